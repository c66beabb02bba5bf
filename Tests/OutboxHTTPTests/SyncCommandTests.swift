import Foundation
import Outbox
import OutboxHTTP
import OutboxProcess
import OutboxTesting
import Testing

/// `outbox sync` (as the README gives it) against the stand-in, and client processes killed during
/// a drain: every acknowledged write reaches the table exactly once, in order.
@Suite("outbox sync, through the stand-in into PostgreSQL")
struct SyncCommandTests {
    static let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(
        "outbox")

    struct Run {
        let status: Int32
        let signalled: Bool
        let stdout: String
        let stderr: String
    }

    /// Runs the tool with `environment` added; with `killAfter`, SIGKILLs it that many seconds in.
    static func outbox(_ arguments: [String], environment: [String: String] = [:], killAfter: Double? = nil) async throws
        -> Run
    {
        let child = try ChildProcess(
            binary, arguments, environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
            errors: .apart(.capture))
        if let killAfter { child.kill(after: killAfter) }
        let ended = await child.ended()
        return Run(status: ended.status, signalled: ended.signalled, stdout: ended.text, stderr: ended.errorText)
    }

    static func enqueue(_ log: String, _ id: Int, title: String) async throws {
        let run = try await outbox([
            "enqueue", log, "--user", "alice", "--table", "todos", "--op", "insert", "--key", #"{"id":\#(id)}"#,
            "--body", #"{"title":"\#(title)"}"#,
        ])
        #expect(run.status == 0, "\(run.stderr)")
    }

    @Test func syncSendsTheLogsWritesAndSaysHowItEnded() async throws {
        try await Instance.with { instance in
            try await TemporaryFolder.with { log in
                for id in 1...3 { try await Self.enqueue(log, id, title: "t\(id)") }
                let missing = try await Self.outbox(["sync", log, "--url", instance.url.absoluteString])
                #expect(missing.status == 2 && missing.stderr.contains("OUTBOX_ACCESS_TOKEN"))
                let environment = ["OUTBOX_ACCESS_TOKEN": try await instance.token("alice"), "OUTBOX_APIKEY": instance.apiKey]
                let run = try await Self.outbox(
                    ["sync", log, "--url", instance.url.absoluteString, "--json"], environment: environment)
                #expect(run.status == 0, "\(run.stderr)")
                let report = try JSONText.parse(run.stdout.trimmingCharacters(in: .newlines))
                guard case .object(let fields) = report else { throw CancellationError() }
                #expect(fields["syncedCount"] == .int(3) && fields["stoppedBy"] == .null)
                #expect(
                    try await instance.sql("select id, title, owner from todos order by id") == [
                        "1|t1|alice", "2|t2|alice", "3|t3|alice",
                    ])
                #expect(
                    !run.stdout.contains(environment["OUTBOX_ACCESS_TOKEN"]!)
                        && !run.stderr.contains(environment["OUTBOX_ACCESS_TOKEN"]!))

                try await Self.enqueue(log, 4, title: "t4")
                try await Instance.run(["stop-standin", instance.folder])
                let down = try await Self.outbox(
                    ["sync", log, "--url", instance.url.absoluteString, "--json"], environment: environment)
                #expect(down.status == 1, "stopped with a write still queued: \(down.stdout) \(down.stderr)")
                #expect(down.stdout.contains(#""stoppedBy":{"code":null,"kind":"network","status":null}"#), "\(down.stdout)")
            }
        }
    }

    // On a terminal, a sync shows how far it got on standard error; in a pipe (above), nothing.
    @Test func syncShowsProgressOnATerminal() async throws {
        try await Instance.with { instance in
            try await TemporaryFolder.with { log in
                for id in 1...3 { try await Self.enqueue(log, id, title: "t\(id)") }
                let environment = ["OUTBOX_ACCESS_TOKEN": try await instance.token("alice"), "OUTBOX_APIKEY": instance.apiKey]
                let command = [Self.binary.path, "sync", log, "--url", instance.url.absoluteString].joined(separator: " ")
                let child = try ChildProcess(
                    URL(fileURLWithPath: "/usr/bin/script"), ["-qec", command, "/dev/null"],
                    environment: ProcessInfo.processInfo.environment.merging(environment) { $1 }, errors: .apart(.capture))
                let ended = await child.ended()
                #expect(ended.status == 0, "\(ended.text) \(ended.errorText)")
                #expect(
                    ended.text.contains("\rsync: 1 of 3 writes (33 %), 0 refused, 0 blocked"), "\(ended.text.debugDescription)")
                #expect(ended.text.contains("synced 3 (0 already on the server)"), "\(ended.text.debugDescription)")
                #expect(!ended.text.contains(environment["OUTBOX_ACCESS_TOKEN"]!))
            }
        }
    }

    // The client killed at random moments during a drain, restarted, drained again; checked
    // from the database's own record: lost = duplicated = reordered = 0.
    @Test func clientsKilledDuringADrainLoseAndRepeatNothing() async throws {
        try await Instance.with { instance in
            try await TemporaryFolder.with { log in
                let count = 200
                var configuration = OutboxConfiguration(autoSync: false)
                configuration.clock = ManualClock()
                let client = try OutboxClient.open(path: log, configuration: configuration)
                try await client.settleSession(user: "alice", accessToken: nil)
                var writes: [Write] = []
                for id in 1...count {
                    writes.append(.insert(into: "todos", key: ["id": .int(Int64(id))], body: ["title": .string("t\(id)")]))
                }
                _ = try await client.enqueue(contentsOf: writes)
                client.close()
                let kills = try await Self.drainWithKills(log, instance, seed: 15)
                let applied = try await instance.sql("select row_id from applied where op = 'insert' order by seq").compactMap {
                    Int($0)
                }
                #expect(applied.count == count, "each write applied once (\(applied.count) applies, \(kills) kills)")
                #expect(applied == Array(1...count), "in order")
                #expect(
                    try await instance.sql("select count(*) from todos where title = 't' || id") == ["\(count)"],
                    "with its content")
            }
        }
    }

    // `outbox enqueue --base-version N` queues a write made on version N, and `outbox sync
    // --transport contract` sends it to the reference instance: merged or conflicted by what changed.
    @Test func enqueueWithABaseVersionAndSyncThroughTheContract() async throws {
        try await Instance.with { instance in
            try await TemporaryFolder.with { log in
                func enqueue(_ extra: [String]) async throws -> Run {
                    try await Self.outbox(["enqueue", log, "--user", "alice", "--table", "todos", "--key", #"{"id":1}"#] + extra)
                }
                #expect(try await enqueue(["--op", "insert", "--body", #"{"title":"Milk"}"#]).status == 0)
                #expect(try await enqueue(["--op", "update", "--body", #"{"done":true}"#, "--base-version", "1"]).status == 0)
                #expect(try await enqueue(["--op", "update", "--body", #"{"title":"Oat"}"#, "--base-version", "1"]).status == 0)
                #expect(try await enqueue(["--op", "update", "--body", #"{"title":"Rye"}"#, "--base-version", "2"]).status == 0)
                let bad = try await enqueue(["--op", "update", "--body", "{}", "--base-version", "0"])
                #expect(bad.status == 2 && bad.stderr.contains("--base-version"))
                let environment = ["OUTBOX_ACCESS_TOKEN": try await instance.token("alice"), "OUTBOX_APIKEY": instance.apiKey]
                let run = try await Self.outbox(
                    ["sync", log, "--url", instance.url.absoluteString, "--transport", "contract", "--json"],
                    environment: environment)
                #expect(run.status == 0, "\(run.stderr)")
                guard case .object(let report)? = try? JSONText.parse(run.stdout), case .array(let verdicts)? = report["verdicts"]
                else {
                    Issue.record("no report: \(run.stdout)")
                    return
                }
                let kinds = verdicts.compactMap { verdict -> String? in
                    guard case .object(let fields) = verdict, case .string(let kind)? = fields["verdict"] else { return nil }
                    return kind
                }
                #expect(kinds == ["accepted", "accepted", "merged", "conflicted"])
                #expect(try await instance.sql("select title, done, version from todos") == ["Oat|t|3"])
                let unknown = try await Self.outbox(
                    ["sync", log, "--url", instance.url.absoluteString, "--transport", "graphql"], environment: environment)
                #expect(unknown.status == 2 && unknown.stderr.contains("postgrest and contract"))
            }
        }
    }

    /// Drains `log` with `outbox sync` runs SIGKILLed at moments drawn from `seed` (the machine's speed
    /// still decides what each one hits), one acknowledgement lost on the way; returns the kills.
    static func drainWithKills(_ log: String, _ instance: Instance, seed: UInt64, transport: String = "postgrest")
        async throws -> Int
    {
        let environment = ["OUTBOX_ACCESS_TOKEN": try await instance.token("alice"), "OUTBOX_APIKEY": instance.apiKey]
        // A lost acknowledgement too: the stand-in commits one request and drops its connection. The
        // requests before it answer 50 ms late, so a drain outlasts the first kills however fast the
        // machine (each run's kill comes 50 to 600 ms in).
        try await instance.fault(Array(repeating: ["latency": 0.05], count: 24) + [["drop": true]])
        let random = SeededRandomSource(seed: seed)
        var kills = 0
        var finished = false
        for attempt in 0..<60 where !finished {
            let delay = attempt < 8 ? 0.05 + Double(random.next() % 550) / 1000 : nil
            let run = try await outbox(
                ["sync", log, "--url", instance.url.absoluteString, "--transport", transport, "--batch", "7"],
                environment: environment, killAfter: delay)
            if run.signalled { kills += 1 } else if run.status == 0 { finished = true }
        }
        #expect(finished, "the drain finished")
        #expect(kills > 0, "some runs were killed")
        return kills
    }

    // Increments through the contract, the client killed at random moments during the
    // drain: each counter equals its number of increments, exactly, from the database's own record.
    @Test func incrementsByKilledClientsCountOnce() async throws {
        try await Instance.with { instance in
            try await TemporaryFolder.with { log in
                var configuration = OutboxConfiguration(autoSync: false)
                configuration.clock = ManualClock()
                let client = try OutboxClient.open(path: log, configuration: configuration)
                try await client.settleSession(user: "alice", accessToken: nil)
                var expected: [Int: Int] = [:]
                var writes: [Write] = []
                for n in 0..<150 {
                    let counter = (n * 3) % 7 + 1
                    expected[counter, default: 0] += 1
                    writes.append(.custom("bump", table: "counters", key: ["id": .int(Int64(counter))], body: [:]))
                }
                _ = try await client.enqueue(contentsOf: writes)
                client.close()
                let kills = try await Self.drainWithKills(log, instance, seed: 16, transport: "contract")
                let counts = try await instance.sql("select id, n from counters order by id")
                #expect(counts == expected.keys.sorted().map { "\($0)|\(expected[$0]!)" }, "\(counts) after \(kills) kills")
                #expect(try await instance.sql("select count(*) from applied where tbl = 'counters'") == ["150"], "each once")
            }
        }
    }
}

extension SyncCommandTests {
    /// Starts the tool without waiting for it.
    static func start(_ arguments: [String], environment: [String: String]) throws -> ChildProcess {
        try ChildProcess(
            binary, arguments, environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
            errors: .apart(.capture))
    }

    /// Waits (at most 30 s) until the stand-in has received `count` API requests.
    static func awaitRequests(_ instance: Instance, _ count: Int) async throws {
        let started = Date()
        while try await instance.requests().count < count, Date().timeIntervalSince(started) < 30 { await Task.yield() }
    }

    // R5.7 with real processes: while one `outbox sync` holds the log's sync lock, a second one on the
    // same log sends nothing and exits 1 naming the holder; every write is applied once. A holder
    // killed with SIGKILL leaves the lock free: the operating system released it.
    @Test func twoSyncsOfOneLogAtOnceSendEachWriteOnce() async throws {
        try await Instance.with { instance in
            try await TemporaryFolder.with { log in
                for id in 1...30 { try await Self.enqueue(log, id, title: "t\(id)") }
                let environment = ["OUTBOX_ACCESS_TOKEN": try await instance.token("alice"), "OUTBOX_APIKEY": instance.apiKey]
                let arguments = ["sync", log, "--url", instance.url.absoluteString, "--batch", "10"]
                try await instance.fault([["latency": 3]])
                let first = try Self.start(arguments, environment: environment)
                try await Self.awaitRequests(instance, 1)
                let second = try await Self.outbox(arguments, environment: environment)
                #expect(second.status == 1, "\(second.stdout) \(second.stderr)")
                #expect(second.stderr.contains("is being synced by process \(first.pid) (outbox)"), "\(second.stderr)")
                let ended = await first.ended()
                #expect(ended.status == 0, "\(ended.text) \(ended.errorText)")
                #expect(try await instance.sql("select count(*), count(distinct row_id) from applied") == ["30|30"], "each once")

                for id in 31...32 { try await Self.enqueue(log, id, title: "t\(id)") }
                let requests = try await instance.requests().count
                try await instance.fault([["latency": 20]])
                let killed = try Self.start(arguments, environment: environment)
                try await Self.awaitRequests(instance, requests + 1)
                killed.send(SIGKILL)
                #expect(await killed.ended().signalled)
                let after = try await Self.outbox(arguments, environment: environment)
                #expect(after.status == 0, "the killed holder left the lock free: \(after.stderr)")
                #expect(try await instance.sql("select count(*), count(distinct row_id) from applied") == ["32|32"])
                #expect(try await instance.sql("select count(*) from todos") == ["32"])
            }
        }
    }

    // Item 10 of the review: a token of alice on a log whose pending write is bob's says so and exits 1,
    // never "remaining 0" and success.
    @Test func aSyncWithAnotherUsersTokenSaysWhatItDidNotSend() async throws {
        try await Instance.with { instance in
            try await TemporaryFolder.with { log in
                let run = try await Self.outbox([
                    "enqueue", log, "--user", "bob", "--table", "todos", "--op", "insert", "--key", #"{"id":1}"#,
                    "--body", #"{"title":"bob's"}"#,
                ])
                #expect(run.status == 0, "\(run.stderr)")
                let environment = ["OUTBOX_ACCESS_TOKEN": try await instance.token("alice"), "OUTBOX_APIKEY": instance.apiKey]
                let sync = try await Self.outbox(["sync", log, "--url", instance.url.absoluteString], environment: environment)
                #expect(sync.status == 1)
                #expect(sync.stderr.contains("1 pending write of other users than alice not sent"), "\(sync.stderr)")
                #expect(try await instance.sql("select count(*) from todos") == ["0"])
            }
        }
    }
}
