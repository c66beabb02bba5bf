import Foundation
import OutboxTesting
import Testing

@testable import Outbox

/// `queue.explain`: what holds a write in every state the verdict table names (R3.1, R3.3),
/// what it waits behind (R2.2, R4.2, R4.5), and the count and event of the writes held behind a dead or
/// blocked write (R7.1, R7.2). The scenarios `Specs/scenarios/explain-*.json` cover the pass's side:
/// Retry-After, a stopped pass, failingAlone, the network switch, identityChanged.
@Suite struct ExplainTests {
    typealias Hold = WriteExplanation.Hold

    /// Each state, the hold it gives, and the calls that free it.
    static let states: [(name: String, state: WriteState, kind: String, remedies: [WriteExplanation.Remedy])] = [
        ("accepted", .accepted, "answered", [.takeAnswered]),
        ("merged", .merged(fields: ["title"]), "answered", [.takeAnswered]),
        ("conflicted", .conflicted(siblingId: "s1", fields: ["title"]), "answered", [.takeAnswered]),
        ("refused", .refused(Refusal(status: 422, code: "23514", fields: ["title"])), "refused", [.sync, .discard]),
        ("refused for good", .refused(.unsent(because: "the insert it waits for was withdrawn")), "refusedForGood", [.discard]),
        ("dead", .dead(Refusal(status: 422, code: "23514")), "dead", [.release, .discard]),
        ("blocked credentialRefused", .blocked(.credentialRefused, refusal: nil), "blocked", [.newAccessToken]),
        ("blocked keySpent", .blocked(.keySpent, refusal: nil), "blocked", [.release]),
        ("blocked ancestorUnavailable", .blocked(.ancestorUnavailable, refusal: nil), "blocked", [.withdraw, .release]),
        ("blocked conflictUnresolved", .blocked(.conflictUnresolved, refusal: nil), "blocked", [.withdraw]),
        ("blocked failingAlone", .blocked(.failingAlone, refusal: nil), "blocked", [.release, .withdraw]),
        ("blocked instanceChanged", .blocked(.instanceChanged, refusal: nil), "blocked", [.release, .withdraw]),
    ]

    @Test func everyStateSaysWhatHoldsItAndWhatFreesIt() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let fresh = try await client.enqueue(todo(100))
            let ready = try await client.queue.explain(fresh)
            #expect(ready.hold == .nothing && ready.behind.isEmpty && ready.remedies == [.sync])
            #expect(ready.description == "write \(fresh) is pending: nothing holds it; the next pass sends it: sync")
            for (index, row) in Self.states.enumerated() {
                let id = try await client.enqueue(todo(Int64(index + 1)))
                try await client.record(id, row.state, refusals: 2)
                let explanation = try await client.queue.explain(id)
                #expect(explanation.state == row.state, "\(row.name)")
                #expect(explanation.holder == id && explanation.behind.isEmpty, "\(row.name)")
                #expect(Self.kind(explanation.hold) == row.kind, "\(row.name): \(explanation.hold)")
                #expect(explanation.remedies == row.remedies, "\(row.name)")
                let word = row.kind == "refusedForGood" ? "refused for good" : row.state.name
                #expect(explanation.description.hasPrefix("write \(id) is \(word)"), "\(explanation)")
            }
        }
    }

    @Test func aWaitingWriteIsExplainedThroughTheChainToTheWriteThatHoldsIt() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let insert = try await client.enqueue(todo(1, ""))
            let update = try await client.enqueue(.update("todos", key: ["id": .int(1)], set: ["title": .string("milk")]))
            let child = try await client.enqueue(
                .insert(into: "items", key: ["id": .int(9)], body: ["todo": .int(1)], dependsOn: [update]))
            try await client.record(
                insert, .dead(Refusal(status: 422, code: "23514", message: "new row violates check", fields: ["title"])),
                refusals: 5)
            let explanation = try await client.queue.explain(child)
            #expect(explanation.behind == [.init(id: update, link: .dependsOn), .init(id: insert, link: .sameRow)])
            #expect(explanation.holder == insert)
            #expect(explanation.remedies == [.release, .discard])
            #expect(
                explanation.description
                    == "write \(child) is pending, waiting behind write \(update) (dependsOn), which waits behind write \(insert) (same row), which is dead after 5 refusals (422 23514 on title): release write \(insert) or discard it"
            )
            // The server's text never reaches an explanation (it stays in the log for audits).
            #expect(!explanation.description.contains("violates"))
            #expect(!JSONText.render(explanation.json).contains("violates"))
        }
    }

    @Test func aMemberOfAnAtomicGroupWaitsBehindWhatAnotherMemberWaitsOn() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let first = try await client.enqueue(todo(1))
            try await client.record(first, .blocked(.keySpent, refusal: nil))
            let group = try await client.enqueue(
                contentsOf: [todo(2), .update("todos", key: ["id": .int(1)], set: ["title": .string("x")])], atomic: true)
            let explanation = try await client.queue.explain(group[0])
            #expect(explanation.behind == [.init(id: group[1], link: .atomicGroup), .init(id: first, link: .sameRow)])
            #expect(explanation.remedies == [.release])
        }
    }

    @Test func explainThrowsNotFoundForAWriteTheQueueDoesNotHoldForTheUser() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let id = try await client.enqueue(todo(1))
            try await client.settleSession(user: "bob", accessToken: nil)
            await #expect(throws: OutboxError.self) { try await client.queue.explain(id) }
            await #expect(throws: OutboxError.self) { try await client.queue.explain(WriteID(99)) }
            client.close()
            // The tool reads any user's write, and says whose it is.
            let inspector = try LogInspector(path: path)
            let explanation = try #require(try inspector.explain(id, now: Timestamp(milliseconds: 0)))
            #expect(explanation.hold == .otherUser("alice"))
            #expect(try inspector.explain(WriteID(99), now: Timestamp(milliseconds: 0)) == nil)
        }
    }

    @Test func theStatusAndTheReportCountTheWritesHeldBehindADeadOrBlockedWrite() async throws {
        try await TemporaryFolder.with { path in
            let instance = SimulatedInstance()
            let client = try await openClient(path, transport: instance)
            let insert = try await client.enqueue(todo(1, ""))
            let update = try await client.enqueue(.update("todos", key: ["id": .int(1)], set: ["title": .string("a")]))
            _ = try await client.enqueue(.update("todos", key: ["id": .int(1)], set: ["title": .string("b")]))
            _ = try await client.enqueue(todo(2))
            #expect(client.syncStatus.value.heldBehindDeadOrBlockedCount == 0)
            try await client.record(insert, .dead(Refusal(status: 422)), refusals: 5)
            #expect(client.syncStatus.value.heldBehindDeadOrBlockedCount == 2)
            #expect(client.syncStatus.value.description.contains("held behind dead or blocked 2"))
            let report = try await client.sync()
            #expect(report.heldBehindDeadOrBlockedCount == 2 && report.syncedCount == 1)
            #expect(report.description.contains("held behind dead or blocked 2"))
            // A refused write holds its row too, but goes again by itself: not counted.
            #expect(try await client.queue.release(insert))
            #expect(client.syncStatus.value.heldBehindDeadOrBlockedCount == 0)
            try await client.record(insert, .blocked(.keySpent, refusal: nil))
            #expect(client.syncStatus.value.heldBehindDeadOrBlockedCount == 2)
            #expect(try await client.queue.discard(update) == false)
        }
    }

    @Test func oneEventWhenAWriteStartsWaitingBehindADeadOrBlockedWrite() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let seen = Seen()
            client.listen { event in
                if case .waitingBehind = event { seen.add(event) }
            }
            let insert = try await client.enqueue(todo(1, ""))
            let update = try await client.enqueue(.update("todos", key: ["id": .int(1)], set: ["title": .string("a")]))
            #expect(seen.events.isEmpty)
            try await client.record(insert, .dead(Refusal(status: 422)), refusals: 5)
            #expect(seen.events == [.waitingBehind(update, holder: insert)])
            // Another commit does not announce it again; a write queued behind it is announced once.
            _ = try await client.enqueue(todo(2))
            let later = try await client.enqueue(.delete(from: "todos", key: ["id": .int(1)]))
            #expect(seen.events == [.waitingBehind(update, holder: insert), .waitingBehind(later, holder: insert)])
            // Released, then dead again: they start waiting again, and are announced again.
            #expect(try await client.queue.release(insert))
            try await client.record(insert, .dead(Refusal(status: 422)), refusals: 6)
            #expect(seen.events.count == 4)
        }
    }

    static func kind(_ hold: Hold) -> String {
        guard
            case .object(let fields) = WriteExplanation(id: WriteID(1), state: .pending, behind: [], hold: hold, remedies: [])
                .json,
            case .object(let hold)? = fields["hold"], case .string(let kind)? = hold["kind"]
        else { return "?" }
        return kind
    }
}

/// Events collected from a listener, which is called synchronously as each is sent.
private final class Seen: @unchecked Sendable {
    private let lock = NSLock()
    private var collected: [OutboxEvent] = []
    func add(_ event: OutboxEvent) { lock.withLock { collected.append(event) } }
    var events: [OutboxEvent] { lock.withLock { collected } }
}
