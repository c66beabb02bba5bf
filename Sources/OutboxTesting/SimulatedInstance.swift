public import Outbox
internal import Synchronization

/// An in-process instance, deterministic: it holds rows, and for every write it applied, the answer it
/// gave, which it replays when the same idempotency key or the same (origin, id) comes again.
/// It answers from a script when one is given (`script(_:)`) and by itself otherwise: it accepts and
/// applies every write, in order, answering `skipped` to a write whose dependency in the same batch
/// was not applied, and all or nothing of an atomic group. After a write scripted `notSent` it
/// applies none of the rest of the batch and answers each `notSent`, as a transport that stopped.
/// Besides the script, responders answer by predicate (this table, this key, the n-th attempt), and a
/// latency holds every request that long, as a real server would.
///
/// Apps use it in their own tests as the transport of a client:
///
/// ```swift
/// let instance = SimulatedInstance()
/// instance.script([.verdict(.refused(Refusal(status: 422, code: "23514")))])
/// instance.respond(table: "todos", attempt: 1, with: .status(503))  // every todo's first try fails
/// let outbox = try await OutboxClient.open(at: folder, transport: instance)
/// ```
public final class SimulatedInstance: OutboxTransport {
    /// One scripted answer (as a scenario scripts them).
    public enum Scripted: Hashable, Sendable {
        /// The answer to one write: accepted, merged, conflicted (an empty sibling id gets a new one),
        /// refused, blocked, or failed.
        case verdict(WriteVerdict)
        /// The whole request fails with an HTTP status, a server code and a Retry-After optional, meaning
        /// what the status says unless `meaning` says more (as a transport maps a token refused, or a
        /// schema the server does not know yet).
        case status(Int, code: String? = nil, retryAfter: String? = nil, meaning: RequestFailure.Meaning? = nil)
        /// The request never reaches the instance.
        case networkDown
        /// The instance applies the request and remembers its answers; the client sees a dropped connection.
        case lostResponse
        /// The instance applies nothing and answers with a body that breaks the wire contract.
        case malformed
        /// The instance applies the request and remembers its answers; then the crash handler runs (the
        /// client dies before it records them) and the client sees a dropped connection.
        case crashAfterApply
        /// The next row read fails as a dropped connection; requests skip over this entry.
        case readFails

        var isRequestLevel: Bool {
            switch self {
            case .status, .networkDown, .lostResponse, .malformed, .crashAfterApply: return true
            case .verdict, .readFails: return false
            }
        }
    }

    /// A write the instance applied, in the order it applied them.
    public struct Applied: Hashable, Sendable {
        /// The log the write came from.
        public var origin: Origin
        /// The write's id in that log.
        public var id: WriteID
        /// The table written.
        public var table: String
        /// The row's key.
        public var key: JSONValue
    }

    /// A request as it arrived: which writes, and with which token (tests check with it that each request carries its own user's token).
    public struct Received: Hashable, Sendable {
        /// The writes the request carried.
        public var writes: [WriteID]
        /// The token it carried, if any.
        public var accessToken: String?
    }

    /// The error a failed row read throws.
    public struct ReadFailed: Error, Hashable, Sendable {
        /// The error.
        public init() {}
    }

    private struct Identity: Hashable {
        var origin: Origin
        var id: WriteID
    }

    /// A standing answer: for the writes its predicate picks, as many times as it is allowed.
    private struct Responder {
        var picks: @Sendable (OutgoingWrite, Int) -> Bool
        var answer: Scripted
        var remaining: Int?

        /// Whether it answers whole requests (`requestLevel`) or single writes (a verdict).
        func answers(requestLevel: Bool) -> Bool {
            if case .verdict = answer { return !requestLevel }
            return requestLevel && answer.isRequestLevel
        }
    }

    private struct State {
        var script: [Scripted] = []
        var responders: [Responder] = []
        var attempts: [Identity: Int] = [:]
        var latency: Duration = .zero
        var rows: [String: JSONValue] = [:]
        var byKey: [IdempotencyKey: WriteAnswer] = [:]
        var byIdentity: [Identity: WriteAnswer] = [:]
        var applied: [Applied] = []
        var received: [Received] = []
        var siblings = 0
        var onCrash: Callback<Void>?
        var unmakeable: Set<String> = []
        var onApply: Callback<(Applied, IdempotencyKey)>?
        var keyColumns: [String: [String]] = [:]
        /// Each origin's acknowledged watermark, and the keys kept for each write (R8.9).
        var watermarks: [Origin: WriteID] = [:]
        var keysOf: [Identity: [IdempotencyKey]] = [:]
    }

    private let state = Mutex(State())

    /// An instance that answers every request after `latency` (none by default).
    public init(latency: Duration = .zero) { state.withLock { $0.latency = latency } }

    /// Gives tables key columns, as PostgREST's `tables:` does: a write made from a model without a key
    /// takes those members of the model as its key.
    public func setKeyColumns(_ columns: [String: [String]]) { state.withLock { $0.keyColumns = columns } }

    public func keyColumns(of table: String) -> [String]? { state.withLock { $0.keyColumns[table] } }

    /// How long each request and row read takes from now on.
    public func setLatency(_ latency: Duration) { state.withLock { $0.latency = latency } }

    /// Answers with `answer` each write `picks` chooses, given the write and its attempt (1 for the
    /// first request that carried it here, 2 for the next…): a verdict answers that write, a request-
    /// level answer (`status`, `networkDown`, `lostResponse`, `malformed`) the whole request carrying
    /// it. Responders answer what the positional script leaves; the first one added that picks a write
    /// answers it, at most `times` times (nil: always).
    public func respond(
        when picks: @escaping @Sendable (OutgoingWrite, _ attempt: Int) -> Bool, with answer: Scripted, times: Int? = nil
    ) {
        state.withLock { $0.responders.append(Responder(picks: picks, answer: answer, remaining: times)) }
    }

    /// `respond(when:with:times:)` for the writes of `table` (and `key`, and `attempt`, when given).
    public func respond(
        table: String? = nil, key: JSONValue? = nil, attempt: Int? = nil, with answer: Scripted, times: Int? = nil
    ) {
        respond(
            when: { write, tried in
                (table == nil || write.table == table) && (key == nil || write.key == key) && (attempt == nil || tried == attempt)
            }, with: answer, times: times)
    }

    /// Appends answers to the script.
    public func script(_ answers: [Scripted]) { state.withLock { $0.script += answers } }

    /// Drops the script entries not used yet.
    public func clearScript() { state.withLock { $0.script = [] } }

    /// Script entries not used yet.
    public var unusedScript: [Scripted] { state.withLock { $0.script } }

    /// What runs when a `crashAfterApply` entry is used (the scenario runner drops its client there).
    public func onCrash(_ handler: @escaping @Sendable () -> Void) { state.withLock { $0.onCrash = Callback(handler) } }

    /// Runs just before the instance applies a write (the crash harness records applies with it).
    public func onApply(_ handler: @escaping @Sendable (Applied, IdempotencyKey) -> Void) {
        state.withLock { $0.onApply = Callback { handler($0.0, $0.1) } }
    }

    /// Takes as applied, answered accepted, a write an earlier run of the instance applied (the crash
    /// harness restores the instance's memory across its worker's deaths).
    public func remember(origin: Origin, id: WriteID, idempotencyKey: IdempotencyKey) {
        state.withLock { state in
            let answer = WriteAnswer(.accepted)
            state.byKey[idempotencyKey] = answer
            state.byIdentity[Identity(origin: origin, id: id)] = answer
            state.keysOf[Identity(origin: origin, id: id), default: []].append(idempotencyKey)
        }
    }

    /// Makes the transport unable to map writes of `table` into a request (refused "unmade", for good), as an HTTP
    /// transport with no mapping for that table would be.
    public func cannotMake(table: String) { state.withLock { _ = $0.unmakeable.insert(table) } }

    public func unmadeReason(for write: OutgoingWrite) -> String? {
        state.withLock { $0.unmakeable.contains(write.table) } ? "the transport has no mapping for table \(write.table)" : nil
    }

    /// The answers the instance keeps to answer a resend once: those of the writes above their
    /// origin's acknowledged watermark. Each batch's watermark drops the ones at or below it.
    public var keptAnswerCount: Int { state.withLock { $0.byIdentity.count } }

    /// The writes applied, each once, in the order they were applied.
    public var applied: [Applied] { state.withLock { $0.applied } }

    /// Every request received, in order.
    public var received: [Received] { state.withLock { $0.received } }

    /// The row held for (`table`, `key`), if any.
    public func row(table: String, key: JSONValue) -> JSONValue? {
        state.withLock { $0.rows[Self.rowKey(table, key)] }
    }

    // MARK: - OutboxTransport

    /// It forgets the answers at or below each batch's acknowledged watermark, as the reference
    /// instance does, and answers a write sent again at or below one as a broken contract.
    public var prunesByWatermark: Bool { true }

    public func send(_ batch: OutgoingBatch, accessToken: String?) async -> RequestAnswer {
        let latency = state.withLock { state -> Duration in
            state.received.append(Received(writes: batch.writes.map(\.id), accessToken: accessToken))
            for write in batch.writes { state.attempts[Identity(origin: write.origin, id: write.id), default: 0] += 1 }
            return state.latency
        }
        // A request cancelled while it waits never reached the instance.
        if latency > .zero, (try? await Task.sleep(for: latency)) == nil { return .failed(RequestFailure(kind: .network)) }
        var crash: Callback<Void>?
        let answer = state.withLock { state -> RequestAnswer in
            // Never a second apply of a write whose answer the instance forgot (R8.9).
            if let origin = batch.writes.first?.origin, let mark = state.watermarks[origin],
                let below = batch.writes.first(where: { $0.id <= mark })
            {
                return .contractBroken("write \(below.id) was sent again at or below the acknowledged watermark \(mark)")
            }
            var entry: Scripted?
            if let index = state.script.firstIndex(where: { $0 != .readFails }), state.script[index].isRequestLevel {
                entry = state.script.remove(at: index)
            } else if !state.script.contains(where: { $0 != .readFails }) {
                for write in batch.writes where entry == nil { entry = Self.respond(to: write, requestLevel: true, &state) }
            }
            if let entry {
                switch entry {
                case .status(let status, let code, let retryAfter, let meaning):
                    return .failed(
                        RequestFailure(
                            kind: .http, status: status, code: code, retryAfter: retryAfter, text: "scripted failure \(status)",
                            meaning: meaning))
                case .networkDown:
                    return .failed(RequestFailure(kind: .network))
                case .malformed:
                    return .contractBroken("the response body is not a list of answers")
                case .lostResponse:
                    _ = Self.apply(batch, scripted: false, &state)
                    return .failed(RequestFailure(kind: .network))
                case .crashAfterApply:
                    _ = Self.apply(batch, scripted: false, &state)
                    crash = state.onCrash
                    return .failed(RequestFailure(kind: .network))
                case .verdict, .readFails:
                    preconditionFailure("not a request-level entry")
                }
            }
            return .answered(Self.apply(batch, scripted: true, &state))
        }
        crash?.call(())
        return answer
    }

    /// The answer of the first responder that picks `write` (a request-level one, or a verdict), counted.
    private static func respond(to write: OutgoingWrite, requestLevel: Bool, _ state: inout State) -> Scripted? {
        let attempt = state.attempts[Identity(origin: write.origin, id: write.id)] ?? 1
        guard
            let index = state.responders.firstIndex(where: {
                $0.answers(requestLevel: requestLevel) && $0.remaining != 0 && $0.picks(write, attempt)
            })
        else { return nil }
        state.responders[index].remaining? -= 1
        return state.responders[index].answer
    }

    public func readRow(table: String, key: JSONValue, accessToken: String?) async throws -> JSONValue? {
        let latency = state.withLock { $0.latency }
        if latency > .zero { try await Task.sleep(for: latency) }
        return try state.withLock { state in
            if let index = state.script.firstIndex(of: .readFails) {
                state.script.remove(at: index)
                throw ReadFailed()
            }
            return state.rows[Self.rowKey(table, key)]
        }
    }

    // MARK: - Applying

    /// Answers and applies a batch in order; with `scripted`, each write not replayed or skipped takes
    /// the script's front entry when it is a verdict.
    private static func apply(_ batch: OutgoingBatch, scripted: Bool, _ state: inout State) -> [WriteAnswer] {
        var answers: [WriteAnswer] = []
        var notApplied = Set<WriteID>()
        if let watermark = batch.acknowledgedWatermark, let origin = batch.writes.first?.origin {
            forget(origin, through: watermark, &state)
        }
        var toApply: [OutgoingWrite] = []
        let inBatch = Set(batch.writes.map(\.id))
        var stopped = false
        for write in batch.writes {
            // After a write answered "not sent", the rest of the batch is not sent either, as a
            // transport that stops a request does.
            if stopped {
                answers.append(WriteAnswer(.notSent(nil)))
                notApplied.insert(write.id)
                continue
            }
            if let earlier = state.byKey[write.idempotencyKey] ?? state.byIdentity[Identity(origin: write.origin, id: write.id)] {
                answers.append(WriteAnswer(earlier.verdict, replayed: true))
                continue
            }
            if write.dependsOn.contains(where: { inBatch.contains($0) && notApplied.contains($0) }) {
                answers.append(WriteAnswer(.skipped))
                notApplied.insert(write.id)
                continue
            }
            var verdict = WriteVerdict.accepted
            if scripted, let index = state.script.firstIndex(where: { $0 != .readFails }),
                case .verdict(let scriptedVerdict) = state.script[index]
            {
                state.script.remove(at: index)
                verdict = scriptedVerdict
            } else if scripted, case .verdict(let answered)? = respond(to: write, requestLevel: false, &state) {
                verdict = answered
            }
            if case .conflicted(let sibling, let fields) = verdict, sibling.isEmpty {
                state.siblings += 1
                verdict = .conflicted(siblingId: "sibling-\(state.siblings)", fields: fields)
            }
            switch verdict {
            case .accepted, .merged, .conflicted: toApply.append(write)
            case .notSent:
                stopped = true
                notApplied.insert(write.id)
            default: notApplied.insert(write.id)
            }
            answers.append(WriteAnswer(verdict))
        }
        if batch.isAtomic && !notApplied.isEmpty { return answers }
        for (write, answer) in zip(batch.writes, answers) where !answer.replayed && toApply.contains(write) {
            store(write, answer, &state)
        }
        return answers
    }

    /// Drops what the instance keeps of `origin`'s writes at or below `watermark`.
    private static func forget(_ origin: Origin, through watermark: WriteID, _ state: inout State) {
        guard watermark > state.watermarks[origin] ?? WriteID(0) else { return }
        state.watermarks[origin] = watermark
        for identity in state.byIdentity.keys where identity.origin == origin && identity.id <= watermark {
            state.byIdentity[identity] = nil
            for key in state.keysOf.removeValue(forKey: identity) ?? [] { state.byKey[key] = nil }
        }
    }

    private static func store(_ write: OutgoingWrite, _ answer: WriteAnswer, _ state: inout State) {
        state.onApply?.call(
            (Applied(origin: write.origin, id: write.id, table: write.table, key: write.key), write.idempotencyKey))
        state.byKey[write.idempotencyKey] = answer
        state.byIdentity[Identity(origin: write.origin, id: write.id)] = answer
        state.keysOf[Identity(origin: write.origin, id: write.id), default: []].append(write.idempotencyKey)
        state.applied.append(Applied(origin: write.origin, id: write.id, table: write.table, key: write.key))
        if case .conflicted = answer.verdict { return }
        let slot = rowKey(write.table, write.key)
        switch write.operation {
        case .delete:
            state.rows[slot] = nil
        case .insert:
            state.rows[slot] = merged(write.key, write.body)
        case .update, .upsert, .custom:
            state.rows[slot] = merged(merged(state.rows[slot] ?? write.key, write.key), write.body)
        }
    }

    private static func merged(_ base: JSONValue, _ fields: JSONValue) -> JSONValue {
        guard case .object(var row) = base, case .object(let more) = fields else { return fields }
        for (name, value) in more { row[name] = value }
        return .object(row)
    }

    private static func rowKey(_ table: String, _ key: JSONValue) -> String { table + "\u{0}" + JSONText.render(key) }
}
