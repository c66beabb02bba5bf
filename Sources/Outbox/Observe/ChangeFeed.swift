internal import Synchronization

/// The log's events from a sequence number on, in order: first those the log already holds, then each
/// new one once it is committed. Read from the log itself, so it never drops an event however slowly
/// it is read, and never holds the writer up (each read is a snapshot; the writer only wakes the
/// readers). An app that stores the last sequence it handled resumes from there after a restart,
/// missing and repeating nothing. It ends when the client closes, or when the reading task is cancelled.
///
/// ```swift
/// for try await change in outbox.changes(after: lastHandled) {
///     for verdict in change.event.verdicts { try await apply(verdict, in: db) }
///     lastHandled = change.sequence
/// }
/// ```
public struct OutboxChanges: AsyncSequence, Sendable {
    public typealias Element = RecordedEvent

    let client: OutboxClient
    let after: UInt64

    public func makeAsyncIterator() -> Iterator { Iterator(client: client, last: after) }

    /// Reads the log a page at a time past the last event it returned, and waits for a commit when it
    /// has read them all.
    public struct Iterator: AsyncIteratorProtocol {
        /// How many events one read takes from the log.
        static let page = 256

        let client: OutboxClient
        var last: UInt64
        var buffer: [RecordedEvent] = []
        var index = 0

        /// The next event; nil once the client is closed. Throws when the log cannot be read (damaged,
        /// a storage error) and `CancellationError` when the reading task is cancelled.
        public mutating func next() async throws -> RecordedEvent? {
            while true {
                if index < buffer.count {
                    let event = buffer[index]
                    index += 1
                    last = event.sequence
                    return event
                }
                try Task.checkCancellation()
                // Read before looking at the log: a commit after the read moves it, and the wait ends.
                let seen = client.commits.generation
                if client.isClosedNow { return nil }
                do {
                    let log = client.log
                    let after = last
                    buffer = try await log.reads.run { try log.events(after: after, limit: Self.page) }
                } catch let error as OutboxError where error.code == .closed || client.isClosedNow {
                    return nil
                }
                index = 0
                if buffer.isEmpty { try await client.commits.wait(past: seen) }
            }
        }
    }
}

/// Counts the log's commits and wakes the change feeds waiting for the next one.
final class CommitSignal: Sendable {
    private struct State {
        var generation: UInt64 = 0
        var finished = false
        var nextWaiter = 0
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
    }

    private let state = Mutex(State())

    var generation: UInt64 { state.withLock { $0.generation } }

    /// A commit happened: every waiter wakes.
    func advance() {
        let waiters = state.withLock { state in
            state.generation &+= 1
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// The client closed: every waiter wakes, and no wait blocks from now on.
    func finish() {
        let waiters = state.withLock { state in
            state.finished = true
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once the generation is past `seen`, the signal finished, or the task is cancelled
    /// (then it throws `CancellationError`).
    func wait(past seen: UInt64) async throws {
        let id = state.withLock { state -> Int in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if state.finished || state.generation != seen || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
        try Task.checkCancellation()
    }
}
