import Foundation
import OutboxTesting
import Testing

@testable import Outbox

/// A log copied from a device may hold terminal control characters in its names;
/// no text output prints them raw.
@Suite struct HostileLogTests {
    @Test func controlCharactersInNamesNeverReachTheTerminalRaw() async throws {
        try await TemporaryFolder.with(created: true) { folder in
            let log = folder + "/log"
            var configuration = OutboxConfiguration(autoSync: false)
            configuration.clock = ManualClock()
            let client = try OutboxClient.open(path: log, configuration: configuration)
            let user = "eve\u{1B}]0;pwned\u{07}"
            let write = Write(
                table: "todos\r\n2  alice  todos  insert  accepted  forged", operation: .custom("op\u{1B}[2J\u{9B}\u{202E}"),
                key: ["id": 1], body: ["t": "\u{1B}[31m\u{7F}"])
            // Written as a hostile build would: past the validation that refuses such names now.
            _ = try await client.log.append { appender in
                try QueueOperations.enqueue([write], user: user, atomic: false, random: SystemRandomSource(), appender: &appender)
            }
            client.close()
            for arguments in [
                ["queue", log], ["queue", log, "--json"], ["replay", log], ["replay", log, "--json"], ["log", log],
                ["log", log, "--json"], ["history", log, "1"], ["history", log, "1", "--json"],
            ] {
                let run = try outbox(arguments)
                #expect(run.status == 0, "\(arguments): \(run.stderr)")
                let raw = run.stdout.unicodeScalars.filter { $0 != "\n" && Write.isControl($0) }
                #expect(raw.isEmpty, "\(arguments) printed \(raw.map { String($0.value, radix: 16) })")
                #expect(
                    !run.stdout.contains("\nforged") && !run.stdout.split(separator: "\n").contains { $0.hasPrefix("2  alice") })
            }
        }
    }

    @Test func namesWithControlCharactersAreRefusedAtEnqueue() async throws {
        try await TemporaryFolder.with(created: true) { folder in
            let client = try OutboxClient.open(path: folder + "/log", configuration: OutboxConfiguration(autoSync: false))
            try await client.settleSession(user: "alice", accessToken: nil)
            for write in [
                Write.insert(into: "todos\u{1B}", key: ["id": 1], body: [:]), .insert(into: "a\nb", key: ["id": 1], body: [:]),
                .custom("op\u{9B}", table: "todos", key: ["id": 1], body: [:]),
                .insert(into: "\u{202E}x", key: ["id": 1], body: [:]),
            ] {
                await #expect(throws: OutboxError.invalidWrite) { try await client.enqueue(write) }
            }
            await #expect(throws: OutboxError.invalidWrite) {
                try await client.settleSession(user: "eve\u{07}", accessToken: nil)
            }
            #expect(try client.everyWrite().isEmpty)
            client.close()
        }
    }
}
