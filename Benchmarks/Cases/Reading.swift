import COutboxLMDB
import Foundation
import Outbox
import OutboxHTTP
import OutboxLMDB
import OutboxProcess
import OutboxTesting
import Synchronization

enum ReadingCase: BenchmarkCase {
    static func isSelected() -> Bool { selected("rebuild") || selected("history") || selected("open") }

    static func run() throws {
        let path = temporaryPath()
        blocking { try await bulkEnqueue(path: path, writes(bulkSize)) }
        if selected("rebuild") {
            let log = try EventLog(path: path)
            // Measured before any rebuild: a rebuild rewrites every projection in one transaction, and the
            // file keeps its high-water mark. The pages the log uses, up to its last one: the file itself
            // runs a step ahead of them (written in advance, on Linux).
            let bytes = try log.environment.usedBytes()
            let fileBytes = (try? FileManager.default.attributesOfItem(atPath: path + "/data.mdb")[.size] as? Int) ?? 0
            let used = try log.environment.read { txn in
                try EventLog.databaseNames.map { name in (name, try txn.usedBytes(log.environment.database(name))) }
            }
            let projectionEntries = try log.environment.read { txn in
                try ProjectionTable.allCases.reduce(0) { $0 + (try txn.count(log.environment.database($1.rawValue))) }
            }
            let entry = [UInt8](repeating: 0, count: 24)
            let measured = try interleaved([
                MeasuredSide({ () }, { try log.rebuild() }),
                MeasuredSide(
                    { temporaryPath() },
                    {
                        rawAppend(
                            path: $0, records: Array(repeating: entry, count: projectionEntries),
                            perTransaction: projectionEntries)
                    }, tearDown: removing),
            ])
            report(
                "5. rebuild (\(projectionEntries) projection entries)", size: bulkSize + 2, measured[0].figure,
                baseline: "raw bulk append of as many entries", measured[1].figure, ratio: measured[1].ratio)
            let payload = writes(1)[0]
            let keyBody = JSONText.render(payload.key).utf8.count + JSONText.render(payload.body).utf8.count
            print(
                "8. log bytes per queued write: \(bytes / bulkSize) (data.mdb's pages to its last in use \(bytes) bytes for \(bulkSize) writes, the file \(fileBytes); key + body \(keyBody) bytes)"
            )
            let inUse = used.filter { $0.1 > 0 }.map { "\($0.0) \($0.1 / bulkSize)" }.joined(separator: ", ")
            print("   pages in use per write: \(used.reduce(0) { $0 + $1.1 } / bulkSize) B (\(inUse))")
            // The chained layout's floor for the same writes (decision 012): the engine's records, the
            // design's entry and a row slot each, and the meta values, put by LMDB's C API alone.
            let floorPath = temporaryPath()
            let floorUsed = chainedFloorEnqueue(path: floorPath, records: sampleRecords(bulkSize))
                .usedBytes([.log, .meta, .writes, .rows]).filter { $0.bytes > 0 }
            print(
                "   the chained layout's floor: \(floorUsed.reduce(0) { $0 + $1.bytes } / bulkSize) B a write (\(floorUsed.map { "\($0.table) \($0.bytes / bulkSize)" }.joined(separator: ", ")))"
            )
            removing(floorPath)
            log.close()
        }
        // 6. history(of:) latency, p50 and p99 over 1000 random writes, on this log and a small one.
        if selected("history") {
            let small = temporaryPath()
            blocking { try await bulkEnqueue(path: small, writes(10_000)) }
            for (name, log, count) in [("10k", small, 10_000), ("\(bulkSize / 1000)k", path, bulkSize)] {
                blocking {
                    let client = try openClient(log)
                    var random = SystemRandomNumberGenerator()
                    let ids = { (0..<1000).map { _ in WriteID(UInt64.random(in: 1...UInt64(count), using: &random)) } }
                    // The call an app makes, first just after the open (the log's pages untouched by this
                    // process: on this machine a page of the file cache idle for a while costs up to
                    // milliseconds to touch first), then again; its reads alone, on this thread (what
                    // grows with the log); and the read executor's round trip with no read (what the call
                    // adds to them: it reads off Swift's pool). Each over other random writes, so that the
                    // pages of one do not serve the next.
                    let first = try await latencies(ids()) { _ = try await client.history(of: $0) }
                    let api = try await latencies(ids()) { _ = try await client.history(of: $0) }
                    let alone = try await latencies(ids()) { _ = try client.log.history(of: $0) }
                    let hop = try await latencies(ids()) { _ in _ = try await client.log.reads.run { 0 } }
                    print(
                        "6. history(of:) on a log of \(name) writes: p50 \(api.p50) µs, p99 \(api.p99) µs (the first 1000 after the open: p50 \(first.p50) µs, p99 \(first.p99) µs); the log's reads alone p50 \(alone.p50) µs, p99 \(alone.p99) µs; the read executor's round trip p50 \(hop.p50) µs, p99 \(hop.p99) µs"
                    )
                    client.close()
                }
            }
            removing(small)
        }
        // 7. Open a log holding the pending writes: time to the first status.
        if selected("open") {
            let open = try measure(
                { () },
                { _ in
                    let client = try openClient(path)
                    precondition(client.syncStatus.value.pendingCount == 0 || client.syncStatus.value.pendingCount == bulkSize)
                    client.close()
                })
            print(
                "7. open a log of \(bulkSize) pending writes to the first status: median \(format(open.median)), best \(format(open.best))"
            )
        }
        removing(path)
    }
}

/// The 50th and 99th percentiles of `body`'s time over `ids`, in whole microseconds, each id once in
/// the order given.
private func latencies(_ ids: [WriteID], _ body: (WriteID) async throws -> Void) async throws -> (p50: Int, p99: Int) {
    var micros: [Double] = []
    micros.reserveCapacity(ids.count)
    for id in ids {
        let start = DispatchTime.now().uptimeNanoseconds
        try await body(id)
        micros.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1000)
    }
    micros.sort()
    return (Int(micros[micros.count / 2]), Int(micros[micros.count * 99 / 100]))
}
