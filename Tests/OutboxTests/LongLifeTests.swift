import Foundation
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
        try await withTemporaryLog { path in
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
}
