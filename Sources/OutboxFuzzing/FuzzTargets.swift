internal import Dispatch
internal import Foundation
internal import Outbox
internal import OutboxScenario
internal import OutboxTesting
internal import OutboxTool
internal import Synchronization

/// The bodies of the libFuzzer targets (Fuzz/), here so the normal test suite replays their crashers
/// with the same code. Each must return normally for any input: a crash is a bug.
public enum FuzzTargets {
    /// Every target by name.
    public static let all: [String: @Sendable ([UInt8]) -> Void] = [
        "record": record, "record-fixed": recordWithFixedChecksum, "replay": replay, "classifier": classifier,
        "scenario": scenario, "json-roundtrip": jsonRoundTrip, "cli": cli,
    ]

    /// The record decoder on raw bytes.
    public static func record(_ bytes: [UInt8]) {
        _ = try? RecordCodec.decode(bytes, sequence: 1)
    }

    /// The record decoder with the checksum fixed up, so mutations reach the payload decoders.
    public static func recordWithFixedChecksum(_ bytes: [UInt8]) {
        let fixed = RecordCodec.fixingChecksum(bytes, sequence: 7)
        guard let event = try? RecordCodec.decode(fixed, sequence: 7) else { return }
        // A record that decodes encodes back to bytes that decode to the same event.
        let again = RecordCodec.encode(event.event, at: event.at, sequence: 7)
        guard let second = try? RecordCodec.decode(again, sequence: 7), second == event else {
            fatalError("a decoded record does not survive an encode/decode round trip")
        }
    }

    /// A whole log: the input cut into records (a length byte each), decoded with fixed checksums, and
    /// folded into projections.
    public static func replay(_ bytes: [UInt8]) {
        var events: [RecordedEvent] = []
        var index = 0
        while index < bytes.count, events.count < 256 {
            let length = Int(bytes[index])
            index += 1
            let end = min(bytes.count, index + length)
            let sequence = UInt64(events.count + 1)
            if let event = try? RecordCodec.decode(
                RecordCodec.fixingChecksum(Array(bytes[index..<end]), sequence: sequence), sequence: sequence)
            {
                events.append(event)
            }
            index = end
        }
        _ = try? LogReplay.snapshot(of: events)
    }

    /// The response classifier on an answer built from the bytes: it must be total.
    public static func classifier(_ bytes: [UInt8]) {
        guard bytes.count >= 4 else { return }
        let status = 100 + (Int(bytes[0]) << 8 | Int(bytes[1])) % 500
        let text = String(decoding: bytes[4...], as: UTF8.self)
        let parts = text.split(separator: "|", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
        let code = parts.first.flatMap { $0.isEmpty ? nil : $0 }
        let retryAfter = parts.count > 1 ? parts[1] : nil
        let answer = RequestAnswer.failed(
            RequestFailure(kind: .http, status: status, code: code, retryAfter: retryAfter, text: parts.last))
        let outcome = AnswerClassifier.outcome(
            of: answer, writes: 1 + Int(bytes[2] % 4), refusals: Int(bytes[3] % 6), at: Timestamp(milliseconds: 1_767_225_600_000)
        )
        if outcome == "no decision" { fatalError("the classifier is not total") }
    }

    /// The scenario parser: what `outbox scenario` reads from a file.
    public static func scenario(_ bytes: [UInt8]) {
        _ = try? Scenario.parse(String(decoding: bytes, as: UTF8.self))
    }

    /// JSON text parses, renders canonically, and parses back to the same value.
    public static func jsonRoundTrip(_ bytes: [UInt8]) {
        guard let value = try? JSONText.parse(String(decoding: bytes, as: UTF8.self)) else { return }
        let rendered = JSONText.render(value)
        guard let again = try? JSONText.parse(rendered), again == value || !value.isFinite else {
            fatalError("canonical JSON does not parse back to the same value")
        }
    }

    /// The `outbox` tool's read-only commands, with their words from the bytes (NUL-separated, after a
    /// first byte that picks the command), on a small real log made once: any command line ends with
    /// exit 0, 1 or 2, and never traps or hangs (P5: a hostile argument).
    public static func cli(_ bytes: [UInt8]) {
        _ = blocking { await cliExitStatus(bytes) }
    }

    /// The commands the CLI target picks from, by its first byte.
    public static let cliCommands = Commands.readOnlyCommands.sorted() + ["help", "--help", "-h", "no-such-command"]

    /// The CLI target's command line, run silently: its exit status; nil for no bytes.
    public static func cliExitStatus(_ bytes: [UInt8]) async -> Int32? {
        guard let first = bytes.first else { return nil }
        let rest = bytes.dropFirst()
        let words =
            rest.isEmpty
            ? []
            : rest.split(separator: 0, omittingEmptySubsequences: false).prefix(8).map { String(decoding: $0, as: UTF8.self) }
        let line = [cliCommands[Int(first) % cliCommands.count], await CLILog.shared.path()] + words
        Console.silence(true)
        return await Commands.run(line, readsInAChild: false).rawValue
    }
}

/// The log the CLI target reads: the first of the damaged-log suite's small logs (writes of two tables,
/// verdicts, a refusal, a release, a withdraw, answers taken), made on first use in a temporary folder
/// removed at exit.
private actor CLILog {
    static let shared = CLILog()
    static let root = TemporaryFolder(prefix: "outbox-fuzz-cli").path
    private var making: Task<String, Never>?

    func path() async -> String {
        if let making { return await making.value }
        let task = Task {
            guard let logs = try? await Commands.makeSmallLogs(in: Self.root), let first = logs.first else {
                fatalError("the CLI fuzz target cannot make its log in \(Self.root)")
            }
            atexit { try? FileManager.default.removeItem(atPath: CLILog.root) }
            return first
        }
        making = task
        return await task.value
    }
}

/// Runs `body` to its end from a fuzz target's synchronous entry point (libFuzzer's thread, not one of
/// the concurrency pool's).
private func blocking<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
    let result = Mutex<T?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task {
        let value = await body()
        result.withLock { $0 = value }
        done.signal()
    }
    done.wait()
    return result.withLock { $0! }
}
