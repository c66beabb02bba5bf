import Foundation
@testable import Outbox
import Testing

@Suite("Sync passes")
struct SyncTests {
    @Test("R4.1: a pass sends pending writes in id order and records each verdict")
    func sendsInOrder() async throws {
        try await withTemporaryLog { path in
            let instance = SimulatedInstance()
            let client = try await openClient(path, transport: instance)
            for n in 1...3 { try await client.enqueue(todo(Int64(n))) }
            instance.script([.verdict(.accepted), .verdict(.refused(Refusal(status: 422, code: "23514")))])
            let report = try await client.sync()
            #expect(report.syncedCount == 2)
            #expect(report.rejected.map(\.id) == [WriteID(2)])
            #expect(report.remainingCount == 0)
            #expect(instance.applied.map(\.id) == [WriteID(1), WriteID(3)])
            let states = try await client.queue.all().map(\.state.name)
            #expect(states == ["accepted", "refused", "accepted"])
            #expect(try await client.verify().isOK)
        }
    }
}
