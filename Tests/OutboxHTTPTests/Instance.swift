import Foundation
import Outbox
import OutboxHTTP
import Testing

/// A real PostgreSQL with the example schema behind the PostgREST stand-in, started by
/// `scripts/instance` for one test and stopped after it (nothing is left running).
struct Instance {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized
    let folder: String
    let url: URL
    let databaseURL: String
    let apiKey: String

    /// Runs `body` with a fresh instance, and stops it whatever happens.
    static func with<R>(_ body: (Instance) async throws -> R) async throws -> R {
        let folder = NSTemporaryDirectory() + "outbox-instance-" + UUID().uuidString
        let started = try run(["start", folder])
        defer {
            _ = try? run(["stop", folder])
            try? FileManager.default.removeItem(atPath: folder)
        }
        guard started.status == 0 else {
            Issue.record("scripts/instance start failed: \(started.output)")
            throw CancellationError()
        }
        var values: [String: String] = [:]
        for line in started.output.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { values[String(parts[0])] = String(parts[1]) }
        }
        let instance = Instance(
            folder: folder, url: URL(string: values["OUTBOX_URL"] ?? "")!, databaseURL: values["OUTBOX_DATABASE_URL"] ?? "",
            apiKey: values["OUTBOX_APIKEY"] ?? "")
        return try await body(instance)
    }

    /// `scripts/instance ARGUMENTS`: its status and what it printed.
    @discardableResult
    static func run(_ arguments: [String]) throws -> (status: Int32, output: String) {
        try capture(root.appendingPathComponent("scripts/instance"), arguments)
    }

    /// Runs `executable`; its status and everything it printed (standard output and error).
    static func capture(_ executable: URL, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// An HS256 token for `user` (role authenticated); `expiresIn` negative for an expired one.
    func token(_ user: String, expiresIn: Int = 3600) throws -> String {
        let made = try Self.run(["token", folder, user, "--expires-in", String(expiresIn)])
        return made.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Runs SQL as the superuser; returns the rows, `|`-separated.
    @discardableResult
    func sql(_ statement: String) throws -> [String] {
        let (status, text) = try Self.capture(
            URL(fileURLWithPath: "/usr/bin/psql"),
            [databaseURL, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", statement])
        guard status == 0 else {
            Issue.record("psql failed: \(text)")
            return []
        }
        return text.split(separator: "\n").map(String.init)
    }

    /// Makes the stand-in answer the next requests with `answers` (see its docstring).
    func fault(_ answers: [[String: Any]]) async throws {
        let body = try JSONSerialization.data(withJSONObject: ["answers": answers])
        _ = try await URLSessionHTTPClient().send(
            HTTPRequest(method: "POST", url: url.appendingPathComponent("_standin/faults"), body: body), timeout: 10)
    }

    /// The API requests the stand-in received (method, path, headers but `Authorization`), in order.
    func requests() async throws -> [(method: String, path: String, headers: [String: String])] {
        let response = try await URLSessionHTTPClient().send(
            HTTPRequest(method: "GET", url: url.appendingPathComponent("_standin/requests")), timeout: 10)
        let list = (try JSONSerialization.jsonObject(with: response.body) as? [[String: Any]]) ?? []
        return list.map {
            ($0["method"] as? String ?? "", $0["path"] as? String ?? "", $0["headers"] as? [String: String] ?? [:])
        }
    }
}

/// A temporary folder path for a log, removed when `body` ends.
func withTemporaryLog<R>(_ body: (String) async throws -> R) async rethrows -> R {
    let path = NSTemporaryDirectory() + "outbox-http-" + UUID().uuidString
    defer { try? FileManager.default.removeItem(atPath: path) }
    return try await body(path)
}
