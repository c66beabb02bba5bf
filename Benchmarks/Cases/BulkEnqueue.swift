import COutboxLMDB
import Foundation
import Outbox
import OutboxHTTP
import OutboxLMDB
import OutboxProcess
import OutboxTesting
import Synchronization

/// The SQLite peer's bulk enqueue: `perTransaction` rows a transaction, one thread.
func peerBulk(_ rows: [(table: String, op: String, key: String, body: String)], perTransaction: Int = 1000) -> MeasuredSide {
    peerSide { peer in
        var index = 0
        while index < rows.count {
            peer.enqueue(Array(rows[index..<min(index + perTransaction, rows.count)]))
            index += perTransaction
        }
    }
}

/// 3. Bulk enqueue, 1000 per transaction, projections included: against raw LMDB, the layout floor and
/// the peer, interleaved.
enum BulkEnqueueCase: BenchmarkCase {
    /// `bulk-enqueue` runs both parts; `bulk-enqueue-integer` and `bulk-enqueue-keys` one each.
    static func isSelected() -> Bool { selected("bulk-enqueue-integer") || selected("bulk-enqueue-keys") }

    static func run() throws {
        let all = writes(bulkSize)
        if selected("bulk-enqueue-integer") { try againstBaselines(all) }
        if selected("bulk-enqueue-keys") { try withUUIDKeys(all) }
    }

    private static func againstBaselines(_ all: [Write]) throws {
        let records = sampleRecords(bulkSize)
        let measured = try interleaved([
            MeasuredSide(
                { temporaryPath() }, { path in blocking { try await bulkEnqueue(path: path, all) } }, tearDown: removing),
            MeasuredSide(
                { temporaryPath() }, { rawAppend(path: $0, records: records, perTransaction: 1000) }, tearDown: removing),
            MeasuredSide({ temporaryPath() }, { _ = floorEnqueue(path: $0, records: records) }, tearDown: removing),
            peerBulk(peerRows(all)),
            MeasuredSide({ temporaryPath() }, { _ = chainedFloorEnqueue(path: $0, records: records) }, tearDown: removing),
        ])
        report(
            "3. bulk enqueue (1000/txn, projections included)", size: bulkSize, Array(measured.prefix(4)),
            baselines: ["raw LMDB append", "the layout floor (its puts, no engine code)", "SQLite peer, 1000/txn"])
        reportFloor("3. bulk enqueue, the chained layout's floor (decision 012)", size: bulkSize, measured[4], peer: measured[3])
    }

    private static func withUUIDKeys(_ all: [Write]) throws {
        // The same with UUID keys. Time-ordered ones (v7) keep their order in `rows` (decision 007); with
        // random ones (v4) each write's row slot (R2.2) lands on a random page of `rows`. Against integer keys.
        let v7 = writesWithUUIDKeys(bulkSize, timeOrdered: true)
        let v4 = writesWithUUIDKeys(bulkSize, timeOrdered: false)
        let keyed = try interleaved([
            MeasuredSide(
                { temporaryPath() }, { path in blocking { try await bulkEnqueue(path: path, all) } }, tearDown: removing),
            MeasuredSide({ temporaryPath() }, { path in blocking { try await bulkEnqueue(path: path, v7) } }, tearDown: removing),
            MeasuredSide({ temporaryPath() }, { path in blocking { try await bulkEnqueue(path: path, v4) } }, tearDown: removing),
        ])
        report(
            "3. bulk enqueue, UUIDv7 keys", size: bulkSize, keyed[1].figure, baseline: "integer keys", keyed[0].figure,
            ratio: 1 / keyed[1].ratio)
        report(
            "3. bulk enqueue, random UUIDv4 keys", size: bulkSize, keyed[2].figure, baseline: "integer keys", keyed[0].figure,
            ratio: 1 / keyed[2].ratio)
    }
}
