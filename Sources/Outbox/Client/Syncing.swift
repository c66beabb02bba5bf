internal import Synchronization

/// The scheduling state of a client (R5): kept in memory only, as [000] keeps it.
struct SyncState {
    struct Waiting {
        var task: Task<Result<SyncReport, OutboxError>, Never>
        var automatic: Bool
    }

    /// The last pass of the chain; a new pass starts after it (at most one runs, R5.1).
    var tail: Task<Result<SyncReport, OutboxError>, Never>?
    /// The pass waiting to run, per table (nil: every table): later callers join it.
    var waiting: [String?: Waiting] = [:]
    var isSyncing = false
    /// Tasks the client started: `idle()` waits for them.
    var inFlight: [Int: Task<Void, Never>] = [:]
    var nextTaskId = 0
    /// Backoff after automatic passes stopped by a failure that may pass (R5.3).
    var backoffStep = 0
    var timer: ClockTimer?
    /// No automatic pass before this (Retry-After, capped at one hour).
    var retryAfterUntil: Timestamp?
    /// The monitor's word (nil: unknown), and whether the one failed attempt of this offline period was made (R5.4).
    var monitorOnline: Bool?
    var offlineAttemptSpent = false
    /// The network switch (R5.5); not kept across clients.
    var networkDisabled = false
    /// Users whose local data is being cleared: their passes stop.
    var clearing: Set<String> = []
    var lastSyncedAt: Timestamp?
    var lastSyncError: PassFailure?
    /// Passes started since the client opened (R5.1: triggers that meet a running pass share one).
    var passesRun = 0
    /// The pass running now, to cancel its request in flight.
    var runningPass: Task<SyncReport, any Error>?

    /// How many entries its collections hold (a client that runs for months must not grow with passes).
    var heldCount: Int { waiting.count + inFlight.count + clearing.count }
}

/// Why the library may start a pass by itself (R5.2).
enum Trigger {
    case enqueued, released, opened, sessionSettled, networkBack, timer
}

extension OutboxClient {
    // MARK: - Sync

    /// Sends the current user's pending writes, and the refused ones not final, once, and returns what
    /// happened. With `table`, only that table's writes, held behind earlier writes of
    /// other tables. If a pass is running, waits for it, then runs its own, so it returns only once
    /// nothing more can be sent now. Throws only for misuse: closed, or no transport.
    @discardableResult
    public func sync(table: String? = nil) async throws -> SyncReport {
        try checkOpen()
        guard transport != nil else {
            throw OutboxError(.noTransport, "sync sends through a transport, and this client has none")
        }
        // The app's own pass goes at once and moves no wait; it ends an offline period's silence (R5.3, R5.4).
        syncState.withLock { $0.offlineAttemptSpent = false }
        return try await requestPass(table: table, automatic: false).get()
    }

    func requestPass(table: String?, automatic: Bool) async -> Result<SyncReport, OutboxError> {
        let task = syncState.withLock { state -> Task<Result<SyncReport, OutboxError>, Never> in
            if var waiting = state.waiting[table] {
                if !automatic {
                    waiting.automatic = false
                    state.waiting[table] = waiting
                }
                return waiting.task
            }
            let previous = state.tail
            let task = Task { [self] in
                _ = await previous?.value
                return await runScheduledPass(table: table)
            }
            state.waiting[table] = SyncState.Waiting(task: task, automatic: automatic)
            state.tail = task
            return task
        }
        track { _ = await task.value }
        return await task.value
    }

    private func runScheduledPass(table: String?) async -> Result<SyncReport, OutboxError> {
        let now = configuration.clock.now()
        let (automatic, held) = syncState.withLock { state -> (Bool, Bool) in
            let automatic = state.waiting.removeValue(forKey: table)?.automatic ?? false
            // An automatic pass that waited behind another checks the gates again: that one may have
            // armed a backoff, received a Retry-After or spent the offline attempt (R5.3, R5.4).
            let held =
                automatic
                && (state.timer != nil || state.retryAfterUntil.map { $0 > now } == true
                    || (state.monitorOnline == false && state.offlineAttemptSpent) || state.networkDisabled)
            if !held {
                state.isSyncing = true
                state.passesRun += 1
            }
            return (automatic, held)
        }
        if held {
            if let until = syncState.withLock({ $0.timer == nil ? $0.retryAfterUntil : nil }), until > now { armTimer(at: until) }
            return .success(SyncReport())
        }
        refreshStatus()
        let result: Result<SyncReport, OutboxError>
        // The pass runs as a task of its own, which close(), disableNetwork() and clearLocalData cancel:
        // a request in flight is cancelled (its keys are resent later).
        let pass = Task { [self] in try await runPass(table: table, automatic: automatic) }
        syncState.withLock { $0.runningPass = pass }
        defer { syncState.withLock { $0.runningPass = nil } }
        do {
            result = .success(try await pass.value)
        } catch let error as OutboxError {
            result = .failure(error)
        } catch {
            result = .failure(OutboxError(.storage, "the pass failed: \(error)"))
        }
        syncState.withLock { $0.isSyncing = false }
        if case .success(let report) = result { afterPass(report, automatic: automatic) }
        refreshStatus()
        await compactIfDue()
        return result
    }

    private func runPass(table: String?, automatic: Bool) async throws -> SyncReport {
        try checkOpen()
        guard let transport, let user = try? owner() else { return SyncReport() }
        if syncState.withLock({ $0.networkDisabled }) || !canSend {
            return try unsentReport(user: user, stoppedBy: nil)
        }
        let token: String?
        switch try await resolveToken(for: user) {
        case .token(let resolved): token = resolved
        case .none: return try unsentReport(user: user, stoppedBy: PassFailure(kind: .noToken))
        case .otherUser:
            let stopped = PassFailure(kind: .identityChanged)
            eventStream.send(.passStopped(stopped))
            return try unsentReport(user: user, stoppedBy: stopped)
        }
        // R5.7: one pass a log at a time, across processes; the lock is held until the last answer is recorded.
        guard let lock = try await acquireSyncLock() else {
            return try unsentReport(user: user, stoppedBy: PassFailure(kind: .busy))
        }
        defer { withExtendedLifetime(lock) {} }
        var refresh: (@Sendable () async -> String?)?
        if let tokenProvider {
            refresh = { @Sendable () async -> String? in
                guard let fresh = try? await tokenProvider() else { return nil }
                return fresh
            }
        }
        let pass = Pass(
            log: log, transport: transport, user: user, token: token, table: table, automatic: automatic,
            maxRefusals: configuration.maxRefusals, batchSize: configuration.batchSize,
            shouldStop: { [weak self] in
                guard let self else { return true }
                // The network switched off, the user's data being cleared, or another user signed in (P7).
                return self.syncState.withLock { $0.networkDisabled || $0.clearing.contains(user) } || (try? self.owner()) != user
            },
            checkAlive: { [weak self] in
                guard let self else { throw OutboxError(.closed, "the outbox client is gone") }
                try self.checkOpen()
            },
            refreshToken: refresh)
        let report = try await pass.run()
        // A latched session's pass sends nothing and so leaves no passEnded in the log to tell the
        // events stream; it is told here (R7.2, R7.3).
        if let stopped = report.stoppedBy, stopped.kind == .identityChanged { eventStream.send(.passStopped(stopped)) }
        return report
    }

    /// The report of a pass that sent nothing: why, if anything stopped it, and what is still pending
    /// (blocked too, when a token of another user latched the soft block, R7.3).
    private func unsentReport(user: String, stoppedBy: PassFailure?) throws -> SyncReport {
        var report = SyncReport()
        report.stoppedBy = stoppedBy
        report.remainingCount = try log.read { try $0.counters(user: user).pending }
        if stoppedBy?.kind == .identityChanged { report.blockedCount = report.remainingCount }
        return report
    }

    /// The token a request of `user` goes with, resolved in this one place for passes and row reads
    /// (R7.5): the token provider's, asked now, or else the session's.
    enum ResolvedToken {
        case token(String?)
        /// The provider gave none (it threw, or returned nil or nothing).
        case none
        /// The provider's token is another user's: it latched the soft block (R7.3).
        case otherUser
    }

    func resolveToken(for user: String) async throws -> ResolvedToken {
        guard let tokenProvider else { return .token(accessToken) }
        guard let provided = try? await tokenProvider(), !provided.isEmpty else { return .none }
        // P7, R7.3: a token of another user never carries this user's writes; it latches the soft
        // block, as a session settled with it would, and a matching token lifts it.
        let changed = AccessToken.subject(of: provided).map { $0 != user } == true
        try await latchIdentity(user: user, changed: changed)
        return changed ? .otherUser : .token(provided)
    }

    /// Records that the provider's token is (`changed`) or is no longer of another user than `user`,
    /// when the session does not say so already.
    private func latchIdentity(user: String, changed: Bool) async throws {
        let settled = SessionSettled(user: user, identityChanged: changed)
        let current = try log.read { try $0.session() }
        guard current?.user == user, current != settled else { return }
        try await log.append { appender in
            if try appender.reader.session() != settled { try appender.append(.sessionSettled(settled)) }
        }
        refreshStatus()
    }

    /// The log's sync lock (R5.7), waiting for a pass of another process up to `syncLockWait`
    /// seconds of the client's clock; nil when it is still held then, or the pass must stop.
    func acquireSyncLock() async throws -> SyncLock? {
        let clock = configuration.clock
        let deadline = clock.now().adding(seconds: configuration.syncLockWait)
        while true {
            if case .acquired(let lock) = try SyncLock.attempt(logPath: log.path) { return lock }
            let now = clock.now()
            guard now < deadline, !isClosedNow, !syncState.withLock({ $0.networkDisabled }) else { return nil }
            let next = min(now.adding(seconds: 0.05), deadline)
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                _ = clock.schedule(at: next) { done.resume() }
            }
        }
    }

    /// Backoff, Retry-After and the offline period after a pass (R5.3, R5.4).
    private func afterPass(_ report: SyncReport, automatic: Bool) {
        let now = configuration.clock.now()
        let delay: Double? = syncState.withLock { state in
            if let retryAfter = report.retryAfter, retryAfter > 0 {
                let until = now.adding(seconds: retryAfter)
                state.retryAfterUntil = max(state.retryAfterUntil ?? until, until)
            }
            state.lastSyncError = report.stoppedBy
            if report.stoppedBy == nil && report.remainingCount == 0 { state.lastSyncedAt = now }
            guard automatic else { return nil }
            guard let failure = report.stoppedBy else {
                state.backoffStep = 0
                return nil
            }
            if failure.kind == .identityChanged { return nil }
            if failure.kind == .network && state.monitorOnline == false {
                state.offlineAttemptSpent = true
                return nil
            }
            var delay = min(60, Double(1 << min(state.backoffStep, 6)))
            state.backoffStep += 1
            if let until = state.retryAfterUntil { delay = max(delay, Double(until.rawValue - now.rawValue) / 1000) }
            return delay
        }
        if automatic { eventStream.send(.automaticPass(report)) }
        guard let delay else { return }
        armTimer(at: now.adding(seconds: delay * jitterFactor()))
    }

    /// 1 ± the configured jitter fraction (at most 20 %), drawn from the injected generator.
    private func jitterFactor() -> Double {
        let fraction = min(max(configuration.backoffJitter, 0), 0.2)
        guard fraction > 0 else { return 1 }
        let unit = Double(configuration.random.next() >> 11) / Double(1 << 53)
        return 1 + fraction * (unit * 2 - 1)
    }

    private func armTimer(at time: Timestamp) {
        let timer = configuration.clock.schedule(at: time) { [weak self] in self?.trigger(.timer) }
        let previous = syncState.withLock { state -> ClockTimer? in
            defer { state.timer = timer }
            return state.timer
        }
        previous?.cancel()
    }

    /// Starts an automatic pass when R5.2–R5.5 allow one now (or arms the timer for when they will).
    func trigger(_ reason: Trigger) {
        guard configuration.autoSync, transport != nil, !isClosedNow else { return }
        let now = configuration.clock.now()
        enum Decision {
            case run
            case wait(Timestamp)
            case nothing
        }
        let decision = syncState.withLock { state -> Decision in
            guard !state.networkDisabled else { return .nothing }
            switch reason {
            case .networkBack, .sessionSettled:
                state.backoffStep = 0
                state.offlineAttemptSpent = false
                state.timer?.cancel()
                state.timer = nil
            case .timer:
                state.timer = nil
            case .enqueued, .released, .opened:
                if state.timer != nil { return .nothing }
            }
            if state.monitorOnline == false && state.offlineAttemptSpent { return .nothing }
            if let until = state.retryAfterUntil, until > now { return state.timer == nil ? .wait(until) : .nothing }
            return .run
        }
        switch decision {
        case .nothing: return
        case .wait(let until): armTimer(at: until)
        case .run:
            guard let user = try? owner(), (try? log.read({ try $0.counters(user: user).pending })) ?? 0 > 0 else { return }
            track { [self] in _ = await requestPass(table: nil, automatic: true) }
        }
    }

    /// Runs `work` as a task `idle()` waits for.
    func track(_ work: @escaping @Sendable () async -> Void) {
        syncState.withLock { state in
            state.nextTaskId += 1
            let id = state.nextTaskId
            state.inFlight[id] = Task { [weak self] in
                await work()
                _ = self?.syncState.withLock { $0.inFlight.removeValue(forKey: id) }
            }
        }
    }

    /// Returns once every pass and task the client started has finished (tests, scenarios: what the
    /// library started at the current simulated time is done).
    package func idle() async {
        while let task = syncState.withLock({ $0.inFlight.values.first }) {
            await task.value
            // A task removes itself when done; one that finished is gone on the next look.
            _ = syncState.withLock { state in
                state.inFlight.first { $0.value == task }.map { state.inFlight.removeValue(forKey: $0.key) }
            }
        }
    }

    /// Calls `listener` with every event of the `events` stream, synchronously as it is sent: for the
    /// scenario runner and the simulation, which must see each in step with the steps they drive.
    package func listen(_ listener: @escaping @Sendable (OutboxEvent) -> Void) { eventStream.listen(listener) }

    /// What the client keeps in memory that could grow with use: scheduling entries and the events
    /// buffered for subscribers (each subscriber's buffer is bounded).
    package var heldInMemory: Int { syncState.withLock { $0.heldCount } + eventStream.bufferedCount }

    // MARK: - Network (R5.4, R5.5)

    var isNetworkDisabled: Bool { syncState.withLock { $0.networkDisabled } }

    /// Switches the library's network access off: nothing is sent until `enableNetwork()`; a request
    /// in flight is cancelled (its writes are sent again later, under the same keys) and the running
    /// pass ends; `status.network` reads `disabled` when this returns.
    public func disableNetwork() async {
        let changed = syncState.withLock { state -> Bool in
            defer { state.networkDisabled = true }
            state.timer?.cancel()
            state.timer = nil
            state.runningPass?.cancel()
            return !state.networkDisabled
        }
        refreshStatus()
        if changed, !isClosedNow {
            _ = try? await log.append { try $0.append(.networkSwitched(NetworkSwitched(enabled: false))) }
        }
    }

    /// Switches network access back on; with autoSync, a pass follows.
    public func enableNetwork() async {
        let changed = syncState.withLock { state -> Bool in
            defer { state.networkDisabled = false }
            return state.networkDisabled
        }
        refreshStatus()
        guard changed, !isClosedNow else { return }
        _ = try? await log.append { try $0.append(.networkSwitched(NetworkSwitched(enabled: true))) }
        trigger(.networkBack)
    }

    /// The connectivity monitor's word: true online, false offline, nil unknown (a monitor that failed
    /// or ended), which counts as online. A hint, never a gate.
    public func connectivityChanged(online: Bool?) {
        let cameBack = syncState.withLock { state -> Bool in
            defer { state.monitorOnline = online }
            return online != false && state.monitorOnline == false || online == true && state.monitorOnline == nil
        }
        refreshStatus()
        if cameBack { trigger(.networkBack) }
    }

    /// Follows a connectivity monitor (on Linux, the app's own sequence of online/offline words) until it
    /// ends, when the network counts as unknown.
    public func monitorConnectivity<Monitor: AsyncSequence & Sendable>(_ monitor: Monitor) where Monitor.Element == Bool {
        Task { [weak self] in
            do {
                for try await online in monitor { self?.connectivityChanged(online: online) }
            } catch {}
            self?.connectivityChanged(online: nil)
        }
    }

    // MARK: - Sign-out (R7.3)

    /// Takes every write of `user` out of the queue, after cancelling a running pass (its report counts
    /// what it sent). Call `sync()` first to send what can be sent. Appends a `localDataCleared` event.
    public func clearLocalData(user: String) async throws {
        try checkOpen()
        let passesForUser = currentUser == user
        syncState.withLock { state in
            _ = state.clearing.insert(user)
            // The running pass is the session user's: cancel its request only when that user is cleared.
            if passesForUser { state.runningPass?.cancel() }
        }
        defer { syncState.withLock { _ = $0.clearing.remove(user) } }
        _ = await syncState.withLock({ $0.tail })?.value
        try await log.append { appender in
            var ids: [WriteID] = []
            try appender.reader.scan(.writes, [], nil) { key, value in
                let id = WriteID(try Key.readBigEndian(key))
                if try WriteEntry.decode(value, id: id).user == user { ids.append(id) }
                return true
            }
            if !ids.isEmpty { try appender.append(.localDataCleared(LocalDataCleared(user: user, writes: ids))) }
        }
    }

    // MARK: - Status and events (R7.1, R7.2)

    /// The status: its value now, and its changes.
    public var syncStatus: StatusObservation {
        StatusObservation(
            current: { [self] in status.withLock { $0 } },
            subscribe: { [self] in statusUpdates.subscribe(initial: status.withLock { $0 }) })
    }

    /// What changes from now on: every verdict with its write's id, local changes, aborted groups,
    /// stopped passes and the report of each automatic pass. Each subscriber keeps the last 1,024
    /// events it has not read; one that falls behind further reads `missed(count)` where events were
    /// lost.
    public var events: AsyncStream<OutboxEvent> { eventStream.subscribe() }

    /// Reads the counts together and publishes the status if it changed. After close it keeps its value.
    /// Returns the writes that started waiting behind a dead or blocked write since the last refresh,
    /// each with the write that holds it, for the events stream. After `events` were committed, the
    /// holders are read again only when those events may have changed them.
    @discardableResult
    func refreshStatus(after events: [RecordedEvent]? = nil) -> [(WriteID, holder: WriteID)] {
        guard !isClosedNow else { return [] }
        let user = try? owner()
        let sync = syncState.withLock { $0 }
        var newlyHeld: [(WriteID, holder: WriteID)] = []
        let changed = status.withLock { status -> SyncStatus? in
            var next = SyncStatus()
            let known = heldBehind.withLock { $0 }
            let stillKnown = known.user == user && events.map { !known.holders.mayChange(after: $0) } == true
            if let user,
                let (counters, session, holders) = try? log.read({ reader in
                    let counters = try reader.counters(user: user)
                    // Only a dead or blocked write holds writes this way: none, and nothing is read.
                    let holders =
                        counters.rejected + counters.blocked == 0
                        ? Explainer.Holders() : stillKnown ? known.holders : try Explainer.holders(user: user, reader: reader)
                    return (counters, try reader.session(), holders)
                })
            {
                let held = holders.held
                next.pendingCount = counters.pending
                next.rejectedCount = counters.rejected
                next.blockedCount = counters.blocked
                next.heldBehindDeadOrBlockedCount = held.count
                if session?.identityChanged == true, session?.user == user {
                    next.blockedCount += counters.pending
                    next.pendingCount = 0
                }
                // Taken under the status's lock, so two refreshes never both announce one write.
                newlyHeld = heldBehind.withLock { known in
                    defer { known = (user, holders) }
                    return held.filter { known.user != user || known.holders.held[$0.key] == nil }.sorted { $0.key < $1.key }
                        .map { ($0.key, holder: $0.value) }
                }
            }
            next.network = sync.networkDisabled ? .disabled : sync.monitorOnline.map { $0 ? .online : .offline } ?? .unknown
            next.isSyncing = sync.isSyncing
            next.lastSyncedAt = sync.lastSyncedAt
            next.lastSyncError = sync.lastSyncError
            guard next != status else { return nil }
            status = next
            return next
        }
        if let changed { statusUpdates.send(changed) }
        return newlyHeld
    }

    /// Called after every commit of the log.
    func didCommit(_ events: [RecordedEvent]) {
        commits.advance()
        let newlyHeld = refreshStatus(after: events)
        for event in OutboxEvent.of(events) { eventStream.send(event) }
        for (id, holder) in newlyHeld { eventStream.send(.waitingBehind(id, holder: holder)) }
    }
}
