import COutboxLMDB
import Foundation
import Outbox
import OutboxHTTP
import OutboxLMDB
import OutboxProcess
import OutboxTesting
import Synchronization

/// The chained layout's floors against the SQLite peer alone, interleaved, without the engine: the
/// gate of decision 012 (each floor at least twice the peer's throughput), quick to run by hand.
enum ChainedFloorsCase: BenchmarkCase {
    static func isSelected() -> Bool { options.filter == "floors" }

    static func run() throws {
        let all = writes(bulkSize)
        let records = sampleRecords(bulkSize)
        let rows = peerRows(all)
        let enqueue = try interleaved([
            peerBulk(rows),
            MeasuredSide({ temporaryPath() }, { _ = chainedFloorEnqueue(path: $0, records: records) }, tearDown: removing),
        ])
        report(
            "floors: bulk enqueue, the chained layout's floor", size: bulkSize, enqueue[1].figure, baseline: "SQLite peer",
            enqueue[0].figure, ratio: 1 / enqueue[1].ratio)
        let drain = try interleaved([
            peerSide({ peer in precondition(peer.drain(batch: 100) == rows.count) }, filled: rows),
            MeasuredSide(
                { () -> (String, RawEnvironment) in
                    let path = temporaryPath()
                    return (path, chainedFloorEnqueue(path: path, records: records))
                }, { chainedFloorDrain($0.1, count: records.count, batch: 100) }, tearDown: { removing($0.0) }),
            MeasuredSide(
                { () -> (String, RawEnvironment) in
                    let path = temporaryPath()
                    return (path, chainedFloorEnqueue(path: path, records: records))
                }, { chainedFloorDrain($0.1, count: records.count, batch: 100, acceptedAsRuns: true) },
                tearDown: { removing($0.0) }),
            MeasuredSide(
                { () -> (String, RawEnvironment) in
                    let path = temporaryPath()
                    return (path, rawAppend(path: path, records: records, perTransaction: 1000))
                }, { rawDrain($0.1, count: records.count, batch: 100) }, tearDown: { removing($0.0) }),
        ])
        // Each side's ratio is the peer's time over its own, round by round.
        report(
            "floors: drain, the chained layout's floor", size: bulkSize, drain[1].figure, baseline: "SQLite peer",
            drain[0].figure, ratio: 1 / drain[1].ratio)
        report(
            "floors: drain, the chained layout's floor with accepted writes in runs", size: bulkSize, drain[2].figure,
            baseline: "SQLite peer", drain[0].figure, ratio: 1 / drain[2].ratio)
        report(
            "floors: drain, the chained floor against the raw drain (time)", size: bulkSize, drain[1].figure,
            baseline: "raw LMDB drain", drain[3].figure, ratio: drain[3].ratio / drain[1].ratio)
        report(
            "floors: drain, the runs floor against the raw drain (time)", size: bulkSize, drain[2].figure,
            baseline: "raw LMDB drain", drain[3].figure, ratio: drain[3].ratio / drain[2].ratio)
    }
}
