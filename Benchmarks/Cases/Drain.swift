import COutboxLMDB
import Foundation
import Outbox
import OutboxHTTP
import OutboxLMDB
import OutboxProcess
import OutboxTesting
import Synchronization

/// Peak anonymous memory (RssAnon, so LMDB's mapped file pages are not counted), in bytes.
func rssAnon() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("RssAnon:") }),
        let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "")
    else { return 0 }
    return kilobytes * 1024
}

/// 4. and 8. Drain a queue in batches of 100 against the lean instance, interleaved with the peer's
/// drain of the same queue, a raw LMDB drain (read 100 records by cursor, append one outcome each, one
/// commit a batch, its data pages flushed) and the layout floor of the engine's drain; and the peer's
/// and the raw drain flushing once at the end, as the engine flushes a pass's commits (decision 016).
enum DrainCase: BenchmarkCase {
    static func isSelected() -> Bool { selected("drain") }

    static func run() throws {
        let all = writes(bulkSize)
        let records = sampleRecords(bulkSize)
        let peak = Mutex(0)
        let engine = MeasuredSide(
            { () -> String in
                let path = temporaryPath()
                blocking { try await bulkEnqueue(path: path, all) }
                return path
            },
            { path in
                withClient(path, batchSize: 100) { client in
                    let idle = rssAnon()
                    let sampler = Task.detached {
                        var high = 0
                        while !Task.isCancelled {
                            high = max(high, rssAnon())
                            try? await Task.sleep(nanoseconds: 5_000_000)
                        }
                        return high
                    }
                    let report = try await client.sync()
                    precondition(report.syncedCount == all.count, "drained \(report.syncedCount)")
                    sampler.cancel()
                    let high = await sampler.value - idle
                    peak.withLock { $0 = max($0, high) }
                }
            }, tearDown: removing)
        let rows = peerRows(all)
        let peer = peerSide({ peer in precondition(peer.drain(batch: 100) == rows.count) }, filled: rows)
        let raw = MeasuredSide(
            { () -> (String, RawEnvironment) in
                let path = temporaryPath()
                return (path, rawAppend(path: path, records: records, perTransaction: 1000))
            }, { rawDrain($0.1, count: records.count, batch: 100) }, tearDown: { removing($0.0) })
        let floor = MeasuredSide(
            { () -> (String, RawEnvironment) in
                let path = temporaryPath()
                return (path, floorEnqueue(path: path, records: records))
            }, { floorDrain($0.1, count: records.count, batch: 100) }, tearDown: { removing($0.0) })
        let chained = MeasuredSide(
            { () -> (String, RawEnvironment) in
                let path = temporaryPath()
                return (path, chainedFloorEnqueue(path: path, records: records))
            }, { chainedFloorDrain($0.1, count: records.count, batch: 100) }, tearDown: { removing($0.0) })
        let peerOnce = peerSide({ peer in precondition(peer.drain(batch: 100, flushingOnce: true) == rows.count) }, filled: rows)
        let rawOnce = MeasuredSide(
            { () -> (String, RawEnvironment) in
                let path = temporaryPath()
                return (path, rawAppend(path: path, records: records, perTransaction: 1000))
            }, { rawDrain($0.1, count: records.count, batch: 100, flushingOnce: true) }, tearDown: { removing($0.0) })
        let measured = try interleaved([engine, peer, raw, floor, chained, peerOnce, rawOnce])
        report(
            "4. drain (batches of 100, lean instance)", size: bulkSize, Array(measured.prefix(4)),
            baselines: [
                "SQLite peer drain", "raw LMDB drain (a flush a batch)", "the layout floor (its reads and puts, no engine code)",
            ])
        report(
            "4. drain (batches of 100, lean instance)", size: bulkSize, [measured[0], measured[5], measured[6]],
            baselines: [
                "SQLite peer drain, synchronous=NORMAL and one checkpoint at the end",
                "raw LMDB drain, MDB_NOSYNC and one flush at the end",
            ])
        reportFloor("4. drain, the chained layout's floor (decision 012)", size: bulkSize, measured[4], peer: measured[1])
        print(
            "8. peak anonymous memory while draining \(bulkSize): \(peak.withLock { $0 } / 1024) KiB above idle (RssAnon, sampled every 5 ms)"
        )
    }
}
