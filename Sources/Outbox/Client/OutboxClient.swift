public import Foundation
internal import OutboxLMDB
internal import Synchronization

/// The outbox of one log: enqueue writes, look at the queue, act on it, audit it.
///
/// ```swift
/// let outbox = try await OutboxClient.open(at: URL(filePath: "/data/outbox"))
/// try await outbox.settleSession(user: "alice", accessToken: token)
/// let id = try await outbox.enqueue(.insert(into: "todos", key: ["id": 1], body: ["title": "Milk"]))
/// let writes = try await outbox.queue.all()
/// ```
///
/// One client per log per process (a second open throws `.alreadyOpen`; `close()` it, or let it go, to open
/// the log again). All calls are safe from any task.
public final class OutboxClient: Sendable {
    package let log: EventLog
    /// The settings the client was opened with.
    public let configuration: OutboxConfiguration
    let transport: (any OutboxTransport)?
    /// Where passes take their token when the app gives one (R7.5); nil: the session's token.
    let tokenProvider: (@Sendable () async throws -> String?)?
    private let session = Mutex(Session())
    private let isClosed = Atomic<Bool>(false)
    /// The log's origin, read when the client opened (it never changes): `origin()` reads no log.
    private let knownOrigin: Origin?
    let syncState: Mutex<SyncState>
    let status = Mutex(SyncStatus())
    /// What the status last read of the log, and the user it was read for: the writes waiting behind
    /// a dead or blocked write (each is announced once, `refreshStatus`), and the pending count,
    /// which tells a trigger whether an automatic pass has anything to send without a read.
    let lastRead = Mutex<(user: String?, pending: Int, holders: Explainer.Holders)>((nil, 0, Explainer.Holders()))
    let statusUpdates = Broadcast<SyncStatus>()
    let eventStream = Broadcast<OutboxEvent>(missed: { .missed(count: $0) })
    /// Wakes the change feeds after each commit.
    let commits = CommitSignal()

    struct Session {
        var user: String?
        var accessToken: String?
        /// Whether the app settled the session in this client: the token lives in memory only, so a
        /// client opened on a log whose session names a user sends nothing until then (R7.3).
        var settledHere = false
    }

    private init(
        log: EventLog, transport: (any OutboxTransport)?, configuration: OutboxConfiguration, user: String?,
        tokenProvider: (@Sendable () async throws -> String?)?, retryAfterUntil: Timestamp?, origin: Origin?
    ) {
        self.log = log
        self.knownOrigin = origin
        self.transport = transport
        self.tokenProvider = tokenProvider
        self.configuration = configuration
        let scheduler = SyncScheduler(startsPasses: configuration.autoSync && transport != nil, retryAfterUntil: retryAfterUntil)
        syncState = Mutex(SyncState(scheduler: scheduler))
        session.withLock { $0.user = user }
    }

    /// A client let go is closed then, not when the last of its log's own tasks lets go of the log:
    /// the path may be opened again once nothing holds the client (a running call holds it until it
    /// returns).
    deinit { close() }

    /// Opens the log at `url` (a folder), creating it, and the folders above it, if needed (on iOS,
    /// Application Support does not exist on first launch). The session starts as the log last
    /// recorded it, without a token until `settleSession` gives one.
    ///
    /// With `accessToken`, every pass asks it for the token just before it sends, and once more when
    /// the server says the token is expired or invalid (then the same request goes again, under the
    /// same keys); a provider that throws or returns nil skips the pass, sending and charging nothing.
    /// With supabase-swift: `accessToken: { try await supabase.auth.session.accessToken }`.
    public static func open(
        at url: URL, transport: (any OutboxTransport)? = nil, configuration: OutboxConfiguration = OutboxConfiguration(),
        accessToken: (@Sendable () async throws -> String?)? = nil
    ) async throws -> OutboxClient {
        let parent = url.deletingLastPathComponent()
        do {
            try FileManager.default.createDirectory(at: parent, withIntermediateDirectories: true)
        } catch {
            throw OutboxError(
                .storage, "\(parent.path): the folder for the log cannot be made: \(error.localizedDescription)", cause: error)
        }
        // Off Swift's pool: opening may create the log, or rebuild the projections of an older layout.
        return try await DispatchQueue.global(qos: .userInitiated).run {
            try open(path: url.path, transport: transport, configuration: configuration, accessToken: accessToken)
        }
    }

    /// Opens the log at `path`, synchronously: for the package's own tools and tests (an app calls
    /// `open(at:)`).
    package static func open(
        path: String, transport: (any OutboxTransport)? = nil, configuration: OutboxConfiguration = OutboxConfiguration(),
        accessToken: (@Sendable () async throws -> String?)? = nil
    ) throws -> OutboxClient {
        guard configuration.maxRefusals >= 1, configuration.batchSize >= 1 else {
            throw OutboxError(.invalidWrite, "maxRefusals and batchSize must be at least 1")
        }
        var options = EventLog.Options()
        options.durability = configuration.durability == .full ? .full : .noSync
        options.mapSize = configuration.initialMapSize
        options.clock = configuration.clock
        options.random = configuration.random
        options.crashPlan = configuration.crashPlan
        options.powerLossIsSimulated = configuration.powerLossIsSimulated
        options.journalIsSimulated = configuration.journalIsSimulated
        options.archiveFolder = configuration.archiveFolder
        let log = try EventLog(path: path, options: options)
        let (user, deadline, origin) = try log.read { (try $0.session()?.user, try $0.retryAfterUntil(), try? $0.origin()) }
        let client = OutboxClient(
            log: log, transport: transport, configuration: configuration, user: user, tokenProvider: accessToken,
            retryAfterUntil: deadline, origin: origin)
        log.observeCommits { [weak client] events in client?.didCommit(events) }
        client.refreshStatus()
        client.trigger(.opened)
        return client
    }

    /// Stops the client: later calls throw `.closed`, a request in flight is cancelled and its pass
    /// records nothing more, the status
    /// keeps its last value and the streams end. The log stays as it is, and may be opened again.
    public func close() {
        guard !isClosed.exchange(true, ordering: .sequentiallyConsistent) else { return }
        log.observeCommits(nil)
        log.close()
        perform(schedule(.closed))
        statusUpdates.finish()
        eventStream.finish()
        commits.finish()
    }

    var isClosedNow: Bool { isClosed.load(ordering: .sequentiallyConsistent) }

    func checkOpen() throws {
        if isClosedNow { throw OutboxError(.closed, "the outbox client is closed") }
    }

    /// The log's origin: with a write's id, it names that write on every server (the
    /// `X-Outbox-Origin` header, the contract's `origin`) however often its key is renewed.
    public func origin() throws -> Origin {
        try checkOpen()
        if let knownOrigin { return knownOrigin }
        return try log.read { try $0.origin() }
    }

    // MARK: - Session

    /// The user new writes belong to, if one is signed in.
    public var currentUser: String? { session.withLock { $0.user } }

    /// Settles the session into `user` (nil: signed out) with its access token, kept in memory only.
    /// A token whose subject is not `user` latches the `identityChanged` block.
    public func settleSession(user: String?, accessToken: String?) async throws {
        try checkOpen()
        if let user { try Write.validateName(user, what: "the user name") }
        let identityChanged = user != nil && accessToken.flatMap(AccessToken.subject(of:)).map { $0 != user } == true
        let settled = SessionSettled(user: user, identityChanged: identityChanged)
        let newToken = session.withLock { $0.accessToken != accessToken } && accessToken != nil
        let random = configuration.random
        try await log.append(crashPoint: .sessionBeforeCommit) { appender in
            if try appender.reader.session() != settled { try appender.append(.sessionSettled(settled)) }
            // A new token clears credentialRefused: those writes go on the next pass by themselves (R3.3).
            if let user, newToken, !identityChanged {
                _ = try QueueOperations.release(reason: .credentialRefused, user: user, random: random, appender: &appender)
            }
        }
        session.withLock {
            $0.user = user
            $0.accessToken = accessToken
            $0.settledHere = true
        }
        await refreshStatusOffPool()
        trigger(.sessionSettled)
    }

    /// The owner of a write made now.
    func owner() throws -> String {
        if let user = currentUser { return user }
        guard !configuration.requiresUser else {
            throw OutboxError(.noUser, "no user is signed in: settle the session first, or open with requiresUser: false")
        }
        return OutboxConfiguration.anonymousUser
    }

    var accessToken: String? { session.withLock { $0.accessToken } }

    /// How many writes of users other than `user` are pending (the tool says so after a sync with
    /// `user`'s token, which never carries them).
    package func pendingCount(exceptUser user: String) throws -> Int {
        try log.read { try $0.pendingCount(exceptUser: user) }
    }

    /// Whether a pass may send now: the session was settled in this client (its token known), or no
    /// user is signed in and writes are anonymous.
    var canSend: Bool {
        session.withLock { $0.settledHere || ($0.user == nil && !configuration.requiresUser) }
    }

    // MARK: - Writes

    /// Queues one write; returns its id once it is durable. Bad input throws `.invalidWrite` and
    /// writes nothing.
    @discardableResult
    public func enqueue(_ write: Write) async throws -> WriteID {
        try await enqueue(contentsOf: [write])[0]
    }

    /// Queues many writes in one transaction; with `atomic`, as one group that the instance applies
    /// whole or not at all. Either every write is queued or none is.
    @discardableResult
    public func enqueue(contentsOf writes: [Write], atomic: Bool = false) async throws -> [WriteID] {
        try checkOpen()
        return try await enqueue(writes, atomic: atomic, owner: try owner())
    }

    /// Enqueues as `user` without touching the session: for the `outbox enqueue` tool.
    package func enqueue(contentsOf writes: [Write], atomic: Bool, user: String) async throws -> [WriteID] {
        try checkOpen()
        try Write.validateName(user, what: "the user name")
        return try await enqueue(writes, atomic: atomic, owner: user)
    }

    private func enqueue(_ writes: [Write], atomic: Bool, owner: String) async throws -> [WriteID] {
        guard !writes.isEmpty else { return [] }
        if atomic && writes.count > WriteQueued.maxGroupSize {
            throw OutboxError.invalid("an atomic group holds at most \(WriteQueued.maxGroupSize) writes")
        }
        // Checked where they lie: a copy of a write retains each of its fields.
        var writes = writes
        for index in writes.indices where writes[index].isKeyless {
            writes[index] = try writes[index].keyedFromBody(columns: transport?.keyColumns(of: writes[index].table))
        }
        var recordBytes = 0
        try writes.withUnsafeBufferPointer { writes in
            for index in writes.indices {
                try writes[index].validate()
                recordBytes += WriteQueued.leastRecordSize(of: writes[index], user: owner)
            }
        }
        let random = configuration.random
        let ids = try await log.append(isEnqueue: true, recordBytes: recordBytes) { [writes] appender in
            try QueueOperations.enqueue(writes, user: owner, atomic: atomic, random: random, appender: &appender)
        }
        trigger(.enqueued)
        return ids
    }

    /// What the current user's queue holds, and the calls that act on it.
    public var queue: OutboxQueue { OutboxQueue(client: self) }

    /// Waits until write `id` has an outcome (accepted, merged, conflicted, refused, blocked or dead) and
    /// returns it as it then stands, or nil when it left the queue first (cancelled, discarded,
    /// withdrawn, taken) or the session moved to another user. For an app that shows a spinner on one
    /// row. Throws `notFound` for a write the log never held, `closed` when the client closes first,
    /// and `CancellationError` when the waiting task is cancelled.
    public func settled(_ id: WriteID) async throws -> QueuedWrite? {
        // Subscribed before the first look: a change right after it still wakes the loop.
        let updates = syncStatus.updates
        guard let write = try await queue.write(id) else {
            _ = try await history(of: id)  // throws notFound for a write the log never held
            return nil
        }
        if write.state != .pending { return write }
        for await _ in updates {
            guard let now = try await queue.write(id) else { return nil }
            if now.state != .pending { return now }
        }
        try Task.checkCancellation()
        throw OutboxError(.closed, "the outbox client closed before write \(id) had an outcome", writeID: id)
    }

    /// The log's events after `sequence` (0: from the first), in order, then each new one as it is
    /// committed; see `OutboxChanges`. Keep the `sequence` of the last event handled, and pass it
    /// here after a restart: nothing is missed or repeated.
    public func changes(after sequence: UInt64 = 0) -> OutboxChanges { OutboxChanges(client: self, after: sequence) }

    // MARK: - Audit and debugging

    /// Every event that touched write `id`, in order, read from an index: the current user's
    /// writes only. Throws `.notFound` for an id the log never held and for another user's write (the
    /// `outbox` tool reads every user's, for audits).
    public func history(of id: WriteID) async throws -> [RecordedEvent] {
        try checkOpen()
        let user = try owner()
        let log = self.log
        let events = try await log.reads.run { try log.history(of: id) }
        guard case .writeQueued(let queued)? = events.first?.event, queued.user == user else { throw OutboxError.notFound(id) }
        return events
    }

    /// The current user's writes as they stood just after event `sequence`, time travel for
    /// debugging (the `outbox` tool shows every user's).
    public func state(asOf sequence: UInt64) async throws -> QueueSnapshot {
        try checkOpen()
        let user = try owner()
        let log = self.log
        let whole = try await log.reads.run { try log.state(asOf: sequence) }
        return QueueSnapshot(sequence: whole.sequence, user: whole.user, writes: whole.writes.filter { $0.user == user })
    }

    /// Checks every record and that the projections equal a rebuild.
    public func verify() async throws -> VerifyReport {
        try checkOpen()
        let log = self.log
        return try await log.reads.run { try log.verify() }
    }

    /// Drops the projections and folds them again from the log.
    public func rebuild() async throws {
        try checkOpen()
        let log = self.log
        try await log.committer.exclusive { try log.rebuild() }
    }

    /// The events from `from` through `to`, in order.
    public func events(from: UInt64 = 1, through to: UInt64 = .max) async throws -> [RecordedEvent] {
        try checkOpen()
        let log = self.log
        return try await log.reads.run {
            var events: [RecordedEvent] = []
            try log.forEachEvent(from: from, to: to) {
                events.append($0)
                return true
            }
            return events
        }
    }
}

extension OutboxClient {
    /// Reads a snapshot of the log off Swift's pool (`ReadExecutor`): what the API's `async` reads use.
    func read<R: Sendable>(_ body: @escaping @Sendable (StoreReader) throws -> R) async throws -> R {
        let log = self.log
        return try await log.reads.run { try log.read(body) }
    }

    /// Every write the queue holds, every user's, in id order (the tools and the scenario runner).
    package func everyWrite() throws -> [QueuedWrite] {
        try checkOpen()
        return try log.read { try QueuedWrite.all(user: nil, reader: $0) }
    }
}
