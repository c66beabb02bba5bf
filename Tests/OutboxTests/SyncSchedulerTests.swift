import Testing

@testable import Outbox

/// SPEC §5 as a table: each row drives a fresh scheduler through events and names the actions the
/// last event must return. No clock, task or log: the time is a value in the events.
@Suite struct SyncSchedulerTests {
    typealias Event = SyncScheduler.Event

    struct Row: Sendable, CustomTestStringConvertible {
        let rule: String
        let name: String
        var startsPasses = true
        let given: [Event]
        let when: Event
        let then: [SyncScheduler.Action]
        var testDescription: String { "\(rule): \(name)" }
    }

    /// Seconds on the test's timeline.
    static func at(_ seconds: Double) -> Timestamp { Timestamp(milliseconds: Int64(seconds * 1000)) }

    static let succeeded = SyncReport()
    static func stopped(_ kind: PassFailure.Kind, retryAfter: Double? = nil) -> SyncReport {
        var report = SyncReport()
        report.stoppedBy = PassFailure(kind: kind, retryAfter: retryAfter)
        report.retryAfter = retryAfter
        report.remainingCount = 1
        return report
    }
    static let offline = stopped(.network)
    static let serverBusy = stopped(.http)

    /// An automatic pass of every table that runs at `seconds` and ends with `report`.
    static func automaticPass(_ report: SyncReport, at seconds: Double) -> [Event] {
        [
            .passRequested(table: nil, automatic: true), .passDue(table: nil, now: at(seconds)),
            .passEnded(report, automatic: true, now: at(seconds)),
        ]
    }

    /// A pass the app asked for that runs at `seconds` and ends with `report`.
    static func appPass(_ report: SyncReport, at seconds: Double) -> [Event] {
        [
            .passRequested(table: nil, automatic: false), .passDue(table: nil, now: at(seconds)),
            .passEnded(report, automatic: false, now: at(seconds)),
        ]
    }

    /// `count` automatic passes stopped by a failure that may pass, each when the timer before it fired.
    static func failures(_ count: Int) -> [Event] {
        (0..<count).flatMap { index -> [Event] in
            (index == 0 ? [] : [.triggered(.timer, now: at(Double(index) * 100))])
                + automaticPass(serverBusy, at: Double(index) * 100)
        }
    }

    static let rows: [Row] = [
        // R5.1: coalescing.
        Row(
            rule: "R5.1", name: "the first request queues a pass", given: [],
            when: .passRequested(table: nil, automatic: true), then: [.queuePass]),
        Row(
            rule: "R5.1", name: "a request meeting a waiting pass joins it", given: [.passRequested(table: nil, automatic: true)],
            when: .passRequested(table: nil, automatic: true), then: [.joinWaitingPass]),
        Row(
            rule: "R5.1", name: "a pass of one table does not join a pass of every table",
            given: [.passRequested(table: nil, automatic: true)], when: .passRequested(table: "todos", automatic: false),
            then: [.queuePass]),
        Row(
            rule: "R5.1", name: "a waiting pass runs when its turn comes",
            given: [.passRequested(table: nil, automatic: true)], when: .passDue(table: nil, now: at(0)),
            then: [.runPass(automatic: true)]),
        Row(
            rule: "R5.1", name: "the app's sync joining an automatic pass makes it the app's (it runs past a backoff)",
            given: failures(1) + [.passRequested(table: nil, automatic: true), .passRequested(table: nil, automatic: false)],
            when: .passDue(table: nil, now: at(0.5)), then: [.runPass(automatic: false)]),
        Row(
            rule: "R5.1", name: "after its pass ran, a request queues a new one",
            given: [.passRequested(table: nil, automatic: false), .passDue(table: nil, now: at(0))],
            when: .passRequested(table: nil, automatic: false), then: [.queuePass]),

        // R5.2: what starts a pass by itself, and autoSync off.
        Row(rule: "R5.2", name: "an enqueue", given: [], when: .triggered(.enqueued, now: at(0)), then: [.requestAutomaticPass]),
        Row(
            rule: "R5.2", name: "a release or a discard", given: [], when: .triggered(.released, now: at(0)),
            then: [.requestAutomaticPass]),
        Row(
            rule: "R5.2", name: "a client opening", given: [], when: .triggered(.opened, now: at(0)),
            then: [.requestAutomaticPass]),
        Row(
            rule: "R5.2", name: "the session settling", given: [], when: .triggered(.sessionSettled, now: at(0)),
            then: [.cancelTimer, .requestAutomaticPass]),
        Row(
            rule: "R5.2", name: "the monitor saying online", given: [.connectivityChanged(online: false, now: at(0))],
            when: .connectivityChanged(online: true, now: at(1)), then: [.cancelTimer, .requestAutomaticPass]),
        Row(
            rule: "R5.2", name: "enableNetwork()", given: [.networkSwitched(enabled: false, now: at(0))],
            when: .networkSwitched(enabled: true, now: at(1)),
            then: [.recordNetworkSwitch(enabled: true), .cancelTimer, .requestAutomaticPass]),
        Row(
            rule: "R5.2", name: "the wait after a failure running out", given: failures(1),
            when: .triggered(.timer, now: at(1)), then: [.requestAutomaticPass]),
        Row(
            rule: "R5.2", name: "autoSync off: an enqueue starts nothing", startsPasses: false, given: [],
            when: .triggered(.enqueued, now: at(0)), then: []),
        Row(
            rule: "R5.2", name: "autoSync off: the network coming back starts nothing", startsPasses: false,
            given: [.connectivityChanged(online: false, now: at(0))], when: .connectivityChanged(online: true, now: at(1)),
            then: []),
        Row(
            rule: "R5.2", name: "autoSync off: enableNetwork() records the switch and starts nothing", startsPasses: false,
            given: [.networkSwitched(enabled: false, now: at(0))], when: .networkSwitched(enabled: true, now: at(1)),
            then: [.recordNetworkSwitch(enabled: true)]),
        Row(
            rule: "R5.2", name: "autoSync off: the app's sync runs", startsPasses: false,
            given: [.passRequested(table: nil, automatic: false)], when: .passDue(table: nil, now: at(0)),
            then: [.runPass(automatic: false)]),

        // R5.3: backoff and Retry-After.
        Row(
            rule: "R5.3", name: "the first failure waits 1 s",
            given: [.passRequested(table: nil, automatic: true), .passDue(table: nil, now: at(0))],
            when: .passEnded(serverBusy, automatic: true, now: at(0)),
            then: [.reportAutomaticPass(serverBusy), .armBackoffTimer(seconds: 1)]),
        Row(
            rule: "R5.3", name: "the second failure in a row waits 2 s",
            given: failures(1) + [
                .triggered(.timer, now: at(1)), .passRequested(table: nil, automatic: true), .passDue(table: nil, now: at(1)),
            ],
            when: .passEnded(serverBusy, automatic: true, now: at(1)),
            then: [.reportAutomaticPass(serverBusy), .armBackoffTimer(seconds: 2)]),
        Row(
            rule: "R5.3", name: "the wait doubles up to 60 s (the seventh failure)",
            given: failures(6) + [
                .triggered(.timer, now: at(1000)), .passRequested(table: nil, automatic: true),
                .passDue(table: nil, now: at(1000)),
            ],
            when: .passEnded(serverBusy, automatic: true, now: at(1000)),
            then: [.reportAutomaticPass(serverBusy), .armBackoffTimer(seconds: 60)]),
        Row(
            rule: "R5.3", name: "and stays at 60 s",
            given: failures(9) + [
                .triggered(.timer, now: at(1000)), .passRequested(table: nil, automatic: true),
                .passDue(table: nil, now: at(1000)),
            ],
            when: .passEnded(serverBusy, automatic: true, now: at(1000)),
            then: [.reportAutomaticPass(serverBusy), .armBackoffTimer(seconds: 60)]),
        Row(
            rule: "R5.3", name: "a Retry-After longer than the step is waited in full",
            given: [.passRequested(table: nil, automatic: true), .passDue(table: nil, now: at(0))],
            when: .passEnded(stopped(.http, retryAfter: 90), automatic: true, now: at(0)),
            then: [.reportAutomaticPass(stopped(.http, retryAfter: 90)), .armBackoffTimer(seconds: 90)]),
        Row(
            rule: "R5.3", name: "a success resets the wait to 1 s",
            given: failures(3) + [.triggered(.timer, now: at(500))] + automaticPass(succeeded, at: 500)
                + [.passRequested(table: nil, automatic: true), .passDue(table: nil, now: at(600))],
            when: .passEnded(serverBusy, automatic: true, now: at(600)),
            then: [.reportAutomaticPass(serverBusy), .armBackoffTimer(seconds: 1)]),
        Row(
            rule: "R5.3", name: "an enqueue during the wait starts nothing", given: failures(2),
            when: .triggered(.enqueued, now: at(100.5)), then: []),
        Row(
            rule: "R5.3", name: "an automatic pass queued behind one that failed waits too",
            given: [
                .passRequested(table: nil, automatic: true), .passDue(table: nil, now: at(0)),
                .passRequested(table: nil, automatic: true), .passEnded(serverBusy, automatic: true, now: at(0)),
            ],
            when: .passDue(table: nil, now: at(0)), then: [.skipPass]),
        Row(
            rule: "R5.3", name: "the network coming back restarts the wait: a pass now",
            given: failures(4) + [.connectivityChanged(online: false, now: at(301))],
            when: .connectivityChanged(online: true, now: at(302)), then: [.cancelTimer, .requestAutomaticPass]),
        Row(
            rule: "R5.3", name: "the network coming back restarts the wait: the next failure waits 1 s",
            given: failures(4) + [
                .connectivityChanged(online: nil, now: at(301)), .connectivityChanged(online: true, now: at(302)),
            ]
                + [.passRequested(table: nil, automatic: true), .passDue(table: nil, now: at(302))],
            when: .passEnded(serverBusy, automatic: true, now: at(302)),
            then: [.reportAutomaticPass(serverBusy), .armBackoffTimer(seconds: 1)]),
        Row(
            rule: "R5.3", name: "the session settling restarts the wait", given: failures(4),
            when: .triggered(.sessionSettled, now: at(301)), then: [.cancelTimer, .requestAutomaticPass]),
        Row(
            rule: "R5.3", name: "the network coming back never runs before a Retry-After",
            given: automaticPass(stopped(.http, retryAfter: 30), at: 0), when: .triggered(.networkBack, now: at(10)),
            then: [.cancelTimer, .armTimer(at: at(30))]),
        Row(
            rule: "R5.3", name: "a Retry-After from the app's pass holds the next trigger until its time",
            given: [
                .passRequested(table: nil, automatic: false), .passDue(table: nil, now: at(0)),
                .passEnded(stopped(.http, retryAfter: 30), automatic: false, now: at(0)),
            ],
            when: .triggered(.enqueued, now: at(5)), then: [.armTimer(at: at(30))]),
        Row(
            rule: "R5.3", name: "a waiting automatic pass meeting a Retry-After arms the timer for it",
            given: [
                .passRequested(table: nil, automatic: false), .passDue(table: nil, now: at(0)),
                .passRequested(table: nil, automatic: true),
                .passEnded(stopped(.http, retryAfter: 30), automatic: false, now: at(0)),
            ],
            when: .passDue(table: nil, now: at(0)), then: [.armTimer(at: at(30)), .skipPass]),
        Row(
            rule: "R5.3", name: "a later, shorter Retry-After never shortens an earlier one",
            given: appPass(stopped(.http, retryAfter: 120), at: 0) + appPass(stopped(.http, retryAfter: 5), at: 1),
            when: .triggered(.enqueued, now: at(10)), then: [.armTimer(at: at(120))]),
        Row(
            rule: "R5.3", name: "the app's pass goes at once during a wait",
            given: failures(3) + [.passRequested(table: nil, automatic: false)],
            when: .passDue(table: nil, now: at(200.5)), then: [.runPass(automatic: false)]),
        Row(
            rule: "R5.3", name: "the app's failed pass moves no wait and arms nothing",
            given: [.passRequested(table: nil, automatic: false), .passDue(table: nil, now: at(0))],
            when: .passEnded(serverBusy, automatic: false, now: at(0)), then: []),
        Row(
            rule: "R5.3", name: "a pass stopped by another user's token waits for the session, not a timer",
            given: [.passRequested(table: nil, automatic: true), .passDue(table: nil, now: at(0))],
            when: .passEnded(stopped(.identityChanged), automatic: true, now: at(0)),
            then: [.reportAutomaticPass(stopped(.identityChanged))]),

        // R5.4: the monitor is a hint; one failed attempt an offline period.
        Row(
            rule: "R5.4", name: "offline, the library still tries once", given: [.connectivityChanged(online: false, now: at(0))],
            when: .triggered(.enqueued, now: at(1)), then: [.requestAutomaticPass]),
        Row(
            rule: "R5.4", name: "offline, a failed attempt for want of a connection arms no timer",
            given: [
                .connectivityChanged(online: false, now: at(0)), .passRequested(table: nil, automatic: true),
                .passDue(table: nil, now: at(1)),
            ],
            when: .passEnded(offline, automatic: true, now: at(1)), then: [.reportAutomaticPass(offline)]),
        Row(
            rule: "R5.4", name: "after it, triggers start nothing until the period ends",
            given: [.connectivityChanged(online: false, now: at(0))] + automaticPass(offline, at: 1),
            when: .triggered(.enqueued, now: at(2)), then: []),
        Row(
            rule: "R5.4", name: "a waiting automatic pass is skipped after it",
            given: [
                .connectivityChanged(online: false, now: at(0)), .passRequested(table: nil, automatic: true),
                .passDue(table: nil, now: at(1)),
            ]
                + [.passRequested(table: nil, automatic: true), .passEnded(offline, automatic: true, now: at(1))],
            when: .passDue(table: nil, now: at(1)), then: [.skipPass]),
        Row(
            rule: "R5.4", name: "the monitor saying online ends the period",
            given: [.connectivityChanged(online: false, now: at(0))] + automaticPass(offline, at: 1),
            when: .connectivityChanged(online: true, now: at(2)), then: [.cancelTimer, .requestAutomaticPass]),
        Row(
            rule: "R5.4", name: "the session settling ends the period",
            given: [.connectivityChanged(online: false, now: at(0))] + automaticPass(offline, at: 1),
            when: .triggered(.sessionSettled, now: at(2)), then: [.cancelTimer, .requestAutomaticPass]),
        Row(
            rule: "R5.4", name: "the app's sync ends the period",
            given: [.connectivityChanged(online: false, now: at(0))] + automaticPass(offline, at: 1)
                + [.passRequested(table: nil, automatic: false)],
            when: .triggered(.enqueued, now: at(2)), then: [.requestAutomaticPass]),
        Row(
            rule: "R5.4", name: "a monitor that fails or ends counts as online",
            given: [.connectivityChanged(online: false, now: at(0))] + automaticPass(offline, at: 1),
            when: .connectivityChanged(online: nil, now: at(2)), then: [.cancelTimer, .requestAutomaticPass]),
        Row(
            rule: "R5.4", name: "with the monitor unknown a connection failure backs off as any other",
            given: [.passRequested(table: nil, automatic: true), .passDue(table: nil, now: at(0))],
            when: .passEnded(offline, automatic: true, now: at(0)),
            then: [.reportAutomaticPass(offline), .armBackoffTimer(seconds: 1)]),
        Row(
            rule: "R5.4", name: "offline, a failure of the server backs off as any other",
            given: [
                .connectivityChanged(online: false, now: at(0)), .passRequested(table: nil, automatic: true),
                .passDue(table: nil, now: at(1)),
            ],
            when: .passEnded(serverBusy, automatic: true, now: at(1)),
            then: [.reportAutomaticPass(serverBusy), .armBackoffTimer(seconds: 1)]),
        Row(
            rule: "R5.4", name: "the monitor saying offline starts nothing", given: [],
            when: .connectivityChanged(online: false, now: at(0)), then: []),
        Row(
            rule: "R5.4", name: "the monitor saying online again starts nothing",
            given: [.connectivityChanged(online: true, now: at(0))],
            when: .connectivityChanged(online: true, now: at(1)), then: []),

        // R5.5: the network switch is a gate.
        Row(
            rule: "R5.5", name: "switching off cancels the timer and the request in flight, and is recorded", given: failures(1),
            when: .networkSwitched(enabled: false, now: at(0.5)),
            then: [.cancelTimer, .cancelRunningPass, .recordNetworkSwitch(enabled: false)]),
        Row(
            rule: "R5.5", name: "switching off again records nothing", given: [.networkSwitched(enabled: false, now: at(0))],
            when: .networkSwitched(enabled: false, now: at(1)), then: [.cancelTimer, .cancelRunningPass]),
        Row(
            rule: "R5.5", name: "switched off, an enqueue starts nothing", given: [.networkSwitched(enabled: false, now: at(0))],
            when: .triggered(.enqueued, now: at(1)), then: []),
        Row(
            rule: "R5.5", name: "switched off, the monitor saying online starts nothing",
            given: [.connectivityChanged(online: false, now: at(0)), .networkSwitched(enabled: false, now: at(0))],
            when: .connectivityChanged(online: true, now: at(1)), then: []),
        Row(
            rule: "R5.5", name: "switched off, a waiting automatic pass is skipped",
            given: [.passRequested(table: nil, automatic: true), .networkSwitched(enabled: false, now: at(0))],
            when: .passDue(table: nil, now: at(1)), then: [.skipPass]),
        Row(
            rule: "R5.5", name: "switching on when on records nothing and starts nothing", given: [],
            when: .networkSwitched(enabled: true, now: at(0)), then: []),
        Row(
            rule: "R5.5", name: "switched off, a wait for the sync lock gives up",
            given: [.networkSwitched(enabled: false, now: at(0))],
            when: .syncLockHeld(now: at(1), deadline: at(5)), then: [.giveUpSyncLock]),

        // R5.7: a pass that finds the sync lock held waits for it, up to a limit.
        Row(
            rule: "R5.7", name: "the lock held: try again shortly", given: [], when: .syncLockHeld(now: at(1), deadline: at(5)),
            then: [.retrySyncLock(at: at(1.05))]),
        Row(
            rule: "R5.7", name: "the last try is at the limit", given: [], when: .syncLockHeld(now: at(4.98), deadline: at(5)),
            then: [.retrySyncLock(at: at(5))]),
        Row(
            rule: "R5.7", name: "at the limit the pass ends as busy", given: [], when: .syncLockHeld(now: at(5), deadline: at(5)),
            then: [.giveUpSyncLock]),

        // Closing.
        Row(
            rule: "close", name: "closing cancels the timer and the request in flight", given: failures(1), when: .closed,
            then: [.cancelTimer, .cancelRunningPass]),
    ]

    @Test(arguments: rows) func row(_ row: Row) {
        var scheduler = SyncScheduler(startsPasses: row.startsPasses)
        for event in row.given { _ = scheduler.handle(event) }
        #expect(scheduler.handle(row.when) == row.then)
    }

    @Test func aNewSchedulerHasAccessOnAndWaitsForAStoredRetryAfter() {
        // R5.5: the switch is not kept; R5.3: a Retry-After the log recorded holds the first pass.
        var scheduler = SyncScheduler(startsPasses: true, retryAfterUntil: Self.at(30))
        #expect(!scheduler.networkDisabled)
        #expect(scheduler.handle(.triggered(.opened, now: Self.at(1))) == [.armTimer(at: Self.at(30))])
        #expect(scheduler.handle(.triggered(.timer, now: Self.at(30))) == [.requestAutomaticPass])
    }

    @Test func theStatusFieldsFollowThePasses() {
        var scheduler = SyncScheduler(startsPasses: true)
        _ = scheduler.handle(.passRequested(table: nil, automatic: false))
        _ = scheduler.handle(.passDue(table: nil, now: Self.at(1)))
        #expect(scheduler.isSyncing && scheduler.passesRun == 1)
        _ = scheduler.handle(.passEnded(Self.succeeded, automatic: false, now: Self.at(2)))
        #expect(!scheduler.isSyncing && scheduler.lastSyncedAt == Self.at(2) && scheduler.lastSyncError == nil)
        for event in Self.automaticPass(Self.serverBusy, at: 3) { _ = scheduler.handle(event) }
        #expect(scheduler.lastSyncedAt == Self.at(2) && scheduler.lastSyncError == PassFailure(kind: .http))
        // A pass that threw changes only whether one is running.
        _ = scheduler.handle(.passRequested(table: nil, automatic: false))
        _ = scheduler.handle(.passDue(table: nil, now: Self.at(4)))
        _ = scheduler.handle(.passEnded(nil, automatic: false, now: Self.at(4)))
        #expect(!scheduler.isSyncing && scheduler.passesRun == 3 && scheduler.lastSyncError == PassFailure(kind: .http))
    }

    @Test func jitterIsOffUnlessSetAndAtMostTwentyPercent() {
        // R5.3.
        #expect(SyncScheduler.jittered(10, fraction: 0, unit: 0.9) == 10)
        #expect(SyncScheduler.jittered(10, fraction: 0.1, unit: 0) == 9)
        #expect(SyncScheduler.jittered(10, fraction: 0.5, unit: 0) == 8)
        #expect(abs(SyncScheduler.jittered(10, fraction: 0.5, unit: 0.999_999) - 12) < 0.001)
    }
}
