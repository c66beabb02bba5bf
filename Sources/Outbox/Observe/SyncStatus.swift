/// What the app shows about syncing (R7.1): one value, read together.
public struct SyncStatus: Hashable, Sendable {
    /// What the library knows of the network.
    public enum Network: String, Hashable, Sendable {
        /// No monitor has said anything (or it failed or ended); counts as online (R5.4).
        case unknown
        case online
        case offline
        /// The app switched network access off (R5.5).
        case disabled
    }

    public var network: Network = .unknown
    /// The user's pending writes (a user whose session latched identityChanged has none: they count as blocked).
    public var pendingCount = 0
    /// Refused and dead writes (R3.5).
    public var rejectedCount = 0
    public var blockedCount = 0
    public var isSyncing = false
    /// When a pass last left the user's queue empty (memory only).
    public var lastSyncedAt: Timestamp?
    /// Why the last pass stopped, if it stopped on a failure: kind, HTTP status and code only.
    public var lastSyncError: PassFailure?

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

/// What changed, for the app to react to (R7.2). Never a server's text or a token.
public enum OutboxEvent: Hashable, Sendable {
    /// The local queue changed: a write queued, released, withdrawn, discarded, cleared.
    case localChanged
    /// The instance refused a write (or the library did, `isFinal`).
    case mutationRejected(WriteID, Rejection)
    /// A write was refused `maxRefusals` times and is dead.
    case deadLetter(WriteID, Rejection)
    /// Nothing of an atomic group was applied (R4.5).
    case batchAborted([WriteID])
    /// The instance merged a write over newer changes: these fields were overwritten.
    case columnOverwritten(WriteID, fields: [String])
    /// A write is blocked until something outside the queue changes (R3.3).
    case blocked(WriteID, BlockedReason)
    /// A pass stopped on a failure.
    case passStopped(PassFailure)

    /// A refusal as the events stream shows it: status, code, fields and counts, never the message.
    public struct Rejection: Hashable, Sendable {
        public var status: Int?
        public var code: String?
        public var fields: [String]
        public var refusals: Int
        public var isFinal: Bool
    }

    /// The stream's events for events just committed.
    static func of(_ recorded: [RecordedEvent]) -> [OutboxEvent] {
        var events: [OutboxEvent] = []
        var localChanged = false
        for event in recorded.map(\.event) {
            switch event {
            case .writeQueued, .writeReleased, .writeWithdrawn, .writeDiscarded, .answersTaken, .answersForgotten,
                .localDataCleared:
                localChanged = true
            case .verdictRecorded(let verdict):
                switch verdict.state {
                case .refused(let refusal):
                    events.append(.mutationRejected(verdict.writeId, Rejection(refusal, verdict.refusals)))
                case .dead(let refusal):
                    events.append(.deadLetter(verdict.writeId, Rejection(refusal ?? Refusal(), verdict.refusals)))
                case .merged(let fields): events.append(.columnOverwritten(verdict.writeId, fields: fields))
                case .blocked(let reason, _): events.append(.blocked(verdict.writeId, reason))
                default: break
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
