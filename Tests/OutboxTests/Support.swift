import Foundation
import OutboxTesting
import Testing

@testable import Outbox

/// A deterministic configuration: manual clock, seeded randomness, no automatic passes.
func testConfiguration(seed: UInt64 = 1, clock: ManualClock = ManualClock()) -> OutboxConfiguration {
    var configuration = OutboxConfiguration(autoSync: false)
    configuration.clock = clock
    configuration.random = SeededRandomSource(seed: seed)
    return configuration
}

/// Opens a client on `path` signed in as `user`.
func openClient(
    _ path: String, user: String? = "alice", configuration: OutboxConfiguration = testConfiguration(),
    transport: (any OutboxTransport)? = nil
) async throws -> OutboxClient {
    let client = try OutboxClient.open(path: path, transport: transport, configuration: configuration)
    if let user { try await client.settleSession(user: user, accessToken: nil) }
    return client
}

extension OutboxClient {
    /// Records a verdict as the replayer would (tests of the local queue calls).
    func record(_ id: WriteID, _ state: WriteState, refusals: Int = 0) async throws {
        _ = try await log.append { appender in
            try appender.append(.verdictRecorded(VerdictRecorded(writeId: id, passId: 1, state: state, refusals: refusals)))
        }
    }

    func eventCount() throws -> UInt64 { try log.lastSequence() }

    func write(_ id: WriteID) async throws -> QueuedWrite? { try await queue.all().first { $0.id == id } }
}

func todo(_ id: Int64, _ title: String = "milk") -> Write {
    .insert(into: "todos", key: ["id": .int(id)], body: ["title": .string(title)])
}

/// A JWT-shaped token whose payload names `subject` (unsigned: the library does not check signatures).
func token(subject: String) -> String {
    let payload = Data("{\"sub\":\"\(subject)\",\"role\":\"authenticated\"}".utf8).base64EncodedString()
        .replacingOccurrences(of: "=", with: "").replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
    return "eyJhbGciOiJIUzI1NiJ9.\(payload).c2lnbmF0dXJl"
}

/// Yields until `condition` holds; records a failure of the calling test when it still does not after
/// 100,000 yields (a wait on something another task does, with a limit, never a sleep).
func eventually(sourceLocation: SourceLocation = #_sourceLocation, _ condition: () -> Bool) async {
    for _ in 0..<100_000 {
        if condition() { return }
        await Task.yield()
    }
    Issue.record("the condition did not hold after 100,000 yields", sourceLocation: sourceLocation)
}

/// A log kept under `Fixtures/`, written by an earlier build, with what that build printed of it.
struct LogFixture {
    let folder: URL

    init(_ name: String) {
        folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/\(name)")
    }

    /// The lines of one of the printed files.
    func lines(_ name: String) throws -> [String] {
        try String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8).split(separator: "\n").map(String.init)
    }

    /// Copies the log's `files` (paths inside the fixture) into the folder `path`.
    func copy(_ files: [String], to path: String) throws {
        for file in files {
            let target = path + "/" + file
            let parent = (target as NSString).deletingLastPathComponent
            try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: folder.appendingPathComponent(file).path, toPath: target)
        }
    }
}
