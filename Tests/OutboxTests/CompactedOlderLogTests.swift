import Foundation
import OutboxLMDB
import OutboxTesting
import Testing

@testable import Outbox

/// A compacted log of layout 10, whose snapshot holds that layout's projections (each user's counters
/// in a table of their own): made at df79cb2 by alice's writes 1–6 sent and taken, 7–8 answered, 9–10
/// pending, then bob's 11–13, compacted into one segment, then bob's 14; with what that build's
/// `outbox log --json` and `outbox history --json` printed for it. This build reads it as that one
/// did, its counters included, each user's mark put at their first pending write (R4.2), and goes on
/// writing to it (R8.2, R8.5).
@Suite struct CompactedOlderLogTests {
    static let fixture = LogFixture("layout10-compacted")

    @Test func aCompactedLogOfTheEarlierLayoutReadsAsItDidAndGoesOn() async throws {
        try await TemporaryFolder.with { path in
            let client = try await Self.open(Self.fixture, at: path, histories: [3, 7, 9, 12])
            #expect(
                try client.log.read { try $0.counters(user: "alice") }
                    == Counters(
                        pending: 2, rejected: 0, blocked: 0, answered: 2, behind: 0, sendFrom: 9, answeredBehind: 0,
                        answeredFrom: 7, answeredTo: 9))
            let bob = Counters(pending: 4, rejected: 0, blocked: 0, answered: 0, behind: 0, sendFrom: 11)
            #expect(try client.log.read { try $0.counters(user: "bob") } == bob)
            #expect(try await client.verify().isOK)

            try await client.settleSession(user: "alice", accessToken: nil)
            #expect(try await client.sync().syncedCount == 2)
            #expect(
                try client.log.read { try $0.counters(user: "alice") }
                    == Counters(
                        pending: 0, rejected: 0, blocked: 0, answered: 4, behind: 0, sendFrom: 15, answeredBehind: 0,
                        answeredFrom: 7, answeredTo: 11))
            try await client.rebuild()
            #expect(try client.log.read { try $0.counters(user: "bob") } == bob)
            #expect(try await client.verify().isOK)
            client.close()
            // The tables layout 10 kept the counters and the pending writes in went with the rebuild on open.
            let environment = try Environment(path: path, databases: EventLog.databaseNames)
            #expect(try !environment.write { txn in try txn.deleteDatabase(named: "counters") })
            #expect(try !environment.write { txn in try txn.deleteDatabase(named: "pending") })
            environment.close()
        }
    }

    /// A compacted log of layout 11, whose snapshot lists every pending write in a `pending` table
    /// and keeps four counts a user: made at c348ed7 by alice's list 1 (then blocked) and its todo 2,
    /// which depends on it, todos 3 (accepted) and 4, 5; bob's 6–7; compacted; then alice's 8. Read
    /// into this layout, alice's mark is at 4 with 2 listed behind it, since 2 waits on the blocked 1
    /// (R4.2); the passes then send what may go, and 2 once 1 is released and goes before it (R2.2).
    static let layout11 = LogFixture("layout11-compacted")

    @Test func aCompactedLogOfLayout11PutsEachMarkWhereTheFoldWouldAndSendsInOrder() async throws {
        try await TemporaryFolder.with { path in
            let client = try await Self.open(Self.layout11, at: path, histories: [1, 2, 4])
            func counters(_ user: String) throws -> Counters { try client.log.read { try $0.counters(user: user) } }
            #expect(
                try counters("alice")
                    == Counters(
                        pending: 4, rejected: 0, blocked: 1, answered: 1, behind: 1, sendFrom: 4, answeredBehind: 0,
                        answeredFrom: 3, answeredTo: 4))
            #expect(try counters("bob") == Counters(pending: 2, rejected: 0, blocked: 0, answered: 0, behind: 0, sendFrom: 6))
            #expect(try await client.verify().isOK)

            try await client.settleSession(user: "alice", accessToken: nil)
            let first = try await client.sync()
            #expect(first.syncedCount == 3, "4, 5 and 8; 2 waits on the blocked 1")
            #expect(first.heldCount == 1)
            #expect(
                try counters("alice")
                    == Counters(
                        pending: 1, rejected: 0, blocked: 1, answered: 4, behind: 1, sendFrom: 9, answeredBehind: 0,
                        answeredFrom: 3, answeredTo: 9))
            _ = try await client.queue.release(1)
            #expect(try await client.sync().syncedCount == 2)
            // 1 and 2, answered below the answered mark, are listed apart (R6.1).
            #expect(
                try counters("alice")
                    == Counters(
                        pending: 0, rejected: 0, blocked: 0, answered: 6, behind: 0, sendFrom: 9, answeredBehind: 2,
                        answeredFrom: 3, answeredTo: 9))
            #expect(try await client.queue.takeAnswered().map(\.id) == [1, 2, 3, 4, 5, 8])
            try await client.rebuild()
            #expect(try counters("bob") == Counters(pending: 2, rejected: 0, blocked: 0, answered: 0, behind: 0, sendFrom: 6))
            #expect(try await client.verify().isOK)
            client.close()
            let environment = try Environment(path: path, databases: EventLog.databaseNames)
            #expect(try !environment.write { txn in try txn.deleteDatabase(named: "pending") })
            environment.close()
        }
    }

    /// A compacted log of layout 12, whose `answered` table lists every answered write: made at
    /// 29a1788 by alice's list 1 (accepted) and its todo 2 (refused, so 1 is kept by a take), todos 3
    /// and 4 (accepted and taken), 5 (accepted); bob's 6; compacted; then alice's 7. Read into this
    /// layout, alice's answered mark is at 1, the first answered, and the takes read from it (R6.1).
    static let layout12 = LogFixture("layout12-compacted")

    @Test func aCompactedLogOfLayout12ReadsItsAnswersFromTheMark() async throws {
        try await TemporaryFolder.with { path in
            let client = try await Self.open(Self.layout12, at: path, histories: [1, 2, 5])
            func counters(_ user: String) throws -> Counters { try client.log.read { try $0.counters(user: user) } }
            var alice = Counters(
                pending: 1, rejected: 1, blocked: 0, answered: 2, behind: 0, sendFrom: 7, answeredBehind: 0, answeredFrom: 1,
                answeredTo: 6)
            #expect(try counters("alice") == alice)
            #expect(try counters("bob") == Counters(pending: 1, rejected: 0, blocked: 0, answered: 0, behind: 0, sendFrom: 6))
            #expect(try await client.verify().isOK)

            try await client.settleSession(user: "alice", accessToken: nil)
            #expect(try await client.queue.takeAnswered().map(\.id) == [5], "1 stays while 2, which depends on it, waits")
            alice.answered = 1
            #expect(try counters("alice") == alice)
            #expect(try await client.queue.discard(2))
            #expect(try await client.queue.takeAnswered().map(\.id) == [1])
            // The mark moves past the writes taken, to the end of those answered.
            alice.answered = 0
            alice.rejected = 0
            alice.answeredFrom = 6
            #expect(try counters("alice") == alice)
            try await client.rebuild()
            #expect(try counters("alice") == alice)
            #expect(try await client.verify().isOK)
            client.close()
        }
    }

    /// A compacted log of layout 14, whose entries note no recent events: made at 624eaed by alice's
    /// list 1 (refused, then resent and its answer lost) and todos 2 and 3 (accepted and taken), then
    /// todo 4; compacted; then todo 5. Read into this layout, write 1's history is its index keys and its
    /// entry, whose recent events start empty; its next events are noted there (R8.3, R8.5).
    static let layout14 = LogFixture("layout14-compacted")

    @Test func aCompactedLogOfLayout14KeepsEveryHistoryAsItNotesNewEvents() async throws {
        try await TemporaryFolder.with { path in
            let client = try await Self.open(Self.layout14, at: path, histories: [1, 2, 4])
            let before = try client.log.history(of: 1).map(\.sequence)
            #expect(try client.log.read { try $0.entry(1) }?.recent.isEmpty == true)
            #expect(try await client.verify().isOK)

            try await client.settleSession(user: "alice", accessToken: nil)
            #expect(try await client.sync().syncedCount == 3, "1, 4 and 5")
            let after = try client.log.history(of: 1)
            #expect(Array(after.map(\.sequence).prefix(before.count)) == before)
            #expect(after.dropFirst(before.count).map(\.event.type) == [.attemptStarted, .answerReceived, .verdictsRecorded])
            #expect(try await client.queue.takeAnswered().map(\.id) == [1, 4, 5])
            #expect(try client.log.history(of: 1).dropLast().map(\.sequence) == after.map(\.sequence))
            try await client.rebuild()
            #expect(try await client.verify().isOK)
            client.close()
        }
    }

    /// A compacted log of layout 15, whose entries hold their idempotency keys, renewed or not: made
    /// at a485144 by alice's list 1 (refused, released under a fresh key, resent and its answer lost),
    /// todos 2 and 3 (accepted and taken) and 4 (refused), then 5; compacted; then 6. Read into this
    /// layout, every write keeps its key (`queue.txt`, as that build listed the queue) and its recent
    /// events, and the next pass sends 1 under its fresh key (R3.1, R8.3, R8.5).
    static let layout15 = LogFixture("layout15-compacted")

    @Test func aCompactedLogOfLayout15KeepsEveryKeyAndHistory() async throws {
        try await TemporaryFolder.with { path in
            let client = try await Self.open(Self.layout15, at: path, histories: [1, 2, 3, 4])
            let listed = try await client.queue.all().map { "\($0.id) \($0.state.name) \($0.idempotencyKey)" }
            #expect(listed == (try Self.layout15.lines("queue.txt")))
            let before = try client.log.history(of: 1).map(\.sequence)
            #expect(try await client.verify().isOK)

            try await client.settleSession(user: "alice", accessToken: nil)
            #expect(try await client.sync().syncedCount == 4, "1, 4, 5 and 6")
            let after = try client.log.history(of: 1)
            #expect(Array(after.map(\.sequence).prefix(before.count)) == before)
            guard case .attemptStarted(let attempt)? = after.dropFirst(before.count).first?.event else {
                Issue.record("write 1 was not sent")
                return
            }
            let renewed = try #require(listed.first?.split(separator: " ").last.map(String.init))
            #expect(attempt.writes.first { $0.id == 1 }?.idempotencyKey.description == renewed)
            #expect(try await client.queue.takeAnswered().map(\.id) == [1, 4, 5, 6])
            try await client.rebuild()
            #expect(try await client.verify().isOK)
            client.close()
        }
    }

    /// Opens a copy of `fixture`'s log at `path` and checks that its log and the histories of the
    /// writes `histories` read as the build that made it printed them.
    static func open(_ fixture: LogFixture, at path: String, histories: [Int]) async throws -> OutboxClient {
        try fixture.copy(["data.mdb", "archive/segment-000001.mdb"], to: path)
        let client = try await openClient(path, user: nil, transport: SimulatedInstance())
        var log: [String] = []
        try client.log.forEachEvent { recorded in
            log.append(JSONText.render(recorded.json))
            return true
        }
        #expect(log == (try fixture.lines("log.jsonl")))
        for id in histories {
            let history = try client.log.history(of: WriteID(UInt64(id))).map { JSONText.render($0.json) }
            #expect(history == (try fixture.lines("history-\(id).jsonl")), "write \(id)")
        }
        return client
    }
}
