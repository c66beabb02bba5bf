/// What the app shows about syncing: one value, read together.
public struct SyncStatus: Hashable, Sendable {
    /// What the library knows of the network.
    public enum Network: String, Hashable, Sendable {
        /// No monitor has said anything (or it failed or ended); counts as online.
        case unknown
        /// The monitor says the device is online.
        case online
        /// The monitor says the device is offline.
        case offline
        /// The app switched network access off.
        case disabled
    }

    /// What the library knows of the network: unknown, online, offline or disabled.
    public var network: Network = .unknown
    /// The user's pending writes (a user whose session latched identityChanged has none: they count as blocked).
    public var pendingCount = 0
    /// Refused and dead writes.
    public var rejectedCount = 0
    /// The current user's writes blocked until something outside the queue changes.
    public var blockedCount = 0
    /// The user's pending writes that wait, directly or through others, behind a dead or blocked write:
    /// no pass sends them until that write is released, withdrawn or discarded (`queue.explain(_:)`
    /// says which). They are among `pendingCount`.
    public var heldBehindDeadOrBlockedCount = 0
    /// Whether a pass is running now.
    public var isSyncing = false
    /// When a pass last left the user's queue empty (memory only).
    public var lastSyncedAt: Timestamp?
    /// Why the last pass stopped, if it stopped on a failure: kind, HTTP status and code only.
    public var lastSyncError: PassFailure?

    /// The status before anything is known.
    public init() {}
}

/// A value the app can read now and watch change.
public struct StatusObservation: Sendable {
    let current: @Sendable () -> SyncStatus
    let subscribe: @Sendable () -> AsyncStream<SyncStatus>

    /// The status now. Never throws; after the client closes it keeps its last value.
    public var value: SyncStatus { current() }

    /// The status now, then every change.
    public var updates: AsyncStream<SyncStatus> { subscribe() }
}

/// What changed, for the app to react to: every verdict with its write's id, what the local queue did,
/// the report of each pass the library ran by itself, and a pass that stopped. Never a server's text
/// or a token.
public enum OutboxEvent: Hashable, Sendable {
    /// The local queue changed: a write queued, released, withdrawn, discarded, cleared.
    case localChanged
    /// The instance took a write; `replayed` when it had already applied it (the write was already on
    /// the server).
    case accepted(WriteID, replayed: Bool)
    /// The instance merged a write over newer changes: these fields were overwritten.
    case columnOverwritten(WriteID, fields: [String])
    /// The instance kept its own value; the write's went to the sibling item `siblingId`.
    case conflicted(WriteID, siblingId: String, fields: [String])
    /// The instance refused a write (or the library did, `isFinal`).
    case mutationRejected(WriteID, Rejection)
    /// A write was refused `maxRefusals` times and is dead.
    case deadLetter(WriteID, Rejection)
    /// Nothing of an atomic group was applied.
    case batchAborted([WriteID])
    /// A write is blocked until something outside the queue changes.
    case blocked(WriteID, BlockedReason)
    /// A pending write started waiting behind `holder`, a dead or blocked write (directly or through
    /// other pending writes): it goes once `holder` is released, withdrawn or discarded. Sent once a
    /// write, after the events of the commit that made it wait.
    case waitingBehind(WriteID, holder: WriteID)
    /// A pass stopped on a failure.
    case passStopped(PassFailure)
    /// The report of a pass the library ran by itself (after an enqueue, when the network came back,
    /// when a wait ran out…), as `sync()` returns its own.
    case automaticPass(SyncReport)
    /// The library compacted the log by itself, as `OutboxConfiguration.compaction` asks, between
    /// two passes: what `compact(before:)` would have returned.
    case automaticCompaction(CompactionReport)
    /// A compaction the library ran by itself failed; the log is as it was (the next one tries again).
    case automaticCompactionFailed(OutboxError)
    /// This subscriber fell behind and lost the `count` oldest events before the next one: read the
    /// queue to catch up.
    case missed(count: Int)

    /// A refusal as the events stream shows it: status, code, fields and counts, never the message.
    public struct Rejection: Hashable, Sendable {
        /// The HTTP status of the refusal, if any.
        public var status: Int?
        /// The server's error code (a SQLSTATE or PostgREST code), if any.
        public var code: String?
        /// The fields the refusal names.
        public var fields: [String]
        /// How often the write was refused so far.
        public var refusals: Int
        /// Whether the refusal is for good (the write was refused unsent or unmade): it is never sent
        /// again, cannot be released, and holds no write behind it. A dead write's is false: it is
        /// never sent again unless released, and until then the writes behind it wait.
        public var isFinal: Bool
    }

    /// The stream's events for events just committed.
    static func of(_ recorded: [RecordedEvent]) -> [OutboxEvent] {
        var events: [OutboxEvent] = []
        var localChanged = false
        for recorded in recorded {
            let event = recorded.event
            switch event {
            case .writeQueued, .writeReleased, .writeWithdrawn, .writeDiscarded, .writeCancelled, .answersTaken,
                .answersForgotten, .localDataCleared:
                localChanged = true
            case .verdictRecorded, .verdictsRecorded:
                for verdict in event.verdicts {
                    let id = verdict.writeId
                    switch verdict.state {
                    case .accepted: events.append(.accepted(id, replayed: verdict.replayed))
                    case .merged(let fields): events.append(.columnOverwritten(id, fields: fields))
                    case .conflicted(let sibling, let fields): events.append(.conflicted(id, siblingId: sibling, fields: fields))
                    case .refused(let refusal): events.append(.mutationRejected(id, Rejection(refusal, verdict.refusals)))
                    case .dead(let refusal): events.append(.deadLetter(id, Rejection(refusal ?? Refusal(), verdict.refusals)))
                    case .blocked(let reason, _): events.append(.blocked(id, reason))
                    case .pending: break
                    }
                }
            case .batchAborted(let aborted): events.append(.batchAborted(aborted.writes))
            case .passEnded(let ended): if let failure = ended.stoppedBy { events.append(.passStopped(failure)) }
            default: break
            }
        }
        return localChanged ? [.localChanged] + events : events
    }
}

extension OutboxEvent.Rejection {
    init(_ refusal: Refusal, _ refusals: Int) {
        self.init(
            status: refusal.status, code: refusal.code, fields: refusal.fields, refusals: refusals, isFinal: refusal.isFinal)
    }
}

extension SyncStatus: CustomStringConvertible {
    /// One line for a log or a debugger: the network, the counts, whether a pass runs, the last sync
    /// and the last failure. Never a server's text or a token.
    public var description: String {
        var text = "network \(network.rawValue), pending \(pendingCount), rejected \(rejectedCount), blocked \(blockedCount)"
        if heldBehindDeadOrBlockedCount > 0 { text += ", held behind dead or blocked \(heldBehindDeadOrBlockedCount)" }
        if isSyncing { text += ", syncing" }
        if let lastSyncedAt { text += ", last synced \(lastSyncedAt)" }
        if let lastSyncError { text += ", last failure \(lastSyncError)" }
        return text
    }
}
