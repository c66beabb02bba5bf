import Foundation
import Outbox
import OutboxHTTP
import OutboxProcess
import OutboxTesting
import Testing

/// A real PostgreSQL with the example schema behind the PostgREST stand-in, started by
/// `scripts/instance` for one test and stopped after it (nothing is left running).
struct Instance {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized
    let folder: String
    let url: URL
    let databaseURL: String
    let apiKey: String

    /// Runs `body` with a fresh instance, and stops it whatever happens. At most `Gate.width` run at
    /// once: the suites start together, and two cores starting thirty clusters at once time out.
    static func with<R>(_ body: (Instance) async throws -> R) async throws -> R {
        await Gate.shared.enter()
        let folder = TemporaryFolder(prefix: "outbox-instance").path
        func stop() async {
            _ = try? await run(["stop", folder])
            try? FileManager.default.removeItem(atPath: folder)
            await Gate.shared.leave()
        }
        let started: (status: Int32, output: String)
        do {
            started = try await run(["start", folder])
        } catch {
            await stop()
            throw error
        }
        guard started.status == 0 else {
            await stop()
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
        do {
            let result = try await body(instance)
            await stop()
            return result
        } catch {
            await stop()
            throw error
        }
    }

    /// `scripts/instance ARGUMENTS`: its status and what it printed.
    @discardableResult
    static func run(_ arguments: [String]) async throws -> (status: Int32, output: String) {
        try await capture(root.appendingPathComponent("scripts/instance"), arguments)
    }

    /// Runs `executable`; its status and everything it printed (standard output and error).
    static func capture(_ executable: URL, _ arguments: [String]) async throws -> (status: Int32, output: String) {
        let ended = try await ChildProcess.run(executable, arguments)
        return (ended.status, ended.text)
    }

    /// An HS256 token for `user` (role authenticated); `expiresIn` negative for an expired one.
    func token(_ user: String, expiresIn: Int = 3600) async throws -> String {
        let made = try await Self.run(["token", folder, user, "--expires-in", String(expiresIn)])
        return made.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Runs SQL as the superuser; returns the rows, `|`-separated.
    @discardableResult
    func sql(_ statement: String) async throws -> [String] {
        let (status, text) = try await Self.capture(
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

/// How many instances may run at once, and the tests waiting for one, first come first served.
actor Gate {
    static let shared = Gate()
    static let width = 3
    private var running = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []

    func enter() async {
        if running < Self.width {
            running += 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    /// Hands the place to the first waiting test, if any.
    func leave() {
        if waiting.isEmpty {
            running -= 1
        } else {
            waiting.removeFirst().resume()
        }
    }
}
