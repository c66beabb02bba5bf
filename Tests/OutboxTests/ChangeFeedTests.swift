import Foundation
import OutboxTesting
import Testing

@testable import Outbox

/// R7.4: the lossless feed, `changes(after:)`: the log's events in order, those already held and then
/// each new one as committed; resumable across a reopen; never dropping for a slow reader; never
/// holding the writer up; ending when the client closes.
@Suite("The change feed (R7.4)")
struct ChangeFeedTests {
    /// Reads `count` events from `changes`, or fails after 60 s (a feed that stops delivering).
    static func take(_ count: Int, from changes: OutboxChanges) async throws -> [RecordedEvent] {
        try await withThrowingTaskGroup(of: [RecordedEvent]?.self) { group in
            group.addTask {
                var taken: [RecordedEvent] = []
                for try await change in changes {
                    taken.append(change)
                    if taken.count == count { break }
                }
                return taken
            }
            group.addTask {
                try await Task.sleep(for: .seconds(60))
                return nil
            }
            let first = try await group.next()!
            group.cancelAll()
            return try #require(first, "the feed gave fewer than \(count) events within 60 s")
        }
    }

    // R7.4: the events already in the log, then each one committed after, in order and without a gap.
    @Test func theFeedGivesTheLogThenEachCommitInOrder() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path, transport: SimulatedInstance())
            try await client.enqueue(contentsOf: [todo(1), todo(2)])
            let held = try client.log.lastSequence()
            let changes = client.changes()
            let reader = Task { try await Self.take(Int(held) + 6, from: changes) }
            try await client.enqueue(todo(3))
            try await client.sync()
            let events = try await reader.value
            #expect(events.map(\.sequence) == Array(1...UInt64(events.count)), "every event once, in order")
            #expect(events.first?.event.type == .logCreated)
            #expect(events.contains { $0.event.type == .writeQueued && $0.sequence > held }, "the enqueue after the start")
            let all = try await Self.take(Int(try client.log.lastSequence()), from: client.changes())
            #expect(all.flatMap(\.event.verdicts).count == 3, "the three verdicts are in the log")
            client.close()
        }
    }

    // R7.4: an app that kept the last sequence it handled resumes after a reopen with the next one,
    // and then goes on with what the new client commits.
    @Test func aReopenedClientResumesAfterTheLastSequenceHandled() async throws {
        try await TemporaryFolder.with { path in
            let first = try await openClient(path, transport: SimulatedInstance())
            try await first.enqueue(contentsOf: (1...5).map { todo($0) })
            let handled = try await Self.take(4, from: first.changes())
            let lastHandled = try #require(handled.last?.sequence)
            try await first.sync()
            let total = try first.log.lastSequence()
            first.close()

            let second = try await openClient(path, transport: SimulatedInstance())
            let rest = Task { try await Self.take(Int(total - lastHandled) + 1, from: second.changes(after: lastHandled)) }
            try await second.enqueue(todo(6))
            let events = try await rest.value
            #expect(
                events.map(\.sequence) == Array((lastHandled + 1)...(lastHandled + UInt64(events.count))),
                "nothing missed, nothing repeated")
            #expect(
                events.contains { if case .writeQueued(let q) = $0.event { return q.id == WriteID(6) } else { return false } })
            second.close()
        }
    }

    // R7.4 against R7.2's bounded stream: 3,000 writes committed while a reader reads nothing lose
    // nothing from the feed (the events stream would say `missed`).
    @Test func aSlowReaderMissesNothing() async throws {
        try await TemporaryFolder.with { path in
            var configuration = testConfiguration()
            configuration.durability = .noSync
            let client = try await openClient(path, configuration: configuration)
            let changes = client.changes()
            var iterator = changes.makeAsyncIterator()
            let logCreated = try await iterator.next()
            #expect(logCreated?.event.type == .logCreated)
            for index in 0..<3000 { try await client.enqueue(todo(Int64(index))) }
            var queued = 0
            var last = logCreated?.sequence ?? 0
            while let event = try await iterator.next() {
                #expect(event.sequence == last + 1)
                last = event.sequence
                if event.event.type == .writeQueued { queued += 1 }
                if queued == 3000 { break }
            }
            #expect(queued == 3000)
            client.close()
        }
    }

    // R7.4: a reader that never reads on holds no commit up, and automatic passes committing while
    // another reader follows are seen in full: every write's verdict once.
    @Test func passesCommitWhileTheFeedIsRead() async throws {
        try await TemporaryFolder.with { path in
            var configuration = testConfiguration()
            configuration.autoSync = true
            configuration.durability = .noSync
            let client = try await openClient(path, configuration: configuration, transport: SimulatedInstance())
            var stalled = client.changes().makeAsyncIterator()
            _ = try await stalled.next()  // a reader that reads one event and then never again
            let verdicts = Task {
                var seen: [WriteID: Int] = [:]
                for try await change in client.changes() {
                    for verdict in change.event.verdicts { seen[verdict.writeId, default: 0] += 1 }
                    if seen.count == 200 { break }
                }
                return seen
            }
            for index in 0..<200 { try await client.enqueue(todo(Int64(index))) }
            await client.idle()
            let seen = try await verdicts.value
            #expect(seen.count == 200 && seen.values.allSatisfy { $0 == 1 })
            client.close()
        }
    }

    // The feed ends when the client closes, for a reader waiting and for one that starts after.
    @Test func theFeedEndsWhenTheClientCloses() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let last = try client.log.lastSequence()
            let (caughtUp, tell) = AsyncStream<Void>.makeStream()
            let waiting = Task {
                var count = 0
                for try await _ in client.changes() {
                    count += 1
                    if count == Int(last) { tell.yield() }
                }
                return count
            }
            for await _ in caughtUp { break }
            client.close()
            #expect(try await waiting.value == Int(last))
            var after = client.changes().makeAsyncIterator()
            #expect(try await after.next() == nil)
        }
    }

    // A cancelled reader's wait ends with CancellationError.
    @Test func aCancelledReaderStops() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let last = try client.log.lastSequence()
            let reader = Task {
                for try await _ in client.changes(after: last) {}
            }
            reader.cancel()
            await #expect(throws: CancellationError.self) { try await reader.value }
            client.close()
        }
    }
}
