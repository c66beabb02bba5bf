import Foundation
import Outbox

/// A journal in front of LMDB (decision 016), as floors against the chained layout's own floors, raw
/// LMDB and the SQLite peer, interleaved, without the engine: whether appending each commit's records
/// to a journal and flushing it there, LMDB's commits flushing nothing but at checkpoints, meets the
/// targets LMDB's own flushes hold back (rows 1 to 4). Only when named: `journal-floors`.
enum JournalFloorsCase: BenchmarkCase {
    static func isSelected() -> Bool { options.filter == "journal-floors" }

    static func run() throws {
        let single = options.quick ? 200 : 10_000
        let all = writes(max(single, bulkSize))
        let records = sampleRecords(all.count)
        let rows = peerRows(all)

        // Row 1: a commit a write, each durable before the next.
        let one = try interleaved([
            floorSide(Array(records[..<single]), perTransaction: 1, journaled: true),
            MeasuredSide(
                { temporaryPath() }, { rawAppend(path: $0, records: Array(records[..<single]), perTransaction: 1) },
                tearDown: removing),
            floorSide(Array(records[..<single]), perTransaction: 1, journaled: false),
        ])
        report(
            "journal floors: durable enqueue, one at a time, journaled", size: single, one,
            baselines: ["raw LMDB, one durable put a commit", "the chained layout's floor, a write's puts a commit"])

        // Row 2: commits of 16 writes, against the peer grouping 16 a transaction.
        let sixteen = try interleaved([
            floorSide(Array(records[..<single]), perTransaction: 16, journaled: true),
            peerBulk(Array(rows[..<single]), perTransaction: 16),
            floorSide(Array(records[..<single]), perTransaction: 16, journaled: false),
        ])
        reportFloor("journal floors: durable enqueue, 16 a commit, journaled", size: single, sixteen[0], peer: sixteen[1])
        reportFloor("journal floors: durable enqueue, 16 a commit, the chained floor", size: single, sixteen[2], peer: sixteen[1])

        // Row 3: 1000 a commit, integer and random UUID row keys (the random keys up to 1M: each new row
        // dirties a page of its own, which at 10M takes the better part of an hour a side).
        let randomRows = records.count <= 1_000_000
        let bulk = try interleaved(
            [
                floorSide(records, perTransaction: 1000, journaled: true),
                peerBulk(rows),
                floorSide(records, perTransaction: 1000, journaled: false),
            ]
                + (randomRows
                    ? [
                        floorSide(records, perTransaction: 1000, journaled: true, randomRows: true),
                        floorSide(records, perTransaction: 1000, journaled: false, randomRows: true),
                    ] : []))
        reportFloor("journal floors: bulk enqueue, journaled", size: records.count, bulk[0], peer: bulk[1])
        reportFloor("journal floors: bulk enqueue, the chained floor", size: records.count, bulk[2], peer: bulk[1])
        if randomRows {
            reportRandomRows(bulk, size: records.count)
        }

        // Row 4: the drain, batches of 100.
        let drain = try interleaved([
            drainSide(records, journaled: true),
            peerSide({ peer in precondition(peer.drain(batch: 100) == rows.count) }, filled: rows),
            drainSide(records, journaled: false),
            MeasuredSide(
                { () -> (String, RawEnvironment) in
                    let path = temporaryPath()
                    return (path, rawAppend(path: path, records: records, perTransaction: 1000))
                }, { rawDrain($0.1, count: records.count, batch: 100) }, tearDown: { removing($0.0) }),
        ])
        reportFloor("journal floors: drain, journaled", size: records.count, drain[0], peer: drain[1])
        reportFloor("journal floors: drain, the chained floor", size: records.count, drain[2], peer: drain[1])
        report(
            "journal floors: drain, journaled (time over the raw drain's)", size: records.count, drain[0].figure,
            baseline: "raw LMDB drain", drain[3].figure, ratio: drain[3].ratio)
    }

    /// Row 3's random keys, each floor's time over its integer keys' (sides 3 and 4 over 0 and 2).

    /// Row 3's random keys: each floor's time over its integer keys' (sides 3 and 4 over 0 and 2).
    @MainActor private static func reportRandomRows(
        _ bulk: [(figure: (median: Double, best: Double), ratio: Double)], size: Int
    ) {
        report(
            "journal floors: bulk enqueue, random UUID keys, journaled (time over its integer keys')", size: size,
            bulk[3].figure, baseline: "journaled, integer keys", bulk[0].figure, ratio: 1 / bulk[3].ratio)
        report(
            "journal floors: bulk enqueue, random UUID keys, the chained floor (time over its integer keys')",
            size: size, bulk[4].figure, baseline: "the chained floor, integer keys", bulk[2].figure,
            ratio: bulk[2].ratio / bulk[4].ratio)
    }

    /// The chained floor's enqueue of `records`, `perTransaction` a commit.
    private static func floorSide(_ records: [[UInt8]], perTransaction: Int, journaled: Bool, randomRows: Bool = false)
        -> MeasuredSide
    {
        MeasuredSide(
            { temporaryPath() },
            { path in
                _ = chainedFloorEnqueue(
                    path: path, records: records, perTransaction: perTransaction, randomRows: randomRows, journaled: journaled)
            }, tearDown: removing)
    }

    /// The chained floor's drain of a log of `records` enqueued before the clock starts.
    private static func drainSide(_ records: [[UInt8]], journaled: Bool) -> MeasuredSide {
        MeasuredSide(
            { () -> (String, RawEnvironment) in
                let path = temporaryPath()
                return (path, chainedFloorEnqueue(path: path, records: records, journaled: journaled))
            }, { chainedFloorDrain($0.1, count: records.count, batch: 100) }, tearDown: { removing($0.0) })
    }
}
