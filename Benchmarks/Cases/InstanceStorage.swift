import COutboxLMDB
import Foundation
import Outbox
import OutboxHTTP
import OutboxLMDB
import OutboxProcess
import OutboxTesting
import Synchronization

/// `ContractTransport` with no watermark: the instance keeps every answer, as before version 2.
struct WithoutWatermark: OutboxTransport {
    let inner: ContractTransport
    init(_ inner: ContractTransport) { self.inner = inner }
    func send(_ batch: OutgoingBatch, accessToken: String?) async -> RequestAnswer {
        await inner.send(batch, accessToken: accessToken)
    }
    func readRow(table: String, key: JSONValue, accessToken: String?) async throws -> JSONValue? {
        try await inner.readRow(table: table, key: key, accessToken: accessToken)
    }
}

/// 14. What the reference instance keeps per device (R8.9): one device drains 100,000 inserts (--size)
/// in batches of 50 with the acknowledged watermark, and as many without (the instance then keeps every
/// key and answer); the bytes of `outbox.keys` and `outbox.answers` rows left for each device's origin.
enum InstanceStorageCase: BenchmarkCase {
    static func isSelected() -> Bool { selected("instance-storage") }

    static func run() throws {
        let size = options.size ?? (options.quick ? 512 : 100_000)
        let ran = withInstance { instance in
            let token = instance.token("alice")
            func kept(_ origin: String) -> (rows: Int, bytes: Int) {
                let row = psql(
                    instance.databaseURL,
                    "select (select count(*) from outbox.answers where origin = '\(origin)') + (select count(*) from outbox.keys where origin = '\(origin)'), "
                        + "coalesce((select sum(pg_column_size(a.*)) from outbox.answers a where origin = '\(origin)'), 0) + "
                        + "coalesce((select sum(pg_column_size(k.*)) from outbox.keys k where origin = '\(origin)'), 0)")?
                    .split(separator: "|")
                guard let row, row.count == 2, let rows = Int(row[0]), let bytes = Int(row[1]) else { return (-1, -1) }
                return (rows, bytes)
            }
            for (pruning, first) in [(true, 1), (false, size + 1)] {
                let path = temporaryPath()
                defer { removing(path) }
                let origin = Mutex("")
                blocking {
                    let inner = try ContractTransport(url: instance.url, apiKey: instance.apiKey)
                    let transport: any OutboxTransport = pruning ? inner : WithoutWatermark(inner)
                    let client = try OutboxClient.open(
                        path: path, transport: transport, configuration: OutboxConfiguration(autoSync: false, batchSize: 50))
                    try await client.settleSession(user: "alice", accessToken: token)
                    _ = try await client.enqueue(
                        contentsOf: (first..<(first + size)).map {
                            .insert(into: "todos", key: ["id": .int(Int64($0))], body: ["title": "Buy milk", "done": false])
                        })
                    let report = try await client.sync()
                    precondition(report.syncedCount == size, "drained \(report.syncedCount)")
                    origin.withLock { $0 = (try? client.origin().description) ?? "" }
                    client.close()
                }
                let (rows, bytes) = kept(origin.withLock { $0 })
                print(
                    "14. instance storage after \(size) writes of one device, \(pruning ? "with the watermark" : "without (version 1's way)"): "
                        + "\(rows) key and answer rows, \(bytes) bytes of rows (\(String(format: "%.1f", Double(bytes) / Double(size))) B a write)"
                )
            }
        }
        if !ran { print("14. instance storage: skipped (scripts/instance could not start PostgreSQL and the stand-in)") }
    }
}
