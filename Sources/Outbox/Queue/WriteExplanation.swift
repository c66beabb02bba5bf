/// Why a write is where it is now, and what would move it on: `queue.explain(_:)` and `outbox why`.
///
/// A waiting write is explained through the writes it waits behind, to the one that holds them all:
/// "write 14 is pending, waiting behind write 12 (same row), which is dead after 5 refusals (422
/// 23514 on title): release write 12 or discard it". It never carries a server's text or a token.
public struct WriteExplanation: Hashable, Sendable {
    /// How a write waits on the next one of `behind`.
    public enum Link: String, Hashable, Sendable {
        /// An earlier write to the same row, not settled yet.
        case sameRow
        /// A write the app named in `dependsOn`.
        case dependsOn
        /// A write another member of its atomic group depends on: the group goes whole.
        case atomicGroup
    }

    /// One write a waiting write waits behind, and how.
    public struct Hop: Hashable, Sendable {
        /// The write waited on.
        public var id: WriteID
        /// How the write before it in the chain waits on it.
        public var link: Link
    }

    /// What holds the write at the end of the chain (the write itself when it waits on nothing).
    public enum Hold: Hashable, Sendable {
        /// Nothing: the next pass sends it.
        case nothing
        /// The library's network access is switched off (`enableNetwork()` lifts it).
        case networkDisabled
        /// The instance asked the outbox to wait until then.
        case retryAfter(until: Timestamp)
        /// The last pass stopped on this failure, which may pass, at the request of these writes.
        case passStopped(PassFailure, sending: [WriteID], at: Timestamp)
        /// It failed alone the last time it went (with this HTTP status, if one came), `streak` passes
        /// in a row while the instance answered others; it goes again on the next pass.
        case failedAlone(status: Int?, streak: Int)
        /// The instance refused it `refusals` times; it goes again on the next pass, and is dead at
        /// `maxRefusals`.
        case refused(Refusal, refusals: Int)
        /// Refused too often: never sent again unless released.
        case dead(Refusal?, refusals: Int)
        /// Refused by the library for good: never sent, never released.
        case refusedForGood(Refusal)
        /// Stopped until something outside the queue changes, since the verdict at that time; a write
        /// blocked failingAlone says how many passes in a row it failed alone (`streak`, else 0).
        case blocked(BlockedReason, Refusal?, since: Timestamp?, streak: Int)
        /// The instance answered it: the app takes or forgets it.
        case answered
        /// The session's token belongs to another user: nothing of this user's goes until a session
        /// with their own token settles.
        case identityChanged
        /// It belongs to another user than the session's: it goes when that user signs in again.
        case otherUser(String)
    }

    /// What the app (or a support engineer) can do about the write that holds it.
    public enum Remedy: String, Hashable, Sendable {
        /// Nothing is needed: a pass sends it (`sync()`, or the next automatic one).
        case sync
        /// Wait: the instance, or the network, has to come back.
        case wait
        /// `release` it: sent again on the next pass under a fresh key.
        case release
        /// `discard` it, taking it and the body it carried out of the queue.
        case discard
        /// `withdraw` it, after reading the row the instance holds.
        case withdraw
        /// `takeAnswered()` or `forgetAnswered()`.
        case takeAnswered
        /// Give the client a new access token (the token provider's, or a new session's).
        case newAccessToken
        /// Settle the session of the user the writes belong to, with that user's token.
        case signIn
        /// Switch network access back on (`enableNetwork()`).
        case enableNetwork
    }

    /// The write explained.
    public var id: WriteID
    /// Its state in the verdict table.
    public var state: WriteState
    /// The writes it waits behind, in order, to the one that holds them all; empty when it waits on none.
    public var behind: [Hop]
    /// What holds the last write of `behind` (or this write, when it waits on none).
    public var hold: Hold
    /// What would free it, acting on `holder`.
    public var remedies: [Remedy]

    /// The write that `hold` and `remedies` are about: the end of the chain, or this write.
    public var holder: WriteID { behind.last?.id ?? id }
}

extension WriteExplanation: CustomStringConvertible {
    /// One sentence: the state, what it waits behind, what holds that, and what would free it.
    public var description: String {
        var text = "write \(id) "
        if !behind.isEmpty {
            text += "is \(state.name)"
            for (position, hop) in behind.enumerated() {
                text += position == 0 ? ", waiting behind " : ", which waits behind "
                text += "write \(hop.id) (\(hop.link.words))"
            }
            text += ", which "
        }
        text += hold == .answered ? "is \(state.name), answered and waiting to be taken" : hold.predicate
        // The holder is named the first time a remedy acts on it, "it" after.
        var named = behind.isEmpty
        for (position, remedy) in remedies.enumerated() {
            text += position == 0 ? ": " : " or "
            text += remedy.words(named ? "it" : "write \(holder)")
            if remedy.actsOnTheWrite { named = true }
        }
        return text
    }
}

extension WriteExplanation.Link {
    var words: String {
        switch self {
        case .sameRow: return "same row"
        case .dependsOn: return "dependsOn"
        case .atomicGroup: return "its atomic group"
        }
    }
}

extension WriteExplanation.Hold {
    /// What holds the write, after its id or after "which": `is dead after 5 refusals (422 23514 on title)`.
    var predicate: String {
        switch self {
        case .nothing: return "is pending: nothing holds it; the next pass sends it"
        case .networkDisabled: return "is pending: network access is switched off"
        case .retryAfter(let until): return "is pending: the instance asked to wait until \(until)"
        case .passStopped(let failure, let sending, let at):
            return
                "is pending: the last pass stopped at \(at) sending \(Self.list(sending)) (\(failure)); the next pass sends it again"
        case .failedAlone(let status, let streak):
            let met = status.map { "HTTP \($0)" } ?? "a failure"
            return
                "is pending: it failed alone \(streak) pass\(streak == 1 ? "" : "es") in a row (\(met)) while others were answered; "
                + "the next pass sends it again"
        case .refused(let refusal, let refusals):
            return
                "is refused, \(refusals) time\(refusals == 1 ? "" : "s") (\(Self.words(refusal))); the next pass sends it again"
        case .dead(let refusal, let refusals):
            let why = refusal.map { " (\(Self.words($0)))" } ?? ""
            return "is dead after \(refusals) refusal\(refusals == 1 ? "" : "s")\(why)"
        case .refusedForGood(let refusal): return "is refused for good (\(refusal.reason ?? Self.words(refusal)))"
        case .blocked(let reason, let refusal, let since, let streak):
            var text = "is blocked \(reason.rawValue)"
            if let since { text += " since \(since)" }
            if streak > 0 {
                text +=
                    ": \(streak) pass\(streak == 1 ? "" : "es") in a row met \(refusal.map(Self.words) ?? "a failure")"
                    + " while others were answered"
            } else if let refusal {
                text += " (\(Self.words(refusal)))"
            }
            return text
        case .answered: return "is answered, waiting to be taken"
        case .identityChanged: return "is pending: the session's token belongs to another user"
        case .otherUser(let user): return "is pending: it belongs to \(user), who is not the session's user"
        }
    }

    /// Status, code and fields, never the server's text: `422 23514 on title`.
    static func words(_ refusal: Refusal) -> String {
        var parts: [String] = []
        if let status = refusal.status { parts.append(String(status)) }
        if let code = refusal.code { parts.append(code) }
        if parts.isEmpty { parts.append(refusal.isFinal ? "by the library" : "no code") }
        var text = parts.joined(separator: " ")
        if !refusal.fields.isEmpty { text += " on " + refusal.fields.joined(separator: ", ") }
        return text
    }

    static func list(_ ids: [WriteID]) -> String {
        guard let first = ids.first, let last = ids.last else { return "nothing" }
        if ids.count == 1 { return "write \(first)" }
        let contiguous = zip(ids, ids.dropFirst()).allSatisfy { $1.rawValue == $0.rawValue + 1 }
        return contiguous ? "writes \(first)–\(last)" : "writes " + ids.map(\.description).joined(separator: ", ")
    }
}

extension WriteExplanation.Remedy {
    /// Whether the words name the write (`release write 12`).
    var actsOnTheWrite: Bool { self == .release || self == .discard || self == .withdraw }

    func words(_ target: String) -> String {
        switch self {
        case .sync: return "sync"
        case .wait: return "wait"
        case .release: return "release \(target)"
        case .discard: return "discard \(target)"
        case .withdraw: return "withdraw \(target)"
        case .takeAnswered: return "take the answers"
        case .newAccessToken: return "give the client a new access token"
        case .signIn: return "settle the session with a token of the user it belongs to"
        case .enableNetwork: return "enable network access"
        }
    }
}

/// The one function behind `explain` and `outbox why`: reads the projections (and, for a pending write,
/// the end of the log) in one snapshot, and decides nothing.
enum Explainer {
    /// What the client knows beside the log: the time, and whether its network access is off.
    struct Context {
        var now: Timestamp
        var networkDisabled = false
        /// How far back the log is read for the last pass's end.
        var lookBack: UInt64 = 10_000
    }

    /// The write's explanation, or nil when the queue does not hold it.
    static func explain(_ id: WriteID, reader: StoreReader, context: Context) throws -> WriteExplanation? {
        guard let entry = try reader.entry(id) else { return nil }
        var behind: [WriteExplanation.Hop] = []
        var seen: Set<WriteID> = [id]
        var current = (id: id, entry: entry)
        while current.entry.state == .pending, let hop = try firstWait(current.id, current.entry, reader: reader),
            seen.insert(hop.id).inserted, let next = try reader.entry(hop.id)
        {
            behind.append(hop)
            current = (hop.id, next)
        }
        let hold = try self.hold(current.id, current.entry, reader: reader, context: context)
        return WriteExplanation(id: id, state: entry.state, behind: behind, hold: hold, remedies: remedies(for: hold))
    }

    /// The first write a pending write waits on, and how: an unsettled dependency of its own, or of
    /// another member of its atomic group that would go with it (R2.2, R4.2, R4.5).
    static func firstWait(_ id: WriteID, _ entry: WriteEntry, reader: StoreReader) throws -> WriteExplanation.Hop? {
        if let dependency = try entry.dependencies.first(where: { try !reader.isSettled($0) }) {
            return WriteExplanation.Hop(id: dependency, link: try link(from: id, entry, to: dependency, reader: reader))
        }
        guard let group = entry.atomicGroup, try reader.isWaiting(entry) else { return nil }
        for offset in 0..<UInt64(group.count) {
            let member = WriteID(group.first.rawValue + offset)
            guard member != id, let other = try reader.entry(member), other.state.isSendable else { continue }
            if try other.dependencies.contains(where: { try !reader.isSettled($0) }) {
                return WriteExplanation.Hop(id: member, link: .atomicGroup)
            }
        }
        return nil
    }

    private static func link(from id: WriteID, _ entry: WriteEntry, to dependency: WriteID, reader: StoreReader) throws
        -> WriteExplanation.Link
    {
        guard case .writeQueued(let queued)? = try reader.record(entry.queuedSequence)?.event, queued.id == id else {
            return .dependsOn
        }
        return queued.dependsOn.contains(dependency) ? .dependsOn : .sameRow
    }

    private static func hold(_ id: WriteID, _ entry: WriteEntry, reader: StoreReader, context: Context) throws
        -> WriteExplanation.Hold
    {
        switch entry.state {
        case .accepted, .merged, .conflicted: return .answered
        case .refused(let refusal) where refusal.isFinal: return .refusedForGood(refusal)
        case .refused(let refusal): return .refused(refusal, refusals: entry.refusals)
        case .dead(let refusal): return .dead(refusal, refusals: entry.refusals)
        case .blocked(let reason, var refusal):
            // What a write failing alone met is its last failure: its status (never the server's text).
            if refusal == nil, reason == .failingAlone, let status = entry.lastFailure?.status {
                refusal = Refusal(status: status)
            }
            let streak = reason == .failingAlone ? entry.environmentalStreak : 0
            return .blocked(reason, refusal, since: try lastVerdictTime(of: id, reader: reader), streak: streak)
        case .pending: break
        }
        let session = try reader.session()
        if let session, session.user != entry.user { return .otherUser(entry.user) }
        if session?.identityChanged == true { return .identityChanged }
        if context.networkDisabled { return .networkDisabled }
        if let until = try reader.retryAfterUntil(), until > context.now { return .retryAfter(until: until) }
        if entry.environmentalStreak > 0 || entry.lastFailure != nil {
            return .failedAlone(status: entry.lastFailure?.status, streak: entry.environmentalStreak)
        }
        if let stopped = try lastPassStop(reader: reader, lookBack: context.lookBack) {
            return .passStopped(stopped.failure, sending: stopped.sending, at: stopped.at)
        }
        return .nothing
    }

    /// When the write's last verdict was recorded.
    private static func lastVerdictTime(of id: WriteID, reader: StoreReader) throws -> Timestamp? {
        for sequence in try reader.historySequences(of: id).reversed() {
            guard let recorded = try reader.record(sequence) else { continue }
            switch recorded.event {
            case .verdictRecorded, .verdictsRecorded: return recorded.at
            default: continue
            }
        }
        return nil
    }

    /// The last pass's end, when it stopped on a failure: the failure, the writes of its last request
    /// and when. Read back from the log's end, at most `lookBack` events.
    private static func lastPassStop(reader: StoreReader, lookBack: UInt64) throws
        -> (failure: PassFailure, sending: [WriteID], at: Timestamp)?
    {
        var sequence = try reader.appliedSequence()
        let floor = sequence > lookBack ? sequence - lookBack : 0
        var stop: (failure: PassFailure, passId: UInt64, at: Timestamp)?
        while sequence > floor {
            defer { sequence -= 1 }
            guard let recorded = try reader.record(sequence) else { continue }
            switch recorded.event {
            case .passEnded(let ended) where stop == nil:
                guard let failure = ended.stoppedBy else { return nil }
                stop = (failure, ended.passId, recorded.at)
            case .attemptStarted(let attempt) where stop?.passId == attempt.passId:
                return (stop!.failure, attempt.writes.map(\.id), stop!.at)
            case .passStarted(let started) where stop?.passId == started.passId:
                return (stop!.failure, [], stop!.at)
            default: continue
            }
        }
        return stop.map { ($0.failure, [], $0.at) }
    }

    static func remedies(for hold: WriteExplanation.Hold) -> [WriteExplanation.Remedy] {
        switch hold {
        case .nothing, .failedAlone: return [.sync]
        case .networkDisabled: return [.enableNetwork]
        case .retryAfter: return [.wait]
        case .passStopped(let failure, _, _):
            switch failure.kind {
            case .noToken: return [.newAccessToken]
            case .http where failure.status == 401: return [.newAccessToken]
            case .identityChanged: return [.signIn]
            default: return [.wait, .sync]
            }
        case .refused: return [.sync, .discard]
        case .dead: return [.release, .discard]
        case .refusedForGood: return [.discard]
        case .answered: return [.takeAnswered]
        case .identityChanged, .otherUser: return [.signIn]
        case .blocked(let reason, _, _, _):
            switch reason {
            case .credentialRefused: return [.newAccessToken]
            case .keySpent: return [.release]
            case .ancestorUnavailable: return [.withdraw, .release]
            case .conflictUnresolved: return [.withdraw]
            case .failingAlone, .instanceChanged: return [.release, .withdraw]
            case .identityChanged: return [.signIn]
            }
        }
    }

    /// The user's dead and blocked writes (`roots`), and each pending write that waits behind one,
    /// directly or through other pending writes (or a member of its atomic group), with that write (the
    /// lowest id when several hold it).
    struct Holders: Sendable {
        var roots: Set<WriteID> = []
        var held: [WriteID: WriteID] = [:]

        /// Whether events just committed may change what holds what; when not, the holders read before
        /// them still stand, and nothing is read (a pass past a thousand refused writes reads none of
        /// them a commit).
        func mayChange(after events: [RecordedEvent]) -> Bool {
            events.contains { recorded in
                switch recorded.event {
                case .verdictRecorded, .verdictsRecorded:
                    // A new dead or blocked write, or one of these (or a write held) that changed state.
                    return recorded.event.verdicts.contains { verdict in
                        switch verdict.state {
                        case .dead, .blocked: return true
                        default: return roots.contains(verdict.writeId) || held[verdict.writeId] != nil
                        }
                    }
                case .writeQueued(let queued):
                    return queued.dependencies.contains { roots.contains($0) || held[$0] != nil }
                case .writeReleased(let released): return roots.contains(released.writeId)
                case .writeWithdrawn(let withdrawn): return roots.contains(withdrawn.writeId)
                case .writeDiscarded(let discarded): return roots.contains(discarded.writeId)
                case .writeCancelled(let cancelled): return held[cancelled.writeId] != nil
                case .localDataCleared, .sessionSettled: return true
                default: return false
                }
            }
        }
    }

    /// The `Holders` of `user`: reads the user's dead and blocked writes and what depends on them,
    /// nothing else.
    static func holders(user: String, reader: StoreReader) throws -> Holders {
        var roots: [WriteID] = []
        try reader.scan(.rejected, StoreKey.bytes(userPrefix: user), nil) { key, _ in
            let id = try StoreKey.trailingID(key)
            if case .dead? = try reader.entry(id)?.state { roots.append(id) }
            return true
        }
        try reader.scan(.blocked, StoreKey.bytes(userPrefix: user), nil) { key, _ in
            roots.append(try StoreKey.trailingID(key))
            return true
        }
        var held: [WriteID: WriteID] = [:]
        for root in roots.sorted() {
            var frontier = [root]
            while let current = frontier.popLast() {
                var next = try reader.dependents(of: current)
                if let group = try reader.entry(current)?.atomicGroup, current != root {
                    next += (0..<UInt64(group.count)).map { WriteID(group.first.rawValue + $0) }
                }
                for dependent in next where held[dependent] == nil && dependent != root {
                    guard try reader.entry(dependent)?.state == .pending else { continue }
                    held[dependent] = root
                    frontier.append(dependent)
                }
            }
        }
        return Holders(roots: Set(roots), held: held)
    }
}

extension StoreReader {
    /// The last sequence the projections have folded.
    func appliedSequence() throws -> UInt64 {
        try value(.meta, MetaKey.applied).map { try MetaKey.readUInt64($0, name: MetaKey.applied) } ?? 0
    }
}

extension WriteExplanation {
    /// The explanation as one JSON object (Specs/json-fields.md): never the server's text.
    package var json: JSONValue { json(naming: { .id($0) }) }

    /// The explanation as JSON, each write named by `name` (the scenario runner names them by ref).
    package func json(naming name: (WriteID) -> JSONValue) -> JSONValue {
        var hold: [String: JSONValue] = [:]
        switch self.hold {
        case .nothing: hold["kind"] = .string("nothing")
        case .networkDisabled: hold["kind"] = .string("networkDisabled")
        case .retryAfter(let until):
            hold = ["kind": .string("retryAfter"), "until": .string(until.description)]
        case .passStopped(let failure, let sending, let at):
            hold = [
                "kind": .string("passStopped"), "failure": failure.reportJSON, "sending": .array(sending.map(name)),
                "at": .string(at.description),
            ]
        case .failedAlone(let status, let streak):
            hold = ["kind": .string("failedAlone"), "status": .optional(status) { .int($0) }, "streak": .int(Int64(streak))]
        case .refused(let refusal, let refusals):
            hold = ["kind": .string("refused"), "refusal": refusal.json(withMessage: false), "refusals": .int(Int64(refusals))]
        case .dead(let refusal, let refusals):
            hold = [
                "kind": .string("dead"), "refusal": .optional(refusal) { $0.json(withMessage: false) },
                "refusals": .int(Int64(refusals)),
            ]
        case .refusedForGood(let refusal):
            hold = ["kind": .string("refusedForGood"), "refusal": refusal.json(withMessage: false)]
        case .blocked(let reason, let refusal, let since, let streak):
            hold = [
                "kind": .string("blocked"), "reason": .string(reason.rawValue),
                "refusal": .optional(refusal) { $0.json(withMessage: false) },
                "since": .optional(since) { .string($0.description) },
                "streak": .int(Int64(streak)),
            ]
        case .answered: hold["kind"] = .string("answered")
        case .identityChanged: hold["kind"] = .string("identityChanged")
        case .otherUser(let user): hold = ["kind": .string("otherUser"), "user": .string(user)]
        }
        return .object([
            "id": name(id), "state": .string(state.name),
            "behind": .array(behind.map { .object(["id": name($0.id), "link": .string($0.link.rawValue)]) }),
            "holder": name(holder), "hold": .object(hold), "remedies": .strings(remedies.map(\.rawValue)),
            "text": .string(description),
        ])
    }
}
