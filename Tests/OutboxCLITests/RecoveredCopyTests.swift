import Foundation
import OutboxTesting
import Testing

@testable import Outbox

/// A log copied from a device whose app was killed or lost power: its last commits are in its
/// journal, not yet in its data file. The read-only commands read a copy recovered from the journal
/// (R2.3's writes all there), say so on standard error, and leave the log's files as they were
/// (R8.6), with nothing left behind in the temporary folder.
@Suite struct RecoveredCopyTests {
    @Test func aLogItsWriterDidNotCloseIsReadFromACopyRecoveredFromItsJournal() async throws {
        try await TemporaryFolder.with(created: true) { folder in
            let log = folder + "/app"
            let device = folder + "/device"
            let scratch = folder + "/tmp"
            for path in [device, scratch] {
                try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            }
            var configuration = OutboxConfiguration(autoSync: false)
            configuration.random = SeededRandomSource(seed: 3)
            let client = try OutboxClient.open(path: log, configuration: configuration)
            try await client.settleSession(user: "alice", accessToken: nil)
            for index in Int64(1)...3 { try await client.enqueue(Self.todo(index)) }
            try client.log.checkpoint()
            // The data file as the checkpoint left it; the journal with the three commits after it.
            try FileManager.default.copyItem(atPath: log + "/data.mdb", toPath: device + "/data.mdb")
            for index in Int64(4)...6 { try await client.enqueue(Self.todo(index)) }
            try FileManager.default.copyItem(atPath: log + "/journal", toPath: device + "/journal")
            client.close()
            let before = try Self.contents(of: device)

            let queue = try Self.outbox(scratch, "queue", device)
            #expect(queue.status == 0, "\(queue.stderr)")
            #expect(queue.stdout.split(separator: "\n").count == 6, "\(queue.stdout)")
            #expect(queue.stderr.contains("\(device): its writer did not close it"), "\(queue.stderr)")
            #expect(queue.stderr.contains("the log itself is unchanged"), "\(queue.stderr)")
            let history = try Self.outbox(scratch, "history", device, "6", "--json")
            #expect(history.status == 0, "\(history.stderr)")
            #expect(history.stdout.contains("writeQueued"), "\(history.stdout)")
            #expect(try Self.outbox(scratch, "verify", device).stdout == "ok\n")

            #expect(try Self.contents(of: device) == before, "the log's files as they were, and nothing beside them")
            #expect(try FileManager.default.contentsOfDirectory(atPath: scratch) == [], "the recovered copies removed")
            // Read-only and without a journal to recover from, the log is refused by name.
            let refused = #expect(throws: OutboxError.self) { try LogInspector(path: device) }
            #expect(refused?.code == .needsRecovery)
        }
    }

    /// A log closed by its app is read as it is: no copy, nothing said.
    @Test func aLogItsWriterClosedIsReadItself() async throws {
        try await TemporaryFolder.with(created: true) { folder in
            let log = folder + "/app"
            let scratch = folder + "/tmp"
            try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
            let client = try OutboxClient.open(path: log, configuration: OutboxConfiguration(autoSync: false))
            try await client.settleSession(user: "alice", accessToken: nil)
            try await client.enqueue(Self.todo(1))
            client.close()
            let inspector = try LogInspector.recovering(path: log, scratch: scratch)
            #expect(inspector.recoveredCopy == nil)
            let queue = try Self.outbox(scratch, "queue", log)
            #expect(queue.status == 0 && queue.stderr.isEmpty, "\(queue.stderr)")
        }
    }

    private static func todo(_ id: Int64) -> Write {
        .insert(into: "todos", key: ["id": .int(id)], body: ["title": .string("milk")])
    }

    /// Runs the `outbox` binary with its temporary folder `scratch`.
    private static func outbox(_ scratch: String, _ arguments: String...) throws -> Run {
        try outboxAs(["TMPDIR=" + scratch], arguments)
    }

    /// Each file of `folder` with its bytes.
    private static func contents(of folder: String) throws -> [String: Data] {
        var files: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: folder) {
            files[name] = try Data(contentsOf: URL(fileURLWithPath: folder + "/" + name))
        }
        return files
    }
}
