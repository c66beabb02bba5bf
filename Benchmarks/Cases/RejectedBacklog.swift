import COutboxLMDB
import Foundation
import Outbox
import OutboxHTTP
import OutboxLMDB
import OutboxProcess
import OutboxTesting
import Synchronization

/// Refuses every write to the table "later" (422) and accepts the rest: a backlog of refused writes.
struct RefusingInstance: OutboxTransport {
    func send(_ batch: OutgoingBatch, accessToken: String?) async -> RequestAnswer {
        .answered(
            batch.writes.map { write in
                write.table == "later" ? WriteAnswer(.refused(Refusal(status: 422, code: "23514"))) : WriteAnswer(.accepted)
            })
    }
    func readRow(table: String, key: JSONValue, accessToken: String?) async throws -> JSONValue? { nil }
}

/// 13. A drain past a backlog of refused writes: 1,000 writes the instance refuses (refused once
/// already, so they are on the rejected list), then the queue; against the same drain with no backlog.
/// Each pass sends the refused ones again once; the batches after them must not pay for them again.
enum RejectedBacklogCase: BenchmarkCase {
    static func isSelected() -> Bool { selected("rejected-backlog") }

    static func run() throws {
        let size = options.size.map { min($0, 100_000) } ?? (options.quick ? 2_000 : 20_000)
        let backlog = (0..<1_000).map { Write.insert(into: "later", key: ["id": .int(Int64($0))], body: ["title": "x"]) }
        let all = writes(size)
        func side(withBacklog: Bool) -> MeasuredSide {
            MeasuredSide(
                { () -> String in
                    let path = temporaryPath()
                    blocking {
                        let client = try OutboxClient.open(
                            path: path, transport: RefusingInstance(),
                            configuration: OutboxConfiguration(autoSync: false, batchSize: 100))
                        try await client.settleSession(user: "alice", accessToken: nil)
                        if withBacklog {
                            _ = try await client.enqueue(contentsOf: backlog)
                            _ = try await client.sync()
                        }
                        var index = 0
                        while index < all.count {
                            _ = try await client.enqueue(contentsOf: Array(all[index..<min(index + 1000, all.count)]))
                            index += 1000
                        }
                        client.close()
                    }
                    return path
                },
                { path in
                    blocking {
                        let client = try OutboxClient.open(
                            path: path, transport: RefusingInstance(),
                            configuration: OutboxConfiguration(autoSync: false, batchSize: 100))
                        try await client.settleSession(user: "alice", accessToken: nil)
                        let report = try await client.sync()
                        precondition(report.syncedCount == all.count, "drained \(report.syncedCount)")
                        client.close()
                    }
                }, tearDown: removing)
        }
        let measured = try interleaved([side(withBacklog: true), side(withBacklog: false)])
        report(
            "13. drain past 1,000 refused writes", size: size, measured, baselines: ["the same drain with no backlog"])
    }
}
