internal import Foundation
package import Outbox
internal import OutboxTesting
internal import Synchronization

/// Runs a scenario on a fresh log in a temporary folder against the simulated instance, on a simulated
/// clock from 2026-01-01T00:00:00Z (SCENARIOS.md), and returns its output document.
package struct ScenarioRunner {
    package init() {}

    /// A fresh folder for a run's log, under the temporary directory (not created).
    package static func temporaryFolder() -> String { TemporaryFolder(prefix: "outbox-scenario").path }

    /// The output document (`name`, `steps`, `final`, `failures`), from a log made in `folder` and
    /// removed when the run ends. Throws `ScenarioError` for a scenario that names a ref no step made.
    package func run(_ scenario: Scenario, in folder: String = ScenarioRunner.temporaryFolder()) async throws -> JSONValue {
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var run = try Run(scenario: scenario, folder: folder)
        return try await run.all()
    }
}

/// The client the crash handler drops: the instance calls it from inside a send.
private final class ClientSlot: Sendable {
    let client = Mutex<OutboxClient?>(nil)
    let crashed = Mutex(false)
    /// The reports of the automatic passes that did something, as the events stream told them, not
    /// yet put in a step's output.
    let automaticReports = Mutex<[SyncReport]>([])

    /// Puts `client` in the slot and collects its automatic passes' reports.
    func hold(_ client: OutboxClient) {
        client.listen { [self] event in
            if case .automaticPass(let report) = event, !report.verdicts.isEmpty || report.stoppedBy != nil {
                automaticReports.withLock { $0.append(report) }
            }
        }
        self.client.withLock { $0 = client }
    }

    func takeAutomaticReports() -> [SyncReport] {
        automaticReports.withLock { reports in
            defer { reports = [] }
            return reports
        }
    }

    func crash() {
        crashed.withLock { $0 = true }
        client.withLock { $0 }?.close()
    }
}

private struct Run {
    let scenario: Scenario
    let folder: String
    let clock = ManualClock()
    let random = SeededRandomSource(seed: 20_260_101)
    let instance = SimulatedInstance()
    let slot = ClientSlot()
    /// The open client; nil only while a crash drops it.
    var current: OutboxClient?
    var client: OutboxClient { current! }
    var refs: [String: WriteID] = [:]
    var names: [WriteID: String] = [:]
    var session: (user: String, token: String)?
    var signIns = 0
    var failures: [JSONValue] = []

    init(scenario: Scenario, folder: String) throws {
        self.scenario = scenario
        self.folder = folder
        let client = try Self.open(folder, scenario, clock, random, instance)
        current = client
        slot.hold(client)
        instance.onCrash { [slot] in slot.crash() }
        for table in scenario.unmadeTables { instance.cannotMake(table: table) }
    }

    private static func open(
        _ folder: String, _ scenario: Scenario, _ clock: ManualClock, _ random: SeededRandomSource, _ instance: SimulatedInstance
    ) throws -> OutboxClient {
        var configuration = OutboxConfiguration(
            autoSync: scenario.autoSync, maxRefusals: scenario.maxRefusals, batchSize: scenario.batchSize)
        configuration.clock = clock
        configuration.random = random
        return try OutboxClient.open(path: folder, transport: instance, configuration: configuration)
    }

    mutating func all() async throws -> JSONValue {
        var steps: [JSONValue] = []
        for (index, step) in scenario.steps.enumerated() {
            var output: [String: JSONValue] = ["index": .int(Int64(index)), "action": .string(step.action.name)]
            try await perform(step.action, index: index, into: &output)
            await client.idle()
            if slot.crashed.withLock({ $0 }) {
                output["crashed"] = true
                try await reopen()
            }
            let automatic = slot.takeAutomaticReports().map(render)
            if !automatic.isEmpty || step.action.name == "sync" || step.action.name == "advance" {
                output["autoPasses"] = .array(automatic)
            }
            if let expect = step.expect {
                var observed = output
                if case .object(let report)? = output["report"] { observed.merge(report) { mine, _ in mine } }
                for problem in Expectation.mismatches(expected: expect, observed: .object(observed), path: "") {
                    failures.append(.string("step \(index) (\(step.action.name)): \(problem)"))
                }
            }
            steps.append(.object(output))
        }
        let final = try await finalDocument()
        if let expect = scenario.expectFinal {
            for problem in Expectation.mismatches(expected: expect, observed: final, path: "final") {
                failures.append(.string(problem))
            }
        }
        client.close()
        return .object(["name": .string(scenario.name), "steps": .array(steps), "final": final, "failures": .array(failures)])
    }

    // MARK: - Steps

    private mutating func perform(_ action: Scenario.Action, index: Int, into output: inout [String: JSONValue]) async throws {
        switch action {
        case .signIn(let user, let subject):
            signIns += 1
            let token = AccessToken.unsigned(subject: subject, serial: signIns)
            session = (user, token)
            let outcome = await Self.outcome {
                try await client.settleSession(user: user, accessToken: token)
                return .bool(true)
            }
            output["result"] = outcome == .bool(true) ? nil : outcome
        case .signOut:
            session = nil
            try await client.settleSession(user: nil, accessToken: nil)
        case .enqueue(let spec):
            let write = try makeWrite(spec, step: index)
            var made: WriteID?
            let outcome = await Self.outcome {
                made = try await client.enqueue(write)
                return .bool(true)
            }
            if let made {
                name(made, spec.ref)
                output["id"] = .int(Int64(made.rawValue))
            }
            output["result"] = outcome == .bool(true) ? nil : outcome
        case .enqueueGroup(let specs):
            let writes = try specs.map { try makeWrite($0, step: index) }
            var made: [WriteID] = []
            let outcome = await Self.outcome {
                made = try await client.enqueue(contentsOf: writes, atomic: true)
                return .bool(true)
            }
            if outcome == .bool(true) {
                for (id, spec) in zip(made, specs) { name(id, spec.ref) }
                output["ids"] = .array(made.map { .int(Int64($0.rawValue)) })
            }
            output["result"] = outcome == .bool(true) ? nil : outcome
        case .respond(let answers):
            instance.script(answers)
        case .sync(let table):
            do {
                output["report"] = render(try await client.sync(table: table))
            } catch let error as OutboxError {
                output["result"] = .string(error.code.description)
            }
        case .advance(let seconds):
            if try await advance(seconds: seconds) { output["crashed"] = true }
        case .network(let word):
            switch word {
            case "disabled": await client.disableNetwork()
            case "enabled": await client.enableNetwork()
            case "offline": client.connectivityChanged(online: false)
            default: client.connectivityChanged(online: true)
            }
        case .crash:
            try await reopen()
        case .release, .releaseReason, .discard, .cancel, .explain, .withdraw, .takeAnswered, .forgetAnswered, .clearLocalData:
            try await performQueueCall(action, index: index, into: &output)
        }
    }

    /// The step's result: what `body` returned, or the code of the error it threw.
    private static func outcome(_ body: () async throws -> JSONValue) async -> JSONValue {
        do {
            return try await body()
        } catch let error as OutboxError {
            return .string(error.code.description)
        } catch {
            return .string("\(error)")
        }
    }

    /// Moves the clock on by `seconds`, letting what falls due on the way run; true when the client
    /// crashed there (it is open again).
    private mutating func advance(seconds: Double) async throws -> Bool {
        var crashed = false
        let target = clock.now().adding(seconds: seconds)
        while let due = clock.nextDue, due <= target {
            clock.set(due)
            await client.idle()
            if slot.crashed.withLock({ $0 }) {
                crashed = true
                try await reopen()
            }
        }
        clock.set(target)
        return crashed
    }

    /// A call of the queue's (or a sign-out's clearing), its result in `output`.
    private mutating func performQueueCall(_ action: Scenario.Action, index: Int, into output: inout [String: JSONValue])
        async throws
    {
        let queue = client.queue
        switch action {
        case .release(let ref):
            let id = try lookUp(ref, step: index)
            output["result"] = await Self.outcome { .bool(try await queue.release(id)) }
        case .releaseReason(let reason):
            output["result"] = await Self.outcome { .int(Int64(try await queue.release(reason: reason))) }
        case .discard(let ref, let withDependents):
            let id = try lookUp(ref, step: index)
            output["result"] = await Self.outcome { .bool(try await queue.discard(id, withDependents: withDependents)) }
        case .cancel(let ref):
            let id = try lookUp(ref, step: index)
            output["result"] = await Self.outcome { .bool(try await queue.cancel(id)) }
        case .explain(let ref):
            let id = try lookUp(ref, step: index)
            output["result"] = await Self.outcome { try await queue.explain(id).json(naming: { .string(self.ref(of: $0)) }) }
        case .withdraw(let ref):
            let id = try lookUp(ref, step: index)
            var row: JSONValue?
            output["result"] = await Self.outcome {
                switch try await queue.withdraw(id) {
                case .withdrawn(let held):
                    row = held
                    return .bool(true)
                case .notWithdrawn:
                    return .bool(false)
                }
            }
            if let row { output["row"] = row }
        case .takeAnswered:
            output["result"] = await Self.outcome { .array(try await queue.takeAnswered().map { .string(ref(of: $0.id)) }) }
        case .forgetAnswered:
            output["result"] = await Self.outcome { .int(Int64(try await queue.forgetAnswered())) }
        case .clearLocalData(let user):
            output["result"] = await Self.outcome {
                try await client.clearLocalData(user: user)
                return .bool(true)
            }
        default:
            break
        }
    }

    /// Drops the client as a killed process would (nothing more is recorded; the log is left as it is,
    /// and its file let go so this process can open it again) and opens a new one on the same log,
    /// signed in as before.
    private mutating func reopen() async throws {
        await client.idle()
        client.close()
        slot.client.withLock { $0 = nil }
        slot.crashed.withLock { $0 = false }
        current = nil
        let client = try Self.open(folder, scenario, clock, random, instance)
        current = client
        slot.hold(client)
        if let session { try await client.settleSession(user: session.user, accessToken: session.token) }
        await client.idle()
    }

    private mutating func name(_ id: WriteID, _ ref: String?) {
        let name = ref ?? "#\(id.rawValue)"
        refs[name] = id
        names[id] = name
    }

    private func ref(of id: WriteID) -> String { names[id] ?? "#\(id.rawValue)" }

    private func lookUp(_ ref: String, step: Int) throws -> WriteID {
        guard let id = refs[ref] else {
            throw ScenarioError(step: step, field: "ref", problem: "no earlier step enqueued a write \"\(ref)\"")
        }
        return id
    }

    private func makeWrite(_ spec: Scenario.WriteSpec, step: Int) throws -> Write {
        Write(
            table: spec.table, operation: WriteOperation(word: spec.op), key: spec.key, body: spec.body,
            baseVersion: spec.baseVersion,
            dependsOn: try spec.dependsOn.map { try lookUp($0, step: step) })
    }

    // MARK: - Output

    private func render(_ report: SyncReport) -> JSONValue { report.json(naming: { .string(ref(of: $0)) }) }

    private func finalDocument() async throws -> JSONValue {
        let writes = client.currentUser != nil ? try await client.queue.all() : try client.everyWrite()
        let queue: [JSONValue] = writes.map { write in
            var fields: [String: JSONValue] = [
                "ref": .string(ref(of: write.id)), "id": .int(Int64(write.id.rawValue)), "state": .string(write.state.name),
                "refusals": .int(Int64(write.refusals)), "waiting": .bool(write.waiting),
            ]
            if case .blocked(let reason, _) = write.state { fields["reason"] = .string(reason.rawValue) }
            return .object(fields)
        }
        let status = client.syncStatus.value
        var statusFields: [String: JSONValue] = [
            "network": .string(status.network.rawValue), "pendingCount": .int(Int64(status.pendingCount)),
            "rejectedCount": .int(Int64(status.rejectedCount)), "blockedCount": .int(Int64(status.blockedCount)),
            "heldBehindDeadOrBlockedCount": .int(Int64(status.heldBehindDeadOrBlockedCount)),
            "isSyncing": .bool(status.isSyncing), "lastSyncError": status.lastSyncError?.reportJSON ?? .null,
        ]
        if let at = status.lastSyncedAt { statusFields["lastSyncedAt"] = .string(at.description) }
        let verify = try await client.verify()
        return .object([
            "queue": .array(queue), "status": .object(statusFields),
            "instance": .object(["applied": .array(instance.applied.map { .string(ref(of: $0.id)) })]),
            "verify": .string(verify.problem ?? "ok"),
        ])
    }
}

/// `expect` against what a step showed: a field present must equal; objects compare by the fields
/// expected, arrays in order and length, numbers by value.
enum Expectation {
    static func mismatches(expected: JSONValue, observed: JSONValue?, path: String) -> [String] {
        let here = path.isEmpty ? "(step)" : path
        switch (expected, observed) {
        case (.object(let want), .object(let have)?):
            return want.keys.sorted().flatMap { key in
                mismatches(expected: want[key]!, observed: have[key], path: path.isEmpty ? key : "\(path).\(key)")
            }
        case (.array(let want), .array(let have)?):
            guard want.count == have.count else {
                return ["\(here) is \(JSONText.render(.array(have))), expected \(JSONText.render(.array(want)))"]
            }
            return zip(want, have).enumerated().flatMap { mismatches(expected: $1.0, observed: $1.1, path: "\(here)[\($0)]") }
        default:
            if let observed, let a = expected.number, let b = observed.number, a == b { return [] }
            if expected == observed || (expected == .null && observed == nil) { return [] }
            // A step shows `autoPasses` only when there were some: expecting none matches its absence.
            if expected == .array([]) && observed == nil { return [] }
            return ["\(here) is \(observed.map(JSONText.render) ?? "absent"), expected \(JSONText.render(expected))"]
        }
    }
}
