import OutboxTesting
import Testing

@testable import Outbox

/// The acknowledged watermark (R8.9) as the library works it out: only writes settled for
/// good in what was committed before the planning commit count; a dead, blocked, refused or pending
/// write holds it; writes out of the queue count.
@Suite struct WatermarkTests {
    @Test func theWatermarkStopsBelowTheFirstWriteThatMayStillGo() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            func watermark() throws -> UInt64 { try client.log.read { try Watermark.acknowledged($0, from: 0) } }
            #expect(try watermark() == 0)
            let ids = try await client.enqueue(contentsOf: (1...6).map { todo(Int64($0)) })
            #expect(try watermark() == 0, "pending")
            try await client.record(ids[0], .accepted)
            try await client.record(ids[1], .refused(.unsent(because: "the insert it waits for was withdrawn")))
            try await client.record(ids[2], .dead(Refusal(status: 422)), refusals: 5)
            try await client.record(ids[3], .merged(fields: ["title"]))
            #expect(try watermark() == 2, "answered, refused for good; then a dead write")
            #expect(try await client.queue.discard(ids[2]))
            #expect(try watermark() == 4)
            try await client.record(ids[4], .blocked(.keySpent, refusal: nil))
            try await client.record(ids[5], .conflicted(siblingId: "s", fields: []))
            #expect(try watermark() == 4, "blocked")
            #expect(try await client.queue.release(ids[4]))
            try await client.record(ids[4], .refused(Refusal(status: 422)), refusals: 1)
            #expect(try watermark() == 4, "refused, not for good: sent again")
            try await client.record(ids[4], .accepted)
            #expect(try watermark() == 6)
            #expect(try await client.queue.takeAnswered().count == 4)
            #expect(try watermark() == 6, "taken out: still settled")
            #expect(try client.log.read { try Watermark.acknowledged($0, from: 6) } == 6, "it never falls")
        }
    }

    @Test func theSimulatedInstanceKeepsOnlyWhatIsInFlightAndRefusesAResendBelowIt() async throws {
        try await TemporaryFolder.with { path in
            let instance = SimulatedInstance()
            var configuration = testConfiguration()
            configuration.batchSize = 50
            let client = try await openClient(path, configuration: configuration, transport: instance)
            try await client.enqueue(contentsOf: (1...1000).map { todo(Int64($0)) })
            #expect(try await client.sync().syncedCount == 1000)
            // The last two requests' answers: what the commits before them had not made durable.
            #expect(instance.keptAnswerCount == 100)
            // A write sent again at or below it: refused whole, never applied twice.
            let again = OutgoingWrite(
                id: WriteID(3), origin: try client.origin(), idempotencyKey: IdempotencyKey(high: 1, low: 1), table: "todos",
                operation: .insert, key: ["id": 3], body: [:])
            guard case .contractBroken = await instance.send(OutgoingBatch(writes: [again]), accessToken: nil) else {
                Issue.record("a resend below the watermark was answered")
                return
            }
            #expect(instance.applied.count == 1000)
        }
    }
}
