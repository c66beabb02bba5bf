import COutboxLMDB
import Foundation
import Outbox
import OutboxHTTP
import OutboxLMDB
import OutboxProcess
import OutboxTesting
import Synchronization

/// 12. Drain to the reference instance through the contract (a request per batch, every write judged
/// by SQL inside PostgreSQL: keys, answers, versions, row locks) over loopback through the stand-in:
/// 100,000 inserts (--size) in batches of 50 and of 64 (the instance's cap on a non-atomic batch: the
/// subtransaction cache), one device and four at once, against a naive client that sends one PostgREST
/// request per write (measured on 5,000 writes), in one run; writes/s, the ratio, the client's CPU per
/// write, and the server's time per write inside `outbox_push` (pg_stat_user_functions).
enum ContractCase: BenchmarkCase {
    static func isSelected() -> Bool { selected("contract") }

    static func run() throws {
        let size = options.size ?? (options.quick ? 512 : 100_000)
        let naiveSize = options.quick ? 256 : 5_000
        let ran = withInstance { instance in
            _ = psql(instance.databaseURL, "alter database outbox set track_functions = 'pl'")
            let token = instance.token("alice")
            let next = Mutex(1)
            /// Drains `writes` inserts split over `devices` logs syncing at once: seconds, client CPU per write.
            func drain(devices: Int, batchSize: Int, contract: Bool, writes: Int) -> (seconds: Double, cpu: Double) {
                let per = writes / devices
                let first = next.withLock { id in
                    defer { id += per * devices }
                    return id
                }
                let paths = (0..<devices).map { _ in temporaryPath() }
                defer { paths.forEach(removing) }
                let measured = Mutex((0.0, 0.0))
                blocking {
                    var clients: [OutboxClient] = []
                    for (index, path) in paths.enumerated() {
                        let transport: any OutboxTransport =
                            contract
                            ? try ContractTransport(url: instance.url, apiKey: instance.apiKey)
                            : try PostgRESTTransport(url: instance.url, apiKey: instance.apiKey, tables: ["todos": ["id"]])
                        let client = try OutboxClient.open(
                            path: path, transport: transport,
                            configuration: OutboxConfiguration(autoSync: false, batchSize: batchSize))
                        try await client.settleSession(user: "alice", accessToken: token)
                        let base = first + index * per
                        _ = try await client.enqueue(
                            contentsOf: (base..<(base + per)).map {
                                .insert(into: "todos", key: ["id": .int(Int64($0))], body: ["title": "Buy milk", "done": false])
                            })
                        clients.append(client)
                    }
                    let cpuBefore = cpuSeconds()
                    let start = DispatchTime.now().uptimeNanoseconds
                    try await withThrowingTaskGroup(of: SyncReport.self) { group in
                        for client in clients { group.addTask { try await client.sync() } }
                        for try await report in group {
                            precondition(
                                report.syncedCount == per,
                                "drained \(report.syncedCount): \(String(describing: report.stoppedBy))")
                        }
                    }
                    let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
                    measured.withLock { $0 = (elapsed, (cpuSeconds() - cpuBefore) / Double(per * devices)) }
                    for client in clients { client.close() }
                }
                return measured.withLock { $0 }
            }
            /// The time spent inside `outbox_push` so far, in seconds, once its statistics count `calls`.
            func serverTime(calls: Int) -> Double? {
                for _ in 0..<100 {
                    let row = psql(
                        instance.databaseURL,
                        "select calls, total_time from pg_stat_user_functions where funcname = 'outbox_push'")?.split(
                            separator: "|")
                    if let row, row.count == 2, let seen = Int(row[0]), seen >= calls, let total = Double(row[1]) {
                        return total / 1000
                    }
                    usleep(200_000)
                }
                return nil
            }
            let naive = drain(devices: 1, batchSize: 1, contract: false, writes: naiveSize)
            let naivePerWrite = naive.seconds / Double(naiveSize)
            var calls = 0
            var server = 0.0
            for (devices, batch) in [(1, 50), (1, 64), (4, 50), (4, 64)] {
                let drained = drain(devices: devices, batchSize: batch, contract: true, writes: size)
                let per = size / devices
                calls += devices * ((per + batch - 1) / batch)
                let total = serverTime(calls: calls)
                let inside = total.map { ($0 - server) / Double(per * devices) }
                if let total { server = total }
                let naiveTime = naivePerWrite * Double(per * devices)
                report(
                    "12. drain to the reference instance, contract, batches of \(batch), \(devices == 1 ? "one device" : "\(devices) devices at once")",
                    size: per * devices, (drained.seconds, drained.seconds),
                    baseline: "one PostgREST request per write (at \(Int(1 / naivePerWrite)) w/s)", (naiveTime, naiveTime))
                let serverText = inside.map { String(format: "%.0f µs", $0 * 1e6) } ?? "not reported in time"
                let share = inside.map { String(format: " (%.1f %% of it)", drained.cpu / $0 * 100) } ?? ""
                print(
                    "12. batches of \(batch), \(devices) device(s): client CPU \(String(format: "%.1f", drained.cpu * 1e6)) µs a write\(share); server time inside outbox_push \(serverText) a write"
                )
            }
        }
        if !ran {
            print("12. drain to the reference instance: skipped (scripts/instance could not start PostgreSQL and the stand-in)")
        }
    }
}
