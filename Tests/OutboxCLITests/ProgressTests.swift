import Foundation
import Outbox
import OutboxTesting
import Testing

/// Long work shows progress: `verify`, `replay` and `sync` of a large log print a line of
/// progress on standard error when it is a terminal, and never into a pipe or a `--json` document.
@Suite struct ProgressTests {
    /// Runs the tool under Debian's `script`, which gives it a terminal: what the terminal showed.
    static func onATerminal(_ arguments: [String]) throws -> Run {
        let command = ([OutputTests.binary.path] + arguments).joined(separator: " ")
        return try run(URL(fileURLWithPath: "/usr/bin/script"), ["-qec", command, "/dev/null"])
    }

    @Test func verifyAndReplayShowProgressOnATerminalOnly() async throws {
        try await TemporaryFolder.with(created: true) { folder in
            let log = folder + "/log"
            // More events than the fold reports progress after (4,096).
            try await OutputTests.bigLog(log, count: 10_000)
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
