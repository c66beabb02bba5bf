import Foundation
import Outbox
import OutboxHTTP
import OutboxProcess
import OutboxTesting
import Testing

/// The soak of the PostgREST path (R9.3): two users on two devices each write their own tables
/// through the stand-in (inserts, updates, upserts, deletes, a custom mutation, on rows the user's two
/// devices share), while `outbox sync --transport postgrest` processes are SIGKILLed, two are started
/// at once on one log, the stand-in and PostgreSQL restart, and the stand-in drops connections after
/// applying, breaks Content-Range and answers HTML; then healing. Checked from the database's own
/// `applied` record against what R9.3 promises per op: inserts exactly once, every write decided,
/// none refused, blocked or dead that the server applied, nothing stuck, per-row order, and each row
/// as the last write applied to it made it (so no deleted row is back).
///
/// `scripts/soak --transport postgrest [--seconds N] [--seed S]`; `scripts/reliability` runs it for
/// 45 s in CI. It ends with one line, `soak postgrest: …`, and on a failure `reproduce: …`.
@Suite("Soak of the PostgREST path")
struct PostgRESTSoakTests {
    static let seconds = ProcessInfo.processInfo.environment["OUTBOX_PGSOAK_SECONDS"].flatMap(Double.init)

    struct Device {
        let path: String
        let user: String
    }

    @Test(.enabled(if: seconds != nil, "run by scripts/soak --transport postgrest"))
    func aSoakOfThePostgRESTPathKeepsWhatR93Promises() async throws {
        let seed = ProcessInfo.processInfo.environment["OUTBOX_SOAK_SEED"].flatMap(UInt64.init) ?? 16
        let seconds = Self.seconds ?? 45
        let random = SeededRandomSource(seed: seed)
        func below(_ n: Int) -> Int { Int(random.next() % UInt64(n)) }
        let root = TemporaryFolder(prefix: "outbox-pgsoak").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let devices = (0..<4).map { Device(path: root + "/device\($0)", user: $0 < 2 ? "alice" : "bob") }
        var counts = (steps: 0, writes: 0, syncs: 0, kills: 0, doubles: 0, busy: 0, faults: 0, standin: 0, database: 0)
        try await Instance.with { instance in
            let started = Date()
            while Date().timeIntervalSince(started) < seconds {
                counts.steps += 1
                let device = devices[below(devices.count)]
                let action = below(100)
                switch action {
                case 0..<45:
                    let writes = Self.writes(for: device.user, random)
                    try await Self.withClient(device, instance) { client in
                        for write in writes { _ = try await client.enqueue(write) }
                    }
                    counts.writes += writes.count
                case 45..<55:
                    // Two syncs of one log at once (R5.7): one sends, the other finds the lock held.
                    counts.doubles += 1
                    async let first = Self.sync(device, instance, killAfter: nil)
                    async let second = Self.sync(device, instance, killAfter: nil)
                    let (one, other) = try await (first, second)
                    if one.busy || other.busy { counts.busy += 1 }
                default:
                    counts.syncs += 1
                    if below(4) == 0 {
                        counts.faults += 1
                        let faults: [[String: Any]] = [
                            ["drop": true], ["strip": "Content-Range"],
                            ["status": 200, "raw": "<html>hello</html>", "contentType": "text/html"],
                        ]
                        try await instance.fault(Array(repeating: [:], count: below(4)) + [faults[below(faults.count)]])
                    }
                    let kill = below(10) < 4 ? 0.005 + Double(below(80)) / 1000 : nil
                    let restart = action >= 95 ? (action >= 98 ? "restart-database" : "restart-standin") : nil
                    async let run = Self.sync(device, instance, killAfter: kill)
                    if let restart {
                        _ = try await Instance.run([restart, instance.folder])
                        if restart == "restart-database" { counts.database += 1 } else { counts.standin += 1 }
                    }
                    if try await run.killed { counts.kills += 1 }
                }
            }
            // Faults no longer scripted, servers up: every device heals.
            _ = try await Instance.run(["restart-standin", instance.folder])
            var failures: [String] = []
            var verdicts: [String: Int] = [:]
            var byOrigin: [String: [QueuedWrite]] = [:]
            for device in devices {
                try await Self.withClient(device, instance) { client in
                    let writes = try await Self.heal(client)
                    for write in writes { verdicts[write.state.name, default: 0] += 1 }
                    byOrigin[try client.origin().description] = writes
                    if !(try client.log.checkDecisions().isSame) { failures.append("\(device.path): decisions differ") }
                }
            }
            failures += try await Self.check(byOrigin, instance)
            let summary = verdicts.keys.sorted().map { "\(verdicts[$0]!) \($0)" }.joined(separator: ", ")
            print(
                "soak postgrest: seed \(seed), \(Int(Date().timeIntervalSince(started))) s, \(counts.steps) steps, "
                    + "\(counts.writes) writes (\(summary)), \(counts.syncs) syncs, \(counts.kills) kills, "
                    + "\(counts.doubles) double syncs (\(counts.busy) found busy), \(counts.faults) faults, "
                    + "\(counts.standin) stand-in and \(counts.database) database restarts, \(failures.count) failed")
            if !failures.isEmpty {
                print("reproduce: scripts/soak --transport postgrest --seed \(seed) --seconds \(Int(seconds))")
                for failure in failures.prefix(20) {
                    print("  \(failure)")
                    Issue.record("\(failure)")
                }
            }
        }
    }

    /// A few writes of `user` on the rows its two devices share: every op, some refused (an empty
    /// title), an insert of a row that may be there, an update of one that may not.
    static func writes(for user: String, _ random: SeededRandomSource) -> [Write] {
        func below(_ n: Int) -> Int { Int(random.next() % UInt64(n)) }
        let base: Int64 = user == "alice" ? 0 : 1000
        var writes: [Write] = []
        for _ in 0..<(1 + below(4)) {
            let key: JSONValue = ["id": .int(base + Int64(1 + below(8)))]
            switch below(100) {
            case 0..<12: writes.append(.insert(into: "todos", key: key, body: ["title": .string("t\(below(100))")]))
            case 12..<32: writes.append(.update("todos", key: key, set: ["title": .string("u\(below(100))")]))
            case 32..<40: writes.append(.update("todos", key: key, set: ["done": .bool(below(2) == 0)]))
            case 40..<75:
                writes.append(.upsert(into: "todos", key: key, body: ["title": .string("s\(below(100))"), "done": false]))
            case 75..<85: writes.append(.delete(from: "todos", key: key))
            case 85..<88: writes.append(.insert(into: "todos", key: key, body: ["title": ""]))  // refused 23514
            default:
                let list = JSONValue.int(base + 1)
                writes.append(.custom("complete_list", table: "lists", key: ["id": list], body: ["list_id": list]))
            }
        }
        return writes
    }

    /// What an app does to settle everything: passes until nothing is pending, each dead write
    /// discarded (so what waits behind it goes), each blocked one withdrawn. Returns every write as it
    /// was last seen, the discarded ones as they were before the discard.
    static func heal(_ client: OutboxClient) async throws -> [QueuedWrite] {
        var seen: [WriteID: QueuedWrite] = [:]
        for _ in 0..<8 {
            for _ in 0..<12 {
                let report = try await client.sync()
                if report.remainingCount == 0 && report.rejectedCount == 0 { break }
            }
            var changed = false
            for write in try await client.queue.all() {
                seen[write.id] = write
                switch write.state {
                // A dead write holds what waits behind it (R4.2): discarded with it, refused unsent.
                case .dead: changed = try await client.queue.discard(write.id, withDependents: true) || changed
                case .blocked:
                    if case .withdrawn = try await client.queue.withdraw(write.id) { changed = true }
                default: break
                }
            }
            if !changed { break }
        }
        for write in try await client.queue.all() { seen[write.id] = write }
        return seen.keys.sorted().map { seen[$0]! }
    }

    static func transport(_ instance: Instance) throws -> PostgRESTTransport {
        try PostgRESTTransport(
            url: instance.url, apiKey: instance.apiKey, tables: ["lists": ["id"], "todos": ["id"]], timeout: 5)
    }

    /// Opens the device's log with a PostgREST transport and the user's token, runs `body`, closes it.
    static func withClient(_ device: Device, _ instance: Instance, _ body: (OutboxClient) async throws -> Void)
        async throws
    {
        var configuration = OutboxConfiguration(autoSync: false, batchSize: 8)
        configuration.clock = ManualClock()
        configuration.syncLockWait = 0
        let client = try OutboxClient.open(path: device.path, transport: try transport(instance), configuration: configuration)
        defer { client.close() }
        try await client.settleSession(user: device.user, accessToken: try await instance.token(device.user))
        try await body(client)
    }

    /// One `outbox sync --transport postgrest` of the device's log, SIGKILLed `killAfter` seconds in.
    static func sync(_ device: Device, _ instance: Instance, killAfter: Double?) async throws -> (killed: Bool, busy: Bool) {
        guard FileManager.default.fileExists(atPath: device.path) else { return (false, false) }
        let child = try ChildProcess(
            SyncCommandTests.binary,
            ["sync", device.path, "--url", instance.url.absoluteString, "--transport", "postgrest", "--batch", "8"],
            environment: ProcessInfo.processInfo.environment.merging([
                "OUTBOX_ACCESS_TOKEN": try await instance.token(device.user), "OUTBOX_APIKEY": instance.apiKey,
            ]) { $1 }, output: .discard, errors: .apart(.capture))
        child.kill(after: killAfter ?? 20)
        let ended = await child.ended()
        return (ended.signalled, ended.errorText.contains("is being synced"))
    }

    /// The database's record against what each device says of its writes (R9.3).
    static func check(_ byOrigin: [String: [QueuedWrite]], _ instance: Instance) async throws -> [String] {
        var failures: [String] = []
        var writesById: [String: [UInt64: QueuedWrite]] = [:]
        for (origin, writes) in byOrigin {
            writesById[origin] = Dictionary(uniqueKeysWithValues: writes.map { ($0.id.rawValue, $0) })
        }
        /// The write an applied row change belongs to: of the ids its request named, the one whose key is the row.
        func write(origin: String, ids: String, table: String, row: Int64) -> QueuedWrite? {
            for id in ids.split(separator: ",").compactMap({ UInt64($0) }) {
                guard let write = writesById[origin]?[id] else { continue }
                if write.table == table, write.key == ["id": .int(row)] { return write }
                if case .custom = write.operation { return write }
            }
            return nil
        }
        var applies: [String: [UInt64: Int]] = [:]
        var lastByRow: [String: QueuedWrite] = [:]
        var lastIdByOriginRow: [String: UInt64] = [:]
        for line in try await instance.sql(
            "select outbox_origin, outbox_write, tbl, row_id, op from applied where outbox_origin is not null order by seq")
        {
            let parts = line.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 5, let row = Int64(parts[3]) else { continue }
            guard let found = write(origin: parts[0], ids: parts[1], table: parts[2], row: row) else {
                failures.append("an apply to \(parts[2]) \(row) names no write of origin \(parts[0]): \(parts[1])")
                continue
            }
            applies[parts[0], default: [:]][found.id.rawValue, default: 0] += 1
            let rowName = parts[2] + "/" + parts[3]
            if case .custom = found.operation {} else { lastByRow[rowName] = found }
            let orderKey = parts[0] + " " + rowName
            if let last = lastIdByOriginRow[orderKey], last > found.id.rawValue, found.operation != .custom("complete_list") {
                failures.append("reordered: write \(found.id) applied to \(rowName) after write \(last) of the same device")
            }
            lastIdByOriginRow[orderKey] = max(lastIdByOriginRow[orderKey] ?? 0, found.id.rawValue)
        }
        for (origin, writes) in byOrigin {
            for write in writes {
                let count = applies[origin]?[write.id.rawValue] ?? 0
                switch write.state {
                case .pending: failures.append("stuck: write \(write.id) (\(write.operation)) is still pending after healing")
                case .accepted, .merged, .conflicted:
                    if write.operation == .insert && count != 1 {
                        failures.append("insert \(write.id) is \(write.state.name) and was applied \(count) times")
                    }
                case .refused, .blocked, .dead:
                    if count > 0 {
                        failures.append(
                            "write \(write.id) (\(write.operation)) is \(write.state.name), but the server applied it")
                    }
                }
            }
        }
        // Each row as the last write applied to it made it: a delete's row is gone, any other's holds
        // what it wrote.
        let rows = try await instance.sql("select id, title, done from todos")
        var current: [String: (title: String, done: String)] = [:]
        for line in rows {
            let parts = line.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            if parts.count == 3 { current["todos/" + parts[0]] = (parts[1], parts[2]) }
        }
        for (row, write) in lastByRow where write.table == "todos" {
            let held = current[row]
            if write.operation == .delete {
                if held != nil { failures.append("deleted row back: \(row), last applied write \(write.id) deleted it") }
                continue
            }
            guard let held else {
                failures.append("\(row) is gone, but the last write applied to it was \(write.id) (\(write.operation))")
                continue
            }
            guard case .object(let body) = write.body else { continue }
            if case .string(let title)? = body["title"], title != held.title {
                failures.append("\(row) holds title \(held.title), the last write applied (\(write.id)) wrote \(title)")
            }
            if case .bool(let done)? = body["done"], (done ? "t" : "f") != held.done {
                failures.append("\(row) holds done \(held.done), the last write applied (\(write.id)) wrote \(done)")
            }
        }
        return failures
    }
}
