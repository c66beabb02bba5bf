internal import Foundation
internal import Outbox
internal import OutboxProcess
internal import OutboxTesting

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// The SIGKILL crash harness (TESTING.md §2): a worker process runs a seeded workload on a real log and
/// reports each durable fact on standard output, unbuffered; the parent kills it at named crash points
/// and at random moments, and checks after each death that nothing acknowledged was lost (I1), the log
/// verifies (I2, I6), and the instance applied nothing twice (I3) or out of order (I4).
extension Commands {
    /// `outbox crash-worker <log> --seed S --writes N --instance FILE` (the harness's child).
    static func crashWorker(_ words: [String]) async throws -> Exit {
        let args = try Arguments(
            command: "crash-worker", words: words, options: ["seed", "writes", "instance", "map-size"], flags: ["enqueue-only"])
        let path = try args.positionals("log")[0]
        let seed = try args.unsigned("seed") ?? 1
        let writes = Int(try args.unsigned("writes") ?? 30)
        let instance = SimulatedInstance()
        if let file = args.option("instance"), let text = try? String(contentsOfFile: file, encoding: .utf8) {
            for line in text.split(separator: "\n") {
                let words = line.split(separator: " ").map(String.init)
                guard words.count == 3, let origin = Origin(words[0]), let id = UInt64(words[1]),
                    let key = IdempotencyKey(words[2])
                else { continue }
                instance.remember(origin: origin, id: WriteID(id), idempotencyKey: key)
            }
        }
        instance.onApply { applied, key in report("APPLIED \(applied.origin) \(applied.id) \(key)") }
        do {
            let mapSize = try args.unsigned("map-size").map(Int.init)
            try await work(
                path, seed: seed, writes: writes, enqueueOnly: args.flag("enqueue-only"), mapSize: mapSize, instance: instance)
        } catch let error as OutboxError {
            // Under injected I/O errors (`fiu-run`) a commit fails: the worker says how, typed, and stops.
            report("ERROR \(error.code)")
            return .failure
        }
        report("DONE")
        return .success
    }

    private static func work(
        _ path: String, seed: UInt64, writes: Int, enqueueOnly: Bool, mapSize: Int?, instance: SimulatedInstance
    ) async throws {
        var configuration = OutboxConfiguration(autoSync: false, batchSize: 3)
        configuration.crashPlan = try CrashPlan.fromEnvironment()
        if let mapSize { configuration.initialMapSize = mapSize }
        configuration.random = SeededRandomSource(seed: seed &* 0x9E37_79B9 &+ UInt64(getpid()))
        let outbox = try OutboxClient.open(path: path, transport: instance, configuration: configuration)
        try await outbox.settleSession(user: "alice", accessToken: AccessToken.unsigned(subject: "alice"))
        let rng = SeededRandomSource(seed: seed &+ UInt64(getpid()))
        for step in 0..<writes {
            // Every tenth step rebuilds, every tenth (offset) switches user and every tenth (offset
            // again) compacts, so each named crash point is passed at least three times in a 40-step run.
            if !enqueueOnly, step % 10 == 7 {
                _ = try await outbox.queue.takeAnswered()
                // The horizon: every event so far, or one drawn at random (R8.5).
                let last = try outbox.log.lastSequence()
                try await outbox.compact(before: rng.next(below: 3) == 0 ? 1 + rng.next(below: last + 1) : nil)
                continue
            }
            let roll = enqueueOnly ? 0 : step % 10 == 9 ? 95 : step % 10 == 4 ? 99 : rng.next(below: 100)
            switch roll {
            case 0..<70:
                let key = Int64(1 + rng.next(below: 8))
                let id = try await outbox.enqueue(
                    .upsert(into: "todos", key: ["id": .int(key)], body: ["n": .int(Int64(rng.next(below: 1000)))]))
                report("ACK \(id) \(key)")
            case 70..<94:
                if rng.next(below: 10) == 0 { instance.script([.lostResponse]) }
                try await syncAndReport(outbox)
            case 94..<97:
                try await outbox.rebuild()
            default:
                try await outbox.settleSession(user: "bob", accessToken: AccessToken.unsigned(subject: "bob"))
                try await outbox.settleSession(user: "alice", accessToken: AccessToken.unsigned(subject: "alice"))
            }
        }
        if writes == 0 {
            for _ in 0..<50 where try await syncAndReport(outbox).remainingCount > 0 {}
        }
    }

    @discardableResult
    private static func syncAndReport(_ outbox: OutboxClient) async throws -> SyncReport {
        let sync = try await outbox.sync()
        for verdict in sync.verdicts { report("VERDICT \(verdict.id) \(verdict.kind.rawValue)") }
        return sync
    }

    /// One line on standard output, written at once (no buffer a kill could lose).
    private static func report(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    /// `outbox crash [--kills M] [--seed S]`: the named crash points × {1, 2, 3}, then M random kills.
    static func crash(_ words: [String]) async throws -> Exit {
        let args = try Arguments(command: "crash", words: words, options: ["kills", "seed", "points"], flags: [])
        let kills = Int(try args.unsigned("kills") ?? 100)
        let seed = try args.unsigned("seed") ?? 1
        let root = TemporaryFolder(prefix: "outbox-crash", created: true)
        defer { root.remove() }
        var tally = CrashTally()
        for point in try crashPoints(args) { try killAt(point, root: root.path, seed: seed, &tally) }
        let rng = SeededRandomSource(seed: seed)
        let cycles = CrashRun(folder: root.path + "/random", seed: seed)
        for cycle in 0..<kills {
            let delay = rng.next(below: 10) == 0 ? 60 + rng.next(below: 240) : rng.next(below: 60)
            // Every other cycle starts from a 32 KiB map (TESTING.md §2, a tiny map): the map grows under the kills.
            if try cycles.run(writes: 30, killAfterMilliseconds: Int(delay), mapSize: cycle % 2 == 1 ? 32 << 10 : nil) {
                tally.killed += 1
            }
            tally.problems += cycles.check(final: false).map { "random kill \(cycle): \($0)" }
            if !tally.problems.isEmpty { break }
        }
        try cycles.finish()
        tally.problems += cycles.check().map { "random kills: \($0)" }
        tally.count(cycles)
        try runTwoAtOnce(root: root.path, seed: seed, &tally)
        try copyDuringADrain(root: root.path, seed: seed, rng: rng, &tally)
        try underIOErrors(root: root.path, seed: seed, &tally)
        say(
            "named points: \(tally.pointsReached) of \(tally.pointsRun) reached and killed"
                + (tally.unreached.isEmpty ? "" : " (the workload did not reach \(tally.unreached.joined(separator: ", ")))"))
        say(
            "\(tally.acknowledged) writes acknowledged, \(tally.applied) applied (a write can be applied with its acknowledgement lost to the kill)"
        )
        for problem in tally.problems.prefix(30) { say("  " + problem) }
        let lost = tally.problems.filter { $0.contains("I1") }.count
        say(
            "crash: \(tally.pointsRun) points, \(kills) random kill cycles, \(tally.killed) kills, \(lost) lost"
                + (tally.problems.isEmpty ? "" : ", \(tally.problems.count) problems"))
        return tally.problems.isEmpty ? .success : .notSo
    }

    /// The crash points `--points` names (every one when it is not given).
    private static func crashPoints(_ args: Arguments) throws -> [CrashPoint] {
        guard let list = args.option("points") else { return CrashPoint.allCases }
        return try list.split(separator: ",", omittingEmptySubsequences: false).map { label throws(UsageError) in
            guard let point = CrashPoint(rawValue: String(label)) else {
                throw UsageError(
                    message:
                        "--points: no crash point '\(label)'; the points are \(CrashPoint.allCases.map(\.rawValue).joined(separator: ", "))"
                )
            }
            return point
        }
    }

    /// A worker killed at the first, second and third time it reaches `point`, each on a log of its own.
    private static func killAt(_ point: CrashPoint, root: String, seed: UInt64, _ tally: inout CrashTally) throws {
        for n in 1...3 {
            let harness = CrashRun(folder: root + "/\(point.rawValue)-\(n)", seed: seed)
            if try harness.run(writes: 40, crashPoint: "\(point.rawValue)#\(n)") {
                tally.killed += 1
                tally.pointsReached += 1
            } else {
                tally.unreached.append("\(point.rawValue)#\(n)")
            }
            try harness.finish()
            tally.problems += harness.check().map { "\(point.rawValue)#\(n): \($0)" }
            tally.pointsRun += 1
            tally.count(harness)
        }
    }

    /// Two processes enqueueing into one log at once: LMDB serializes their writers; every write of
    /// both is acknowledged once, under its own id, and the log verifies.
    private static func runTwoAtOnce(root: String, seed: UInt64, _ tally: inout CrashTally) throws {
        let shared = CrashRun(folder: root + "/two-processes", seed: seed)
        let problems = try shared.runTwoAtOnce(writes: 40)
        tally.problems += problems.map { "two processes: \($0)" }
        say(
            "two processes enqueueing into one log at once: \(shared.acked.count) writes acknowledged, \(problems.isEmpty ? "each once, under its own id; the log verifies" : "\(problems.count) problems")"
        )
    }

    /// Copies of data.mdb taken with no lock while a drain runs (TESTING.md §2).
    private static func copyDuringADrain(root: String, seed: UInt64, rng: SeededRandomSource, _ tally: inout CrashTally) throws {
        let copied = CrashRun(folder: root + "/copy-during-drain", seed: seed)
        let copies = try copied.drainWhileCopying(writes: 300, copies: 8, rng: rng)
        tally.problems += copies.problems.map { "copy during a drain: \($0)" }
        say(
            "copies of data.mdb taken during a drain: \(copies.verified) verified and held every acknowledged write, \(copies.refused) refused with a clear message"
                + (copies.problems.isEmpty ? "" : ", \(copies.problems.count) problems"))
        tally.count(copied)
    }

    /// Injected I/O errors (TESTING.md §2, Debian's fiu-utils): fdatasync, pwrite and writev fail at random.
    private static func underIOErrors(root: String, seed: UInt64, _ tally: inout CrashTally) throws {
        let faulty = CrashRun(folder: root + "/io-errors", seed: seed)
        if let io = try faulty.runWithIOErrors(workers: 25) {
            tally.problems += io.problems.map { "I/O errors: \($0)" }
            say(
                "workers under injected I/O errors: \(io.failed) of \(io.workers) stopped on a typed storage error, \(io.workers - io.failed) finished; \(io.acknowledged) writes acknowledged under them, none lost"
                    + (io.problems.isEmpty ? "" : ", \(io.problems.count) problems"))
        } else {
            say("workers under injected I/O errors: not run (fiu-run is not installed; scripts/setup installs fiu-utils)")
        }
        tally.count(faulty)
    }
}

/// What the crash harness counted and found.
private struct CrashTally {
    var problems: [String] = []
    var pointsRun = 0
    var pointsReached = 0
    var unreached: [String] = []
    var killed = 0
    var acknowledged = 0
    var applied = 0

    mutating func count(_ run: CrashRun) {
        acknowledged += run.acked.count
        applied += run.applied.count
    }
}

/// A worker that did not end within its limit: a hang, reported as one.
struct WorkerHung: Error, CustomStringConvertible {
    let pid: Int32
    let seconds: Double
    var description: String { "worker process \(pid) did not end within \(Int(seconds)) s: a hang (it was killed)" }
}

/// One log the harness kills workers on, and what their output said.
final class CrashRun {
    let folder: String
    let seed: UInt64
    private(set) var acked: [UInt64: Int64] = [:]
    private(set) var applied: [(origin: String, id: UInt64, key: String)] = []
    private var runs = 0

    init(folder: String, seed: UInt64) {
        self.folder = folder
        self.seed = seed
    }

    private var log: String { folder + "/log" }
    private var instanceFile: String { folder + "/instance.txt" }

    /// Runs one worker; true when it was killed (at its crash point, or by the timer).
    @discardableResult
    func run(writes: Int, crashPoint: String? = nil, killAfterMilliseconds: Int? = nil, mapSize: Int? = nil) throws -> Bool {
        let worker = try start(writes: writes, crashPoint: crashPoint, mapSize: mapSize)
        if let delay = killAfterMilliseconds {
            usleep(useconds_t(delay * 1000))
            worker.send(SIGKILL)
        }
        let ended = try end(of: worker)
        read(ended.output)
        return ended.signalled
    }

    /// Starts one worker on the log, with the instance's memory of what it applied.
    private func start(
        writes: Int, crashPoint: String? = nil, enqueueOnly: Bool = false, mapSize: Int? = nil, wrappedIn wrapper: [String] = []
    ) throws -> ChildProcess {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try applied.map { "\($0.origin) \($0.id) \($0.key)" }.joined(separator: "\n").write(
            toFile: instanceFile, atomically: true, encoding: .utf8)
        runs += 1
        return try worker(
            ["--seed", String(seed &+ UInt64(runs)), "--writes", String(writes), "--instance", instanceFile]
                + (enqueueOnly ? ["--enqueue-only"] : [])
                + (mapSize.map { ["--map-size", String($0)] } ?? []),
            crashPoint: crashPoint, wrappedIn: wrapper)
    }

    /// How long a worker may run: each ends within seconds, so one still running then has hung.
    static let workerLimit = 120.0

    /// The worker's end; a worker that hangs is killed and fails the harness (never a wait without end).
    private func end(of worker: ChildProcess) throws -> ChildProcess.Ended {
        if let ended = worker.wait(timeout: Self.workerLimit) { return ended }
        worker.send(SIGKILL)
        _ = worker.wait()
        throw WorkerHung(pid: worker.pid, seconds: Self.workerLimit)
    }

    /// Records what a worker's output says it acknowledged and the instance applied.
    private func read(_ data: Data) {
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
            let words = line.split(separator: " ").map(String.init)
            switch words.first {
            case "ACK" where words.count == 3: acked[UInt64(words[1]) ?? 0] = Int64(words[2]) ?? 0
            case "APPLIED" where words.count == 4: applied.append((words[1], UInt64(words[2]) ?? 0, words[3]))
            default: break
            }
        }
    }

    /// TESTING.md §2, a copy taken during a drain: `writes` writes are queued, then a worker drains them
    /// while `data.mdb` is copied byte for byte `copies` times (as `cp` or `adb pull` would, with no
    /// lock). Each copy is read by `outbox verify` in a process of its own: it must verify, and then hold
    /// every acknowledged write, or be refused with a message naming the copy (exit 1 or 2); never a
    /// crash or a hang. Returns how many copies verified, how many were refused, and what went wrong.
    func drainWhileCopying(writes: Int, copies: Int, rng: SeededRandomSource) throws -> (
        verified: Int, refused: Int, problems: [String]
    ) {
        read(try end(of: try start(writes: writes, enqueueOnly: true)).output)
        let drainer = try start(writes: 0)
        var paths: [String] = []
        for index in 0..<copies {
            usleep(useconds_t(rng.next(below: 15_000)))
            let copy = folder + "/copy-\(index)"
            try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: true)
            if let bytes = FileManager.default.contents(atPath: log + "/data.mdb"),
                FileManager.default.createFile(atPath: copy + "/data.mdb", contents: bytes)
            {
                paths.append(copy)
            }
        }
        read(try end(of: drainer).output)
        var verified = 0
        var refused = 0
        var problems: [String] = []
        for copy in paths {
            let ended = try verifyInItsOwnProcess(copy)
            let (status, message) = (ended.status, ended.text)
            if !ended.signalled && status == 0 {
                verified += 1
                let inspector = try LogInspector(path: copy)
                for id in acked.keys.sorted() where try inspector.history(of: WriteID(id)).first?.event.type != .writeQueued {
                    problems.append("I1: write \(id) was acknowledged before the copy and is not in it")
                }
            } else if !ended.signalled && (status == 1 || status == 2) && message.contains(copy) {
                refused += 1
            } else {
                problems.append(
                    "outbox verify on a copy ended with \(ended.signalled ? "signal" : "exit") \(status): \(message.prefix(200))"
                )
            }
        }
        return (verified, refused, problems + check(final: false))
    }

    /// TESTING.md §2, I/O errors: `workers` workers run the workload one after another under `fiu-run`,
    /// which makes `fdatasync`, `pwrite` and `writev` (LMDB's flush and page writes) fail at random, from
    /// one call in 500 to one in 5. Each must finish, or stop on a typed storage error (`ERROR storage`):
    /// never a crash. After each, in this process with no faults, nothing acknowledged is lost (I1) and
    /// the log verifies (I2, I6); at the end a worker with no faults drains the queue (I3, I4, I8).
    /// Returns nil when `fiu-run` is not installed.
    func runWithIOErrors(workers: Int) throws -> (workers: Int, failed: Int, acknowledged: Int, problems: [String])? {
        let fiu = "/usr/bin/fiu-run"
        guard FileManager.default.isExecutableFile(atPath: fiu) else { return nil }
        let probabilities = [0.2, 0.002, 0.01, 0.03, 0.1]  // the first worker likely fails while creating the log
        var failed = 0
        var problems: [String] = []
        for index in 0..<workers {
            let p = probabilities[index % probabilities.count]
            let faults = ["posix/io/sync/fdatasync", "posix/io/rw/pwrite", "posix/io/rw/writev"].flatMap {
                ["-c", "enable_random name=\($0),probability=\(p)"]
            }
            let ended = try end(of: try start(writes: 30, wrappedIn: [fiu, "-x", "-f", ""] + faults))
            read(ended.output)
            let last = ended.text.split(separator: "\n").last.map(String.init) ?? ""
            switch (ended.signalled, ended.status, last) {
            case (false, 0, "DONE"): break
            case (false, 2, "ERROR storage"): failed += 1
            default:
                let how = ended.signalled ? "signal \(ended.status)" : "exit \(ended.status)"
                problems.append("worker \(index) (p = \(p)) ended with \(how), its last line '\(last.prefix(80))'")
            }
            problems += check(final: false).map { "after worker \(index) (p = \(p)): \($0)" }
        }
        let acknowledged = acked.count
        try finish()
        return (workers, failed, acknowledged, problems + check())
    }

    /// `outbox verify <path>` in a process of its own: its status, how it ended, and what it printed.
    private func verifyInItsOwnProcess(_ path: String) throws -> ChildProcess.Ended {
        var environment = ProcessInfo.processInfo.environment
        environment["OUTBOX_READ_TIMEOUT"] = "60"  // a hang is a failure, not a ten-minute wait
        return try ChildProcess.runBlocking(ChildProcess.currentProgram, ["verify", path], environment: environment)
    }

    /// Starts a worker process on this log (this same program, `crash-worker`), its output piped back.
    private func worker(_ arguments: [String], crashPoint: String?, wrappedIn wrapper: [String] = []) throws -> ChildProcess {
        let program = ChildProcess.currentProgram
        var environment = ProcessInfo.processInfo.environment
        environment[CrashPlan.environmentVariable] = crashPoint
        // Its standard error is discarded: a worker that crashes ends at once, rather than with Swift's
        // backtracer attached, which a kill then leaves holding the output pipe (a crash seen as a hang).
        environment["SWIFT_BACKTRACE"] = "enable=no"
        let words = ["crash-worker", log] + arguments
        if let runner = wrapper.first {
            return try ChildProcess(
                URL(fileURLWithPath: runner), wrapper.dropFirst() + [program.path] + words, environment: environment,
                errors: .apart(.discard))
        }
        return try ChildProcess(program, words, environment: environment, errors: .apart(.discard))
    }

    /// Two enqueue-only workers on the log at the same time; returns what went wrong.
    func runTwoAtOnce(writes: Int) throws -> [String] {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let workers = try (1...2).map { index in
            try worker(
                ["--seed", String(seed &+ UInt64(index * 1000)), "--writes", String(writes), "--enqueue-only"], crashPoint: nil)
        }
        var ids: [UInt64] = []
        var problems: [String] = []
        for (index, worker) in workers.enumerated() {
            let ended = try end(of: worker)
            if !ended.succeeded { problems.append("worker \(index + 1) exited with \(ended.status)") }
            for line in ended.text.split(separator: "\n") where line.hasPrefix("ACK ") {
                let words = line.split(separator: " ")
                if let id = UInt64(words[1]) {
                    ids.append(id)
                    acked[id] = Int64(words[2]) ?? 0
                }
            }
        }
        if ids.count != 2 * writes { problems.append("\(ids.count) acknowledgements, not \(2 * writes)") }
        if Set(ids).count != ids.count { problems.append("two writes were given one id") }
        return problems + check(final: false)
    }

    /// A last worker with no crash point sends what is left.
    func finish() throws { try run(writes: 0) }

    /// I1, I2, I6 always; with `final`, every acknowledged write applied exactly once (I3, I8) and in
    /// order (I4).
    func check(final: Bool = true) -> [String] {
        var problems: [String] = []
        guard FileManager.default.fileExists(atPath: log + "/data.mdb") else {
            return acked.isEmpty ? [] : ["I1: the log is gone"]
        }
        do {
            let inspector: LogInspector
            do {
                inspector = try LogInspector(path: log)
            } catch let error as OutboxError where error.code == .needsRecovery {
                // A worker killed, or stopped by an I/O error, with commits only in the journal: the
                // next open for writing recovers them, as the app's next start would.
                try EventLog(path: log).close()
                inspector = try LogInspector(path: log)
            }
            let report = try inspector.verify()
            if !report.isOK { problems.append("I2/I6: \(report)") }
            for id in acked.keys.sorted() where try inspector.history(of: WriteID(id)).first?.event.type != .writeQueued {
                problems.append("I1: write \(id) was acknowledged and is not in the log")
            }
        } catch let error as OutboxError
            where error.code == .damaged && acked.isEmpty
            && (error.message.contains("holds no events") || error.message.contains("not an outbox log"))
        {
            // Killed (or failed on an I/O error) while the log was being created, before its databases
            // or its first event were committed: nothing was acknowledged, so nothing is lost, and the
            // next open completes the creation.
        } catch {
            problems.append("I2: the log cannot be read: \(error)")
        }
        var seen: [UInt64: Int] = [:]
        for (index, write) in applied.enumerated() {
            if seen[write.id] != nil { problems.append("I3: write \(write.id) was applied twice") }
            seen[write.id] = index
            // I4: every earlier write to the same row was applied before it (the workload never discards).
            if let key = acked[write.id] {
                for (other, otherKey) in acked where otherKey == key && other < write.id && (seen[other] == nil) {
                    problems.append("I4: write \(write.id) was applied before write \(other) to the same row")
                }
            }
        }
        if final {
            for id in acked.keys.sorted() where seen[id] == nil {
                problems.append("I8: write \(id) was acknowledged and never applied")
            }
        }
        return problems
    }
}
