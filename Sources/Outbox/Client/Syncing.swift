internal import Synchronization

/// What a client keeps to schedule its passes: the scheduler's state, and the tasks and the timer
/// its actions made. In memory only, as [000] keeps it.
struct SyncState {
    var scheduler: SyncScheduler
    /// The last pass of the chain; a new pass starts after it (at most one runs, R5.1).
    var tail: Task<Result<SyncReport, OutboxError>, Never>?
    /// The pass waiting to run, per table (nil: every table): later callers join it.
    var waiting: [String?: Task<Result<SyncReport, OutboxError>, Never>] = [:]
    var timer: ClockTimer?
    /// Tasks the client started: `idle()` waits for them.
    var inFlight: [Int: Task<Void, Never>] = [:]
    var nextTaskId = 0
    /// Users whose local data is being cleared: their passes stop.
    var clearing: Set<String> = []
    /// The pass running now, to cancel its request in flight.
    var runningPass: Task<SyncReport, any Error>?

    init(scheduler: SyncScheduler) { self.scheduler = scheduler }

    var passesRun: Int { scheduler.passesRun }
    var networkDisabled: Bool { scheduler.networkDisabled }
    /// How many entries its collections hold (a client that runs for months must not grow with passes).
    var heldCount: Int { waiting.count + inFlight.count + clearing.count }
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
        return try await requestPass(table: table, automatic: false).get()
    }

    func requestPass(table: String?, automatic: Bool) async -> Result<SyncReport, OutboxError> {
        let task = syncState.withLock { state -> Task<Result<SyncReport, OutboxError>, Never> in
            let actions = state.scheduler.handle(.passRequested(table: table, automatic: automatic))
            if actions == [.joinWaitingPass], let waiting = state.waiting[table] { return waiting }
            let previous = state.tail
            let task = Task { [self] in
                _ = await previous?.value
                return await runScheduledPass(table: table)
            }
            state.waiting[table] = task
            state.tail = task
            return task
        }
        track { _ = await task.value }
        return await task.value
    }

    private func runScheduledPass(table: String?) async -> Result<SyncReport, OutboxError> {
        let actions = syncState.withLock { state in
            state.waiting[table] = nil
            return state.scheduler.handle(.passDue(table: table, now: configuration.clock.now()))
        }
        guard case .runPass(let automatic) = actions.last else {
            perform(actions)
            return .success(SyncReport())
        }
        publishSchedulingStatus()
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
            // Its text stays out of the message (an error from elsewhere may carry a server's words).
            result = .failure(OutboxError(.storage, "the pass failed (\(type(of: error)))", cause: error))
        }
        perform(schedule(.passEnded(try? result.get(), automatic: automatic, now: configuration.clock.now())))
        publishSchedulingStatus()
        await compactIfDue()
        return result
    }

    private func runPass(table: String?, automatic: Bool) async throws -> SyncReport {
        try checkOpen()
        guard let transport, let user = try? owner() else { return SyncReport() }
        if syncState.withLock({ $0.networkDisabled }) || !canSend {
            return try await unsentReport(user: user, stoppedBy: nil)
        }
        let token: String?
        switch try await resolveToken(for: user) {
        case .token(let resolved): token = resolved
        case .none: return try await unsentReport(user: user, stoppedBy: PassFailure(kind: .noToken))
        case .otherUser:
            let stopped = PassFailure(kind: .identityChanged)
            eventStream.send(.passStopped(stopped))
            return try await unsentReport(user: user, stoppedBy: stopped)
        }
        // R5.7: one pass a log at a time, across processes; the lock is held until the last answer is recorded.
        guard let lock = try await acquireSyncLock() else {
            return try await unsentReport(user: user, stoppedBy: PassFailure(kind: .busy))
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
        // The pass runs on the log writer's queue, between its transactions: the commit that records
        // an answer resumes it there, with no thread to wake before the next request goes out, and its
        // next transaction starts there with none either. The transport is never called inside one (R9.1).
        let report = try await withTaskExecutorPreference(log.committer.executor) { try await pass.run() }
        // A latched session's pass sends nothing and so leaves no passEnded in the log to tell the
        // events stream; it is told here (R7.2, R7.3).
        if let stopped = report.stoppedBy, stopped.kind == .identityChanged { eventStream.send(.passStopped(stopped)) }
        return report
    }

    /// The report of a pass that sent nothing: why, if anything stopped it, and what is still pending
    /// (blocked too, when a token of another user latched the soft block, R7.3).
    private func unsentReport(user: String, stoppedBy: PassFailure?) async throws -> SyncReport {
        var report = SyncReport()
        report.stoppedBy = stoppedBy
        report.remainingCount = try await read { try $0.counters(user: user).pending }
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
        let current = try await read { try $0.session() }
        guard current?.user == user, current != settled else { return }
        // Its commit refreshes the status.
        try await log.append { appender in
            if try appender.reader.session() != settled { try appender.append(.sessionSettled(settled)) }
        }
    }

    /// The log's sync lock (R5.7), waiting for a pass of another process up to `syncLockWait`
    /// seconds of the client's clock; nil when it is still held then, or the pass must stop.
    func acquireSyncLock() async throws -> SyncLock? {
        let clock = configuration.clock
        let deadline = clock.now().adding(seconds: configuration.syncLockWait)
        while true {
            if case .acquired(let lock) = try SyncLock.attempt(logPath: log.path) { return lock }
            guard !isClosedNow,
                case .retrySyncLock(let next) = schedule(.syncLockHeld(now: clock.now(), deadline: deadline)).first
            else { return nil }
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                _ = clock.schedule(at: next) { done.resume() }
            }
        }
    }

    /// Hands `event` to the scheduler and returns what it says to do.
    func schedule(_ event: SyncScheduler.Event) -> [SyncScheduler.Action] {
        syncState.withLock { $0.scheduler.handle(event) }
    }

    /// Does what the scheduler said. The actions about the pass whose turn came, the sync lock and
    /// the network switch's record are done where their events are handled.
    func perform(_ actions: [SyncScheduler.Action]) {
        for action in actions {
            switch action {
            case .requestAutomaticPass:
                // The count the status read after the last commit: no read of the log here, which may run on Swift's pool.
                guard let user = try? owner(), lastRead.withLock({ $0.user == user ? $0.pending : 0 }) > 0 else { continue }
                track { [self] in _ = await requestPass(table: nil, automatic: true) }
            case .armTimer(let time):
                armTimer(at: time)
            case .armBackoffTimer(let seconds):
                armTimer(at: configuration.clock.now().adding(seconds: jittered(seconds)))
            case .cancelTimer:
                syncState.withLock { state in
                    state.timer?.cancel()
                    state.timer = nil
                }
            case .cancelRunningPass:
                syncState.withLock { $0.runningPass?.cancel() }
            case .reportAutomaticPass(let report):
                eventStream.send(.automaticPass(report))
            case .joinWaitingPass, .queuePass, .runPass, .skipPass, .retrySyncLock, .giveUpSyncLock, .recordNetworkSwitch:
                continue
            }
        }
    }

    /// `seconds` spread by the configured jitter fraction, drawn from the injected generator (no draw
    /// when there is no jitter).
    private func jittered(_ seconds: Double) -> Double {
        guard configuration.backoffJitter > 0 else { return seconds }
        let unit = Double(configuration.random.next() >> 11) / Double(1 << 53)
        return SyncScheduler.jittered(seconds, fraction: configuration.backoffJitter, unit: unit)
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
        guard !isClosedNow else { return }
        perform(schedule(.triggered(reason, now: configuration.clock.now())))
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
    public func disableNetwork() async { await switchNetwork(enabled: false) }

    /// Switches network access back on; with autoSync, a pass follows.
    public func enableNetwork() async { await switchNetwork(enabled: true) }

    private func switchNetwork(enabled: Bool) async {
        let actions = schedule(.networkSwitched(enabled: enabled, now: configuration.clock.now()))
        // Switched off, the running pass is cancelled before the status says disabled; switched on,
        // the pass it starts follows the switch's record.
        if !enabled { perform(actions) }
        publishSchedulingStatus()
        guard !isClosedNow else { return }
        if actions.contains(.recordNetworkSwitch(enabled: enabled)) {
            _ = try? await log.append { try $0.append(.networkSwitched(NetworkSwitched(enabled: enabled))) }
        }
        if enabled { perform(actions) }
    }

    /// The connectivity monitor's word: true online, false offline, nil unknown (a monitor that failed
    /// or ended), which counts as online. A hint, never a gate.
    public func connectivityChanged(online: Bool?) {
        let actions = schedule(.connectivityChanged(online: online, now: configuration.clock.now()))
        publishSchedulingStatus()
        if !isClosedNow { perform(actions) }
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
                let id = WriteID(try StoreKey.readBigEndian(key))
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
    /// holders are read again only when those events may have changed them. It reads the log: called
    /// after each commit (on the committer's queue) and otherwise off Swift's pool.
    @discardableResult
    func refreshStatus(after events: [RecordedEvent]? = nil) -> [(WriteID, holder: WriteID)] {
        guard !isClosedNow else { return [] }
        let user = try? owner()
        var newlyHeld: [(WriteID, holder: WriteID)] = []
        publishStatus { _ in
            var next = SyncStatus()
            let known = lastRead.withLock { $0 }
            // Asked only when some write is dead or blocked: a commit's events are not walked for nothing.
            func stillKnown() -> Bool { known.user == user && events.map { !known.holders.mayChange(after: $0) } == true }
            if let user,
                let (counters, session, holders) = try? log.read({ reader in
                    let counters = try reader.counters(user: user)
                    // Only a dead or blocked write holds writes this way: none, and nothing is read.
                    let holders =
                        counters.rejected + counters.blocked == 0
                        ? Explainer.Holders()
                        : stillKnown() ? known.holders : try Explainer.holders(user: user, reader: reader)
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
                newlyHeld = lastRead.withLock { known in
                    defer { known = (user, counters.pending, holders) }
                    return held.filter { known.user != user || known.holders.held[$0.key] == nil }.sorted { $0.key < $1.key }
                        .map { ($0.key, holder: $0.value) }
                }
            }
            return next
        }
        return newlyHeld
    }

    /// Runs `refreshStatus()` on the log's read threads, for the calls that run on Swift's pool.
    func refreshStatusOffPool() async {
        _ = try? await log.reads.run { [self] in _ = refreshStatus() }
    }

    /// Publishes the status with the scheduler's part as it is now and the counts as last read (they
    /// change only by commits, after each of which `refreshStatus` reads them): reads nothing from the log.
    func publishSchedulingStatus() {
        guard !isClosedNow else { return }
        publishStatus { $0 }
    }

    /// Publishes `counted(status)` with the scheduler's part as it is now, if that changed the status.
    /// The scheduler is read under the status's lock, so the last status published has its latest part.
    private func publishStatus(_ counted: (SyncStatus) -> SyncStatus) {
        let changed = status.withLock { status -> SyncStatus? in
            var next = counted(status)
            let sync = syncState.withLock { $0.scheduler }
            next.network = sync.networkDisabled ? .disabled : sync.monitorOnline.map { $0 ? .online : .offline } ?? .unknown
            next.isSyncing = sync.isSyncing
            next.lastSyncedAt = sync.lastSyncedAt
            next.lastSyncError = sync.lastSyncError
            guard next != status else { return nil }
            status = next
            return next
        }
        if let changed { statusUpdates.send(changed) }
    }

    /// Called after every commit of the log.
    func didCommit(_ events: [RecordedEvent]) {
        commits.advance()
        let newlyHeld = refreshStatus(after: events)
        guard eventStream.hasAudience else { return }
        for event in OutboxEvent.of(events) { eventStream.send(event) }
        for (id, holder) in newlyHeld { eventStream.send(.waitingBehind(id, holder: holder)) }
    }
}
