import Foundation
import Outbox
import OutboxTesting
import Testing

@testable import OutboxSimulation

/// The simulation's storage model of a power loss (`PowerLoss`), and what R2.3 promises under it.
@Suite("Power loss")
struct PowerLossTests {
    @Test(
        "a power loss undoes a pass's last commit, never an enqueue's; the write is resent under its key and applied once (R2.3, R4.6)"
    )
    func undoesTheLastPassCommit() async throws {
        let path = NSTemporaryDirectory() + "outbox-power-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: path) }
        let instance = SimulatedInstance()
        var configuration = OutboxConfiguration(autoSync: false)
        configuration.clock = ManualClock()
        configuration.random = SeededRandomSource(seed: 7)
        func open() async throws -> OutboxClient {
            let client = try OutboxClient.open(path: path, transport: instance, configuration: configuration)
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

    @Test("the model refuses a file that is not LMDB's")
    func refusesAFileThatIsNotLMDB() throws {
        let path = NSTemporaryDirectory() + "outbox-power-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(FileManager.default.createFile(atPath: path, contents: Data(repeating: 7, count: 8192)))
        #expect(throws: PowerLoss.Unexpected.self) { try PowerLoss.undoLastCommit(file: path) }
        #expect(FileManager.default.contents(atPath: path) == Data(repeating: 7, count: 8192))
    }
}
