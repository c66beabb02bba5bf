import COutboxLMDB
import Foundation
import Outbox
import OutboxHTTP
import OutboxLMDB
import OutboxProcess
import OutboxTesting
import Synchronization

/// An instance whose every request fails with a 503: a pass plans its first batch, sends, and stops.
struct FailingInstance: OutboxTransport {
    func send(_ batch: OutgoingBatch, accessToken: String?) async -> RequestAnswer {
        .failed(RequestFailure(kind: .http, status: 503))
    }
    func readRow(table: String, key: JSONValue, accessToken: String?) async throws -> JSONValue? { nil }
}

/// 10. Atomic groups stay linear: `queue.all()` over one group of 10,000 against the same writes with no
/// group, and a failed pass (503) with one group of 10,000 pending against one of 1,000, per write.
enum AtomicGroupCase: BenchmarkCase {
    static func isSelected() -> Bool { selected("atomic-group") }

    static func run() throws {
        let size = options.quick ? 2_000 : 10_000
        /// A log holding `count` writes, in one group or none; `work` timed on a client of it.
        func timed(_ count: Int, atomic: Bool, _ work: @escaping @Sendable (OutboxClient) async throws -> Void) -> (
            median: Double, best: Double
        ) {
            let all = writes(count)
            return measure(
                { () -> String in
                    let path = temporaryPath()
                    blocking {
                        let client = try OutboxClient.open(
                            path: path, transport: FailingInstance(), configuration: OutboxConfiguration(autoSync: false))
                        try await client.settleSession(user: "alice", accessToken: nil)
                        _ = try await client.enqueue(contentsOf: all, atomic: atomic)
                        client.close()
                    }
                    return path
                },
                { path in
                    blocking {
                        let client = try OutboxClient.open(
                            path: path, transport: FailingInstance(), configuration: OutboxConfiguration(autoSync: false))
                        try await client.settleSession(user: "alice", accessToken: nil)
                        try await work(client)
                        client.close()
                    }
                }, tearDown: removing)
        }
        let listAll: @Sendable (OutboxClient) async throws -> Void = { client in _ = try await client.queue.all() }
        report(
            "10. queue.all(), one atomic group", size: size, timed(size, atomic: true, listAll),
            baseline: "the same writes in no group", timed(size, atomic: false, listAll))
        let failedPass: @Sendable (OutboxClient) async throws -> Void = { client in
            let report = try await client.sync()
            precondition(report.stoppedBy != nil)
        }
        let large = timed(size, atomic: true, failedPass)
        let small = timed(size / 10, atomic: true, failedPass)
        report(
            "10. a failed pass with one atomic group pending", size: size, large,
            baseline: "a group a tenth the size, times ten", (small.median * 10, small.best * 10))
    }
}
