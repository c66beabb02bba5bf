import OutboxLMDB
import OutboxTesting
import Synchronization
import Testing

@testable import Outbox

/// The pending writes are a state of their entries, read from each user's mark (`Counters.sendFrom`):
/// the mark moves past a write as it leaves the queue and past a pending write that waits on one not
/// going, which is listed behind it with any write released below it. Whatever the mark passes, the
/// planner still sends in id order what may go (R2.2, R4.2), and a fold of the log gives the same
/// mark (R8.2).
@Suite struct SendMarkTests {
    @Test func theMarkPassesAWriteThatWaitsAndThePassStillSendsItOnceItMayGo() async throws {
        try await TemporaryFolder.with { path in
            let instance = SimulatedInstance()
            let client = try await openClient(path, transport: instance)
            let parent = try await client.enqueue(.insert(into: "lists", key: ["id": 1], body: [:]))
            let child = try await client.enqueue(.insert(into: "todos", key: ["id": 1], body: [:], dependsOn: [parent]))
            let others = try await client.enqueue(contentsOf: [todo(2), todo(3), todo(4)])
            func counters() throws -> Counters { try client.log.read { try $0.counters(user: "alice") } }
            #expect(try counters().sendFrom == parent.rawValue)

            // The parent blocked: the child waits on it, so the mark goes past both to the next write.
            try await client.record(parent, .blocked(.keySpent, refusal: nil))
            #expect(
                try counters()
                    == Counters(pending: 4, rejected: 0, blocked: 1, answered: 0, behind: 1, sendFrom: others[0].rawValue))
            #expect(try await client.verify().isOK)

            let first = try await client.sync()
            #expect(first.syncedCount == 3)
            #expect(first.heldCount == 1, "the child, behind the mark, is still counted as held")
            let end = others[2].rawValue + 1
            let answered = (from: others[0].rawValue, to: end)
            #expect(
                try counters()
                    == Counters(
                        pending: 1, rejected: 0, blocked: 1, answered: 3, behind: 1, sendFrom: end, answeredBehind: 0,
                        answeredFrom: answered.from, answeredTo: answered.to))

            // Released below the mark, the parent is listed behind it too, and both go in id order.
            _ = try await client.queue.release(parent)
            #expect(try counters().behind == 2)
            #expect(try counters().sendFrom == end, "the mark never moves back over the writes settled since")
            #expect(try await client.sync().syncedCount == 2)
            // Answered below the answered mark, the parent and the child are listed apart (R6.1).
            #expect(
                try counters()
                    == Counters(
                        pending: 0, rejected: 0, blocked: 0, answered: 5, behind: 0, sendFrom: end, answeredBehind: 2,
                        answeredFrom: answered.from, answeredTo: answered.to))
            #expect(try await client.queue.all().map(\.state).allSatisfy(\.isAnswered))
            let applied = instance.applied.map(\.id)
            #expect(applied.firstIndex(of: parent)! < applied.firstIndex(of: child)!, "the parent first (R2.2)")
            #expect(try await client.verify().isOK)

            // A write queued once nothing is pending brings the mark to it.
            let next = try await client.enqueue(todo(5))
            #expect(try counters().sendFrom == next.rawValue)
            #expect(try await client.verify().isOK)
        }
    }

    @Test func aWriteQueuedWaitingWhenNothingIsPendingIsListedBehindTheMark() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path, transport: SimulatedInstance())
            let parent = try await client.enqueue(.insert(into: "lists", key: ["id": 1], body: [:]))
            try await client.record(parent, .blocked(.keySpent, refusal: nil))
            // Nothing is pending: the child, which waits on the blocked parent, does not hold the mark.
            let child = try await client.enqueue(.insert(into: "todos", key: ["id": 1], body: [:], dependsOn: [parent]))
            func counters() throws -> Counters { try client.log.read { try $0.counters(user: "alice") } }
            #expect(try counters().behind == 1)
            #expect(try counters().sendFrom == child.rawValue + 1)
            let later = try await client.enqueue(contentsOf: [todo(2), todo(3)])
            #expect(try counters().sendFrom == later[0].rawValue)
            #expect(try await client.sync().syncedCount == 2)
            #expect(try counters().sendFrom == later[1].rawValue + 1, "the mark went on past the drained writes")
            _ = try await client.queue.release(parent)
            #expect(try await client.sync().syncedCount == 2)
            #expect(try counters().pending == 0)
            #expect(try counters().behind == 0)
            #expect(try await client.verify().isOK)
        }
    }

    @Test func eachUserHasTheirOwnMarkAndAPassStepsOverTheOtherUsersWrites() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path, transport: SimulatedInstance())
            let a1 = try await client.enqueue(todo(1))
            try await client.settleSession(user: "bob", accessToken: nil)
            let b2 = try await client.enqueue(todo(2))
            try await client.settleSession(user: "alice", accessToken: nil)
            let a3 = try await client.enqueue(todo(3))
            func counters(_ user: String) throws -> Counters { try client.log.read { try $0.counters(user: user) } }
            #expect(try counters("alice").sendFrom == a1.rawValue)
            #expect(try counters("bob").sendFrom == b2.rawValue)

            #expect(try await client.sync().syncedCount == 2)
            #expect(try counters("alice").pending == 0)
            #expect(
                try counters("bob")
                    == Counters(pending: 1, rejected: 0, blocked: 0, answered: 0, behind: 0, sendFrom: b2.rawValue))
            #expect(try client.pendingCount(exceptUser: "alice") == 1)
            #expect(try await client.queue.all().map(\.id) == [a1, a3])

            try await client.settleSession(user: "bob", accessToken: nil)
            #expect(try await client.sync().syncedCount == 1)
            #expect(try counters("bob").sendFrom == a3.rawValue + 1)
            #expect(try await client.verify().isOK)
        }
    }
}

/// A batch is planned once, ahead, while the request before it is in flight, and carried into the
/// commit that records that request's answer when nothing it read has changed since (R4.1, R4.2).
@Suite struct CarriedPlanTests {
    @Test func aWriteQueuedWhileARequestIsInFlightStillJoinsTheNextBatch() async throws {
        try await TemporaryFolder.with { path in
            let (client, instance) = try await Self.openInBatchesOfTwo(path)
            _ = try await client.enqueue(contentsOf: [todo(1), todo(2), todo(3)])
            // While [1, 2] is in flight, and after the pass planned [3] ahead, write 4 is queued: the
            // plan made ahead is not what the planner chooses now, so the commit plans again.
            let queued = Mutex(false)
            instance.onApply { applied, _ in
                guard applied.id == 2,
                    queued.withLock({ done in
                        defer { done = true }
                        return !done
                    })
                else { return }
                try! client.log.transaction(sync: .standard) { appender in
                    _ = try QueueOperations.enqueue(
                        [todo(4)], user: "alice", atomic: false, random: SeededRandomSource(seed: 7), appender: &appender)
                }
            }
            #expect(try await client.sync().syncedCount == 4)
            #expect(instance.received.map(\.writes) == [[1, 2], [3, 4]])
        }
    }

    @Test func aBatchPlannedAheadIsSentAsPlannedWhenNothingChanged() async throws {
        try await TemporaryFolder.with { path in
            let (client, instance) = try await Self.openInBatchesOfTwo(path)
            _ = try await client.enqueue(contentsOf: [todo(1), todo(2), todo(3), todo(4), todo(5)])
            #expect(try await client.sync().syncedCount == 5)
            #expect(instance.received.map(\.writes) == [[1, 2], [3, 4], [5]])
            #expect(try await client.verify().isOK)
        }
    }

    @Test func aBatchPlannedOnAnAnswerThatDidNotComeIsPlannedAgain() async throws {
        try await TemporaryFolder.with { path in
            let (client, instance) = try await Self.openInBatchesOfTwo(path)
            let ids = try await client.enqueue(contentsOf: [todo(1), todo(2)])
            // Planned ahead with [1, 2] counted as answered: [3, 4]; but 2 is refused, and 3 depends on it.
            _ = try await client.enqueue(.insert(into: "todos", key: ["id": 3], body: [:], dependsOn: [ids[1]]))
            _ = try await client.enqueue(todo(4))
            instance.script([.verdict(.accepted), .verdict(.refused(Refusal(status: 422, code: "23514")))])
            _ = try await client.sync()
            #expect(instance.received.map(\.writes) == [[1, 2], [4]], "3 waits on the refused 2 (R2.2)")
        }
    }

    // The batch after the next is planned while the commit that sends the next is made, on the
    // snapshot before it; when that commit ran another job too (a write queued in it, after the
    // pass's own), the plan is made again on what it committed.
    @Test(.timeLimit(.minutes(1))) func aPlanReadBeforeACommitSharedWithAnotherJobIsMadeAgain() async throws {
        try await TemporaryFolder.with { path in
            let (client, instance) = try await Self.openInBatches(of: 3, path)
            _ = try await client.enqueue(contentsOf: (1...5).map { todo($0) })
            let log = client.log
            log.suspendWriter()
            let sync = Task { try await client.sync() }
            // The pass's first commit waits, and the batch after it ([4, 5]) was read ahead meanwhile.
            while log.committer.waitingCount < 1 || log.reads.finishedCount < log.reads.submittedCount {
                await Task.yield()
            }
            let queued = Task { try await client.enqueue(todo(6)) }
            while log.committer.waitingCount < 2 { await Task.yield() }
            log.resumeWriter()
            _ = try await queued.value
            #expect(try await sync.value.syncedCount == 6)
            #expect(instance.received.map(\.writes) == [[1, 2, 3], [4, 5, 6]])
        }
    }

    // A drain reads ahead once a request: the read made while a commit is made stands when the commit
    // ran the pass's job alone, and is not made again after it.
    @Test func aDrainReadsAheadOnceARequest() async throws {
        try await TemporaryFolder.with { path in
            let (client, _) = try await Self.openInBatches(of: 2, path)
            func readsOfADrain(_ count: Int64) async throws -> Int {
                _ = try await client.enqueue(contentsOf: (1...count).map { todo($0) })
                let before = client.log.reads.submittedCount
                #expect(try await client.sync().syncedCount == Int(count))
                return client.log.reads.submittedCount - before
            }
            let short = try await readsOfADrain(6)
            let long = try await readsOfADrain(12)
            #expect(long - short == 2 * 3, "three requests more: before each the acknowledged watermark read, and one read ahead")
        }
    }

    /// A client sending batches of two to a simulated instance.
    static func openInBatchesOfTwo(_ path: String) async throws -> (OutboxClient, SimulatedInstance) {
        try await openInBatches(of: 2, path)
    }

    /// A client sending batches of `size` to a simulated instance.
    static func openInBatches(of size: Int, _ path: String) async throws -> (OutboxClient, SimulatedInstance) {
        let instance = SimulatedInstance()
        var configuration = testConfiguration()
        configuration.batchSize = size
        return (try await openClient(path, configuration: configuration, transport: instance), instance)
    }
}
