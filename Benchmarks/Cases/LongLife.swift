import COutboxLMDB
import Foundation
import Outbox
import OutboxHTTP
import OutboxLMDB
import OutboxProcess
import OutboxTesting
import Synchronization

/// 9. Long life: one client makes 100,000 single enqueues in a row; the last 10 % against the first
/// 10 % of the same client (TESTING.md §5: a per-commit cost that grows is a defect). No fsync, so the
/// figure is the engine's own work per commit, not the disk's.
enum LongLifeCase: BenchmarkCase {
    static func isSelected() -> Bool { selected("long-life") }

    static func run() throws {
        let size = options.size ?? (options.quick ? 10_000 : 100_000)
        let tenth = size / 10
        let all = writes(size)
        let path = temporaryPath()
        let marks = Mutex<[Double]>([])
        blocking {
            let configuration = OutboxConfiguration(autoSync: false, durability: .noSync)
            let client = try OutboxClient.open(path: path, configuration: configuration)
            try await client.settleSession(user: "alice", accessToken: nil)
            var times: [Double] = []
            for (index, write) in all.enumerated() {
                if index % tenth == 0 { times.append(Double(DispatchTime.now().uptimeNanoseconds) / 1e9) }
                try await client.enqueue(write)
            }
            times.append(Double(DispatchTime.now().uptimeNanoseconds) / 1e9)
            client.close()
            marks.withLock { $0 = times }
        }
        removing(path)
        let times = marks.withLock { $0 }
        let first = times[1] - times[0]
        let last = times[10] - times[9]
        report(
            "9. long life: the last 10 % of \(size) single enqueues (no fsync), one client", size: tenth, (last, last),
            baseline: "the first 10 % of the same client", (first, first))
    }
}
