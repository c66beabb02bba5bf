// The benchmarks: warm-up, N timed runs, median and best, each figure also a ratio to a baseline
// measured in the same run (this machine is shared and noisy).
//
//   swift run -c release outbox-benchmarks [--quick] [--runs N] [--size N] [filter]   (--help: the cases)
import COutboxLMDB
import Foundation
import Outbox
import OutboxHTTP
import OutboxLMDB
import OutboxProcess
import OutboxTesting
import Synchronization

/// Every case, in the order a full run measures them.
let cases: [any BenchmarkCase.Type] = [
    ProfileCase.self,
    EnqueueDurableCase.self,
    EnqueueConcurrentCase.self,
    BulkEnqueueCase.self,
    DrainCase.self,
    ChainedFloorsCase.self,
    JournalFloorsCase.self,
    RejectedBacklogCase.self,
    AtomicGroupCase.self,
    PostgRESTCase.self,
    ContractCase.self,
    InstanceStorageCase.self,
    LongLifeCase.self,
    CompactionCase.self,
    ReadingCase.self,
    FileGrowthCase.self,
]
for benchmark in cases where benchmark.isSelected() { try benchmark.run() }

print("| case | size | median | best | writes/s (median) | baseline (median) | time over the baseline's (median of the rounds) |")
print("|---|---|---|---|---|---|---|")
for row in rows {
    print(
        "| \(row.name) | \(row.size) | \(format(row.median)) | \(format(row.best)) | \(Int(Double(row.size) / row.median)) | \(row.baseline): \(format(row.baselineMedian)) | \(String(format: "%.2f", row.ratio))× |"
    )
}
print("bench: \(rows.count) figures measured\(options.quick ? " (--quick smoke: sizes too small to judge by)" : "")")
