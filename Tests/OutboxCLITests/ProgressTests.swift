import Foundation
import Outbox
import OutboxTesting
import Testing

/// Long work shows progress (issue 27): `verify`, `replay` and `sync` of a large log print a line of
/// progress on standard error when it is a terminal, and never into a pipe or a `--json` document.
@Suite struct ProgressTests {
    /// A log of 10,000 writes: more events than the fold reports progress after (4,096).
    static func largeLog(_ path: String) async throws {
        var configuration = OutboxConfiguration(autoSync: false, durability: .noSync)
        configuration.clock = ManualClock()
        let client = try OutboxClient.open(path: path, configuration: configuration)
        try await client.settleSession(user: "alice", accessToken: nil)
        try await client.enqueue(
            contentsOf: (1...10_000).map { .insert(into: "todos", key: ["id": .int(Int64($0))], body: ["title": "milk"]) })
        client.close()
    }

    /// Runs the tool under Debian's `script`, which gives it a terminal: what the terminal showed.
    static func onATerminal(_ arguments: [String]) throws -> Run {
        let command = ([OutputTests.binary.path] + arguments).joined(separator: " ")
        return try run(URL(fileURLWithPath: "/usr/bin/script"), ["-qec", command, "/dev/null"])
    }

    @Test func verifyAndReplayShowProgressOnATerminalOnly() async throws {
        try await withTemporaryFolder { folder in
            let log = folder + "/log"
            try await Self.largeLog(log)
            let piped = try outbox("verify", log)
            #expect(piped.status == 0 && piped.stderr.isEmpty && !piped.stdout.contains("verify:"), "\(piped)")

            let verify = try Self.onATerminal(["verify", log])
            #expect(verify.status == 0, "\(verify)")
            #expect(verify.stdout.contains("\rverify: 4,096 of 10,002 events (40 %)"), "\(verify.stdout.debugDescription)")
            // The line is cleared before the result is printed.
            let result = try #require(verify.stdout.components(separatedBy: "\r").last)
            #expect(result.hasPrefix("ok"), "\(verify.stdout.debugDescription)")

            let replay = try Self.onATerminal(["replay", log])
            #expect(replay.stdout.contains("\rreplay: 4,096 of 10,002 events"), "\(replay.stdout.prefix(300).debugDescription)")
            let json = try Self.onATerminal(["replay", log, "--json"])
            #expect(json.status == 0 && !json.stdout.contains("replay:"), "\(json.stdout.prefix(300).debugDescription)")
        }
    }
}
