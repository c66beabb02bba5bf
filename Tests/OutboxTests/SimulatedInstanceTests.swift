import Foundation
import OutboxTesting
import Testing

@testable import Outbox

/// The simulated instance as an app's tests use it (OutboxTesting): answers by predicate besides the
/// positional script, and a latency that holds requests in flight.
@Suite struct SimulatedInstanceTests {
    // The first try of every todo fails with a 503; the second goes through.
    @Test func aResponderAnswersTheAttemptItNames() async throws {
        try await TemporaryFolder.with { path in
            let instance = SimulatedInstance()
            instance.respond(table: "todos", attempt: 1, with: .status(503))
            let client = try await openClient(path, transport: instance)
            try await client.enqueue(todo(1))
            #expect(try await client.sync().stoppedBy?.status == 503)
            #expect(try await client.sync().verdicts.map(\.kind) == [.accepted])
            try await client.enqueue(todo(2))
            #expect(try await client.sync().stoppedBy?.status == 503, "a new write's first try")
            client.close()
        }
    }

    // One row's writes are refused, as often as allowed; the others are accepted; a predicate picks
    // what no table or key can name.
    @Test func respondersPickWritesByKeyAndByPredicate() async throws {
        try await TemporaryFolder.with { path in
            let instance = SimulatedInstance()
            instance.respond(key: ["id": 2], with: .verdict(.refused(Refusal(status: 422, code: "23514"))), times: 1)
            instance.respond(
                when: { write, _ in write.operation == .delete }, with: .verdict(.blocked(.conflictUnresolved, refusal: nil)))
            let client = try await openClient(path, transport: instance)
            try await client.enqueue(contentsOf: [todo(1), todo(2), .delete(from: "todos", key: ["id": 3])])
            #expect(try await client.sync().verdicts.map(\.kind) == [.accepted, .refused, .blocked])
            #expect(try await client.sync().verdicts.map(\.kind) == [.accepted], "refused once only; the blocked one waits")
            #expect(instance.row(table: "todos", key: ["id": 2]) != nil)
            client.close()
        }
    }

    // A request waits out the latency in flight; closing the client then cancels it: nothing is
    // applied, and the write is sent again by the next client.
    @Test func aLatencyHoldsTheRequestInFlight() async throws {
        try await TemporaryFolder.with { path in
            let instance = SimulatedInstance(latency: .seconds(600))
            let client = try await openClient(path, transport: instance)
            let id = try await client.enqueue(todo(1))
            let pass = Task { try await client.sync() }
            let deadline = Date().addingTimeInterval(60)
            while instance.received.isEmpty, Date() < deadline { await Task.yield() }
            #expect(instance.received.map(\.writes) == [[id]], "the request is in flight")
            client.close()
            _ = try? await pass.value
            #expect(instance.applied.isEmpty, "a cancelled request reached nothing")
            instance.setLatency(.zero)
            let again = try await openClient(path, transport: instance)
            #expect(try await again.sync().verdicts.map(\.kind) == [.accepted])
            again.close()
        }
    }
}
