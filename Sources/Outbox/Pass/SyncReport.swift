/// What one `sync` did. The counts are this call's own.
public struct SyncReport: Hashable, Sendable {
    /// One answer the call got for one write, or one decision it made on one.
    public struct Verdict: Hashable, Sendable {
        /// accepted, merged, conflicted, refused (by the instance, or by the library: unmade), dead,
        /// blocked, failed (a per-write failure that may pass), skipped, notSent (the
        /// transport stopped before it: pending, nothing charged).
        public enum Kind: String, Hashable, Sendable {
            /// Applied as sent.
            case accepted
            /// Applied over newer changes to other fields.
            case merged
            /// Not applied; kept as a sibling the app can read.
            case conflicted
            /// Refused by the instance; sent again until it is dead.
            case refused
            /// Refused too often: never sent again.
            case dead
            /// Held until something outside the queue changes.
            case blocked
            /// Failed alone with a failure that may pass.
            case failed
            /// Not applied: a write it depends on in the same request was not.
            case skipped
            /// Not sent: the request stopped before it.
            case notSent
        }
        /// The write.
        public var id: WriteID
        /// What the instance answered.
        public var kind: Kind
        /// The write's refusal count after this answer.
        public var refusals: Int
        /// Whether the instance had applied it before (a resend answered again).
        public var replayed: Bool
        /// The reason, when `kind` is blocked.
        public var blockedReason: BlockedReason?

        /// A verdict of a report (tests of an app's reactions make their own).
        public init(id: WriteID, kind: Kind, refusals: Int, replayed: Bool = false, blockedReason: BlockedReason? = nil) {
            self.id = id
            self.kind = kind
            self.refusals = refusals
            self.replayed = replayed
            self.blockedReason = blockedReason
        }
    }

    /// A write refused or dead during this call, with its refusal count.
    public struct Rejected: Hashable, Sendable {
        /// The write.
        public var id: WriteID
        /// How often the instance refused it so far.
        public var refusals: Int
        /// Whether this refusal made it dead.
        public var isDead: Bool
    }

    /// Answered this call: accepted, merged or conflicted.
    public var syncedCount = 0
    /// Of those, answers the instance replayed: the write was already on the server.
    public var alreadyOnServerCount = 0
    /// Refused or dead during this call.
    public var rejected: [Rejected] = []
    /// How many writes the pass saw refused (dead ones included).
    public var rejectedCount: Int { rejected.count }
    /// Blocked during this call.
    public var blockedCount = 0
    /// Writes in this call's scope still waiting on a dependency when it returned.
    public var heldCount = 0
    /// Of the user's pending writes when the call returned, those waiting (directly or through others)
    /// behind a dead or blocked write: no pass sends them until that write is released, withdrawn or
    /// discarded.
    public var heldBehindDeadOrBlockedCount = 0
    /// With a table: that table's writes held behind an earlier pending write of another table.
    public var heldBehindOtherTablesCount = 0
    /// The user's writes still pending when the call returned, whatever the table.
    public var remainingCount = 0
    /// One entry per answer received or decision made, in order (a collection that keeps a run of like
    /// verdicts on consecutive writes as one).
    public var verdicts = Verdicts()
    /// The failure that stopped the pass, if one did: kind, HTTP status and code, never a message.
    public var stoppedBy: PassFailure?
    /// How long the instance asked to wait, in seconds (capped at one hour), if it did.
    public var retryAfter: Double?

    /// A report of a pass that did nothing.
    public init() {}

    mutating func add(_ verdicts: [Verdict]) {
        for verdict in verdicts { add(verdict) }
    }

    mutating func add(_ verdict: Verdict) {
        verdicts.append(verdict)
        switch verdict.kind {
        case .accepted, .merged, .conflicted:
            syncedCount += 1
            if verdict.replayed { alreadyOnServerCount += 1 }
        case .refused, .dead: rejected.append(Rejected(id: verdict.id, refusals: verdict.refusals, isDead: verdict.kind == .dead))
        case .blocked: blockedCount += 1
        case .failed, .skipped, .notSent: break
        }
    }
}

extension SyncReport.Verdict {
    /// The report's line for a recorded state.
    init(id: WriteID, state: WriteState, refusals: Int, replayed: Bool) {
        let kind: Kind
        var reason: BlockedReason?
        switch state {
        case .pending: kind = .skipped
        case .accepted: kind = .accepted
        case .merged: kind = .merged
        case .conflicted: kind = .conflicted
        case .refused: kind = .refused
        case .dead: kind = .dead
        case .blocked(let why, _):
            kind = .blocked
            reason = why
        }
        self.init(id: id, kind: kind, refusals: refusals, replayed: replayed, blockedReason: reason)
    }
}

extension SyncReport {
    /// The report as one JSON object with the fields documented in Specs/json-fields.md; writes are named by their ids.
    public var json: JSONValue { json(naming: { .int(Int64($0.rawValue)) }) }

    /// The report as JSON, each write named by `name` (the scenario runner names them by ref).
    package func json(naming name: (WriteID) -> JSONValue) -> JSONValue {
        .object([
            "syncedCount": .int(Int64(syncedCount)), "alreadyOnServerCount": .int(Int64(alreadyOnServerCount)),
            "rejectedCount": .int(Int64(rejectedCount)), "blockedCount": .int(Int64(blockedCount)),
            "heldCount": .int(Int64(heldCount)), "heldBehindOtherTablesCount": .int(Int64(heldBehindOtherTablesCount)),
            "heldBehindDeadOrBlockedCount": .int(Int64(heldBehindDeadOrBlockedCount)),
            "remainingCount": .int(Int64(remainingCount)), "rejected": .array(rejected.map { name($0.id) }),
            "stoppedBy": stoppedBy?.reportJSON ?? .null, "retryAfter": retryAfter.map { .double($0) } ?? .null,
            "verdicts": .array(
                verdicts.map { verdict in
                    var fields: [String: JSONValue] = [
                        "ref": name(verdict.id), "verdict": .string(verdict.kind.rawValue),
                        "refusals": .int(Int64(verdict.refusals)), "replayed": .bool(verdict.replayed),
                    ]
                    if let reason = verdict.blockedReason { fields["reason"] = .string(reason.rawValue) }
                    return .object(fields)
                }),
        ])
    }
}

extension PassFailure {
    /// `{kind, status, code}`, as a report and the status show it: never a message or a token.
    public var reportJSON: JSONValue {
        .object([
            "kind": .string(kind.rawValue), "status": status.map { .int(Int64($0)) } ?? .null,
            "code": code.map { .string($0) } ?? .null,
        ])
    }
}

extension SyncReport: CustomStringConvertible {
    /// One line for a log or a debugger: the counts (the replayed answers are among the synced), then
    /// how the pass stopped, if it did. Never a server's text or a token.
    public var description: String {
        var text =
            "synced \(syncedCount) (\(alreadyOnServerCount) already on the server), rejected \(rejectedCount), "
            + "blocked \(blockedCount), held \(heldCount), remaining \(remainingCount)"
        if heldBehindOtherTablesCount > 0 { text += ", held behind other tables \(heldBehindOtherTablesCount)" }
        if heldBehindDeadOrBlockedCount > 0 { text += ", held behind dead or blocked \(heldBehindDeadOrBlockedCount)" }
        if let stoppedBy { text += "; stopped by \(stoppedBy)" }
        return text
    }
}
