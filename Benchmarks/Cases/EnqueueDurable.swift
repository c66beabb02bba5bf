import COutboxLMDB
import Foundation
import Outbox
import OutboxHTTP
import OutboxLMDB
import OutboxProcess
import OutboxTesting
import Synchronization

/// 1. Durable enqueue one at a time: each returns after its own full-sync commit; one client for all
/// of them. Interleaved with raw LMDB's durable puts and the layout floor's (a write's puts a commit),
/// round by round.
enum EnqueueDurableCase: BenchmarkCase {
    static func isSelected() -> Bool { selected("enqueue-durable") }

    static func run() throws {
        let size = options.quick ? 200 : 10_000
        let all = writes(size)
        let records = sampleRecords(size)
        let measured = try interleaved([
            MeasuredSide(
                { temporaryPath() },
                { path in withClient(path) { client in for write in all { try await client.enqueue(write) } } },
                tearDown: removing),
            MeasuredSide({ temporaryPath() }, { rawAppend(path: $0, records: records, perTransaction: 1) }, tearDown: removing),
            MeasuredSide(
                { temporaryPath() }, { _ = floorEnqueue(path: $0, records: records, perTransaction: 1) }, tearDown: removing),
        ])
        report(
            "1. durable enqueue, one at a time", size: size, measured,
            baselines: ["raw LMDB, one durable put a commit", "the layout floor, one write's puts a commit"])
    }
}
