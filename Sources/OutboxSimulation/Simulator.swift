internal import Foundation
internal import Outbox
internal import OutboxTesting
internal import Synchronization

/// What one seed of the simulation found.
package struct SimulationResult: Sendable {
    package let seed: UInt64
    package let steps: Int
    /// Invariants broken (empty when the seed passed), each naming its invariant (I1 … I12).
    package let failures: [String]
    /// A hash of everything that happened: the same seed gives the same hash (I11).
    package let traceHash: UInt64
    package let enqueued: Int
    package let applied: Int
    package let requests: Int
    package let crashes: Int
    /// Crashes that were power losses (`PowerLoss`): undoing the last commit, or, journaled, leaving
    /// LMDB's data file to be put back to the journal's head.
    package let powerLosses: Int
    /// Journaled power losses that took back commits written to the journal and not flushed.
    package let journalCuts: Int
    /// Compactions that archived something (R8.5).
    package let compactions: Int
    package let rates: String

    package var passed: Bool { failures.isEmpty }
}

/// The deterministic simulation of TESTING.md §1: per seed, a random workload of users, writes and
/// queue calls against the simulated instance behind a faulty network, with crashes, on a simulated
/// clock; then a healing phase; every invariant checked against the simulator's own record.
package enum Simulator {
    /// The default number of steps per seed.
    package static let defaultSteps = 200

    /// `journaled`: the log commits through a journal (`OutboxConfiguration.journalIsSimulated`), and
    /// each power loss puts LMDB back to the journal's head.
    package static func run(seed: UInt64, steps: Int = defaultSteps, journaled: Bool = false) async -> SimulationResult {
        let folder = TemporaryFolder(prefix: "outbox-sim-\(seed)").path
        // OUTBOX_SIM_KEEP=1 keeps a failing seed's log for `outbox log` and `outbox history`.
        let keep = ProcessInfo.processInfo.environment["OUTBOX_SIM_KEEP"] != nil
        var run = SimulationRun(seed: seed, folder: folder, journaled: journaled)
        var failures: [String] = []
        do {
            try await run.start()
            for step in 0..<steps {
                try await run.step(step)
                if run.failures.count > 0 { break }
            }
            if run.failures.isEmpty { try await run.heal() }
            if run.failures.isEmpty { try await run.checkEnd() }
        } catch {
            run.failures.append("an unexpected error at step \(run.stepIndex): \(error)")
        }
        // Closing ends the events streams, which I10 then reads to their end.
        run.close()
        await run.checkEventCanaries()
        failures = run.failures + run.transport.state.withLock { $0.violations }
        if keep && !failures.isEmpty {
            failures.append("the log is kept in \(folder)")
        } else {
            try? FileManager.default.removeItem(atPath: folder)
        }
        let trace = run.transport.state.withLock { $0.trace.hash } ^ run.trace.hash
        return SimulationResult(
            seed: seed, steps: steps, failures: Array(failures.prefix(20)), traceHash: trace, enqueued: run.writes.count,
            applied: run.transport.instance.applied.count, requests: run.requestCount,
            crashes: run.crashes, powerLosses: run.powerLosses, journalCuts: run.journalCuts, compactions: run.compactions,
            rates: run.rates.description)
    }
}

/// The committed list of seeds the simulation once failed on: `seed steps` a line, `#` comments.
package enum RegressionSeeds {
    package struct Malformed: Error, CustomStringConvertible {
        package let line: String
        package var description: String { "'\(line)' is not 'seed steps'" }
    }

    package static func parse(_ text: String) throws -> [(seed: UInt64, steps: Int)] {
        try text.split(separator: "\n").compactMap { line in
            let words = line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0].split(separator: " ")
            if words.isEmpty { return nil }
            guard let seed = UInt64(words[0]), words.count <= 2 else { throw Malformed(line: String(line)) }
            let steps = words.count == 2 ? Int(words[1]) : Simulator.defaultSteps
            guard let steps, steps > 0 else { throw Malformed(line: String(line)) }
            return (seed, steps)
        }
    }
}

/// One write as the simulator recorded it when its enqueue returned.
struct SimWrite {
    var id: WriteID
    var user: String
    var table: String
    var key: JSONValue
    var body: JSONValue
    /// What it depends on in the simulator's own view: its dependsOn, and earlier writes of its user to
    /// the same row the simulator did not know to be settled (a subset of the library's `follows`).
    var dependencies: [WriteID]
    /// No dependsOn, no atomic group, and no earlier write of its user to its row at all: nothing the
    /// library could make it wait for, so it is sendable from its enqueue until it is first sent (I4).
    var isFree: Bool
    /// Enqueued in an atomic group: it may wait on what another member waits on (R4.5).
    var grouped: Bool
    /// How many requests the library had made when its enqueue returned to the simulator.
    var enqueuedAtRequest: Int
}

/// When the app took a write out of the queue, as the simulator saw it.
struct WriteTakenOut {
    var applied: Int
    var request: Int
}

struct SimulationRun {
    let seed: UInt64
    let folder: String
    var rng: SplitMix64
    let rates: FaultRates
    let clock = ManualClock()
    let random: SeededRandomSource
    let transport: FaultyTransport
    var configuration: OutboxConfiguration
    var client: OutboxClient?
    var users: [String] = []
    var user: String?
    var tokenSerial = 0
    var writes: [WriteID: SimWrite] = [:]
    var order: [WriteID] = []
    /// Writes the app took out (discard, withdraw, clear), and writes those calls refused for good
    /// (which settle as a write taken out does, R3.1): how many writes the instance had applied then,
    /// and how many requests the library had made when the call began (requests from then on may treat
    /// the write as settled, I4).
    var removed: [WriteID: WriteTakenOut] = [:]
    /// Answered writes the app took or forgot: each must have been applied.
    var taken: Set<WriteID> = []
    var failures: [String] = []
    var trace = Trace()
    var crashes = 0
    var compactions = 0
    /// Crashes that undid a commit (`PowerLoss`), drawn from a generator of their own so that the
    /// workloads of seeds recorded before the storage model existed stay as they were.
    var powerLosses = 0
    var journalCuts = 0
    var storageRng: SplitMix64
    /// The shape of this seed's row keys, and its generator (for `mixed`), apart from `rng` for the same
    /// reason: every shape gives the workload of the integer keys the seeds were recorded with.
    let keyShape: RowKeyShape
    var keyRng: SplitMix64
    /// Draws the compactions and their horizons: a stream of its own, so the other draws of a seed are
    /// what they were before compaction was simulated.
    var compactionRng: SplitMix64
    /// Draws for `cancel` (R6.6), apart from `rng` so that adding it moved no recorded seed's workload.
    var cancelRng: SplitMix64
    var stepIndex = 0
    var eventTexts: [Task<[String], Never>] = []
    var errorTexts: [String] = []
    var statusTexts: [String] = []
    var currentToken: String?

    init(seed: UInt64, folder: String, journaled: Bool) {
        self.seed = seed
        self.folder = folder
        var rng = SplitMix64(seed: seed)
        storageRng = SplitMix64(seed: seed ^ 0x504F_5745_524C_4F53)
        keyRng = SplitMix64(seed: seed ^ 0x524F_574B_4559_5321)
        compactionRng = SplitMix64(seed: seed ^ 0x434F_4D50_4143_5421)
        cancelRng = SplitMix64(seed: seed ^ 0x4341_4E43_454C_2121)
        keyShape = RowKeyShape.allCases[keyRng.below(RowKeyShape.allCases.count)]
        rates = FaultRates(&rng)
        transport = FaultyTransport(rng: SplitMix64(seed: rng.next()), rates: rates, clock: clock)
        random = SeededRandomSource(seed: rng.next())
        var configuration = OutboxConfiguration(
            autoSync: rng.chance(0.5), maxRefusals: 2 + rng.below(4), batchSize: 1 + rng.below(6), durability: .noSync)
        configuration.clock = clock
        configuration.random = random
        configuration.powerLossIsSimulated = true
        configuration.journalIsSimulated = journaled
        if rng.chance(0.1) { configuration.initialMapSize = 256 << 10 }
        self.configuration = configuration
        users = (0..<(1 + rng.below(4))).map { "user\($0)" }
        self.rng = rng
    }

    // MARK: - Lifecycle

    mutating func start() async throws {
        try open()
        trace.add(
            "config autoSync=\(configuration.autoSync) batch=\(configuration.batchSize) max=\(configuration.maxRefusals) users=\(users.count) keys=\(keyShape)"
        )
    }

    private mutating func open() throws {
        let client = try OutboxClient.open(path: folder, transport: transport, configuration: configuration)
        self.client = client
        let events = client.events
        eventTexts.append(
            Task {
                var texts: [String] = []
                for await event in events { texts.append("\(event)") }
                return texts
            })
    }

    func close() {
        client?.close()
    }

    var outbox: OutboxClient { client! }

    var requestCount: Int { transport.state.withLock { $0.requestLog.count } }

    // MARK: - Steps

    mutating func step(_ index: Int) async throws {
        stepIndex = index
        if rng.chance(rates.crash) { try await crash() }
        let roll = rng.below(100)
        switch roll {
        case 0..<34: try await enqueue()
        case 34..<38: try await enqueueGroup()
        case 38..<52: try await sync()
        case 52..<62: try await advance(seconds: [0.5, 1, 2, 5, 30, 120][rng.below(6)])
        case 62..<67: try await signIn(users[rng.below(users.count)])
        case 67..<69: try await signOut()
        case 69..<71: expireToken()
        case 71..<74: await network()
        case 74..<78: try await release()
        case 78..<81: try await withdraw()
        case 81..<85: try await discard()
        case 85..<89: try await takeOrForget()
        case 89..<90: try await clear()
        case 90..<92: try await rebuild()
        default: try await advance(seconds: 0)
        }
        await outbox.idle()
        if compactionRng.chance(0.03) { try await compact() }
        transport.state.withLock { $0.checkTokens() }
        statusTexts.append("\(outbox.syncStatus.value)")
        if index % 25 == 24 { try await verify("I6 (every 25 steps)") }
    }

    private mutating func call<R>(_ what: String, _ body: (OutboxClient) async throws -> R) async throws -> R? {
        let client = outbox
        do {
            let result = try await body(client)
            trace.add("\(what) ok")
            return result
        } catch let error as OutboxError {
            errorTexts.append("\(error)")
            trace.add("\(what) \(error.code)")
            let expected: Set<OutboxError.Code> = [.noUser, .notFound, .networkDisabled, .rowReadFailed, .invalidWrite]
            if !expected.contains(error.code) { failures.append("step \(stepIndex): \(what) threw \(error.code): \(error)") }
            return nil
        }
    }

    private mutating func newWrite() -> (Write, deps: [WriteID]) {
        let table = ["todos", "lists"][rng.below(2)]
        let key = keyShape.key(row: 1 + rng.below(6), &keyRng)
        let ops: [WriteOperation] = [.insert, .update, .upsert, .delete, .custom("complete")]
        let op = ops[rng.below(ops.count)]
        let body: JSONValue = op == .delete ? [:] : ["title": .string("t\(rng.below(1000))")]
        var explicit: [WriteID] = []
        if let user, rng.chance(0.2) {
            let own = order.filter { writes[$0]!.user == user }
            if !own.isEmpty { explicit = [own[rng.below(own.count)]] }
        }
        return (Write(table: table, operation: op, key: key, body: body, dependsOn: explicit), explicit)
    }

    /// Applied, taken out, or refused for good (R3.1), as far as the simulator saw.
    private func settledInMyView(_ id: WriteID) -> Bool {
        removed[id] != nil || transport.instance.applied.contains { $0.id == id }
    }

    private mutating func record(_ id: WriteID, _ write: Write, explicit: [WriteID], grouped: Bool = false) {
        guard let user else { return }
        let sameRowEver = order.filter { other in
            let w = writes[other]!
            return w.user == user && w.table == write.table && w.key == write.key
        }
        let sameRow = sameRowEver.filter { !settledInMyView($0) }
        writes[id] = SimWrite(
            id: id, user: user, table: write.table, key: write.key, body: write.body,
            dependencies: Array(Set(explicit + sameRow)).sorted(),
            isFree: explicit.isEmpty && sameRowEver.isEmpty && !grouped, grouped: grouped, enqueuedAtRequest: requestCount)
        order.append(id)
        transport.state.withLock { $0.owners[id] = user }
    }

    mutating func enqueue() async throws {
        let (write, explicit) = newWrite()
        guard let id = try await call("enqueue", { outbox in try await outbox.enqueue(write) }) else { return }
        if user == nil { failures.append("I1: an enqueue with no user signed in returned \(id)") }
        record(id, write, explicit: explicit)
    }

    mutating func enqueueGroup() async throws {
        let group = (0..<(2 + rng.below(2))).map { _ in newWrite() }
        guard
            let ids = try await call(
                "enqueueGroup", { outbox in try await outbox.enqueue(contentsOf: group.map(\.0), atomic: true) })
        else { return }
        for (id, (write, explicit)) in zip(ids, group) { record(id, write, explicit: explicit, grouped: true) }
    }

    mutating func sync() async throws {
        transport.state.withLock { $0.appSyncRunning = true }
        let table = rng.chance(0.2) ? "todos" : nil
        let report = try await call("sync", { outbox in try await outbox.sync(table: table) })
        transport.state.withLock { $0.appSyncRunning = false }
        if let report { trace.add("report \(report.syncedCount) \(report.rejectedCount) \(report.remainingCount)") }
    }

    mutating func advance(seconds: Double) async throws {
        let target = clock.now().adding(seconds: seconds)
        while let due = clock.nextDue, due <= target {
            clock.set(due)
            await outbox.idle()
        }
        clock.set(target)
    }

    mutating func signIn(_ name: String) async throws {
        tokenSerial += 1
        let token = Self.token(subject: name, serial: tokenSerial)
        transport.state.withLock { state in
            state.tokenUsers[token] = name
            state.validTokens.insert(token)
        }
        if try await call("signIn", { outbox in try await outbox.settleSession(user: name, accessToken: token) }) != nil {
            user = name
            currentToken = token
        }
    }

    /// A JWT-shaped token naming `subject`, with a canary in its signature (I10).
    static func token(subject: String, serial: Int) -> String {
        func base64URL(_ text: String) -> String {
            Data(text.utf8).base64EncodedString().replacingOccurrences(of: "=", with: "")
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        }
        return base64URL(#"{"alg":"HS256"}"#) + "." + base64URL(#"{"sub":"\#(subject)","n":\#(serial)}"#)
            + ".TOKEN-CANARY-\(serial)"
    }

    mutating func signOut() async throws {
        if try await call("signOut", { outbox in try await outbox.settleSession(user: nil, accessToken: nil) }) != nil {
            user = nil
            currentToken = nil
        }
    }

    mutating func expireToken() {
        guard let token = currentToken else { return }
        transport.state.withLock { _ = $0.validTokens.remove(token) }
        trace.add("expire")
    }

    mutating func network() async {
        switch rng.below(4) {
        case 0: await outbox.disableNetwork()
        case 1: await outbox.enableNetwork()
        case 2: outbox.connectivityChanged(online: false)
        default: outbox.connectivityChanged(online: true)
        }
    }

    private mutating func pick(_ matching: (QueuedWrite) -> Bool) async throws -> QueuedWrite? {
        guard user != nil, let all = try await call("all", { outbox in try await outbox.queue.all() }) else { return nil }
        let candidates = all.filter(matching)
        return candidates.isEmpty ? nil : candidates[rng.below(candidates.count)]
    }

    mutating func release() async throws {
        guard let write = try await pick({ ["refused", "blocked", "dead"].contains($0.state.name) }) else { return }
        let id = write.id
        _ = try await call("release", { outbox in try await outbox.queue.release(id) })
    }

    mutating func withdraw() async throws {
        guard let write = try await pick({ $0.state.name == "blocked" }) else { return }
        let id = write.id
        let before = requestCount
        let appliedBefore = transport.instance.applied.count
        if case .withdrawn? = try await call("withdraw", { outbox in try await outbox.queue.withdraw(id) }) {
            removed[write.id] = WriteTakenOut(applied: transport.instance.applied.count, request: before)
            try noteRefusalsForGood(WriteTakenOut(applied: appliedBefore, request: before))
        }
    }

    mutating func discard() async throws {
        guard let write = try await pick({ ["refused", "dead"].contains($0.state.name) }) else { return try await cancel() }
        let withDependents = rng.chance(0.5)
        let id = write.id
        let before = requestCount
        let appliedBefore = transport.instance.applied.count
        if try await call("discard", { outbox in try await outbox.queue.discard(id, withDependents: withDependents) }) == true {
            if removed[write.id] == nil {
                removed[write.id] = WriteTakenOut(applied: transport.instance.applied.count, request: before)
            }
            try noteRefusalsForGood(WriteTakenOut(applied: appliedBefore, request: before))
        }
    }

    /// With nothing to discard, now and then the app's undo of a pending write (R6.6): it leaves the
    /// queue only when nothing has sent it, and takes the writes that named it in `dependsOn` with it.
    mutating func cancel() async throws {
        guard user != nil, cancelRng.chance(0.5),
            let pending = try await call("all", { outbox in try await outbox.queue.all() })?.filter({ $0.state == .pending }),
            !pending.isEmpty
        else { return }
        let id = pending[cancelRng.below(pending.count)].id
        let before = requestCount
        let appliedBefore = transport.instance.applied.count
        if try await call("cancel", { outbox in try await outbox.queue.cancel(id) }) == true {
            // The write left, and with it the rest of its atomic group, if it is in one.
            let left = Set(pending.map(\.id)).subtracting(try await outbox.queue.all().map(\.id))
            for gone in left where removed[gone] == nil {
                removed[gone] = WriteTakenOut(applied: transport.instance.applied.count, request: before)
            }
            try noteRefusalsForGood(WriteTakenOut(applied: appliedBefore, request: before))
        }
    }

    /// A withdraw or a discard with dependents refuses the writes that waited on it for good: from then
    /// on they settle their row and their dependents as a write taken out does (R3.1), so later writes to
    /// the same row go. They count as taken out from the moment the call began.
    private mutating func noteRefusalsForGood(_ at: WriteTakenOut) throws {
        for write in try outbox.everyWrite() where write.state.isRefusedForGood && removed[write.id] == nil {
            removed[write.id] = at
        }
    }

    mutating func takeOrForget() async throws {
        guard user != nil else { return }
        if rng.chance(0.5) {
            if let answers = try await call("takeAnswered", { outbox in try await outbox.queue.takeAnswered() }) {
                taken.formUnion(answers.map(\.id))
            }
        } else {
            let before = Set(try await outbox.queue.all().map(\.id))
            _ = try await call("forgetAnswered", { outbox in try await outbox.queue.forgetAnswered() })
            let after = Set(try await outbox.queue.all().map(\.id))
            taken.formUnion(before.subtracting(after))
        }
    }

    mutating func clear() async throws {
        guard let user else { return }
        let held = try await outbox.queue.all().map(\.id)
        let before = requestCount
        if try await call("clearLocalData", { outbox in try await outbox.clearLocalData(user: user) }) != nil {
            for id in held where !(try await outbox.queue.all().contains { $0.id == id }) && removed[id] == nil {
                removed[id] = WriteTakenOut(applied: transport.instance.applied.count, request: before)
            }
        }
    }

    /// Compacts the log before a horizon drawn at random (every event so far, half the time), then
    /// checks it verifies, archive included (R8.5).
    mutating func compact() async throws {
        let last = try outbox.log.lastSequence()
        let horizon = compactionRng.chance(0.5) ? nil : 1 + UInt64(compactionRng.below(Int(last) + 1))
        if try await call("compact", { outbox in try await outbox.compact(before: horizon) })?.segment != nil { compactions += 1 }
        try await verify("I6 (after a compaction)")
    }

    mutating func rebuild() async throws {
        _ = try await call("rebuild", { outbox in try await outbox.rebuild() })
        try await verify("I6 (after a rebuild)")
    }

    /// Drops the client as a killed process would and opens a new one, signed in as before. Half the
    /// crashes are power losses, which also take back the last commit when it was a pass's, made
    /// without syncing the meta page (R2.3; `PowerLoss`).
    mutating func crash() async throws {
        crashes += 1
        await outbox.idle()
        let journaled = configuration.journalIsSimulated
        let undo = !journaled && storageRng.chance(0.5) && outbox.log.lastCommitMayBeUndoneByPowerLoss
        // A journaled log: a power loss leaves LMDB's pages after the journal's head anywhere (the next
        // open puts LMDB back to the head, its snapshot held: they are free pages there), and of the
        // commits in the journal those flushed, then any part of the rest.
        let unflushed = outbox.log.unflushedJournalCommits
        let powerLoss = journaled && storageRng.chance(0.5)
        let cut = unflushed.map { $0.lowerBound + storageRng.below($0.count + 1) }
        outbox.log.leaveJournalOnClose()
        outbox.close()
        client = nil
        if powerLoss {
            powerLosses += 1
            trace.add("power loss")
            if let cut, let unflushed, cut < unflushed.upperBound {
                try PowerLoss.loseJournal(folder: folder, from: cut, to: unflushed.upperBound)
                journalCuts += 1
                trace.add("journal cut at \(cut) of \(unflushed)")
            }
        }
        if undo {
            try PowerLoss.undoLastCommit(file: folder + "/data.mdb")
            powerLosses += 1
            // The undone commit recorded the last request's answer: a Retry-After in it is forgotten too (I9).
            transport.state.withLock { $0.retryAfterUntil = $0.retryAfterBeforeLastAnswer }
            trace.add("power loss")
        }
        try open()
        trace.add("crash")
        if let user, let token = currentToken {
            _ = try await call("resettle", { outbox in try await outbox.settleSession(user: user, accessToken: token) })
        }
        await outbox.idle()
        try await checkDurable()
        try await verify("I6 (after a reopen)")
    }

    // MARK: - Invariants

    /// I1: every write whose enqueue returned is in the log, as it was made.
    mutating func checkDurable() async throws {
        for id in order {
            let write = writes[id]!
            let history = try outbox.log.history(of: id)  // every user's: the audit view
            guard case .writeQueued(let queued)? = history.first?.event, queued.user == write.user, queued.table == write.table,
                queued.key == write.key, queued.body == write.body
            else {
                let found = history.map { "\($0.sequence) \($0.event.type.name)" }.joined(separator: ", ")
                failures.append("I1: write \(id) is not in the log as it was made (its history: [\(found)])")
                return
            }
        }
    }

    mutating func verify(_ context: String) async throws {
        let report = try await outbox.verify()
        if !report.isOK { failures.append("\(context): \(report)") }
    }

    /// Faults off, every user signed in once with a valid token, network on, until quiet.
    mutating func heal() async throws {
        transport.state.withLock { state in
            state.faultsOn = false
            state.retryAfterUntil = nil
        }
        await outbox.enableNetwork()
        outbox.connectivityChanged(online: true)
        for name in users {
            try await signIn(name)
            for _ in 0..<50 {
                await outbox.idle()
                transport.state.withLock { $0.appSyncRunning = true }
                let report = try await outbox.sync()
                transport.state.withLock { $0.appSyncRunning = false }
                if report.verdicts.isEmpty && report.stoppedBy == nil { break }
            }
            try await advance(seconds: 3600)
        }
        await outbox.idle()
    }

    /// I2, I3, I6, I7, I8, I10 at the end.
    mutating func checkEnd() async throws {
        transport.state.withLock { $0.checkTokens() }
        try await checkDurable()
        try await verify("I2/I6 (at the end)")
        let decisions = try outbox.log.checkDecisions()
        if !decisions.isSame { failures.append("I7: \(decisions)") }
        let applied = transport.instance.applied
        var appliedAt: [WriteID: Int] = [:]
        for (index, write) in applied.enumerated() {
            if appliedAt[write.id] != nil { failures.append("I3: write \(write.id) was applied twice") }
            appliedAt[write.id] = index
            guard let mine = writes[write.id] else {
                failures.append("I8: the instance applied write \(write.id), which was never enqueued")
                continue
            }
            for dependency in mine.dependencies {
                let before = appliedAt[dependency].map { $0 < index } ?? false
                let removedBefore = removed[dependency].map { $0.applied <= index } ?? false
                if !before && !removedBefore {
                    failures.append(
                        "I4: write \(write.id) was applied before write \(dependency), which it depends on, was settled")
                }
            }
        }
        checkOrderAtEverySend(appliedAt: appliedAt)
        let queue = try outbox.everyWrite()
        let held = Dictionary(uniqueKeysWithValues: queue.map { ($0.id, $0) })
        for id in order {
            if let write = held[id] {
                switch write.state {
                case .accepted, .merged, .conflicted:
                    if appliedAt[id] == nil {
                        failures.append("I8: write \(id) reads \(write.state.name) but the instance never applied it")
                    }
                case .pending:
                    if !write.waiting { failures.append("I8: write \(id) is still sendable after healing") }
                    // A write waits only behind one that still holds it: pending, refused (not for good),
                    // blocked or dead. Answered, taken out or refused for good hold nothing (R2.2, R3.1).
                    // Its dependencies are the simulator's and the library's own: a row's earlier write
                    // the instance applied from a duplicated copy after answering it blocked is settled
                    // in the simulator's view, and still holds the row in the library's.
                    if let mine = writes[id], !mine.grouped,
                        !(mine.dependencies + write.dependsOn + write.follows).contains(where: {
                            held[$0].map { !$0.state.isAnswered && !$0.state.isRefusedForGood } ?? false
                        })
                    {
                        failures.append("I8: write \(id) waits after healing, and nothing it depends on holds it")
                    }
                case .refused(let refusal):
                    if !refusal.isFinal { failures.append("I8: write \(id) is still refused (not final) after healing") }
                case .blocked, .dead:
                    break
                }
            } else if taken.contains(id) {
                if appliedAt[id] == nil {
                    failures.append("I8: write \(id) was taken as answered but the instance never applied it")
                }
            } else if removed[id] == nil {
                failures.append("I8: write \(id) left the queue and the simulator does not know how (lost)")
            }
        }
        try checkCanaries()
    }

    /// I4 (P3) at every request the library made, in order:
    /// - no write is sent before a write it depends on is settled (applied before the request came, or
    ///   taken out by a call begun before it) unless that write is ahead of it in the same request (R2.2,
    ///   R4.5);
    /// - no write's first send overtakes an earlier write of its user that was sendable then: a free
    ///   write (`SimWrite.isFree`) enqueued before the request, not taken out, and not sent yet (R4.1's
    ///   id order, R4.2).
    mutating func checkOrderAtEverySend(appliedAt: [WriteID: Int]) {
        let requests = transport.state.withLock { $0.requestLog }
        var firstSent: [WriteID: (request: Int, position: Int)] = [:]
        for (index, request) in requests.enumerated() {
            for (position, id) in request.writes.enumerated() where firstSent[id] == nil { firstSent[id] = (index, position) }
        }
        func takenOut(_ id: WriteID, by request: Int) -> Bool { removed[id].map { $0.request <= request } ?? false }
        for (index, request) in requests.enumerated() {
            for (position, id) in request.writes.enumerated() {
                guard let write = writes[id] else { continue }  // I5 names a write the simulator never enqueued
                for dependency in write.dependencies {
                    let applied = appliedAt[dependency].map { $0 < request.appliedBefore } ?? false
                    if !applied && !takenOut(dependency, by: index) && !request.writes[..<position].contains(dependency) {
                        failures.append(
                            "I4: request \(index) sent write \(id) before write \(dependency), which it depends on, was settled")
                        return
                    }
                }
                guard firstSent[id]! == (index, position) else { continue }
                for earlier in order where earlier.rawValue < id.rawValue {
                    guard let other = writes[earlier], other.user == write.user, other.isFree, other.enqueuedAtRequest <= index,
                        !takenOut(earlier, by: index)
                    else { continue }
                    if let sent = firstSent[earlier], sent.request < index || (sent.request == index && sent.position < position)
                    {
                        continue
                    }
                    failures.append(
                        "I4: request \(index) sent write \(id) for the first time ahead of write \(earlier), which was sendable")
                    return
                }
            }
        }
    }

    /// I10: token canaries appear nowhere; server-text canaries never in the status, events or errors.
    mutating func checkCanaries() throws {
        let data = FileManager.default.contents(atPath: folder + "/data.mdb") ?? Data()
        if data.range(of: Data("TOKEN-CANARY".utf8)) != nil { failures.append("I10: a token canary is in data.mdb") }
        let seen = statusTexts + errorTexts
        for text in seen where text.contains("TOKEN-CANARY") || text.contains("SERVER-CANARY") {
            failures.append("I10: a canary reached the status or an error: \(text.prefix(120))")
            return
        }
    }

    /// I10 over the events streams, once every client is closed.
    mutating func checkEventCanaries() async {
        for task in eventTexts {
            for text in await task.value where text.contains("CANARY") {
                failures.append("I10: a canary reached the events stream: \(text.prefix(120))")
                return
            }
        }
    }
}

/// The shapes of row key a seed uses (R2.2), one per seed: each is stored in `rows` in its own form
/// (decision 007), and a row must be told apart from every other and found again in each of them.
enum RowKeyShape: CaseIterable {
    /// `{"id": 3}`: ordered, integer form.
    case integer
    /// `{"id": "row-3"}`: ordered, string form.
    case string
    /// `{"list": 1, "id": 3}`: hashed form.
    case composite
    /// A string longer than the ordered form keeps: hashed form.
    case longString
    /// `{"id": 3}` or `{"id": "3"}`, drawn per write: two rows whose keys differ only in type.
    case mixed

    func key(row: Int, _ rng: inout SplitMix64) -> JSONValue {
        switch self {
        case .integer: return ["id": .int(Int64(row))]
        case .string: return ["id": .string("row-\(row)")]
        case .composite: return ["list": 1, "id": .int(Int64(row))]
        case .longString: return ["id": .string(String(repeating: "k", count: 80) + "\(row)")]
        case .mixed: return rng.chance(0.5) ? ["id": .int(Int64(row))] : ["id": .string("\(row)")]
        }
    }
}
