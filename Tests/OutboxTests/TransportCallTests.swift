import Foundation
import OutboxTesting
import Synchronization
import Testing

@testable import Outbox

/// A simulated instance behind a transport that sends a batch two writes a request, cannot make the
/// writes of one table nor atomic groups of another, and notes for each of its calls whether it ran on
/// the log's writer.
final class WatchedTransport: OutboxTransport {
    let instance = SimulatedInstance()
    private let counts = Mutex<(calls: Int, onWriter: [String], sendsElsewhere: Int)>((0, [], 0))

    var calls: Int { counts.withLock { $0.calls } }
    /// The calls that ran on the log's writer, inside a transaction, by name.
    var onWriter: [String] { counts.withLock { $0.onWriter } }
    /// The sends that ran off the writer's queue.
    var sendsElsewhere: Int { counts.withLock { $0.sendsElsewhere } }

    private func note(_ name: String) {
        let writing = GroupCommitter.isWriting
        counts.withLock { counts in
            counts.calls += 1
            if writing { counts.onWriter.append(name) }
        }
    }

    func send(_ batch: OutgoingBatch, accessToken: String?) async -> RequestAnswer {
        let elsewhere = !GroupCommitter.isOnWritersQueue
        counts.withLock { $0.sendsElsewhere += elsewhere ? 1 : 0 }
        note("send")
        return await instance.send(batch, accessToken: accessToken)
    }

    func requestSize(for batch: OutgoingBatch) -> Int {
        note("requestSize")
        return 2
    }

    func unmadeReason(for write: OutgoingWrite) -> String? {
        note("unmadeReason")
        return write.table == "legacy" ? "the transport has no mapping for table legacy" : nil
    }

    func unmadeReason(forGroup group: OutgoingBatch) -> String? {
        note("unmadeReason(forGroup:)")
        return group.writes.first?.table == "lists" ? "groups of lists need another transport" : nil
    }

    func readRow(table: String, key: JSONValue, accessToken: String?) async throws -> JSONValue? {
        note("readRow")
        return try await instance.readRow(table: table, key: key, accessToken: accessToken)
    }
}

/// R9.1: the transport is never called inside a write transaction of the log; the pass asks it
/// between transactions, and decides the same as when it asked inside them. The pass runs on the
/// writer's queue between them, so no thread is woken between a commit and the next request.
@Suite struct TransportCallTests {
    @Test func theTransportIsNeverCalledOnTheLogsWriter() async throws {
        try await TemporaryFolder.with { path in
            let transport = WatchedTransport()
            var configuration = testConfiguration()
            configuration.batchSize = 5
            let client = try await openClient(path, configuration: configuration, transport: transport)
            for n in 1...12 { try await client.enqueue(todo(Int64(n))) }
            // Updates that follow the inserts of their rows, across batches (R4.5).
            for n in [2, 7, 11] { try await client.enqueue(.update("todos", key: ["id": .int(Int64(n))], set: ["done": true])) }
            try await client.enqueue(.insert(into: "legacy", key: ["id": 1], body: [:]))
            _ = try await client.enqueue(contentsOf: [todo(20), todo(21)], atomic: true)
            _ = try await client.enqueue(
                contentsOf: [
                    .insert(into: "lists", key: ["id": 1], body: [:]), .insert(into: "lists", key: ["id": 2], body: [:]),
                ], atomic: true)
            for n in 30...40 { try await client.enqueue(todo(Int64(n))) }
            // A request refused whole (split into halves, R4.5), a refusal, a failure that stops the pass.
            transport.instance.script([
                .verdict(.accepted), .verdict(.accepted), .status(400, code: "23502"), .verdict(.accepted),
                .verdict(.refused(Refusal(status: 422, code: "23514"))), .status(503),
            ])
            for _ in 0..<4 { try await client.sync() }
            #expect(transport.calls > 20)
            #expect(transport.onWriter.isEmpty, "called on the log's writer: \(transport.onWriter)")
            #expect(transport.sendsElsewhere == 0, "sent off the writer's queue")
            let states = try await client.queue.all().map(\.state.name)
            #expect(states.filter { $0 == "refused" }.count >= 3, "\(states)")
            let decisions = try client.log.checkDecisions()
            #expect(decisions.isSame, "\(decisions)")
            client.close()
        }
    }
}

extension TransportCallTests {
    /// A transport that sends `size` writes a request.
    final class SizedTransport: OutboxTransport {
        let instance = SimulatedInstance()
        let size: Int?
        init(size: Int?) { self.size = size }
        func send(_ batch: OutgoingBatch, accessToken: String?) async -> RequestAnswer {
            await instance.send(batch, accessToken: accessToken)
        }
        func requestSize(for batch: OutgoingBatch) -> Int { size ?? batch.writes.count }
        func readRow(table: String, key: JSONValue, accessToken: String?) async throws -> JSONValue? { nil }
    }

    // R2.3, R9.3: asking the transport between transactions costs no commit: a drain is one
    // transaction a request, and one more to plan the first, as when the transport was asked inside
    // them; updates that follow writes of an earlier batch are foreseen too.
    @Test(arguments: [nil, 2] as [Int?])
    func aDrainIsOneTransactionARequest(size: Int?) async throws {
        try await TemporaryFolder.with { path in
            let transport = SizedTransport(size: size)
            var configuration = testConfiguration()
            configuration.batchSize = 10
            let client = try await openClient(path, configuration: configuration, transport: transport)
            for n in 1...34 { try await client.enqueue(todo(Int64(n))) }
            for n in 1...6 { try await client.enqueue(.update("todos", key: ["id": .int(Int64(n * 5))], set: ["done": true])) }
            let before = client.log.committer.transactionCount
            let report = try await client.sync()
            let transactions = client.log.committer.transactionCount - before
            #expect(report.syncedCount == 40)
            #expect(transport.instance.received.count == (size == nil ? 4 : 20))
            #expect(transactions == transport.instance.received.count + 1)
            client.close()
        }
    }
}
