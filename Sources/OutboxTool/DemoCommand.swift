internal import Foundation
internal import Outbox
internal import OutboxTesting

extension Commands {
    /// The main job: a realistic session against the simulated instance, printed for a person.
    static func demo(_ words: [String]) async throws -> Exit {
        let args = try Arguments(command: "demo", words: words, options: ["keep"], flags: [])
        guard args.positionals.isEmpty else { throw UsageError(message: "demo takes no arguments") }
        let folder = args.option("keep") ?? TemporaryFolder(prefix: "outbox-demo").path
        if args.option("keep") != nil, FileManager.default.fileExists(atPath: folder) {
            throw UsageError(message: "--keep \(folder): the folder exists; give a new one")
        }
        defer { if args.option("keep") == nil { try? FileManager.default.removeItem(atPath: folder) } }

        let clock = ManualClock()
        var configuration = OutboxConfiguration(autoSync: false, batchSize: 2)
        configuration.clock = clock
        configuration.random = SeededRandomSource(seed: 7)
        let instance = SimulatedInstance()
        let outbox = try OutboxClient.open(path: folder, transport: instance, configuration: configuration)
        defer { outbox.close() }

        say("== The app signs alice in and queues seven writes while offline (each durable when enqueue returns)")
        try await outbox.settleSession(user: "alice", accessToken: AccessToken.unsigned(subject: "alice"))
        let milk = try await outbox.enqueue(.insert(into: "todos", key: ["id": 1], body: ["title": "Buy milk", "done": false]))
        try await outbox.enqueue(.insert(into: "todos", key: ["id": 2], body: ["title": "Call the plumber", "done": false]))
        let list = try await outbox.enqueue(.insert(into: "lists", key: ["id": 7], body: ["name": "Groceries"]))
        try await outbox.enqueue(.update("todos", key: ["id": 1], set: ["done": true], baseVersion: 1))
        let empty = try await outbox.enqueue(.insert(into: "todos", key: ["id": 3], body: ["title": "", "done": false]))
        let archive = try await outbox.enqueue(
            .custom("archive_list", table: "lists", key: ["id": 7], body: ["reason": "done"], dependsOn: [empty]))
        try await outbox.enqueue(.insert(into: "todos", key: ["id": 4], body: ["title": "Water the plants", "done": false]))
        try showQueue(outbox)
        _ = (milk, list)

        say("\n== First sync: the instance takes one batch, then answers 503 (the pass stops; nothing is charged)")
        instance.script([.verdict(.accepted), .verdict(.accepted), .status(503, retryAfter: "2")])
        say(describe(try await outbox.sync()))
        clock.advance(seconds: 2)

        say("\n== Second sync, two seconds later: the title check refuses write \(empty); the pass goes on past it,")
        say("   and the write that depends on it waits")
        let refusal = Refusal(
            status: 422, code: "23514", reason: "check_violation",
            message: "new row for relation \"todos\" violates check constraint \"title_not_empty\"", fields: ["title"])
        instance.script([.verdict(.accepted), .verdict(.merged(fields: ["done"])), .verdict(.refused(refusal))])
        say(describe(try await outbox.sync()))

        say("\n== Status (what a banner shows: counts, never server text)")
        say(describe(outbox.syncStatus.value))

        say("\n== The queue now")
        try showQueue(outbox)

        say("\n== Why write \(archive) is not sent yet (queue.explain; `outbox why` for a log from a device)")
        say("  " + (try await outbox.queue.explain(archive)).description)

        say("\n== History of the refused write \(empty), as `outbox history` shows it (the audit view keeps the server's text)")
        for event in try await outbox.history(of: empty) { say("  " + Render.timeline(event, of: empty)) }

        say("\n== The app discards it with its dependents (they are refused unsent), then takes the answers")
        _ = try await outbox.queue.discard(empty, withDependents: true)
        let taken = try await outbox.queue.takeAnswered()
        say("  took \(taken.count) answered writes: \(taken.map { "\($0.id)" }.joined(separator: ", "))")
        try showQueue(outbox)
        say("\n== The instance applied, in order: " + instance.applied.map { "\($0.table)#\($0.id)" }.joined(separator: ", "))
        let verify = try await outbox.verify()
        say("== verify: \(verify)   (\(verify.events) events; projections equal a rebuild)")
        if args.option("keep") != nil {
            say("\nThe log is kept in \(folder): try 'outbox log \(folder)', 'outbox history \(folder) \(empty)',")
            say("'outbox replay \(folder) --check-decisions'.")
        }
        return verify.isOK ? .success : .notSo
    }

    private static func showQueue(_ outbox: OutboxClient) throws {
        let writes = try outbox.everyWrite()
        if writes.isEmpty { say("  (empty)") }
        for write in writes { say("  " + Render.line(write)) }
    }

    /// The report's own line (counts, and what stopped the pass), then one line a verdict.
    static func describe(_ report: SyncReport) -> String {
        var lines = ["  " + report.description]
        for verdict in report.verdicts {
            var line = "    write \(verdict.id): \(verdict.kind.rawValue)"
            if let reason = verdict.blockedReason { line += " (\(reason.rawValue))" }
            if verdict.refusals > 0 { line += ", refusals \(verdict.refusals)" }
            if verdict.replayed { line += ", replayed" }
            lines.append(line)
        }
        return lines.joined(separator: "\n")
    }

    static func describe(_ status: SyncStatus) -> String { "  " + status.description }
}
