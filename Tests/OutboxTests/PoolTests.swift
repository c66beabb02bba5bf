import Foundation
import OutboxTesting
import Testing

@testable import Outbox

@Suite("Swift's pool never waits on the log")
struct PoolTests {
    @Test("a client's passes, triggers, status and calls read and write the log off Swift's pool")
    func noTransactionOnThePool() async throws {
        try await TemporaryFolder.with { path in
            let clock = ManualClock()
            var configuration = testConfiguration(clock: clock)
            configuration.autoSync = true
            configuration.syncLockWait = 0
            let instance = SimulatedInstance()
            let client = try await OutboxClient.open(
                at: URL(filePath: path), transport: instance, configuration: configuration,
                accessToken: { token(subject: "alice") })
            try await client.settleSession(user: "alice", accessToken: token(subject: "alice"))
            // Automatic passes after enqueues, one refused write (the holders are read), one stopped by a 503.
            instance.script([.verdict(.accepted), .verdict(.refused(Refusal(status: 422, code: "23514")))])
            for n in 1...3 { try await client.enqueue(todo(Int64(n))) }
            await client.idle()
            instance.script([.status(503, retryAfter: "2")])
            try await client.enqueue(todo(4))
            await client.idle()
            // The backoff's timer fires a pass; the monitor and the network switch trigger others.
            clock.advance(seconds: 3)
            await client.idle()
            client.connectivityChanged(online: false)
            client.connectivityChanged(online: true)
            await client.disableNetwork()
            await client.enableNetwork()
            await client.idle()
            _ = try await client.sync()
            _ = try await client.queue.all()
            _ = try await client.queue.explain(2)
            _ = try await client.queue.release(2)
            await client.idle()
            _ = try await client.queue.takeAnswered()
            _ = try await client.compact()
            _ = try await client.history(of: 1)
            // A synchronous call an app may make from a task: the origin, read when the client opened.
            _ = try client.origin()
            #expect(instance.applied.count >= 3)
            #expect(client.log.transactionsBegunFromTasks == 0)
            // The count sees a read made from a task, and the origin is the log's.
            #expect(try client.origin() == client.log.read { try $0.origin() })
            #expect(client.log.transactionsBegunFromTasks == 1)
            client.close()
        }
    }
}
