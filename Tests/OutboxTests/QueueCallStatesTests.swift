import OutboxTesting
import Testing

@testable import Outbox

/// Which states each queue call takes, and what it returns for the others (R6.2–R6.4, R6.6): the README's table, one write a cell.
@Suite struct QueueCallStatesTests {
    enum Call: String, CaseIterable { case release, withdraw, discard, cancel }

    /// The states, and for each the calls that act on it (the others return false or `.notWithdrawn`).
    static let takes: [(name: String, state: WriteState?, calls: Set<Call>)] = [
        ("pending, never sent", nil, [.cancel]),
        ("accepted", .accepted, []),
        ("merged", .merged(fields: ["title"]), []),
        ("conflicted", .conflicted(siblingId: "s1", fields: ["title"]), []),
        ("refused", .refused(Refusal(status: 422, code: "23514")), [.release, .discard]),
        ("refused for good", .refused(.unsent(because: "the insert it waits for was withdrawn")), [.discard]),
        ("dead", .dead(Refusal(status: 422)), [.release, .discard]),
        ("blocked credentialRefused", .blocked(.credentialRefused, refusal: nil), [.release]),
        ("blocked keySpent", .blocked(.keySpent, refusal: nil), [.release]),
        ("blocked ancestorUnavailable", .blocked(.ancestorUnavailable, refusal: nil), [.release, .withdraw]),
        ("blocked conflictUnresolved", .blocked(.conflictUnresolved, refusal: nil), [.release, .withdraw]),
        ("blocked failingAlone", .blocked(.failingAlone, refusal: nil), [.release, .withdraw]),
        ("blocked instanceChanged", .blocked(.instanceChanged, refusal: nil), [.release, .withdraw]),
    ]

    @Test(arguments: Call.allCases)
    func eachCallTakesItsStatesAndNoOthers(call: Call) async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path, transport: SimulatedInstance())
            for (index, row) in Self.takes.enumerated() {
                let id = try await client.enqueue(todo(Int64(index + 1)))
                if let state = row.state { try await client.record(id, state, refusals: 1) }
                let acted: Bool
                switch call {
                case .release: acted = try await client.queue.release(id)
                case .withdraw: acted = try await client.queue.withdraw(id) != .notWithdrawn
                case .discard: acted = try await client.queue.discard(id)
                case .cancel: acted = try await client.queue.cancel(id)
                }
                #expect(acted == row.calls.contains(call), "\(call) on a write \(row.name)")
            }
        }
    }
}
