/// Why the library may start a pass by itself.
enum Trigger: Hashable, Sendable {
    case enqueued, released, opened, sessionSettled, networkBack, timer
}

/// When passes run: a state value and the rules that move it. Each event the client meets returns the
/// actions the client then performs (start or join a pass, arm or cancel the timer, record the
/// network switch). Nothing here reads a clock, starts a task or touches the log: the client passes
/// the time in and does what the actions say.
struct SyncScheduler: Hashable, Sendable {
    /// Whether the library starts passes by itself (`autoSync`, with a transport to send through).
    let startsPasses: Bool
    /// The passes waiting to run, per table (nil: every table), each marked automatic until the app
    /// asks for it too. At most one waits a table; later requests join it.
    private(set) var waiting: [String?: Bool] = [:]
    private(set) var isSyncing = false
    /// Passes started since the client opened.
    private(set) var passesRun = 0
    /// How many automatic passes in a row stopped on a failure that may pass.
    private(set) var backoffStep = 0
    /// Whether the timer is armed: no automatic pass starts before it fires.
    private(set) var timerArmed = false
    /// No automatic pass before this (a Retry-After).
    private(set) var retryAfterUntil: Timestamp?
    /// The monitor's word: nil is unknown, which counts as online.
    private(set) var monitorOnline: Bool?
    /// Whether the one failed attempt of this offline period was made.
    private(set) var offlineAttemptSpent = false
    /// The network switch; a new client starts with access on.
    private(set) var networkDisabled = false
    private(set) var lastSyncedAt: Timestamp?
    private(set) var lastSyncError: PassFailure?

    init(startsPasses: Bool, retryAfterUntil: Timestamp? = nil) {
        self.startsPasses = startsPasses
        self.retryAfterUntil = retryAfterUntil
    }

    enum Event: Hashable, Sendable {
        /// The app's `sync()` (not automatic) or an automatic trigger asks for a pass of `table`.
        case passRequested(table: String?, automatic: Bool)
        /// A requested pass's turn came: the pass before it ended.
        case passDue(table: String?, now: Timestamp)
        /// The pass that ran ended with `report`, or with nil when it threw.
        case passEnded(SyncReport?, automatic: Bool, now: Timestamp)
        /// Something happened after which the library may start a pass.
        case triggered(Trigger, now: Timestamp)
        /// `disableNetwork()` or `enableNetwork()`.
        case networkSwitched(enabled: Bool, now: Timestamp)
        /// The connectivity monitor's word.
        case connectivityChanged(online: Bool?, now: Timestamp)
        /// Another process holds the log's sync lock; the pass may wait for it until `deadline`.
        case syncLockHeld(now: Timestamp, deadline: Timestamp)
        /// The client closed.
        case closed
    }

    enum Action: Hashable, Sendable {
        /// Wait for the pass already waiting for this table, and share its report.
        case joinWaitingPass
        /// Queue a new pass after the last one.
        case queuePass
        /// Run the pass whose turn came.
        case runPass(automatic: Bool)
        /// End the pass whose turn came without sending: a backoff, a Retry-After, the offline period
        /// or the network switch holds automatic passes.
        case skipPass
        /// Start an automatic pass, if the current user has writes pending.
        case requestAutomaticPass
        /// Arm the timer for this time (it replaces one armed before).
        case armTimer(at: Timestamp)
        /// Arm the timer this many seconds from now, with the configured jitter.
        case armBackoffTimer(seconds: Double)
        case cancelTimer
        /// Cancel the running pass's request in flight.
        case cancelRunningPass
        /// Append the switch to the log.
        case recordNetworkSwitch(enabled: Bool)
        /// Tell the events stream what the automatic pass did.
        case reportAutomaticPass(SyncReport)
        /// Try the sync lock again at this time.
        case retrySyncLock(at: Timestamp)
        /// Stop waiting for the sync lock: the pass ends as busy.
        case giveUpSyncLock
    }

    /// Seconds between two attempts at a sync lock another process holds.
    static let syncLockRetryInterval = 0.05

    mutating func handle(_ event: Event) -> [Action] {
        switch event {
        case .passRequested(let table, let automatic):
            // The app's own pass ends an offline period's silence.
            if !automatic { offlineAttemptSpent = false }
            if let waitingAutomatic = waiting[table] {
                if !automatic && waitingAutomatic { waiting[table] = false }
                return [.joinWaitingPass]
            }
            waiting[table] = automatic
            return [.queuePass]
        case .passDue(let table, let now):
            let automatic = waiting.removeValue(forKey: table) ?? false
            // An automatic pass that waited behind another checks the gate again: that one may have
            // armed a backoff, received a Retry-After or spent the offline attempt.
            if automatic {
                switch gate(now: now) {
                case .closed: return [.skipPass]
                case .closedUntil(let until): return armTimer(at: until) + [.skipPass]
                case .open: break
                }
            }
            isSyncing = true
            passesRun += 1
            return [.runPass(automatic: automatic)]
        case .passEnded(let report, let automatic, let now):
            isSyncing = false
            guard let report else { return [] }
            return passEnded(report, automatic: automatic, now: now)
        case .triggered(let trigger, let now):
            return triggered(trigger, now: now)
        case .networkSwitched(let enabled, let now):
            let changed = networkDisabled == enabled
            networkDisabled = !enabled
            if !enabled {
                var actions = cancelTimer() + [.cancelRunningPass]
                if changed { actions.append(.recordNetworkSwitch(enabled: false)) }
                return actions
            }
            guard changed else { return [] }
            return [.recordNetworkSwitch(enabled: true)] + triggered(.networkBack, now: now)
        case .connectivityChanged(let online, let now):
            let cameBack = online != false && monitorOnline == false || online == true && monitorOnline == nil
            monitorOnline = online
            return cameBack ? triggered(.networkBack, now: now) : []
        case .syncLockHeld(let now, let deadline):
            guard now < deadline, !networkDisabled else { return [.giveUpSyncLock] }
            return [.retrySyncLock(at: min(now.adding(seconds: Self.syncLockRetryInterval), deadline))]
        case .closed:
            return cancelTimer() + [.cancelRunningPass]
        }
    }

    /// Whether an automatic pass may run now.
    private enum Gate {
        case open
        /// Not before the timer fires, the network comes back or is switched on.
        case closed
        /// Not before a Retry-After's time, and no timer armed for it yet.
        case closedUntil(Timestamp)
    }

    private func gate(now: Timestamp) -> Gate {
        if networkDisabled || timerArmed || (monitorOnline == false && offlineAttemptSpent) { return .closed }
        if let until = retryAfterUntil, until > now { return .closedUntil(until) }
        return .open
    }

    private mutating func triggered(_ trigger: Trigger, now: Timestamp) -> [Action] {
        guard startsPasses, !networkDisabled else { return [] }
        var actions: [Action] = []
        switch trigger {
        case .networkBack, .sessionSettled:
            // The wait starts again from its first step, but never before a Retry-After's time.
            backoffStep = 0
            offlineAttemptSpent = false
            actions = cancelTimer()
        case .timer:
            timerArmed = false
        case .enqueued, .released, .opened:
            break
        }
        switch gate(now: now) {
        case .closed: return actions
        case .closedUntil(let until): return actions + armTimer(at: until)
        case .open: return actions + [.requestAutomaticPass]
        }
    }

    private mutating func passEnded(_ report: SyncReport, automatic: Bool, now: Timestamp) -> [Action] {
        if let retryAfter = report.retryAfter, retryAfter > 0 {
            let until = now.adding(seconds: retryAfter)
            retryAfterUntil = max(retryAfterUntil ?? until, until)
        }
        lastSyncError = report.stoppedBy
        if report.stoppedBy == nil && report.remainingCount == 0 { lastSyncedAt = now }
        guard automatic else { return [] }
        let actions: [Action] = [.reportAutomaticPass(report)]
        guard let failure = report.stoppedBy else {
            backoffStep = 0
            return actions
        }
        switch failure.kind {
        case .identityChanged:
            // Held until the session settles; no wait to arm.
            return actions
        case .network where monitorOnline == false:
            // One failed attempt an offline period.
            offlineAttemptSpent = true
            return actions
        default:
            var delay = min(60, Double(1 << min(backoffStep, 6)))
            backoffStep += 1
            if let until = retryAfterUntil { delay = max(delay, Double(until.rawValue - now.rawValue) / 1000) }
            timerArmed = true
            return actions + [.armBackoffTimer(seconds: delay)]
        }
    }

    private mutating func armTimer(at time: Timestamp) -> [Action] {
        timerArmed = true
        return [.armTimer(at: time)]
    }

    private mutating func cancelTimer() -> [Action] {
        timerArmed = false
        return [.cancelTimer]
    }

    /// `seconds` spread by up to `fraction` either way (at most 20 %), by `unit` in [0, 1) drawn from
    /// the injected generator.
    static func jittered(_ seconds: Double, fraction: Double, unit: Double) -> Double {
        let fraction = min(max(fraction, 0), 0.2)
        return seconds * (1 + fraction * (unit * 2 - 1))
    }
}
