import Foundation
import OutboxTesting
import Synchronization
import Testing

@testable import Outbox

/// A client runs for months: what each commit costs and what memory holds stay flat (TESTING.md §5).
@Suite struct LongLifeTests {
    /// Runs `body` on a thread of its own with a 512 KiB stack, and returns once it has.
    private func onSmallStack(_ body: @escaping @Sendable () -> Void) async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let thread = Thread {
                body()
                done.resume()
            }
            thread.stackSize = 512 << 10
            thread.start()
        }
    }

    // The commit observer was a closure in a `Mutex`, re-wrapped at every read: the n-th commit went
    // through n thunks, and 10,000 to 12,000 commits overflowed a 512 KiB stack (so did releasing the
    // chain). Held in a class box, 200,000 commits and the release run in constant stack.
    @Test func commitNotificationsCostTheSameAfterManyCommits() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let told = Mutex(0)
            let log = client.log
            log.observeCommits { [weak client] events in
                _ = client
                told.withLock { $0 += events.count }
            }
            let event = RecordedEvent(
                sequence: 1, at: Timestamp(milliseconds: 0), event: .networkSwitched(NetworkSwitched(enabled: true)))
            await onSmallStack {
                for _ in 0..<200_000 { log.didCommit([event]) }
                log.observeCommits(nil)
            }
            #expect(told.withLock { $0 } == 200_000)
            client.close()
        }
    }

    // R7.2, R5.2: the report of every automatic pass reaches the events stream, and nothing the client
    // keeps grows with the passes (a client that runs for months must hold what it held on day one).
    @Test func tenThousandAutomaticPassesKeepNothing() async throws {
        try await TemporaryFolder.with { path in
            var configuration = testConfiguration()
            configuration.autoSync = true
            configuration.durability = .noSync
            let client = try await openClient(path, configuration: configuration, transport: SimulatedInstance())
            let reports = Mutex(0)
            client.listen { event in
                if case .automaticPass(let report) = event, report.syncedCount == 1 { reports.withLock { $0 += 1 } }
            }
            let unread = client.events
            var held: [Int] = []
            for index in 0..<10_000 {
                try await client.enqueue(todo(Int64(index)))
                await client.idle()
                if index % 1000 == 999 { held.append(client.heldInMemory) }
            }
            #expect(reports.withLock { $0 } == 10_000)
            // The one subscriber that never reads holds its 1,024 newest events, however many passes ran.
            #expect(held.allSatisfy { $0 <= 1024 }, "\(held)")
            #expect(held.last == held[1])
            client.close()
            var read = 0
            var first: OutboxEvent?
            for await event in unread {
                if first == nil { first = event }
                read += 1
            }
            // Each pass tells localChanged, accepted and its report: 30,000 events; 1,024 kept.
            #expect(first == .missed(count: 30_000 - 1024))
            #expect(read == 1 + 1024)
        }
    }
}
