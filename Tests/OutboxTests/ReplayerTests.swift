import Foundation
import OutboxTesting
import Synchronization
import Testing

@testable import Outbox

/// A transport in front of a simulated instance that holds its first send until `open()`.
final class GatedTransport: OutboxTransport {
    let instance = SimulatedInstance()
    private let state = Mutex<(waiting: CheckedContinuation<Void, Never>?, opened: Bool, arrived: Bool)>((nil, false, false))
    let unmadeTables: Set<String>

    init(unmadeTables: Set<String> = [], gated: Bool = true) {
        self.unmadeTables = unmadeTables
        state.withLock { $0.opened = !gated }
    }

    var hasArrived: Bool { state.withLock { $0.arrived } }

    func open() {
        let waiting = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.opened = true
            defer { state.waiting = nil }
            return state.waiting
        }
        waiting?.resume()
    }

    func send(_ batch: OutgoingBatch, accessToken: String?) async -> RequestAnswer {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let go = state.withLock { state -> Bool in
                state.arrived = true
                if state.opened { return true }
                state.waiting = continuation
                return false
            }
            if go { continuation.resume() }
        }
        return await instance.send(batch, accessToken: accessToken)
    }

    func unmadeReason(for write: OutgoingWrite) -> String? {
        unmadeTables.contains(write.table) ? "no mapping for table \(write.table)" : nil
    }

    func readRow(table: String, key: JSONValue, accessToken: String?) async throws -> JSONValue? {
        try await instance.readRow(table: table, key: key, accessToken: accessToken)
    }
}

/// A client (batches of one) with `writes` queued, and a sync of it held inside its first send.
func syncHeldAtItsFirstSend(_ path: String, writes: Int) async throws -> (
    OutboxClient, GatedTransport, Task<SyncReport, any Error>
) {
    let transport = GatedTransport()
    var configuration = testConfiguration()
    configuration.batchSize = 1
    let client = try await openClient(path, configuration: configuration, transport: transport)
    for n in 1...writes { try await client.enqueue(todo(Int64(n))) }
    let pass = Task { try await client.sync() }
    await eventually { transport.hasArrived }
    return (client, transport, pass)
}

@Suite("Classification (R4.3, R9.1)")
struct ClassificationTests {
    @Test(
        "a failure its transport says no more of means what its kind and status say",
        arguments: [
            (RequestFailure.Kind.network, nil, RequestFailure.Meaning.mayPass), (.timeout, nil, .mayPass),
            (.device, nil, .mayPass), (.http, 401, .mayPass), (.http, 402, .mayPass), (.http, 408, .mayPass),
            (.http, 429, .mayPass), (.http, 500, .mayPass), (.http, 503, .mayPass), (.http, 540, .mayPass),
            (.http, 302, .mayPass), (.http, 400, .refused), (.http, 403, .refused), (.http, 404, .refused),
            (.http, 409, .refused), (.http, 413, .refused), (.http, 422, .refused),
        ] as [(RequestFailure.Kind, Int?, RequestFailure.Meaning)])
    func generic(_ kind: RequestFailure.Kind, _ status: Int?, _ meaning: RequestFailure.Meaning) {
        #expect(RequestFailure(kind: kind, status: status).meaning == meaning)
        // A code tells the library nothing: only the transport's mapping reads codes.
        #expect(RequestFailure(kind: kind, status: status, code: "PGRST204").meaning == meaning)
    }

    @Test("the library judges the meaning the transport gave, whatever the status and code say")
    func meaningDecides() throws {
        func decide(_ failure: RequestFailure) throws -> Decider.Decision {
            try DeciderTests.decide(.failed(failure))
        }
        let refused = try decide(RequestFailure(kind: .http, status: 503, code: "X", meaning: .refused))
        #expect(refused.verdicts.map(\.kind) == [.refused])
        let mayPass = try decide(RequestFailure(kind: .http, status: 400, code: "23505", meaning: .mayPass))
        #expect(mayPass.verdicts.isEmpty)
        #expect(mayPass.next == .stop(PassFailure(kind: .http, status: 400, code: "23505")))
        let schema = try decide(RequestFailure(kind: .http, status: 400, code: "X", meaning: .schemaCache))
        #expect(schema.next == .stop(PassFailure(kind: .schemaCache, status: 400, code: "X")))
        #expect(schema.events.count == 1)
    }

    @Test("answers recorded before transports gave a meaning are judged as they were then (answerReceived v3)")
    func legacyAnswers() throws {
        func legacy(_ bytes: (inout ByteWriter) -> Void) throws -> RequestAnswer {
            var writer = ByteWriter()
            bytes(&writer)
            return try writer.bytes.withUnsafeBytes { raw in
                var reader = ByteReader(raw)
                return try RequestAnswer.decode(from: &reader)
            }
        }
        func failure(_ status: Int, _ code: String) throws -> RequestFailure? {
            let answer = try legacy { w in
                w.byte(1)
                w.byte(3)
                w.optional(status) { $0.varint($1) }
                w.optional(code) { $0.string($1) }
                w.optional(String?.none) { $0.string($1) }
                w.optional(String?.none) { $0.string($1) }
            }
            guard case .failed(let failure) = answer else { return nil }
            return failure
        }
        #expect(try failure(401, "PGRST303")?.meaning == .tokenRefused)
        #expect(try failure(400, "PGRST204")?.meaning == .schemaCache)
        #expect(try failure(403, "42501")?.meaning == .mayPass)
        #expect(try failure(409, "23505")?.meaning == .refused)
        // A per-write refusal of then, stored as code 3: judged by its code as the library then did.
        func refused(_ status: Int, _ code: String) throws -> WriteVerdict? {
            let answer = try legacy { w in
                w.byte(0)
                w.array([0]) { w, _ in
                    w.byte(3)
                    Refusal(status: status, code: code, message: "m").encode(into: &w)
                    w.bool(false)
                }
            }
            guard case .answered(let answers) = answer else { return nil }
            return answers.first?.verdict
        }
        #expect(try refused(422, "23514") == .refused(Refusal(status: 422, code: "23514", message: "m")))
        #expect(try refused(403, "42501") == .failed(status: 403, text: "m"))
        guard case .notSent(let schema?)? = try refused(400, "PGRST204") else {
            Issue.record("a schema-cache refusal of then is its request's failure")
            return
        }
        #expect(schema.meaning == .schemaCache && schema.code == "PGRST204")
    }

    @Test("Retry-After: seconds, an HTTP-date, a past date, garbage, a huge value (R5.3)")
    func retryAfter() {
        let now = Timestamp(milliseconds: 1_767_225_600_000)  // 2026-01-01T00:00:00Z
        #expect(RetryAfter.seconds("120", now: now) == 120)
        #expect(RetryAfter.seconds("Thu, 01 Jan 2026 00:02:00 GMT", now: now) == 120)
        #expect(RetryAfter.seconds("Wed, 31 Dec 2025 23:00:00 GMT", now: now) == 0)
        #expect(RetryAfter.seconds("soon", now: now) == nil)
        #expect(RetryAfter.seconds("-5", now: now) == nil)
        #expect(RetryAfter.seconds("99999999999999999999", now: now) == 3600)
        #expect(RetryAfter.seconds("86400", now: now) == 3600)
        #expect(RetryAfter.seconds(nil, now: now) == nil)
    }

    @Test("a deadline computed from a hostile time saturates instead of trapping (fuzz crasher)")
    func saturatingTime() {
        #expect(Timestamp(milliseconds: .max - 5).adding(seconds: 3600) == Timestamp(rawValue: .max))
        #expect(Timestamp(milliseconds: .min + 5).adding(seconds: -3600) == Timestamp(rawValue: .min))
        #expect(Timestamp(milliseconds: 0).adding(seconds: .infinity) == Timestamp(milliseconds: 0))
        #expect(Timestamp(milliseconds: 0).adding(seconds: 1e300) == Timestamp(milliseconds: 9_000_000_000_000_000_000))
    }
}

@Suite("The replayer")
struct ReplayerTests {
    @Test("R7.1: the status counts a moving write exactly once under concurrent syncs")
    func statusCountsOnce() async throws {
        try await TemporaryFolder.with { path in
            let instance = SimulatedInstance()
            var configuration = testConfiguration()
            configuration.maxRefusals = 1000
            let client = try await openClient(path, configuration: configuration, transport: instance)
            let total = 60
            for n in 1...total { try await client.enqueue(todo(Int64(n))) }
            // Every answer a refusal: each write is pending or rejected at every moment, never both or neither.
            instance.script(Array(repeating: .verdict(.refused(Refusal(status: 422, code: "23514"))), count: 10_000))
            let updates = client.syncStatus.updates
            let watcher = Task {
                var seen = 0
                for await status in updates {
                    #expect(status.pendingCount + status.rejectedCount == total, "\(status)")
                    seen += 1
                    if seen > 200 { break }
                }
                return seen
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<16 { group.addTask { for _ in 0..<3 { try await client.sync() } } }
                for _ in 0..<4 {
                    group.addTask {
                        for _ in 0..<50 {
                            let status = client.syncStatus.value
                            #expect(status.pendingCount + status.rejectedCount == total, "\(status)")
                            await Task.yield()
                        }
                    }
                }
                try await group.waitForAll()
            }
            client.close()
            #expect(await watcher.value > 1)
            #expect(client.syncStatus.value.rejectedCount == total)
        }
    }

    @Test("R5.1: syncs that meet a running pass share the one that waits, and report only what it sent")
    func coalesced() async throws {
        try await TemporaryFolder.with { path in
            let (client, transport, first) = try await syncHeldAtItsFirstSend(path, writes: 3)
            let waiters = (0..<5).map { _ in Task { try await client.sync() } }
            await eventually { client.syncState.withLock { $0.waiting.count == 1 } }
            transport.open()
            #expect(try await first.value.syncedCount == 3)
            for waiter in waiters { #expect(try await waiter.value.syncedCount == 0) }
            let passes = try await client.events().filter { $0.event.type == .passStarted }
            #expect(passes.count == 1)
            #expect(transport.instance.received.count == 3)
            // The five syncs that met the running pass shared the one waiting pass: two ran in all.
            #expect(client.syncState.withLock { $0.passesRun } == 2)
        }
    }

    @Test("R7.3: clearLocalData cancels a running pass first; its report counts what it sent")
    func clearCancels() async throws {
        try await TemporaryFolder.with { path in
            let (client, transport, pass) = try await syncHeldAtItsFirstSend(path, writes: 4)
            let clear = Task { try await client.clearLocalData(user: "alice") }
            await eventually { client.syncState.withLock { !$0.clearing.isEmpty } }
            transport.open()
            let report = try await pass.value
            try await clear.value
            #expect(report.syncedCount == 1)
            #expect(transport.instance.applied.count == 1)
            #expect(try await client.queue.all().isEmpty)
            #expect(try await client.events().last?.event.type == .localDataCleared)
            #expect(try await client.verify().isOK)
        }
    }

    @Test("R4.3: a write the transport cannot make is refused unmade (final), never sent, never released")
    func unmade() async throws {
        try await TemporaryFolder.with { path in
            let transport = GatedTransport(unmadeTables: ["legacy"], gated: false)
            let client = try await openClient(path, transport: transport)
            let legacy = try await client.enqueue(.insert(into: "legacy", key: ["id": 1], body: [:]))
            try await client.enqueue(todo(2))
            let report = try await client.sync()
            #expect(report.rejected.map(\.id) == [legacy])
            #expect(report.syncedCount == 1)
            #expect(transport.instance.received.allSatisfy { !$0.writes.contains(legacy) })
            guard case .refused(let refusal)? = try await client.write(legacy)?.state else {
                Issue.record("not refused")
                return
            }
            #expect(refusal.isFinal && refusal.status == nil)
            #expect(try await client.queue.release(legacy) == false)
            #expect(try await client.sync().verdicts.isEmpty)
        }
    }

    @Test("R3.2: a write released under a fresh key whose earlier copy was applied is answered replayed, by (origin, id)")
    func dedupByOrigin() async throws {
        try await TemporaryFolder.with { path in
            let instance = SimulatedInstance()
            let client = try await openClient(path, transport: instance)
            let id = try await client.enqueue(todo(1))
            instance.script([.lostResponse])
            #expect(try await client.sync().stoppedBy?.kind == .network)
            // As if the instance had answered keySpent to a later send: the app releases it under a fresh key.
            try await client.record(id, .blocked(.keySpent, refusal: nil))
            #expect(try await client.queue.release(id))
            let report = try await client.sync()
            #expect(report.alreadyOnServerCount == 1)
            #expect(instance.applied.count == 1)
            #expect(Set(instance.received.map(\.writes)).count == 1)
        }
    }

    @Test("P7, R7.3: every request carries the token of the user who owns its writes")
    func tokensPerUser() async throws {
        try await TemporaryFolder.with { path in
            let instance = SimulatedInstance()
            var configuration = testConfiguration()
            configuration.batchSize = 1
            let client = try await openClient(path, user: nil, configuration: configuration, transport: instance)
            let tokens = ["alice": token(subject: "alice"), "bob": token(subject: "bob")]
            var owner: [WriteID: String] = [:]
            for round in 0..<3 {
                for user in ["alice", "bob"] {
                    try await client.settleSession(user: user, accessToken: tokens[user])
                    owner[try await client.enqueue(todo(Int64(round * 10 + 1)))] = user
                    owner[try await client.enqueue(todo(Int64(round * 10 + 2)))] = user
                    try await client.sync()
                }
            }
            try await client.settleSession(user: nil, accessToken: nil)
            #expect(try await client.sync().verdicts.isEmpty)
            #expect(instance.received.count == 12)
            for request in instance.received {
                for id in request.writes { #expect(request.accessToken == tokens[owner[id]!]) }
            }
        }
    }

    @Test("R7.2, R3.4, P6: the events stream says what changed, never the server's text")
    func eventsStream() async throws {
        try await TemporaryFolder.with { path in
            let instance = SimulatedInstance()
            var configuration = testConfiguration()
            configuration.maxRefusals = 2
            let client = try await openClient(path, configuration: configuration, transport: instance)
            let events = client.events
            let canary = "CANARY-server-text-7d1f"
            let refused = Refusal(status: 422, code: "23514", reason: "check", message: canary, fields: ["title"])
            try await client.enqueue(todo(1))
            try await client.enqueue(todo(2))
            try await client.enqueue(todo(3))
            try await client.enqueue(contentsOf: [todo(4), todo(5)], atomic: true)
            try await client.enqueue(todo(6))
            try await client.enqueue(todo(7))
            instance.script([
                .verdict(.refused(refused)), .verdict(.merged(fields: ["title"])), .verdict(.blocked(.keySpent, refusal: nil)),
                .verdict(.accepted), .verdict(.refused(refused)), .verdict(.conflicted(siblingId: "s1", fields: ["title"])),
                .verdict(.accepted),
            ])
            let first = try await client.sync()
            instance.script([.verdict(.refused(refused)), .status(503, retryAfter: canary)])
            let second = try await client.sync()
            client.close()
            var seen: [OutboxEvent] = []
            for await event in events { seen.append(event) }
            #expect(seen.contains(.localChanged))
            #expect(
                seen.contains(
                    .mutationRejected(
                        WriteID(1), .init(status: 422, code: "23514", fields: ["title"], refusals: 1, isFinal: false))))
            #expect(seen.contains(.columnOverwritten(WriteID(2), fields: ["title"])))
            // Every verdict with its write's id, accepted and conflicted included.
            #expect(seen.contains(.conflicted(WriteID(6), siblingId: "s1", fields: ["title"])))
            #expect(seen.contains(.accepted(WriteID(7), replayed: false)))
            #expect(
                !seen.contains { if case .automaticPass = $0 { true } else { false } }, "the app's own passes return their report"
            )
            #expect(seen.contains(.blocked(WriteID(3), .keySpent)))
            #expect(seen.contains(.batchAborted([WriteID(4), WriteID(5)])))
            #expect(seen.contains { if case .deadLetter(WriteID(1), _) = $0 { true } else { false } })
            #expect(seen.contains(.passStopped(PassFailure(kind: .http, status: 503, code: nil, retryAfter: nil))))
            for text in ["\(seen)", "\(first)", "\(second)", "\(client.syncStatus.value)"] { #expect(!text.contains(canary)) }
        }
    }

    @Test("R7.1: the status reflects an earlier run's queue from open, and keeps its value after close")
    func statusFromOpen() async throws {
        try await TemporaryFolder.with { path in
            do {
                let client = try await openClient(path)
                try await client.enqueue(todo(1))
                try await client.enqueue(todo(2))
                client.close()
            }
            let client = try await openClient(path, transport: SimulatedInstance())
            #expect(client.syncStatus.value.pendingCount == 2)
            try await client.sync()
            #expect(client.syncStatus.value.pendingCount == 0)
            #expect(client.syncStatus.value.lastSyncedAt != nil)
            client.close()
            #expect(client.syncStatus.value.pendingCount == 0)
            #expect(throws: OutboxError.closed) { try client.checkOpen() }
        }
    }

    @Test("R5.4: a monitor that ends counts as unknown; its words move the status")
    func monitor() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path, transport: SimulatedInstance())
            let (words, continuation) = AsyncStream<Bool>.makeStream()
            client.monitorConnectivity(words)
            continuation.yield(false)
            await eventually { client.syncStatus.value.network == .offline }
            #expect(client.syncStatus.value.network == .offline)
            continuation.finish()
            await eventually { client.syncStatus.value.network == .unknown }
            #expect(client.syncStatus.value.network == .unknown)
        }
    }

    @Test("R5.3: jitter stays within the fraction the app set, drawn from the injected generator")
    func jitter() async throws {
        try await TemporaryFolder.with { path in
            let clock = ManualClock()
            var configuration = testConfiguration(clock: clock)
            configuration.autoSync = true
            configuration.backoffJitter = 0.2
            let instance = SimulatedInstance()
            instance.script([.status(503)])
            let client = try await openClient(path, configuration: configuration, transport: instance)
            try await client.enqueue(todo(1))
            await client.idle()
            let due = try #require(clock.nextDue)
            let delay = Double(due.rawValue - clock.now().rawValue) / 1000
            #expect(delay >= 0.8 && delay <= 1.2)
            clock.set(due)
            await client.idle()
            #expect(instance.applied.count == 1)
        }
    }
}

@Suite("The decider (R4.3–R4.5)")
struct DeciderTests {
    static func entry(_ id: UInt64, refusals: Int = 0, group: WriteQueued.AtomicGroup? = nil) -> WriteEntry {
        WriteEntry(
            queuedSequence: id + 1, user: "alice", table: "todos", dependencies: [], atomicGroup: group,
            renewedKey: nil, state: .pending, refusals: refusals, replayed: false,
            schemaRefusals: 0, lastSchemaRefusalAt: nil, lastFailure: nil, environmentalStreak: 0)
    }

    static func decide(_ answer: RequestAnswer, writes: [UInt64] = [1], batchCount: Int? = nil, refusals: Int = 0) throws
        -> Decider.Decision
    {
        let input = Decider.Input(
            passId: 9, writes: writes.map { WriteID($0) }, batchCount: batchCount ?? writes.count, answer: answer,
            maxRefusals: 5, at: Timestamp(milliseconds: 0))
        return try Decider.decide(input) { entry($0.rawValue, refusals: refusals) }
    }

    @Test(
        "no connection, a timeout and a device failure stop the pass as network failures and charge nothing",
        arguments: RequestFailure.Kind.allCases.filter { $0 != .http })
    func environmental(_ kind: RequestFailure.Kind) throws {
        let decision = try Self.decide(.failed(RequestFailure(kind: kind)))
        #expect(decision.next == .stop(PassFailure(kind: .network)))
        #expect(decision.events.isEmpty)
    }

    @Test("a verdict count other than the writes sent is a protocol violation: stop, nothing charged")
    func countMismatch() throws {
        for answers in [[], [WriteAnswer(.accepted), WriteAnswer(.accepted)]] {
            let decision = try Self.decide(.answered(answers))
            #expect(decision.next == .stop(PassFailure(kind: .protocol)))
            #expect(decision.events.isEmpty)
        }
    }

    @Test("the refusal that reaches maxRefusals makes the write dead")
    func dead() throws {
        let decision = try Self.decide(.answered([WriteAnswer(.refused(Refusal(status: 422)))]), refusals: 4)
        guard case .verdictRecorded(let verdict)? = decision.events.first, case .dead = verdict.state else {
            Issue.record("not dead: \(decision.events)")
            return
        }
        #expect(verdict.refusals == 5)
    }

    @Test("a request-level refusal of a multi-write batch splits it; of one write, refuses it")
    func split() throws {
        let refusal = RequestAnswer.failed(RequestFailure(kind: .http, status: 400, code: "23502"))
        #expect(try Self.decide(refusal, writes: [1, 2, 3]).next == .split)
        #expect(try Self.decide(refusal, writes: [1, 2, 3]).events.isEmpty)
        #expect(try Self.decide(refusal).events.count == 1)
    }
}

@Suite("The response classifier is total (TESTING.md §3)")
struct TotalClassifierTests {
    /// R4.3 written again, apart from the library's code: what each meaning a transport gives does.
    /// (Which status and code mean what is the transport's mapping: PostgRESTMappingIsTotal.)
    static func expected(_ meaning: RequestFailure.Meaning) -> String {
        switch meaning {
        case .schemaCache: return "schemaCache"
        case .mayPass, .tokenRefused: return "stop"
        case .refused: return "refuse"
        }
    }

    @Test("every status 100–599 × code × body × Retry-After × meaning is decided as R4.3 says, with no text anywhere")
    func total() throws {
        let codes: [String?] = [nil, "PGRST204", "PGRST205", "PGRST202", "42501", "25006", "23505", "22P02", "P0001", "<html>"]
        let bodies: [String?] = [nil, "", #"{"code":"23505","message":"TEXT-CANARY"}"#, #"{"code":"#, "<html>TEXT-CANARY</html>"]
        let retryAfters: [String?] = [nil, "5", "Thu, 01 Jan 2026 00:10:00 GMT", "garbage", "99999999999999", "-3"]
        let meanings = RequestFailure.Meaning.allCases
        var cases = 0
        for status in 100...599 {
            for (index, code) in codes.enumerated() {
                for (body, retryAfter) in zip(bodies + bodies, retryAfters + retryAfters) {
                    let meaning = meanings[(status + index + cases) % meanings.count]
                    let failure = RequestFailure(
                        kind: .http, status: status, code: code, retryAfter: retryAfter, text: body, meaning: meaning)
                    let decision = try DeciderTests.decide(.failed(failure))
                    let rendered = "\(decision.next) \(decision.verdicts)"
                    #expect(!rendered.contains("TEXT-CANARY"))
                    switch (Self.expected(meaning), decision.next) {
                    case ("schemaCache", .stop(let stopped)): #expect(stopped.kind == .schemaCache)
                    case ("stop", .stop(let stopped)):
                        #expect(stopped.kind == .http && stopped.status == status)
                        if let seconds = stopped.retryAfter { #expect(seconds >= 0 && seconds <= 3600) }
                    case ("refuse", .goOn): #expect(decision.verdicts.map(\.kind) == [.refused])
                    default: Issue.record("status \(status) code \(code ?? "-") \(meaning): \(decision.next)")
                    }
                    cases += 1
                }
            }
        }
        #expect(cases == 500 * 10 * 10)
    }
}
