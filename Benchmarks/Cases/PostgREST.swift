import COutboxLMDB
import Foundation
import Outbox
import OutboxHTTP
import OutboxLMDB
import OutboxProcess
import OutboxTesting
import Synchronization

/// The process's CPU time (user + system) so far, in seconds.
func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

/// Runs `executable ARGUMENTS`; its standard output, or nil when it could not run or failed.
func output(of executable: String, _ arguments: [String]) -> String? {
    guard
        let ended = try? ChildProcess.runBlocking(
            URL(fileURLWithPath: executable), arguments, errors: .apart(.discard)),
        ended.succeeded
    else { return nil }
    return ended.text
}

/// Runs one SQL statement with psql; its output, trimmed (rows `|`-separated), or nil.
func psql(_ databaseURL: String, _ statement: String) -> String? {
    output(of: "/usr/bin/psql", [databaseURL, "-X", "-q", "-A", "-t", "-c", statement])?.trimmingCharacters(
        in: .whitespacesAndNewlines)
}

/// Runs `scripts/instance ARGUMENTS`; its output, or nil when it failed.
func instanceScript(_ arguments: [String]) -> String? {
    output(of: FileManager.default.currentDirectoryPath + "/scripts/instance", arguments)
}

// 11. Drain to PostgreSQL through the PostgREST stand-in over loopback (a real database, real HTTP):
// batched inserts (50 a request) against one request per write, as a hand-written outbox loop sends
// them, in one run; writes/s of both and the client's CPU per write. Starts its own instance with
// scripts/instance (PostgreSQL 15 and python3-psycopg; skipped when they are missing).
/// A running `scripts/instance`: its folder and what `start` printed.
struct RunningInstance {
    let folder: String
    let url: URL
    let apiKey: String?
    let databaseURL: String

    func token(_ user: String) -> String {
        instanceScript(["token", folder, user])?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
    }
}

/// Runs `body` with a fresh instance, stopped and removed after; false (and nothing run) when it cannot start.
func withInstance(_ body: (RunningInstance) -> Void) -> Bool {
    let folder = temporaryPath()
    guard let started = instanceScript(["start", folder]) else { return false }
    defer {
        _ = instanceScript(["stop", folder])
        removing(folder)
    }
    var values: [String: String] = [:]
    for line in started.split(separator: "\n") {
        let parts = line.split(separator: "=", maxSplits: 1)
        if parts.count == 2 { values[String(parts[0])] = String(parts[1]) }
    }
    body(
        RunningInstance(
            folder: folder, url: URL(string: values["OUTBOX_URL"] ?? "")!, apiKey: values["OUTBOX_APIKEY"],
            databaseURL: values["OUTBOX_DATABASE_URL"] ?? ""))
    return true
}

enum PostgRESTCase: BenchmarkCase {
    static func isSelected() -> Bool { selected("postgrest") }

    static func run() throws {
        let size = options.quick ? 500 : 10_000
        let ran = withInstance { instance in
            let token = instance.token("alice")
            let url = instance.url
            let apiKey = instance.apiKey
            let cpu = Mutex<[Double]>([])
            func drain(batchSize: Int, firstId: Int) -> (median: Double, best: Double) {
                let path = temporaryPath()
                defer { removing(path) }
                let seconds = Mutex(0.0)
                blocking {
                    let transport = try PostgRESTTransport(url: url, apiKey: apiKey, tables: ["todos": ["id"]])
                    let client = try OutboxClient.open(
                        path: path, transport: transport,
                        configuration: OutboxConfiguration(autoSync: false, batchSize: batchSize))
                    try await client.settleSession(user: "alice", accessToken: token)
                    _ = try await client.enqueue(
                        contentsOf: (firstId..<(firstId + size)).map {
                            .insert(into: "todos", key: ["id": .int(Int64($0))], body: ["title": "Buy milk", "done": false])
                        })
                    let cpuBefore = cpuSeconds()
                    let start = DispatchTime.now().uptimeNanoseconds
                    let report = try await client.sync()
                    seconds.withLock { $0 = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9 }
                    precondition(
                        report.syncedCount == size, "drained \(report.syncedCount): \(String(describing: report.stoppedBy))")
                    let used = cpuSeconds() - cpuBefore
                    cpu.withLock { $0.append(used / Double(size)) }
                    client.close()
                }
                let time = seconds.withLock { $0 }
                return (time, time)
            }
            let batched = drain(batchSize: 50, firstId: 1)
            let single = drain(batchSize: 1, firstId: size + 1)
            report(
                "11. drain to PostgreSQL through the stand-in, inserts batched 50 a request", size: size, batched,
                baseline: "one request per write", single)
            let perWrite = cpu.withLock { $0 }
            print(
                "11. client CPU per write: \(String(format: "%.1f", perWrite[0] * 1e6)) µs batched, \(String(format: "%.1f", perWrite[1] * 1e6)) µs one request per write"
            )
        }
        if !ran { print("11. drain to PostgreSQL: skipped (scripts/instance could not start PostgreSQL and the stand-in)") }
    }
}
