import COutboxLMDB
import Foundation
import Outbox
import OutboxHTTP
import OutboxLMDB
import OutboxProcess
import OutboxTesting
import Synchronization

/// Instruction counts: only when named, never in a full run. `profile-none` builds the keys and bodies
/// of --size writes, `profile-enqueue` also makes the writes (their canonical form) and bulk-enqueues them into a fresh log (1000 a transaction), `profile-drain` also
/// drains that log (batches of 100, lean instance), `profile-rebuild` rebuilds its projections instead;
/// `profile-floor-enqueue` and `profile-floor-drain` do the layout floors' work for the same writes
/// instead (`profile-floor-none` only makes their records), `profile-floor-chained-enqueue` and
/// `profile-floor-chained-drain` the chained layout's floors (decision 012), `profile-floor-chained-runs-drain` its
/// drain with accepted writes recorded as runs, `profile-floor-chained-durable` its enqueue a commit a
/// write (row 1's floor, for `strace -c` or `perf trace -s` beside `profile-enqueue-durable`); `profile-enqueue-durable` enqueues them one at a time,
/// each durable (row 1's engine side alone), `profile-enqueue-concurrent` from 16 tasks at once (row
/// 2's). Under callgrind the differences of the
/// totals are the instructions per write, whole (Specs/decisions/010):
///   valgrind --tool=callgrind --callgrind-out-file=/dev/null .build/release/outbox-benchmarks --size 20000 profile-enqueue
enum ProfileCase: BenchmarkCase {
    static func isSelected() -> Bool { options.filter?.hasPrefix("profile-") == true }

    static func run() throws {
        guard let filter = options.filter else { return }
        let values = writeValues(options.size ?? 20_000)
        let path = temporaryPath()
        if filter.hasPrefix("profile-floor") {
            // The layout floors of the same writes: their puts (and for the drain its reads), no engine code.
            let records = sampleRecords(values.count)
            if filter.hasPrefix("profile-floor-chained") {
                let env = chainedFloorEnqueue(
                    path: path, records: records, perTransaction: filter == "profile-floor-chained-durable" ? 1 : 1000)
                if filter == "profile-floor-chained-drain" { chainedFloorDrain(env, count: records.count, batch: 100) }
                if filter == "profile-floor-chained-runs-drain" {
                    chainedFloorDrain(env, count: records.count, batch: 100, acceptedAsRuns: true)
                }
            } else if filter != "profile-floor-none" {
                let env = floorEnqueue(path: path, records: records)
                if filter == "profile-floor-drain" { floorDrain(env, count: records.count, batch: 100) }
            }
            removing(path)
            print("profile: \(filter), \(values.count) writes")
            exit(0)
        }
        if filter == "profile-enqueue-concurrent" || filter == "profile-enqueue-durable" {
            let all = writes(from: values)
            withClient(path) { client in
                if filter == "profile-enqueue-durable" {
                    for write in all { try await client.enqueue(write) }
                } else {
                    try await enqueueConcurrently(all, client: client)
                }
            }
            removing(path)
            print("profile: \(filter), \(values.count) writes")
            exit(0)
        }
        if filter != "profile-none" { blocking { try await bulkEnqueue(path: path, writes(from: values)) } }
        if filter == "profile-drain" {
            withClient(path, batchSize: 100) { client in
                let report = try await client.sync()
                precondition(report.syncedCount == values.count, "drained \(report.syncedCount)")
            }
        }
        if filter == "profile-rebuild" { try EventLog(path: path).rebuild() }
        removing(path)
        print("profile: \(filter), \(values.count) writes")
        exit(0)
    }
}
