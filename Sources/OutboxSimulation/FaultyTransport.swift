internal import Outbox
internal import OutboxTesting
internal import Synchronization

/// The fault rates of one seed, drawn once (TESTING.md §1).
struct FaultRates: Sendable, CustomStringConvertible {
    var dropped = 0.0, lost = 0.0, duplicated = 0.0, delayed = 0.0
    var serverError = 0.0, retryAfter = 0.0, unauthorized = 0.0, permission = 0.0
    var refusal = 0.0, schemaCache = 0.0, failedAlone = 0.0, malformed = 0.0
    var crash = 0.0

    init(_ rng: inout SplitMix64) {
        dropped = rng.unit() * 0.3
        lost = rng.unit() * 0.3
        duplicated = rng.unit() * 0.2
        delayed = rng.unit() * 0.05
        serverError = rng.unit() * 0.2
        retryAfter = rng.unit() * 0.2
        unauthorized = rng.unit() * 0.1
        permission = rng.unit() * 0.1
        refusal = rng.unit() * 0.1
        schemaCache = rng.unit() * 0.05
        failedAlone = rng.unit() * 0.05
        malformed = rng.unit() * 0.05
        crash = rng.unit() * 0.02
    }

    init() {}

    var description: String {
        func p(_ x: Double) -> String { String(Int((x * 100).rounded())) + "%" }
        return
            "dropped \(p(dropped)), lost \(p(lost)), duplicated \(p(duplicated)), delayed \(p(delayed)), 5xx \(p(serverError)), "
            + "Retry-After \(p(retryAfter)), 401 \(p(unauthorized)), 42501 \(p(permission)), refusals \(p(refusal)), "
            + "schema cache \(p(schemaCache)), failed alone \(p(failedAlone)), malformed \(p(malformed)), crash \(p(crash))"
    }
}

/// The simulator's draws from its own generators (the client gets its own seeded source).
extension SplitMix64 {
    mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }
    mutating func below(_ n: Int) -> Int { n <= 0 ? 0 : Int(next() % UInt64(n)) }
    mutating func chance(_ p: Double) -> Bool { unit() < p }
}

/// The instance as the simulator serves it: the simulated instance behind a network that drops,
/// loses, duplicates and delays requests, and a server that fails in every way a real one does. It
/// checks, at every request, that the token belongs to the owner of every write (I5) and that no
/// library pass comes before a Retry-After deadline (I9).
final class FaultyTransport: OutboxTransport {
    struct State {
        var rng: SplitMix64
        var rates: FaultRates
        /// Draws for a transport that stops in the middle of a batch (writes not sent), a stream apart
        /// from `rng` so adding it moved no other fault of any seed.
        var stops: SplitMix64
        var faultsOn = true
        /// Owner of every write the simulator enqueued, by id.
        var owners: [WriteID: String] = [:]
        /// Every token the simulator issued, and whose it is; the ones still valid.
        var tokenUsers: [String: String] = [:]
        var validTokens: Set<String> = []
        var delayedCopies: [OutgoingBatch] = []
        var retryAfterUntil: Timestamp?
        /// `retryAfterUntil` before the last answer: what a power loss that undoes its commit leaves.
        var retryAfterBeforeLastAnswer: Timestamp?
        var appSyncRunning = false
        var violations: [String] = []
        /// Every request's writes and token, until checked.
        var sent: [([WriteID], String?)] = []
        /// Every request the library made, in order: its writes, and how many writes the instance had
        /// applied when it came (I4 at every send).
        var requestLog: [(writes: [WriteID], appliedBefore: Int)] = []
        var trace = Trace()
    }

    let instance = SimulatedInstance()
    let state: Mutex<State>
    let clock: ManualClock

    init(rng: SplitMix64, rates: FaultRates, clock: ManualClock) {
        state = Mutex(State(rng: rng, rates: rates, stops: SplitMix64(seed: rng.state ^ 0x6E6F_7453_656E_7421)))
        self.clock = clock
    }

    /// The instance forgets answers at or below each batch's acknowledged watermark (R8.9): a library
    /// that resent a write below it would meet a broken contract, which I12 records.
    var prunesByWatermark: Bool { true }

    func send(_ batch: OutgoingBatch, accessToken: String?) async -> RequestAnswer {
        let now = clock.now()
        let appliedBefore = instance.applied.count
        let plan = state.withLock { state -> Plan in
            state.requestLog.append((batch.writes.map(\.id), appliedBefore))
            state.trace.add("send \(batch.writes.map(\.id.rawValue)) \(batch.isAtomic)")
            // Checked after the step (I5): an automatic pass may send a write before its enqueue has
            // returned to the simulator.
            state.sent.append((batch.writes.map(\.id), accessToken))
            if let until = state.retryAfterUntil, now < until, !state.appSyncRunning {
                state.violations.append("I9: a library pass sent a request at \(now), before the Retry-After deadline \(until)")
            }
            return state.plan(batch, token: accessToken, now: now)
        }
        var delivered: [OutgoingBatch] = []
        for copy in plan.deliverFirst {
            instance.clearScript()
            _ = await instance.send(copy, accessToken: accessToken)
            delivered.append(copy)
        }
        let answer: RequestAnswer
        switch plan.kind {
        case .answer(let fixed):
            answer = fixed
        case .forward(let script, let duplicate):
            instance.clearScript()
            instance.script(script)
            answer = await instance.send(batch, accessToken: accessToken)
            instance.clearScript()
            if duplicate { _ = await instance.send(batch, accessToken: accessToken) }
        }
        state.withLock { state in
            state.trace.add("answer \(answer)")
            if case .contractBroken(let why) = answer, why.contains("acknowledged watermark") {
                state.violations.append("I12: the library sent a write again at or below its acknowledged watermark: \(why)")
            }
            state.retryAfterBeforeLastAnswer = state.retryAfterUntil
            if case .failed(let failure) = answer, let text = failure.retryAfter,
                let seconds = RetryAfterProbe.seconds(text, now: now), seconds > 0
            {
                let until = now.adding(seconds: seconds)
                state.retryAfterUntil = max(state.retryAfterUntil ?? until, until)
            }
        }
        return answer
    }

    func readRow(table: String, key: JSONValue, accessToken: String?) async throws -> JSONValue? {
        let fails = state.withLock { $0.faultsOn && $0.rng.chance($0.rates.dropped) }
        if fails { throw SimulatedInstance.ReadFailed() }
        return try await instance.readRow(table: table, key: key, accessToken: accessToken)
    }

    struct Plan {
        enum Kind {
            case answer(RequestAnswer)
            case forward(script: [SimulatedInstance.Scripted], duplicate: Bool)
        }
        var kind: Kind
        var deliverFirst: [OutgoingBatch] = []
    }
}

extension FaultyTransport.State {
    /// I5: every request's token belongs to the owner of every write in it; nothing is sent signed out.
    mutating func checkTokens() {
        for (ids, token) in sent {
            for id in ids {
                guard let owner = owners[id] else {
                    violations.append("I5: a request carries write \(id), which the simulator never enqueued")
                    continue
                }
                guard let token else {
                    violations.append("I5: write \(id) of \(owner) sent with no token (signed out)")
                    continue
                }
                if tokenUsers[token] != owner {
                    violations.append("I5/P7: write \(id) of \(owner) sent with \(tokenUsers[token] ?? "nobody")'s token")
                }
            }
        }
        sent = []
    }

    /// What happens to one request.
    mutating func plan(_ batch: OutgoingBatch, token: String?, now: Timestamp) -> FaultyTransport.Plan {
        var plan = FaultyTransport.Plan(kind: .forward(script: [], duplicate: false))
        if !delayedCopies.isEmpty, rng.chance(0.5) { plan.deliverFirst = [delayedCopies.removeFirst()] }
        guard faultsOn else { return plan }
        if let token, !validTokens.contains(token) {
            return FaultyTransport.Plan(
                kind: .answer(
                    .failed(
                        RequestFailure(
                            kind: .http, status: 401, code: "PGRST301", text: "JWT expired SERVER-CANARY", meaning: .tokenRefused)
                    )),
                deliverFirst: plan.deliverFirst)
        }
        func fail(
            _ status: Int, code: String? = nil, retryAfter: String? = nil, meaning: RequestFailure.Meaning? = nil
        ) -> FaultyTransport.Plan {
            FaultyTransport.Plan(
                kind: .answer(
                    .failed(
                        RequestFailure(
                            kind: .http, status: status, code: code, retryAfter: retryAfter, text: "SERVER-CANARY \(status)",
                            meaning: meaning))),
                deliverFirst: plan.deliverFirst)
        }
        if rng.chance(rates.dropped) {
            if rng.chance(rates.delayed * 4) { delayedCopies.append(batch) }
            return FaultyTransport.Plan(kind: .answer(.failed(RequestFailure(kind: .network))), deliverFirst: plan.deliverFirst)
        }
        if rng.chance(rates.serverError) { return fail([500, 502, 503, 504][rng.below(4)]) }
        if rng.chance(rates.retryAfter) {
            let forms = [
                "\(1 + rng.below(90))", "Thu, 01 Jan 2026 00:10:00 GMT", "Wed, 31 Dec 2025 00:00:00 GMT", "soon-ish",
                "99999999999",
            ]
            return fail(rng.chance(0.5) ? 429 : 503, retryAfter: forms[rng.below(forms.count)])
        }
        if rng.chance(rates.unauthorized) { return fail(401) }
        if rng.chance(rates.permission) { return fail(403, code: "42501", meaning: .mayPass) }
        if rng.chance(rates.schemaCache) {
            return rng.chance(0.5)
                ? fail(400, code: "PGRST204", meaning: .schemaCache) : fail(404, code: "PGRST205", meaning: .schemaCache)
        }
        if rng.chance(rates.malformed) {
            return FaultyTransport.Plan(
                kind: .answer(.contractBroken("the body answers another write")), deliverFirst: plan.deliverFirst)
        }
        if rng.chance(rates.refusal) && batch.writes.count > 1 && !batch.isAtomic { return fail(400, code: "23502") }
        var script = verdicts(for: batch)
        if rng.chance(rates.lost) { script = [.lostResponse] }
        // A transport that sends a request per write may stop after some were answered: the write whose
        // request failed and the rest are not sent (a stream of draws of its own, so as to move no
        // other fault of any seed).
        if !batch.isAtomic, script.count == batch.writes.count, script.count > 1,
            let index = (1..<script.count).first(where: { _ in stops.chance(0.01) })
        {
            let failure =
                stops.chance(0.5)
                ? RequestFailure(kind: .timeout) : RequestFailure(kind: .http, status: 503, code: "PGRST001", retryAfter: "0")
            script[index] = .verdict(.notSent(failure))
        }
        plan.kind = .forward(script: script, duplicate: rng.chance(rates.duplicated))
        return plan
    }

    /// The instance's answer to each write of a request the faults let through.
    private mutating func verdicts(for batch: OutgoingBatch) -> [SimulatedInstance.Scripted] {
        var script: [SimulatedInstance.Scripted] = []
        for _ in batch.writes {
            if rng.chance(rates.refusal) {
                let refusals: [(Int, String?)] = [
                    (400, "23502"), (400, "P0001"), (409, "23503"), (409, "23505"), (413, nil), (422, "23514"),
                ]
                let (status, code) = refusals[rng.below(refusals.count)]
                script.append(
                    .verdict(.refused(Refusal(status: status, code: code, reason: "refused", message: "SERVER-CANARY refusal"))))
            } else if rng.chance(rates.failedAlone) {
                script.append(.verdict(.failed(status: rng.chance(0.3) ? 429 : 503, text: "SERVER-CANARY failed")))
            } else if rng.chance(0.03) {
                script.append(.verdict(.merged(fields: ["title"])))
            } else if rng.chance(0.02) {
                script.append(.verdict(.conflicted(siblingId: "", fields: ["title"])))
            } else if rng.chance(0.01) {
                let reasons: [BlockedReason] = [
                    .keySpent, .ancestorUnavailable, .conflictUnresolved, .instanceChanged, .credentialRefused,
                ]
                script.append(.verdict(.blocked(reasons[rng.below(reasons.count)], refusal: nil)))
            } else {
                script.append(.verdict(.accepted))
            }
        }
        return script
    }
}

/// A running hash of what happened (I11: the same seed gives the same hash).
struct Trace: Sendable {
    private(set) var hash: UInt64 = 0xCBF2_9CE4_8422_2325
    mutating func add(_ text: String) {
        for byte in text.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        hash = (hash ^ 0x0A) &* 0x0000_0100_0000_01B3
    }
}

/// Retry-After as the simulator reads it for I9, written apart from the library's reader on purpose.
enum RetryAfterProbe {
    static func seconds(_ text: String, now: Timestamp) -> Double? {
        if let n = Double(text), n >= 0, text.allSatisfy(\.isNumber) { return min(n, 3600) }
        if text == "Thu, 01 Jan 2026 00:10:00 GMT" { return max(0, min(3600, Double(1_767_226_200_000 - now.rawValue) / 1000)) }
        return nil
    }
}
