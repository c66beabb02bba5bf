import COutboxLMDB
import Foundation
import Outbox
import OutboxHTTP
import OutboxLMDB
import OutboxProcess
import OutboxTesting
import Synchronization

/// 14. Writes through their whole life, only when named (R8.5): enqueue (1000 a transaction, made as
/// they are enqueued), drain (batches of 100, lean instance), take (1,000 a call, as an app taking
/// what a pass answered), compact. The log's size before and after,
/// the compaction's time against a raw copy of the same data file (read, written, flushed), history(of:)
/// p99 on live and archived writes, the open time after, and the peak resident memory. It needs disk
/// for the log twice over (about 2 × 250 B a write) and its archive (about 300 B a write).
enum CompactionCase: BenchmarkCase {
    static func isSelected() -> Bool { options.filter == "compaction" }

    static func run() throws {
        let count = options.size ?? 10_000_000
        let path = temporaryPath()
        let enqueued = seconds {
            withClient(path) { client in
                var next = 0
                while next < count {
                    let chunk = (next..<min(next + 1000, count)).map { index in
                        Write.insert(into: "todos", key: ["id": .int(Int64(index))], body: ["title": "Buy milk", "done": false])
                    }
                    _ = try await client.enqueue(contentsOf: chunk)
                    next += chunk.count
                }
            }
        }
        let drained = seconds { withClient(path, batchSize: 100) { client in _ = try await client.sync() } }
        let taken = seconds {
            withClient(path) { client in
                var next: UInt64 = 1
                while next <= UInt64(count) {
                    let last = min(next + 999, UInt64(count))
                    _ = try await client.queue.forgetAnswered(ids: (next...last).map { WriteID($0) })
                    next = last + 1
                }
            }
        }
        // Live writes: queued after the drain, still pending at the compaction.
        withClient(path) { client in _ = try await client.enqueue(contentsOf: writes(1000)) }
        func fileSize(_ file: String) -> Int { (try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? 0 }
        let before = fileSize(path + "/data.mdb")
        let copy = path + "-copy.mdb"
        let copied = seconds {
            let data = FileManager.default.contents(atPath: path + "/data.mdb")!
            _ = FileManager.default.createFile(atPath: copy, contents: data)
            let handle = FileHandle(forUpdatingAtPath: copy)!
            try? handle.synchronize()
            try? handle.close()
        }
        removing(copy)
        nonisolated(unsafe) var report: CompactionReport?
        let compacted = seconds { withClient(path) { client in report = try await client.compact() } }
        let after = fileSize(path + "/data.mdb")
        let archive = fileSize(path + "/archive/segment-000001.mdb")
        nonisolated(unsafe) var p99: (live: Int, archived: Int, again: Int, faults: Int) = (0, 0, 0, 0)
        withClient(path) { client in
            var random = SystemRandomNumberGenerator()
            func percentile(_ ids: [WriteID]) async throws -> Int {
                var latencies: [Double] = []
                for id in ids {
                    let start = DispatchTime.now().uptimeNanoseconds
                    _ = try await client.history(of: id)
                    latencies.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1000)
                }
                return Int(latencies.sorted()[ids.count * 99 / 100])
            }
            func majorFaults() -> Int {
                var usage = rusage()
                getrusage(RUSAGE_SELF.rawValue, &usage)
                return usage.ru_majflt
            }
            let live = (0..<1000).map { _ in WriteID(UInt64.random(in: UInt64(count + 1)...UInt64(count + 1000), using: &random))
            }
            let archived = (0..<1000).map { _ in WriteID(UInt64.random(in: 1...UInt64(count), using: &random)) }
            p99.live = try await percentile(live)
            let faults = majorFaults()
            p99.archived = try await percentile(archived)
            p99.faults = majorFaults() - faults
            // The same archived writes again: their pages are in memory now.
            p99.again = try await percentile(archived)
        }
        let opened = try measure({ () }, { _ in try openClient(path).close() })
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        print("14. \(count) writes through their whole life (compaction)")
        print("  enqueue \(format(enqueued)), drain \(format(drained)), take \(format(taken))")
        print("  data file before \(before) B (\(before / count) B a write), after \(after) B; archive segment \(archive) B")
        print(
            "  compaction \(format(compacted)); a raw copy of the same data file \(format(copied)): \(String(format: "%.2f", compacted / copied))× the copy"
        )
        print("  \(report.map { "\($0)" } ?? "no report")")
        print(
            "  history(of:) p99: live writes \(p99.live) µs, archived writes \(p99.archived) µs (\(p99.faults) major page faults), the same archived writes again \(p99.again) µs"
        )
        print("  open after the compaction, to the first status: median \(format(opened.median)), best \(format(opened.best))")
        print("  peak resident memory \(usage.ru_maxrss / 1024) MiB (LMDB's mapped pages included)")
        removing(path)
        exit(0)
    }
}
