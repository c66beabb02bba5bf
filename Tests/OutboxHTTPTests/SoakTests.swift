import Foundation
import Outbox
import OutboxHTTP
import OutboxProcess
import OutboxTesting
import Testing

/// The soak, in the manner of Jepsen's total-queue check: a seeded random workload of two users on
/// two devices each (every op, dependencies, atomic groups, stale bases, releases, withdraws) against
/// the reference instance, while `outbox sync` processes are SIGKILLed, the stand-in is restarted
/// under a request and PostgreSQL is restarted; then healing. Checked from the database's own record
/// (the apply log its triggers keep, the answers and siblings of the instance), not the library's:
/// lost = duplicated = reordered = 0, every write applied exactly once or given a terminal verdict.
///
/// Bounded for CI (`scripts/reliability` runs `scripts/soak --seconds 45`); longer by hand:
/// `scripts/soak --seconds 600 --seed 7`. It ends with one line, `soak: …`, and on a failure
/// `reproduce: scripts/soak --seed S …`.
@Suite("Soak against the reference instance")
struct SoakTests {
    /// Set by `scripts/soak` (which `scripts/reliability` runs in CI after the suites, alone: it
    /// restarts servers and SIGKILLs processes, and wants the machine to itself).
    static let seconds = ProcessInfo.processInfo.environment["OUTBOX_SOAK_SECONDS"].flatMap(Double.init)

    struct Device {
        let path: String
        let user: String
        /// Writes withdrawn here (they leave the queue).
        var withdrawn: Set<WriteID> = []
    }

    @Test(.enabled(if: seconds != nil, "run by scripts/soak"))
    func aSoakLosesDuplicatesAndReordersNothing() async throws {
        let seed = ProcessInfo.processInfo.environment["OUTBOX_SOAK_SEED"].flatMap(UInt64.init) ?? 16
        let seconds = Self.seconds ?? 45
        let random = SeededRandomSource(seed: seed)
        func below(_ n: Int) -> Int { Int(random.next() % UInt64(n)) }
        let root = TemporaryFolder(prefix: "outbox-soak").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        var devices = (0..<4).map { Device(path: root + "/device\($0)", user: $0 < 2 ? "alice" : "bob") }
        var counts = (
            steps: 0, writes: 0, syncs: 0, kills: 0, standin: 0, database: 0, releases: 0, withdraws: 0, discards: 0
        )
        try await Instance.with { instance in
            try await Self.keepForgottenAnswers(instance)
            let started = Date()
            while Date().timeIntervalSince(started) < seconds {
                counts.steps += 1
                let index = below(devices.count)
                let device = devices[index]
                let action = below(100)
                switch action {
                case 0..<45:
                    let writes = Self.writes(for: device.user, random)
                    try await Self.withClient(device, instance) { client in
                        if writes.count > 1 && below(3) == 0 {
                            counts.writes += try await client.enqueue(contentsOf: writes, atomic: true).count
                        } else {
                            for write in writes { _ = try await client.enqueue(write) }
                            counts.writes += writes.count
                        }
                    }
                case 45..<85, 95..<100:
                    counts.syncs += 1
                    let kill = below(10) < 4 ? 0.005 + Double(below(80)) / 1000 : nil
                    let restart = action >= 95 ? (action >= 98 ? "restart-database" : "restart-standin") : nil
                    let killed = try await Self.sync(device, instance, killAfter: kill, restart: restart)
                    if killed { counts.kills += 1 }
                    if restart == "restart-database" { counts.database += 1 } else if restart != nil { counts.standin += 1 }
                case 85..<90:
                    // The app settles what it was shown: blocked writes released, dead ones discarded.
                    try await Self.withClient(device, instance) { client in
                        for write in try await client.queue.all() {
                            switch write.state {
                            case .blocked: if try await client.queue.release(write.id) { counts.releases += 1 }
                            case .dead: if try await client.queue.discard(write.id, withDependents: true) { counts.discards += 1 }
                            default: break
                            }
                        }
                    }
                default:
                    try await Self.withClient(device, instance) { client in
                        for write in try await client.queue.all() {
                            guard case .blocked = write.state else { continue }
                            if case .withdrawn = try await client.queue.withdraw(write.id) {
                                devices[index].withdrawn.insert(write.id)
                                counts.withdraws += 1
                            }
                            break
                        }
                    }
                }
            }
            // Healing: the servers are up; every device syncs until nothing is pending (a refused write
            // goes again each pass until it is dead).
            var failures: [String] = []
            var verdicts: [String: Int] = [:]
            for device in devices {
                try await Self.withClient(device, instance) { client in
                    let withdrawn = try await Self.heal(client)
                    let origin = try client.origin().description
                    let writes = try await client.queue.all()
                    for write in writes { verdicts[write.state.name, default: 0] += 1 }
                    failures += try await Self.check(
                        writes, withdrawn: device.withdrawn.union(withdrawn), origin: origin, instance)
                }
            }
            let summary = verdicts.keys.sorted().map { "\(verdicts[$0]!) \($0)" }.joined(separator: ", ")
            print(
                "soak: seed \(seed), \(Int(Date().timeIntervalSince(started))) s, \(counts.steps) steps, \(counts.writes) writes (\(summary)), "
                    + "\(counts.syncs) syncs, \(counts.kills) kills, \(counts.standin) stand-in and \(counts.database) database restarts, "
                    + "\(counts.releases) releases, \(counts.withdraws) withdraws, \(counts.discards) discards, \(failures.count) failed"
            )
            if !failures.isEmpty {
                print("reproduce: scripts/soak --seed \(seed) --seconds \(Int(seconds))")
                for failure in failures.prefix(20) {
                    print("  \(failure)")
                    Issue.record("\(failure)")
                }
            }
        }
    }

    /// What an app does to settle everything: passes until they change nothing, then each dead write
    /// discarded (its dependents are refused unsent), each blocked one withdrawn or, for a spent key,
    /// released, and passes again. Returns the writes withdrawn.
    static func heal(_ client: OutboxClient) async throws -> Set<WriteID> {
        var withdrawn = Set<WriteID>()
        for _ in 0..<6 {
            for _ in 0..<12 {
                let report = try await client.sync()
                if report.remainingCount == 0 && report.rejectedCount == 0 { break }
            }
            var changed = false
            for write in try await client.queue.all() {
                switch write.state {
                case .dead: changed = try await client.queue.discard(write.id, withDependents: true) || changed
                case .blocked(.keySpent, _): changed = try await client.queue.release(write.id) || changed
                case .blocked:
                    if case .withdrawn = try await client.queue.withdraw(write.id) {
                        withdrawn.insert(write.id)
                        changed = true
                    }
                default: break
                }
            }
            if !changed { break }
        }
        return withdrawn
    }

    /// A few writes of `user`: every op, some with a stale or impossible base, some depending on the
    /// write before them, on rows the user's two devices share.
    static func writes(for user: String, _ random: SeededRandomSource) -> [Write] {
        func below(_ n: Int) -> Int { Int(random.next() % UInt64(n)) }
        let base: Int64 = user == "alice" ? 0 : 1000
        var writes: [Write] = []
        for _ in 0..<(1 + below(4)) {
            let todo: JSONValue = ["id": .int(base + Int64(1 + below(12)))]
            let version: Int64? = below(3) == 0 ? Int64(1 + below(4)) : nil
            switch below(100) {
            case 0..<12:
                writes.append(.insert(into: "todos", key: todo, body: ["title": .string("t\(below(100))")]))
            case 12..<32:
                writes.append(.update("todos", key: todo, set: ["title": .string("u\(below(100))")], baseVersion: version))
            case 32..<42: writes.append(.update("todos", key: todo, set: ["done": .bool(below(2) == 0)], baseVersion: version))
            case 42..<67: writes.append(.upsert(into: "todos", key: todo, body: ["title": .string("s\(below(100))")]))
            case 67..<72: writes.append(.delete(from: "todos", key: todo, baseVersion: version))
            case 72..<75: writes.append(.insert(into: "todos", key: todo, body: ["title": ""]))  // refused 23514
            default:
                writes.append(.custom("bump", table: "counters", key: ["id": .int(base + Int64(1 + below(4)))], body: [:]))
            }
        }
        return writes
    }

    /// Opens the device's log with a contract transport and the user's token, runs `body`, closes it.
    static func withClient(_ device: Device, _ instance: Instance, _ body: (OutboxClient) async throws -> Void)
        async throws
    {
        let transport = try ContractTransport(url: instance.url, apiKey: instance.apiKey, timeout: 5)
        var configuration = OutboxConfiguration(autoSync: false, batchSize: 8)
        configuration.clock = ManualClock()
        let client = try OutboxClient.open(path: device.path, transport: transport, configuration: configuration)
        defer { client.close() }
        try await client.settleSession(user: device.user, accessToken: try await instance.token(device.user))
        try await body(client)
    }

    /// One `outbox sync` of the device's log, SIGKILLed `killAfter` seconds in, with a server restart
    /// under it; whether it was killed.
    static func sync(_ device: Device, _ instance: Instance, killAfter: Double?, restart: String?) async throws -> Bool {
        guard FileManager.default.fileExists(atPath: device.path) else { return false }
        let child = try ChildProcess(
            SyncCommandTests.binary,
            ["sync", device.path, "--url", instance.url.absoluteString, "--transport", "contract", "--batch", "8"],
            environment: ProcessInfo.processInfo.environment.merging([
                "OUTBOX_ACCESS_TOKEN": try await instance.token(device.user), "OUTBOX_APIKEY": instance.apiKey,
            ]) { $1 }, output: .discard, errors: .apart(.discard))
        // A run that hangs (a request the restart left waiting for its timeout) is killed at 20 s.
        child.kill(after: killAfter ?? 20)
        if let restart { _ = try await Instance.run([restart, instance.folder]) }
        return await child.ended().signalled
    }

    /// The instance forgets the answers at or below each device's watermark (R8.9); the soak keeps a
    /// copy of each as it goes (a trigger of this fixture, not of the instance), so that the check below
    /// still finds every answer the instance gave.
    static func keepForgottenAnswers(_ instance: Instance) async throws {
        _ = try await instance.sql(
            """
            create table if not exists public.soak_forgotten_answers (origin text not null, write_id bigint not null);
            create or replace function public.soak_keep_forgotten() returns trigger language plpgsql as $$
            begin insert into public.soak_forgotten_answers values (old.origin, old.write_id); return old; end $$;
            drop trigger if exists soak_keep_forgotten on outbox.answers;
            create trigger soak_keep_forgotten before delete on outbox.answers
              for each row execute function public.soak_keep_forgotten();
            """)
    }

    /// The database's record of one device's writes against what the device says of them.
    static func check(_ writes: [QueuedWrite], withdrawn: Set<WriteID>, origin: String, _ instance: Instance) async throws
        -> [String]
    {
        var applies: [UInt64: Int] = [:]
        var lastByRow: [String: UInt64] = [:]
        var failures: [String] = []
        for line in try await instance.sql(
            "select outbox_write, tbl, row_id from applied where outbox_origin = '\(origin)' order by seq")
        {
            let parts = line.split(separator: "|").map(String.init)
            guard parts.count == 3, let id = UInt64(parts[0]) else { continue }
            applies[id, default: 0] += 1
            let row = parts[1] + "/" + parts[2]
            if let last = lastByRow[row], last > id {
                let describe = { (id: UInt64) -> String in
                    guard let write = writes.first(where: { $0.id.rawValue == id }) else { return "\(id) (gone)" }
                    return
                        "\(id) (\(write.operation) \(write.state.name), follows \(write.follows), depends on \(write.dependsOn))"
                }
                failures.append("reordered: write \(describe(id)) applied to \(row) after write \(describe(last))")
            }
            lastByRow[row] = id
        }
        let answered = Set(
            try await instance.sql(
                "select write_id from outbox.answers where origin = '\(origin)' "
                    + "union select write_id from public.soak_forgotten_answers where origin = '\(origin)'"
            ).compactMap(UInt64.init))
        let siblings = Set(
            try await instance.sql("select write_id from outbox.siblings where origin = '\(origin)'").compactMap(UInt64.init))
        for write in writes {
            let id = write.id.rawValue
            let count = applies[id] ?? 0
            switch write.state {
            case .accepted, .merged:
                if !answered.contains(id) {
                    failures.append("lost: write \(id) is \(write.state.name), the instance never applied it")
                }
                if count > 1 { failures.append("duplicated: write \(id) applied \(count) times") }
                if count == 0 && write.operation != .delete {
                    failures.append("lost: write \(id) is \(write.state.name), no row changed for it")
                }
            case .conflicted:
                if !answered.contains(id) || !siblings.contains(id) {
                    failures.append("lost: write \(id) is conflicted, the instance holds no sibling for it")
                }
                if count > 0 { failures.append("duplicated: conflicted write \(id) changed a row") }
            case .pending:
                failures.append(
                    "write \(id) (\(write.operation), follows \(write.follows), depends on \(write.dependsOn), waiting \(write.waiting)) is still pending after healing"
                )
            case .refused, .blocked, .dead:
                if count > 0 || answered.contains(id) {
                    failures.append("lost answer: write \(id) is \(write.state.name), but the instance applied it")
                }
            }
        }
        for id in withdrawn where (applies[id.rawValue] ?? 0) > 0 || answered.contains(id.rawValue) {
            failures.append("write \(id) was withdrawn, but the instance applied it")
        }
        return failures
    }
}
