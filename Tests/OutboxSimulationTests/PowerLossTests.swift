import Foundation
import Outbox
import OutboxTesting
import Synchronization
import Testing

@testable import Outbox
@testable import OutboxSimulation

/// The simulation's storage model of a power loss (`PowerLoss`), and what R2.3 promises under it.
@Suite("Power loss")
struct PowerLossTests {
    /// No automatic passes; a manual clock and a seeded generator. The log commits as the simulation's
    /// do (`.noSync`, its power losses modelled as `.full` durability without a journal would meet
    /// them): a log with a journal flushes a pass's commits too, and no power loss undoes them
    /// (`JournaledLogTests`).
    static func configuration() -> OutboxConfiguration {
        var configuration = OutboxConfiguration(autoSync: false, durability: .noSync)
        configuration.powerLossIsSimulated = true
        configuration.clock = ManualClock()
        configuration.random = SeededRandomSource(seed: 7)
        return configuration
    }

    @Test(
        "a power loss undoes a pass's last commit, never an enqueue's; the write is resent under its key and applied once (R2.3, R4.6)"
    )
    func undoesTheLastPassCommit() async throws {
        let path = TemporaryFolder(prefix: "outbox-power").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let instance = SimulatedInstance()
        func open() async throws -> OutboxClient {
            let client = try OutboxClient.open(path: path, transport: instance, configuration: Self.configuration())
            try await client.settleSession(user: "alice", accessToken: nil)
            return client
        }

        var client = try await open()
        let id = try await client.enqueue(.insert(into: "todos", key: ["id": .int(1)], body: ["title": .string("milk")]))
        #expect(!client.log.lastCommitMayBeUndoneByPowerLoss, "an enqueue is synced whole")
        let first = try await client.sync()
        #expect(first.syncedCount == 1)
        #expect(client.log.lastCommitMayBeUndoneByPowerLoss, "the pass's answer was committed without the meta sync")
        client.close()

        try PowerLoss.undoLastCommit(file: path + "/data.mdb")
        client = try await open()
        defer { client.close() }
        #expect(
            try await client.queue.all().first { $0.id == id }?.state.name == "pending", "the verdict went with the undone commit"
        )
        #expect(try await client.verify().isOK)
        let second = try await client.sync()
        #expect(second.verdicts.map(\.replayed) == [true], "the instance replays its answer to the same key")
        #expect(instance.applied.map(\.id) == [id], "applied once")
        #expect(try await client.queue.all().first { $0.id == id }?.state.name == "accepted")
    }

    @Test(
        "a request that follows a write answered in the last commit goes once that commit is durable; others do not wait for a flush (R9.3, R2.3, decision 013)"
    )
    func aFollowerGoesOnlyOnceTheAnswerItFollowsIsDurable() async throws {
        let path = TemporaryFolder(prefix: "outbox-power").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let transport = OneWriteARequest()
        let client = try OutboxClient.open(path: path, transport: transport, configuration: Self.configuration())
        defer { client.close() }
        try await client.settleSession(user: "alice", accessToken: nil)
        transport.log = client.log
        let insert = try await client.enqueue(.insert(into: "todos", key: ["id": .int(1)], body: ["title": .string("milk")]))
        let delete = try await client.enqueue(.delete(from: "todos", key: ["id": .int(1)]))
        let other = try await client.enqueue(.insert(into: "todos", key: ["id": .int(2)], body: ["title": .string("tea")]))
        let report = try await client.sync()
        #expect(report.syncedCount == 3)
        // The model's counterexample (Specs/model, no-flush-before-follower): were the delete sent while
        // the insert's answer could still be undone, a power loss would resend the insert after it.
        #expect(transport.sends.map(\.id) == [insert, delete, other])
        #expect(transport.sends.map(\.mayBeUndone) == [true, false, true], "only the delete waited for a flush")
    }

    @Test("the model refuses a file that is not LMDB's")
    func refusesAFileThatIsNotLMDB() throws {
        let path = TemporaryFolder(prefix: "outbox-power").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(FileManager.default.createFile(atPath: path, contents: Data(repeating: 7, count: 8192)))
        #expect(throws: PowerLoss.Unexpected.self) { try PowerLoss.undoLastCommit(file: path) }
        #expect(FileManager.default.contents(atPath: path) == Data(repeating: 7, count: 8192))
    }
}

/// The instance behind a transport that sends one write a request (as PostgREST's does), noting at
/// each send whether a power loss could still undo the log's last commit.
private final class OneWriteARequest: OutboxTransport, @unchecked Sendable {
    let instance = SimulatedInstance()
    nonisolated(unsafe) var log: EventLog?
    private let noted = Mutex<[(id: WriteID, mayBeUndone: Bool)]>([])

    var sends: [(id: WriteID, mayBeUndone: Bool)] { noted.withLock { $0 } }

    func send(_ batch: OutgoingBatch, accessToken: String?) async -> RequestAnswer {
        let mayBeUndone = log?.lastCommitMayBeUndoneByPowerLoss ?? true
        noted.withLock { $0 += batch.writes.map { (id: $0.id, mayBeUndone: mayBeUndone) } }
        return await instance.send(batch, accessToken: accessToken)
    }

    func requestSize(for batch: OutgoingBatch) -> Int { 1 }

    func readRow(table: String, key: JSONValue, accessToken: String?) async throws -> JSONValue? {
        try await instance.readRow(table: table, key: key, accessToken: accessToken)
    }
}
