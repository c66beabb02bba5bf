import COutboxLMDB
import Foundation
import Outbox
import OutboxHTTP
import OutboxLMDB
import OutboxProcess
import OutboxTesting
import Synchronization

/// 1. Durable enqueue one at a time: each returns after its own full-sync commit; one client for all
/// of them. Interleaved, round by round, with raw LMDB's durable puts, the chained layout's floor (a
/// write's puts a commit) and that floor with every table in one B-tree (decision 012's alternative:
/// whether fewer databases make a commit's flush shorter).
enum EnqueueDurableCase: BenchmarkCase {
    static func isSelected() -> Bool { selected("enqueue-durable") }

    static func run() throws {
        let size = options.quick ? 200 : 10_000
        let all = writes(size)
        let records = sampleRecords(size)
        let floor = { (oneTree: Bool) in
            MeasuredSide(
                { temporaryPath() },
                { _ = chainedFloorEnqueue(path: $0, records: records, perTransaction: 1, oneTree: oneTree) },
                tearDown: removing)
        }
        let measured = try interleaved([
            MeasuredSide(
                { temporaryPath() },
                { path in withClient(path) { client in for write in all { try await client.enqueue(write) } } },
                tearDown: removing),
            MeasuredSide({ temporaryPath() }, { rawAppend(path: $0, records: records, perTransaction: 1) }, tearDown: removing),
            floor(false),
            floor(true),
        ])
        let raw = "raw LMDB, one durable put a commit"
        report(
            "1. durable enqueue, one at a time", size: size, measured,
            baselines: [raw, "the chained layout's floor, a write's puts a commit"])
        // Each ratio is the engine's time over a side's, round by round: their quotient is the floor's
        // time over raw LMDB's.
        for (index, name) in [(2, "the chained layout's floor"), (3, "the chained layout's floor in one B-tree")] {
            report(
                "1. durable enqueue, one at a time, \(name)", size: size, measured[index].figure, baseline: raw,
                measured[1].figure, ratio: measured[1].ratio / measured[index].ratio)
        }
    }
}
