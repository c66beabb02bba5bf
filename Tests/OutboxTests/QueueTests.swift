import OutboxTesting
import Synchronization
import Testing

@testable import Outbox

/// A transport that only reads rows (the queue's part of the boundary), from a table it is given; a
/// send gets a dropped connection.
final class RowTransport: OutboxTransport {
    let rows: [String: JSONValue]
    let fails: Bool
    let reads = Mutex(0)
    init(rows: [String: JSONValue] = [:], fails: Bool = false) {
        self.rows = rows
        self.fails = fails
    }
    struct ReadFailed: Error {}
    func send(_ batch: OutgoingBatch, accessToken: String?) async -> RequestAnswer { .failed(RequestFailure(kind: .network)) }
    func readRow(table: String, key: JSONValue, accessToken: String?) async throws -> JSONValue? {
        reads.withLock { $0 += 1 }
        if fails { throw ReadFailed() }
        return rows[table + JSONText.render(key)]
    }
}

@Suite struct QueueTests {
    // R6.1
    @Test func takeAnsweredClearsAndReturnsInOneStep() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let ids = try await client.enqueue(contentsOf: [todo(1), todo(2), todo(3)])
            try await client.record(ids[0], .accepted)
            try await client.record(ids[1], .conflicted(siblingId: "s", fields: ["title"]))
            let before = try client.eventCount()
            async let first = client.queue.takeAnswered()
            async let second = client.queue.takeAnswered()
            let taken = try await first + second
            #expect(taken.map(\.id).sorted() == [ids[0], ids[1]])
            #expect(try await client.queue.all().map(\.id) == [ids[2]])
            #expect(try client.eventCount() == before + 1, "one answersTaken event (R6.5)")
            #expect(try await client.queue.takeAnswered().isEmpty)
        }
    }

    // R6.1: an answered write that a waiting write depends on stays until that one is answered.
    @Test func anAnsweredWriteADependentWaitsOnStays() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let parent = try await client.enqueue(.insert(into: "lists", key: ["id": 1], body: [:]))
            let child = try await client.enqueue(.insert(into: "todos", key: ["id": 1], body: [:], dependsOn: [parent]))
            let loner = try await client.enqueue(todo(2))
            try await client.record(parent, .accepted)
            try await client.record(loner, .accepted)
            #expect(try await client.queue.forgetAnswered() == 1)
            #expect(try await client.queue.all().map(\.id) == [parent, child])
            try await client.record(child, .accepted)
            #expect(try await client.queue.forgetAnswered(ids: [child, 999]) == 1)
            #expect(try await client.queue.forgetAnswered(ids: [parent]) == 1)
            #expect(try await client.queue.all().isEmpty)
        }
    }

    // R6.2
    @Test func discardTakesOnlyRefusedOrDeadWrites() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let ids = try await client.enqueue(contentsOf: [todo(1), todo(2), todo(3)])
            try await client.record(ids[0], .refused(Refusal(status: 422, code: "23514")), refusals: 1)
            try await client.record(ids[1], .dead(nil), refusals: 5)
            #expect(try await client.queue.discard(ids[2]) == false)
            #expect(try await client.queue.discard(ids[0]))
            #expect(try await client.queue.discard(ids[1]))
            await #expect(throws: OutboxError.notFound) { try await client.queue.discard(ids[0]) }
            await #expect(throws: OutboxError.notFound) { try await client.queue.discard(999) }
            #expect(try await client.queue.all().map(\.id) == [ids[2]])
            // The log keeps the discarded write's history (R6.5).
            #expect(try await client.history(of: ids[0]).last?.event.type == .writeDiscarded)
        }
    }

    // R6.2: a write others wait on is discarded only with its dependents, which are refused unsent.
    @Test func discardWithDependentsRefusesThemUnsent() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let list = try await client.enqueue(.insert(into: "lists", key: ["id": 1], body: [:]))
            let item = try await client.enqueue(.insert(into: "todos", key: ["id": 1], body: [:], dependsOn: [list]))
            let edit = try await client.enqueue(.update("todos", key: ["id": 1], set: ["done": true]))
            try await client.record(list, .refused(Refusal(status: 400)), refusals: 1)
            #expect(try await client.queue.discard(list) == false)
            #expect(try await client.queue.discard(list, withDependents: true))
            for id in [item, edit] {
                let write = try #require(try await client.write(id))
                #expect(write.state == .refused(.unsent(because: "the insert it waits for was discarded")))
                #expect(try await client.queue.release(id) == false, "a final refusal is never released")
            }
            #expect(try await client.queue.discard(edit))
        }
    }

    // R6.2: dependents that were refused (not final), blocked or dead are refused unsent too; a refused
    // one would otherwise be resent forever behind a write that never reached the instance, and never
    // reach a terminal state (simulation seed 4027642: an aborted atomic group, one member discarded).
    @Test func discardWithDependentsRefusesDependentsThatAreNotPending() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let list = try await client.enqueue(.insert(into: "lists", key: ["id": 1], body: [:]))
            let waiting = try await client.enqueue(
                contentsOf: (1...4).map { n in
                    .insert(into: "todos", key: ["id": .int(Int64(n))], body: [:], dependsOn: [list])
                })
            let answered = try await client.enqueue(.insert(into: "todos", key: ["id": 9], body: [:], dependsOn: [list]))
            try await client.record(list, .refused(Refusal(status: 409)), refusals: 1)
            try await client.record(waiting[1], .refused(Refusal(reason: "its atomic group was aborted")), refusals: 1)
            try await client.record(waiting[2], .blocked(.keySpent, refusal: nil))
            try await client.record(waiting[3], .dead(Refusal(status: 400)), refusals: 5)
            try await client.record(answered, .accepted)
            #expect(try await client.queue.discard(list, withDependents: true))
            for id in waiting {
                let write = try #require(try await client.write(id))
                #expect(write.state == .refused(.unsent(because: "the insert it waits for was discarded")), "write \(id)")
            }
            #expect(try await client.write(answered)?.state == .accepted)
        }
    }

    // R6.2, decision 013 (the model check's discard race): while the outcome of a write's last send is
    // unknown, it is not discarded, nor is a write whose discard would refuse it unsent: the instance
    // could apply it after the log said it was gone or refused for good.
    @Test func discardWaitsForTheOutcomeOfTheLastSend() async throws {
        try await TemporaryFolder.with { path in
            let instance = SimulatedInstance()
            let client = try await openClient(path, transport: instance)
            let list = try await client.enqueue(.insert(into: "lists", key: ["id": 1], body: [:]))
            let item = try await client.enqueue(.insert(into: "todos", key: ["id": 1], body: [:]))
            instance.script([.verdict(.refused(Refusal(status: 422, code: "23514"))), .verdict(.accepted)])
            _ = try await client.sync()
            #expect(try await client.write(list)?.state.name == "refused")
            // Resent, and the answer lost after the instance applied it (a timeout: it may have passed).
            instance.script([.lostResponse])
            _ = try await client.sync()
            #expect(try await client.write(list)?.state.name == "refused", "still refused in the log")
            #expect(try await client.queue.discard(list) == false, "its last send's outcome is unknown")
            // The next pass resends it under its key: the instance replays what it applied.
            _ = try await client.sync()
            #expect(try await client.write(list)?.state.name == "accepted")
            #expect(instance.applied.map(\.id).filter { $0 == list }.count == 1)
            #expect(try await client.write(item)?.state.name == "accepted")
        }
    }

    // Decision 013: a dependent in doubt keeps its ancestor from being discarded with it.
    @Test func discardWithDependentsWaitsForADependentInDoubt() async throws {
        try await TemporaryFolder.with { path in
            let instance = SimulatedInstance()
            let client = try await openClient(path, transport: instance)
            let list = try await client.enqueue(.insert(into: "lists", key: ["id": 1], body: [:]))
            let item = try await client.enqueue(.insert(into: "todos", key: ["id": 1], body: [:], dependsOn: [list]))
            // Both are sent and the answer lost; then the list is refused (as a later pass would): the
            // item's send is still in doubt, and discarding the list would refuse it unsent.
            instance.script([.lostResponse])
            _ = try await client.sync()
            try await client.record(list, .refused(Refusal(status: 409)), refusals: 1)
            #expect(try await client.queue.discard(list, withDependents: true) == false)
            #expect(try await client.write(item)?.state.name == "pending")
            try await client.record(item, .refused(Refusal(status: 409)), refusals: 1)
            #expect(try await client.queue.discard(list, withDependents: true))
        }
    }

    // R6.3
    @Test func releaseSendsAgainUnderAFreshKeyKeepingTheCount() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let ids = try await client.enqueue(contentsOf: [todo(1), todo(2), todo(3), todo(4)])
            try await client.record(ids[0], .blocked(.keySpent, refusal: nil), refusals: 1)
            try await client.record(ids[1], .refused(Refusal(status: 409)), refusals: 2)
            try await client.record(ids[2], .dead(Refusal(status: 400)), refusals: 5)
            for id in ids.prefix(3) {
                let key = try #require(try await client.write(id)).idempotencyKey
                let refusals = try #require(try await client.write(id)).refusals
                #expect(try await client.queue.release(id))
                let released = try #require(try await client.write(id))
                #expect(released.state == .pending)
                #expect(released.idempotencyKey != key)
                #expect(released.refusals == refusals)
            }
            #expect(try await client.queue.release(ids[3]) == false, "a pending write is not released")
            await #expect(throws: OutboxError.notFound) { try await client.queue.release(999) }
        }
    }

    @Test func releaseByReasonReleasesEveryWriteBlockedSo() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let ids = try await client.enqueue(contentsOf: [todo(1), todo(2), todo(3)])
            try await client.record(ids[0], .blocked(.failingAlone, refusal: nil))
            try await client.record(ids[1], .blocked(.keySpent, refusal: nil))
            try await client.record(ids[2], .blocked(.failingAlone, refusal: nil))
            #expect(try await client.queue.release(reason: .failingAlone) == 2)
            #expect(try await client.queue.all().map(\.state.name) == ["pending", "blocked", "pending"])
        }
    }

    // R6.4
    @Test func withdrawReadsTheRowAndRefusesDependentsUnsent() async throws {
        try await TemporaryFolder.with { path in
            let transport = RowTransport(rows: ["todos{\"id\":1}": ["id": 1, "title": "server's"]])
            let client = try await openClient(path, transport: transport)
            let edit = try await client.enqueue(.update("todos", key: ["id": 1], set: ["title": "mine"], baseVersion: 3))
            let after = try await client.enqueue(.insert(into: "notes", key: ["id": 5], body: [:], dependsOn: [edit]))
            let pending = try await client.enqueue(todo(9))
            #expect(try await client.queue.withdraw(pending) == .notWithdrawn)
            try await client.record(edit, .blocked(.conflictUnresolved, refusal: nil))
            #expect(try await client.queue.withdraw(edit) == .withdrawn(row: ["id": 1, "title": "server's"]))
            #expect(try await client.write(edit) == nil)
            #expect(try await client.write(after)?.state == .refused(.unsent(because: "the update it waits for was withdrawn")))
            let history = try await client.history(of: edit)
            guard case .writeWithdrawn(let withdrawn)? = history.last?.event else {
                Issue.record("no writeWithdrawn")
                return
            }
            #expect(withdrawn.row == ["id": 1, "title": "server's"])
        }
    }

    @Test func withdrawOfARowTheInstanceLacksReadsNull() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path, transport: RowTransport())
            let id = try await client.enqueue(todo(1))
            try await client.record(id, .blocked(.instanceChanged, refusal: nil))
            #expect(try await client.queue.withdraw(id) == .withdrawn(row: .null))
        }
    }

    @Test func aFailedRowReadChangesNothing() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path, transport: RowTransport(fails: true))
            let id = try await client.enqueue(todo(1))
            try await client.record(id, .blocked(.failingAlone, refusal: nil))
            let before = try client.eventCount()
            await #expect(throws: OutboxError.rowReadFailed) { try await client.queue.withdraw(id) }
            #expect(try client.eventCount() == before)
            #expect(try await client.write(id)?.state == .blocked(.failingAlone, refusal: nil))
        }
    }

    // R2.4, P7: a row the log could not read back is refused before anything is written.
    @Test func aRowTooDeepToKeepChangesNothing() async throws {
        try await TemporaryFolder.with { path in
            let deep = (0..<JSONText.maxDepth).reduce(JSONValue.int(1)) { inner, _ in .array([inner]) }
            let transport = RowTransport(rows: ["todos" + JSONText.render(["id": 1]): ["id": 1, "tags": deep]])
            let client = try await openClient(path, transport: transport)
            let id = try await client.enqueue(todo(1))
            try await client.record(id, .blocked(.failingAlone, refusal: nil))
            let before = try client.eventCount()
            await #expect(throws: OutboxError.rowReadFailed) { try await client.queue.withdraw(id) }
            #expect(try client.eventCount() == before)
            #expect(try await client.queue.all().map(\.id) == [id])
        }
    }

    @Test func queueCallsActOnlyOnTheCurrentUsersWrites() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let alices = try await client.enqueue(todo(1))
            try await client.record(alices, .refused(Refusal(status: 400)), refusals: 1)
            try await client.settleSession(user: "bob", accessToken: nil)
            #expect(try await client.queue.all().isEmpty)
            await #expect(throws: OutboxError.notFound) { try await client.queue.discard(alices) }
            await #expect(throws: OutboxError.notFound) { try await client.queue.release(alices) }
        }
    }
}

@Suite struct SessionTests {
    // R7.3: a token of another subject latches identityChanged; a matching one clears it. Tokens are
    // never written (R8.7).
    @Test func aTokenOfAnotherSubjectBlocksPendingWrites() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path, user: nil)
            try await client.settleSession(user: "alice", accessToken: token(subject: "alice"))
            let id = try await client.enqueue(todo(1))
            #expect(try await client.write(id)?.state == .pending)
            try await client.settleSession(user: "alice", accessToken: token(subject: "bob"))
            #expect(try await client.write(id)?.state == .blocked(.identityChanged, refusal: nil))
            try await client.settleSession(user: "alice", accessToken: token(subject: "alice"))
            #expect(try await client.write(id)?.state == .pending)
            for event in try await client.events() {
                #expect(!JSONText.render(event.json).contains("eyJ"), "no token in the log")
            }
        }
    }

    // R7.2: a commit's verdicts go to the subscribers of `events` at the time; with none, nothing is
    // built or kept for them, and a subscriber that comes later hears from then on.
    @Test func verdictEventsReachTheSubscribersOfTheirCommit() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path, transport: SimulatedInstance())
            let first = try await client.enqueue(todo(1))
            #expect(try await client.sync().syncedCount == 1)
            #expect(client.heldInMemory == 0)
            let events = client.events
            let second = try await client.enqueue(todo(2))
            #expect(try await client.sync().syncedCount == 1)
            client.close()
            var seen: [OutboxEvent] = []
            for await event in events { seen.append(event) }
            #expect(seen.contains(.accepted(second, replayed: false)))
            #expect(seen.contains(.localChanged))
            #expect(!seen.contains(.accepted(first, replayed: false)))
        }
    }

    // R7.3, R7.2: while the latch holds, a sync sends nothing, reports stoppedBy identityChanged and
    // tells the events stream (passStopped); the pending write counts as blocked. A matching token
    // lets the next sync send it with that token.
    @Test func aLatchedSessionSendsNothingAndSaysWhy() async throws {
        try await TemporaryFolder.with { path in
            let instance = SimulatedInstance()
            let client = try await openClient(path, user: nil, transport: instance)
            let events = client.events
            try await client.settleSession(user: "alice", accessToken: token(subject: "bob"))
            let id = try await client.enqueue(todo(1))
            let stopped = try await client.sync()
            #expect(stopped.stoppedBy == PassFailure(kind: .identityChanged))
            #expect(stopped.verdicts.isEmpty)
            #expect(instance.received.isEmpty)
            #expect(client.syncStatus.value.blockedCount == 1)
            #expect(client.syncStatus.value.pendingCount == 0)
            #expect(client.syncStatus.value.lastSyncError == PassFailure(kind: .identityChanged))
            try await client.settleSession(user: "alice", accessToken: token(subject: "alice"))
            let sent = try await client.sync()
            #expect(sent.stoppedBy == nil)
            #expect(sent.verdicts.map(\.id) == [id])
            #expect(instance.received.map(\.accessToken) == [token(subject: "alice")])
            client.close()
            var seen: [OutboxEvent] = []
            for await event in events { seen.append(event) }
            #expect(seen.filter { $0 == .passStopped(PassFailure(kind: .identityChanged)) }.count == 1)
        }
    }

    @Test func theSessionSurvivesReopen() async throws {
        try await TemporaryFolder.with { path in
            do {
                let client = try await openClient(path, user: "carol")
                _ = try await client.enqueue(todo(1))
            }
            let reopened = try OutboxClient.open(path: path, configuration: testConfiguration())
            #expect(reopened.currentUser == "carol")
            #expect(try await reopened.queue.all().count == 1)
        }
    }

    // A client let go closes its log even while something else (here the test, in the library one of
    // the writer's own tasks finishing) still holds the log: the path opens again at once.
    @Test func aClientLetGoClosesItsLog() async throws {
        try await TemporaryFolder.with { path in
            var client: OutboxClient? = try await openClient(path)
            let log = client?.log
            _ = try await client?.enqueue(todo(1))
            client = nil
            let reopened = try withExtendedLifetime(log) { try OutboxClient.open(path: path, configuration: testConfiguration()) }
            #expect(try await reopened.queue.all().count == 1)
        }
    }

    @Test func subjectIsReadFromTheJWTPayload() {
        #expect(AccessToken.subject(of: token(subject: "alice")) == "alice")
        #expect(AccessToken.subject(of: "not-a-jwt") == nil)
        #expect(AccessToken.subject(of: "a.b.c") == nil)
    }
}

@Suite("Cancel (R6.6)")
struct CancelTests {
    @Test("a write nothing has sent leaves the queue; its explicit dependents are refused unsent; its row goes on")
    func cancelTakesAnUnsentWriteOut() async throws {
        try await TemporaryFolder.with { path in
            let instance = SimulatedInstance()
            let client = try await openClient(path, transport: instance)
            let milk = try await client.enqueue(todo(1))
            let follower = try await client.enqueue(.update("todos", key: ["id": 1], set: ["done": true]))
            let dependent = try await client.enqueue(
                .insert(into: "todos", key: ["id": 2], body: ["title": "x"], dependsOn: [milk]))
            let other = try await client.enqueue(todo(3))
            #expect(try await client.queue.cancel(milk))
            await #expect(throws: OutboxError.notFound) { try await client.queue.cancel(milk) }
            instance.script([.status(503)])
            _ = try await client.sync()
            #expect(try await client.queue.cancel(other) == false, "attempted: its fate is the instance's")
            let report = try await client.sync()
            #expect(report.syncedCount == 2)
            #expect(instance.applied.map(\.id) == [follower, other])
            let states = try await client.queue.all().map { ($0.id, $0.state.name) }
            #expect(states.map(\.0) == [follower, dependent, other])
            guard case .refused(let refusal)? = try await client.write(dependent)?.state else {
                Issue.record("the dependent is not refused")
                return
            }
            #expect(refusal.isFinal && refusal.reason == "the insert it waits for was cancelled")
            #expect(try await client.queue.cancel(follower) == false, "answered")
            #expect(try await client.history(of: milk).last?.event.type == .writeCancelled)
            #expect(try await client.verify().isOK)
        }
    }

    @Test("a write of an atomic group takes its whole group with it")
    func cancelTakesTheGroup() async throws {
        try await TemporaryFolder.with { path in
            let instance = SimulatedInstance()
            let client = try await openClient(path, transport: instance)
            let group = try await client.enqueue(contentsOf: [todo(1), todo(2), todo(3)], atomic: true)
            let after = try await client.enqueue(todo(4))
            #expect(try await client.queue.cancel(group[1]))
            #expect(try await client.queue.all().map(\.id) == [after])
            #expect(try await client.sync().syncedCount == 1)
            #expect(instance.applied.map(\.id) == [after])
            #expect(try await client.verify().isOK)
        }
    }

}

@Suite("Following one write")
struct LookUpTests {
    // One write, and the writes of one row, as all() shows them; another user's or a gone write is nil.
    @Test func oneWriteAndOneRowAreLookedUp() async throws {
        try await TemporaryFolder.with { path in
            let instance = SimulatedInstance()
            let client = try await openClient(path, transport: instance)
            let first = try await client.enqueue(todo(1))
            let other = try await client.enqueue(todo(2))
            let second = try await client.enqueue(.update("todos", key: ["id": 1], set: ["done": true]))
            #expect(try await client.queue.write(second)?.follows == [first])
            #expect(try await client.queue.writes(table: "todos", key: ["id": 1]).map(\.id) == [first, second])
            #expect(try await client.queue.writes(table: "lists", key: ["id": 1]).isEmpty)
            try await client.sync()
            #expect(try await client.queue.write(first)?.state == .accepted)
            _ = try await client.queue.takeAnswered()
            #expect(try await client.queue.write(other) == nil, "taken")
            try await client.settleSession(user: "bob", accessToken: nil)
            let bobs = try await client.enqueue(todo(1))
            try await client.settleSession(user: "alice", accessToken: nil)
            #expect(try await client.queue.write(bobs) == nil, "another user's")
            #expect(try await client.queue.writes(table: "todos", key: ["id": 1]).isEmpty)
        }
    }

    // R8.3, R8.4 from the app: the history and the past state of its current user's writes only; another user's
    // write is not found, as if the log never held it (the `outbox` tool still reads every user's).
    @Test func historyAndPastStateAreTheCurrentUsers() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path, transport: SimulatedInstance())
            let alices = try await client.enqueue(todo(1))
            try await client.settleSession(user: "bob", accessToken: nil)
            let bobs = try await client.enqueue(todo(2))
            let sequence = try client.log.lastSequence()
            #expect(try await client.history(of: bobs).first?.event.type == .writeQueued)
            await #expect(throws: OutboxError.notFound) { try await client.history(of: alices) }
            #expect(try await client.state(asOf: sequence).writes.map(\.id) == [bobs])
            try await client.settleSession(user: "alice", accessToken: nil)
            await #expect(throws: OutboxError.notFound) { try await client.history(of: bobs) }
            await #expect(throws: OutboxError.notFound) { try await client.settled(bobs) }
            #expect(try await client.state(asOf: sequence).writes.map(\.id) == [alices])
            client.close()
            #expect(try LogInspector(path: path).state(asOf: sequence).writes.map(\.id) == [alices, bobs], "the tool reads both")
        }
    }

    // The app's spinner on one row: settled(id) returns once the write has an outcome.
    @Test func settledWaitsForTheOutcome() async throws {
        try await TemporaryFolder.with { path in
            let instance = SimulatedInstance()
            let client = try await openClient(path, transport: instance)
            let id = try await client.enqueue(todo(1))
            let waiting = Task { try await client.settled(id) }
            instance.script([.status(503)])
            _ = try await client.sync()
            _ = try await client.sync()
            #expect(try await waiting.value?.state == .accepted)
            #expect(try await client.settled(id)?.state == .accepted, "already settled")
            await #expect(throws: OutboxError.notFound) { try await client.settled(WriteID(99)) }

            let cancelled = try await client.enqueue(todo(2))
            let gone = Task { try await client.settled(cancelled) }
            #expect(try await client.queue.cancel(cancelled))
            #expect(try await gone.value == nil, "it left the queue")

            let pending = try await client.enqueue(todo(3))
            let abandoned = Task { try await client.settled(pending) }
            abandoned.cancel()
            await #expect(throws: CancellationError.self) { try await abandoned.value }
            let closing = Task { try await client.settled(pending) }
            client.close()
            await #expect(throws: OutboxError.closed) { try await closing.value }
        }
    }
}
