import Foundation
import OutboxTesting
import Testing

@testable import Outbox

/// A flipped bit in LMDB's newer meta page makes LMDB open the older one, silently
/// undoing the last commit; the commit mark beside the log catches it on open.
@Suite struct CommitMarkTests {
    /// Rewrites the newer meta page's transaction id (offset 144 of pages 0 and 1) to one below the
    /// older's, so LMDB opens the older meta page: the last commit is undone, and both pages still look
    /// sound and consecutive (the case comparing the two pages cannot see).
    static func rollBackTheLastCommit(_ folder: String) throws {
        let url = URL(fileURLWithPath: folder + "/data.mdb")
        var data = try Data(contentsOf: url)
        let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
        func txnid(_ page: Int) -> UInt64 {
            data[(page * pageSize + 144)..<(page * pageSize + 152)].reversed().reduce(0) { $0 << 8 | UInt64($1) }
        }
        let (older, newer) = txnid(0) < txnid(1) ? (0, 1) : (1, 0)
        let rolled = txnid(older) - 1
        for index in 0..<8 { data[newer * pageSize + 144 + index] = UInt8(truncatingIfNeeded: rolled >> (8 * UInt64(index))) }
        try data.write(to: url)
    }

    @Test func aLogRolledBackBehindItsMarkIsRefusedOnOpen() async throws {
        try await TemporaryFolder.with { path in
            var configuration = testConfiguration()
            configuration.durability = .full
            let client = try await openClient(path, configuration: configuration)
            try await client.enqueue(todo(1))
            try await client.enqueue(todo(2))
            let last = try client.eventCount()
            client.close()
            #expect(CommitMark.read(at: path + "/last-commit")?.sequence == last)
            try Self.rollBackTheLastCommit(path)

            let refused = #expect(throws: OutboxError.self) { try OutboxClient.open(path: path, configuration: configuration) }
            #expect(refused?.code == .damaged)
            #expect(refused?.message.contains("was committed and flushed before") == true)
            #expect(refused?.message.contains(path + "/last-commit") == true, "it says how to read the log anyway")
            #expect(throws: OutboxError.damaged) { try LogInspector(path: path) }

            // The support engineer's way in: without the mark the tools read what the log holds.
            try FileManager.default.removeItem(atPath: path + "/last-commit")
            let inspector = try LogInspector(path: path)
            #expect(try inspector.lastSequence() == last - 1)
            inspector.log.close()
        }
    }

    @Test func passCommitsAndNoSyncLogsLeaveTheMarkWhereItWas() async throws {
        try await TemporaryFolder.with { path in
            var configuration = testConfiguration()
            configuration.durability = .full
            let client = try await openClient(path, configuration: configuration, transport: SimulatedInstance())
            try await client.enqueue(todo(1))
            let marked = try client.eventCount()
            try await client.sync()
            #expect(try client.eventCount() > marked)
            #expect(
                CommitMark.read(at: path + "/last-commit")?.sequence == marked, "a pass's commits may be undone by a power loss")
            client.close()
        }
        try await TemporaryFolder.with { path in
            var configuration = testConfiguration()
            configuration.durability = .noSync
            let client = try await openClient(path, configuration: configuration)
            try await client.enqueue(todo(1))
            client.close()
            #expect(CommitMark.read(at: path + "/last-commit") == nil)
        }
    }

    @Test func aMarkOfAnotherLogOrOneThatDoesNotReadIsIgnored() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            try await client.enqueue(todo(1))
            client.close()
            let other = CommitMark.encode(.init(origin: Origin(high: 1, low: 2), sequence: 1_000))
            try Data(other).write(to: URL(fileURLWithPath: path + "/last-commit"))
            try OutboxClient.open(path: path, configuration: testConfiguration()).close()
            try Data([1, 2, 3]).write(to: URL(fileURLWithPath: path + "/last-commit"))
            try OutboxClient.open(path: path, configuration: testConfiguration()).close()
        }
    }
}
