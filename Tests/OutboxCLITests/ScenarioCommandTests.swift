import Foundation
import OutboxProcess
import OutboxTesting
import Testing

/// `outbox scenario`, `outbox demo` and `outbox replay --check-decisions` as a person runs them.
@Suite struct ScenarioCommandTests {
    static let scenarios = URL(filePath: #filePath).deletingLastPathComponent().appending(path: "../../Specs/scenarios")
        .standardized
    static let passing = scenarios.appending(path: "refusal-does-not-stop-the-pass.json").path

    @Test("scenario: exit 0 and one JSON document when every expectation holds")
    func passes() throws {
        let run = try outbox("scenario", Self.passing, "--json")
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.split(separator: "\n").count == 1)
        #expect(run.stdout.contains(#""failures":[]"#))
        #expect(try outbox("scenario", Self.passing).stdout.contains("every expectation held"))
    }

    @Test("scenario: exit 1 with each failure printed when an expectation does not hold")
    func failsAnExpectation() throws {
        try TemporaryFolder.with(created: true) { folder in
            let file = folder + "/wrong.json"
            try #"""
            {"name": "wrong", "steps": [{"signIn": "alice"},
              {"enqueue": {"ref": "a", "table": "todos", "op": "insert", "key": {"id": 1}, "body": {}}},
              {"sync": {}, "expect": {"syncedCount": 2}}]}
            """#.write(toFile: file, atomically: true, encoding: .utf8)
            let run = try outbox("scenario", file)
            #expect(run.status == 1)
            #expect(run.stderr.contains("step 2 (sync): syncedCount is 1, expected 2"))
        }
    }

    @Test(
        "scenario: exit 2 naming the step and the field for a file that is not a scenario",
        arguments: [
            (#"{"name": "x", "steps": [{"signIn": "alice"}, {"sync": {}, "jump": 1}]}"#, "step 1, field \"jump\""),
            (
                #"{"name": "x", "steps": [{"enqueue": {"ref": "a", "op": "insert", "key": {"id": 1}}}]}"#,
                "step 0, field \"enqueue.table\""
            ),
            (#"{"name": "x", "steps": [{"respond": [{"verdict": "maybe"}]}]}"#, "step 0, field \"respond[0]\""),
            (#"{"name": "x", "steps": [{"discard": "nobody"}]}"#, "step 0, field \"ref\""),
            // A number past what its field converts to is a usage error, not a trap.
            (#"{"name": "x", "steps": [{"respond": [{"status": 503, "retryAfter": 1e308}]}]}"#, "step 0, field \"respond[0]\""),
            (#"{"name": "x", "steps": [{"respond": [{"status": 503, "retryAfter": -1.5}]}]}"#, "step 0, field \"respond[0]\""),
            (#"{"name": "x", "steps": [{"advance": 1e308}]}"#, "step 0, field \"advance\""),
            (#"{"name": "x", "config": {"batchSize": 1e300}, "steps": []}"#, "field \"config.batchSize\""),
            (#"{"steps": []}"#, "field \"name\""),
            ("not json", "not JSON"),
        ])
    func invalid(_ text: String, _ named: String) throws {
        try TemporaryFolder.with(created: true) { folder in
            let file = folder + "/bad.json"
            try text.write(toFile: file, atomically: true, encoding: .utf8)
            let run = try outbox("scenario", file)
            #expect(run.status == 2)
            #expect(run.stderr.contains(named), "\(run.stderr)")
        }
    }

    @Test("demo: syncs against the simulated instance and its log has the same decisions (R8.4)")
    func demo() throws {
        try TemporaryFolder.with(created: true) { folder in
            let log = folder + "/demo"
            let run = try outbox("demo", "--keep", log)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(run.stdout.contains("stopped by http 503"))
            #expect(run.stdout.contains("refused, refusals 1"))
            #expect(run.stdout.contains("verify: ok"))
            let check = try outbox("replay", log, "--check-decisions")
            #expect(check.status == 0)
            #expect(check.stdout.hasPrefix("same decisions"))
        }
    }
}

@Suite struct CrashHarnessTests {
    @Test(
        "crash: workers killed at named crash points lose nothing acknowledged (I1–I4); random kills run in scripts/reliability")
    func crashHarness() throws {
        let run = try outbox("crash", "--kills", "0", "--points", "enqueue.afterCommit,pass.afterSend,pass.answerBeforeCommit")
        #expect(run.status == 0, "\(run.stdout)")
        #expect(run.stdout.contains("crash: 9 points, 0 random kill cycles"))
        #expect(run.stdout.contains("0 lost"))
        // TESTING.md §2: copies of data.mdb taken during a drain verify and hold every acknowledged
        // write, or are refused clearly; none crashes or hangs the tool.
        #expect(run.stdout.contains("copies of data.mdb taken during a drain: "))
        #expect(!run.stdout.contains("copy during a drain:"), "no problem line for the copies")
        // TESTING.md §2, I/O errors (fiu-utils, installed by scripts/setup): workers stop on a typed
        // storage error or finish, and lose nothing acknowledged.
        #expect(run.stdout.contains("workers under injected I/O errors: "))
        #expect(!run.stdout.contains("\n  I/O errors:"), "no problem line for the injected I/O errors")
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/fiu-run") {
            #expect(run.stdout.contains("stopped on a typed storage error"))
        }
    }
}

@Suite struct DamageSuiteTests {
    @Test("damage: damaged records are caught naming their sequence; truncated and damaged pages never crash the tool")
    func damagedLogs() throws {
        let run = try outbox("damage", "--samples", "30", "--record-stride", "9")
        #expect(run.status == 0, "\(run.stdout)")
        #expect(run.stdout.contains(", 0 failed"))
    }

    @Test("a read-only command whose reader dies reports a damaged page structure and exits 2")
    func readerDeath() throws {
        try TemporaryFolder.with(created: true) { folder in
            let log = folder + "/log"
            try makeLog(log, count: 2)
            // A timeout of zero seconds stands in for a reader that hangs on a damaged page.
            // Options before the path: the message names the log, not an option's value.
            let ended = try ChildProcess.runBlocking(
                URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("outbox"),
                ["log", "--from", "1", log],
                environment: ProcessInfo.processInfo.environment.merging(["OUTBOX_READ_TIMEOUT": "0"]) { $1 }, output: .discard,
                errors: .apart(.capture))
            let text = ended.errorText
            #expect(ended.status == 2)
            #expect(text.contains(log) && text.contains("did not finish"), "\(text)")
            #expect(!text.contains(": 1:"), "the option's value is not named as the log")
        }
    }
}
