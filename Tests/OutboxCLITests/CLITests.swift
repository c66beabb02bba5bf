import Foundation
import Outbox
import OutboxProcess
import OutboxTesting
import Testing

/// Runs the `outbox` binary built beside the tests; returns its exit status and output.
struct Run {
    let status: Int32
    let stdout: String
    let stderr: String
}

func outbox(_ arguments: String...) throws -> Run { try outbox(arguments) }

func outbox(_ arguments: [String]) throws -> Run {
    try run(
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("outbox"), arguments)
}

/// Runs `executable` with `arguments`; its exit status and output.
func run(_ executable: URL, _ arguments: [String]) throws -> Run {
    let ended = try ChildProcess.runBlocking(executable, arguments, errors: .apart(.capture))
    return Run(status: ended.status, stdout: ended.text, stderr: ended.errorText)
}

/// Enqueues `count` writes through the tool, each in its own process that exits without closing.
func makeLog(_ path: String, count: Int = 3, body: String = #"{"title":"milk"}"#) throws {
    for index in 1...count {
        let run = try outbox(
            "enqueue", path, "--user", "alice", "--table", "todos", "--op", "insert", "--key", #"{"id":\#(index)}"#, "--body",
            body)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout == "\(index)\n")
    }
}

@Suite struct CLITests {
    // R2.3: each enqueue ran in a process that exited without closing the log; all are there.
    @Test func enqueuedWritesSurviveAProcessThatExitsWithoutClosing() throws {
        try TemporaryFolder.with(created: true) { folder in
            let log = folder + "/log"
            try makeLog(log, count: 5)
            let queue = try outbox("queue", log)
            #expect(queue.status == 0)
            #expect(queue.stdout.split(separator: "\n").count == 5)
            #expect(try outbox("verify", log).stdout == "ok\n")
        }
    }

    @Test func jsonOutputsUseTheDocumentedFields() throws {
        try TemporaryFolder.with(created: true) { folder in
            let log = folder + "/log"
            try makeLog(log, count: 2)
            let dep = try outbox(
                "enqueue", log, "--user", "alice", "--table", "notes", "--op", "complete_list", "--key", #"{"id":1}"#,
                "--depends-on", "1,2")
            #expect(dep.stdout == "3\n")
            let lines = try outbox("queue", log, "--json").stdout.split(separator: "\n")
            #expect(lines.count == 3)
            let third = try JSONSerialization.jsonObject(with: Data(lines[2].utf8)) as! [String: Any]
            #expect(third["op"] as? String == "complete_list")
            #expect(third["dependsOn"] as? [Int] == [1, 2])
            #expect(third["waiting"] as? Bool == true)
            #expect(third["state"] as? String == "pending")
            let events = try outbox("log", log, "--json", "--from", "2", "--to", "3").stdout.split(separator: "\n")
            #expect(events.count == 2)
            let event = try JSONSerialization.jsonObject(with: Data(events[0].utf8)) as! [String: Any]
            #expect(event["seq"] as? Int == 2)
            #expect(event["type"] as? String == "writeQueued")
            let history = try outbox("history", log, "3", "--json")
            #expect(history.status == 0)
            #expect(history.stdout.contains("\"writeId\":3"))
            let replay = try outbox("replay", log, "--until", "3", "--json")
            let document = try JSONSerialization.jsonObject(with: Data(replay.stdout.utf8)) as! [String: Any]
            #expect(document["sequence"] as? Int == 3)
            #expect(document["queue"] as? [Int] == [1, 2])
        }
    }

    // R8.6: read-only commands never modify the data file.
    @Test func readOnlyCommandsLeaveTheFileByteIdentical() throws {
        try TemporaryFolder.with(created: true) { folder in
            let log = folder + "/log"
            try makeLog(log)
            let data = log + "/data.mdb"
            let before = try Data(contentsOf: URL(fileURLWithPath: data))
            for arguments in [
                ["queue", log], ["queue", log, "--json", "--user", "alice"], ["history", log, "2"], ["log", log],
                ["log", log, "--json"], ["verify", log], ["replay", log], ["replay", log, "--until", "2", "--json"],
                ["queue", data], ["history", log, "77"],
            ] {
                _ = try outbox(arguments)
                #expect(try Data(contentsOf: URL(fileURLWithPath: data)) == before, "\(arguments)")
            }
        }
    }

    // R8.2, R8.6: a flipped byte inside a record is found, and its sequence named.
    @Test func verifyCatchesAFlippedByteInARecord() throws {
        try TemporaryFolder.with(created: true) { folder in
            let log = folder + "/log"
            try makeLog(log, count: 3, body: #"{"title":"CANARYBODY"}"#)
            let url = URL(fileURLWithPath: log + "/data.mdb")
            var bytes = [UInt8](try Data(contentsOf: url))
            let needle = Array("CANARYBODY".utf8)
            var flipped = 0
            var index = 0
            while index + needle.count <= bytes.count {
                if Array(bytes[index..<(index + needle.count)]) == needle {
                    bytes[index + 3] ^= 0x04
                    flipped += 1
                }
                index += 1
            }
            #expect(flipped >= 3)
            try Data(bytes).write(to: url)
            let verify = try outbox("verify", log)
            #expect(verify.status == 1)
            #expect(verify.stdout.contains("sequence 2"), "\(verify.stdout)")
            #expect(verify.stdout.contains(log), "names the file")
            let read = try outbox("log", log)
            #expect(read.status == 2)
            #expect(read.stderr.contains("sequence 2"))
            // Enqueue refuses a log that does not verify, and appends nothing.
            let damaged = try Data(contentsOf: url)
            let enqueue = try outbox(
                "enqueue", log, "--user", "alice", "--table", "todos", "--op", "insert", "--key", #"{"id":9}"#)
            #expect(enqueue.status == 2)
            #expect(
                enqueue.stderr.contains("does not verify") && enqueue.stderr.contains("nothing was queued"), "\(enqueue.stderr)")
            #expect(try Data(contentsOf: url) == damaged)
        }
    }

    // R8.8: only enqueue creates a log.
    @Test func readOnlyCommandsRefuseAMissingLog() throws {
        try TemporaryFolder.with(created: true) { folder in
            let missing = folder + "/nothing"
            for command in ["queue", "log", "verify", "replay"] {
                let run = try outbox(command, missing)
                #expect(run.status == 2, "\(command)")
                #expect(run.stderr.contains(missing))
            }
            #expect(try outbox("history", missing, "1").status == 2)
            #expect(!FileManager.default.fileExists(atPath: missing))
        }
    }

    @Test func aForeignFileIsAnUnreadableLog() throws {
        try TemporaryFolder.with(created: true) { folder in
            let log = folder + "/log"
            try FileManager.default.createDirectory(atPath: log, withIntermediateDirectories: true)
            try Data(String(repeating: "not lmdb ", count: 2000).utf8).write(to: URL(fileURLWithPath: log + "/data.mdb"))
            for arguments in [["verify", log], ["queue", log], ["log", log]] {
                let run = try outbox(arguments)
                #expect(run.status == 2, "\(arguments)")
                #expect(run.stderr.contains(log))
            }
        }
    }

    @Test func badUsageExitsTwoWithAMessage() throws {
        try TemporaryFolder.with(created: true) { folder in
            let log = folder + "/log"
            try makeLog(log, count: 1)
            let cases: [[String]] = [
                [], ["frobnicate"], ["queue"], ["queue", log, "extra"], ["queue", log, "--colour"], ["queue", log, "--user"],
                ["enqueue", log, "--table", "t", "--op", "insert", "--key", "{\"id\":1}"],
                ["enqueue", log, "--user", "a", "--table", "t", "--op", "insert", "--key", "{oops"],
                ["enqueue", log, "--user", "a", "--table", "t", "--op", "insert", "--key", "[1]"],
                ["enqueue", log, "--user", "a", "--table", "", "--op", "insert", "--key", "{\"id\":1}"],
                ["enqueue", log, "--user", "a", "--table", "t", "--op", "insert", "--key", "{\"id\":1}", "--body", "3"],
                ["enqueue", log, "--user", "a", "--table", "t", "--op", "insert", "--key", "{\"id\":1}", "--depends-on", "x"],
                ["enqueue", log, "--user", "a", "--table", "t", "--op", "insert", "--key", "{\"id\":1}", "--depends-on", "99"],
                ["enqueue", log, "--user", "bob", "--table", "t", "--op", "insert", "--key", "{\"id\":1}", "--depends-on", "1"],
                ["enqueue", log, "--user", "a", "--user", "b", "--table", "t", "--op", "insert", "--key", "{\"id\":1}"],
                ["history", log], ["history", log, "one"], ["log", log, "--from", "x"], ["log", log, "--from", "5", "--to", "2"],
                ["verify"], ["verify", log, "--json"], ["replay", log, "--until", "0"], ["replay", log, "--until", "99"],
                ["crash", "--points", "no-such-point"], ["crash", "--points", ""], ["crash", "--kills", "-1"],
                ["simulate", "--seeds", "x"],
                ["simulate", "--seed", "1", "--steps", "0"], ["damage", "--samples", "many"], ["demo", "extra"],
            ]
            let before = try outbox("log", log).stdout
            for arguments in cases {
                let run = try outbox(arguments)
                #expect(run.status == 2, "\(arguments): \(run.stdout) \(run.stderr)")
                #expect(!run.stderr.isEmpty, "\(arguments)")
            }
            #expect(try outbox("log", log).stdout == before, "bad input changed nothing")
            #expect(try outbox("history", log, "42").status == 1)
        }
    }

    @Test(arguments: ["enqueue", "queue", "history", "log", "verify", "replay"])
    func everyCommandHasHelp(command: String) throws {
        let run = try outbox(command, "--help")
        #expect(run.status == 0)
        #expect(run.stdout.contains("usage: outbox \(command)"))
    }
}

/// `outbox history` without `--json`: a timeline a support engineer reads at a glance, one line per
/// event with what it means for the write; `--json` stays the events as the log holds them.
@Suite struct HistoryTimelineTests {
    @Test func historyIsATimelineAndJSONStaysAsItWas() throws {
        try TemporaryFolder.with(created: true) { folder in
            let log = folder + "/demo"
            #expect(try outbox("demo", "--keep", log).status == 0)
            let retried = try outbox("history", log, "3")
            #expect(retried.status == 0, "\(retried.stderr)")
            let lines = retried.stdout.split(separator: "\n").map {
                $0.components(separatedBy: "  ").dropFirst(2).joined(separator: "  ")
            }
            #expect(
                lines == [
                    "queued by alice: insert lists {\"id\":7} {\"name\":\"Groceries\"}",
                    "sent in pass 10 with write 4 under key 77cbc4a1-33c2-d0f6-53fc-d6513d02befe",
                    "pass 10: its request failed, http 503, Retry-After 2",
                    "sent in pass 17 with write 4 under key 77cbc4a1-33c2-d0f6-53fc-d6513d02befe",
                    "answered in pass 17: accepted", "now accepted",
                ], "\(retried.stdout)")
            let refused = try outbox("history", log, "5").stdout
            #expect(refused.contains("answered in pass 17: refused, 422 23514 check_violation on title: «new row for relation"))
            #expect(
                refused.contains("now refused by the instance: 422 23514") && refused.contains("discarded with its dependents"))
            #expect(
                try outbox("history", log, "6").stdout.contains("now refused: the insert it waits for was discarded, for good"))
            let json = try outbox("history", log, "5", "--json").stdout.split(separator: "\n")
            #expect(json.count == 5)
            #expect(json.allSatisfy { line in (try? JSONText.parse(String(line)))?.objectValue?["type"] != nil })
        }
    }
}
