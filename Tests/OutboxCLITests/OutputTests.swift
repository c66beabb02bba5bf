import Foundation
import Outbox
import OutboxProcess
import OutboxTesting
import Testing

/// What the tool does when its output goes nowhere.
@Suite struct OutputTests {
    static let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(
        "outbox")

    /// A log of `count` writes (1,000: `outbox log --json` prints far more than a pipe holds).
    static func bigLog(_ path: String, count: Int = 1000) async throws {
        var configuration = OutboxConfiguration(autoSync: false, durability: .noSync)
        configuration.clock = ManualClock()
        let client = try OutboxClient.open(path: path, configuration: configuration)
        try await client.settleSession(user: "alice", accessToken: nil)
        try await client.enqueue(
            contentsOf: (1...count).map { .insert(into: "todos", key: ["id": .int(Int64($0))], body: ["title": "milk"]) })
        client.close()
    }

    // `outbox log LOG | head -1`: a reader that stops reading is not a damaged log.
    @Test func aReaderThatStopsReadingIsNotDamage() async throws {
        try await TemporaryFolder.with(created: true) { folder in
            let log = folder + "/log"
            try await Self.bigLog(log)
            let out = Pipe()
            let child = try ChildProcess(
                Self.binary, ["log", log, "--json"], output: .handle(out.fileHandleForWriting), errors: .apart(.capture))
            _ = out.fileHandleForReading.availableData
            try out.fileHandleForReading.close()
            let ended = await child.ended()
            #expect(ended.status == 141)
            #expect(ended.errorText == "", "nothing said about damage")
        }
    }

    // An enqueue whose id cannot be printed is still queued, once, and says so with its own status.
    @Test func anEnqueueThatCannotPrintItsIdSaysItIsQueued() throws {
        try TemporaryFolder.with(created: true) { folder in
            let log = folder + "/log"
            for output in ["/dev/full", "closed pipe"] {
                let destination: ChildProcess.Output
                if output == "/dev/full" {
                    destination = .handle(try FileHandle(forWritingTo: URL(fileURLWithPath: "/dev/full")))
                } else {
                    let out = Pipe()
                    try out.fileHandleForReading.close()
                    destination = .handle(out.fileHandleForWriting)
                }
                let ended = try ChildProcess.runBlocking(
                    Self.binary,
                    ["enqueue", log, "--user", "alice", "--table", "todos", "--op", "insert", "--key", #"{"id":1}"#],
                    output: destination, errors: .apart(.capture))
                let stderr = ended.errorText
                #expect(!ended.signalled, "\(output)")
                #expect(ended.status == 3, "\(output): \(stderr)")
                #expect(stderr.contains("queued as write") && stderr.contains("do not enqueue it again"), "\(output)")
            }
            let queue = try outbox("queue", log)
            #expect(queue.stdout.split(separator: "\n").count == 2, "each enqueue queued its write once")
        }
    }
}

extension OutputTests {
    // An interrupted scenario takes its temporary log (bodies on disk) with it.
    @Test func anInterruptedScenarioLeavesNoLogBehind() throws {
        try TemporaryFolder.with(created: true) { folder in
            let steps =
                [#"{"signIn": "alice"}"#]
                + (1...4000).map {
                    #"{"enqueue": {"table": "todos", "op": "insert", "key": {"id": \#($0)}, "body": {"t": "x"}}}"#
                }
            try Data(#"{"name": "long", "steps": [\#(steps.joined(separator: ","))]}"#.utf8).write(
                to: URL(fileURLWithPath: folder + "/long.json"))
            let scratch = folder + "/tmp"
            try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
            let child = try ChildProcess(
                Self.binary, ["scenario", folder + "/long.json"],
                environment: ProcessInfo.processInfo.environment.merging(["TMPDIR": scratch + "/"]) { $1 }, output: .discard,
                errors: .apart(.discard))
            // Wait (at most 60 s) for its log to exist and hold data, then interrupt it as Ctrl-C would.
            func logs() throws -> [String] {
                try FileManager.default.contentsOfDirectory(atPath: scratch).filter { $0.hasPrefix("outbox-scenario-") }
            }
            let deadline = Date().addingTimeInterval(60)
            while Date() < deadline, child.isRunning,
                try logs().first.map({ !FileManager.default.fileExists(atPath: scratch + "/" + $0 + "/data.mdb") }) ?? true
            {
                usleep(2_000)
            }
            #expect(!(try logs()).isEmpty, "the run made its log")
            child.send(SIGINT)
            #expect(child.wait()?.status == 128 + SIGINT)
            let left = try logs()
            #expect(left.isEmpty, "the log went with the run: \(left)")
        }
    }
}

extension OutputTests {
    // `replay --json` is written as it is read: still one canonical JSON document, as documented.
    @Test func aStreamedReplayIsOneCanonicalDocument() async throws {
        try await TemporaryFolder.with(created: true) { folder in
            let log = folder + "/log"
            try await Self.bigLog(log)
            let run = try outbox("replay", log, "--json")
            #expect(run.status == 0, "\(run.stderr)")
            let text = run.stdout.trimmingCharacters(in: .newlines)
            let document = try JSONText.parse(text)
            #expect(JSONText.render(document) == text, "canonical: sorted keys, no spaces")
            guard case .object(let fields) = document, case .array(let queue)? = fields["queue"],
                case .array(let verdicts)? = fields["verdicts"]
            else {
                Issue.record("not the documented shape: \(text.prefix(200))")
                return
            }
            #expect(queue.count == 1000 && verdicts.count == 1000)
            #expect(
                fields["user"] == .string("alice") && fields["sequence"] == .int(1002), "logCreated, the session, 1,000 writes")
            let queueRun = try outbox("queue", log, "--json")
            #expect(queueRun.stdout.split(separator: "\n").count == 1000)
        }
    }
}
