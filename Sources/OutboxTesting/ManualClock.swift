public import Outbox
internal import Synchronization

/// A clock that moves only when told: tests, scenarios and simulations. Moving it runs the actions
/// that fall due, in time order (and in the order they were scheduled at one time).
public final class ManualClock: OutboxClock {
    private struct Scheduled {
        var time: Timestamp
        var order: Int
        var timer: ClockTimer
        var action: @Sendable () -> Void
    }

    private struct State {
        var now: Timestamp
        var scheduled: [Scheduled] = []
        var order = 0
    }

    private let state: Mutex<State>

    /// Starts at `start` (by default 2026-01-01T00:00:00Z, where scenarios start).
    public init(start: Timestamp = Timestamp(milliseconds: 1_767_225_600_000)) {
        state = Mutex(State(now: start))
    }

    public func now() -> Timestamp { state.withLock { $0.now } }

    public func schedule(at time: Timestamp, _ action: @escaping @Sendable () -> Void) -> ClockTimer {
        let timer = ClockTimer()
        let due = state.withLock { state -> Bool in
            if time <= state.now { return true }
            state.order += 1
            state.scheduled.append(Scheduled(time: time, order: state.order, timer: timer, action: action))
            return false
        }
        if due { action() }
        return timer
    }

    /// When the next scheduled action falls due, if one is scheduled.
    public var nextDue: Timestamp? {
        state.withLock { state in state.scheduled.filter { !$0.timer.isCancelled }.map(\.time).min() }
    }

    /// Moves the clock on by `seconds`, running what falls due on the way.
    public func advance(seconds: Double) { set(now().adding(seconds: seconds)) }

    /// Sets the clock, running what falls due (at or before `time`) in time order.
    public func set(_ time: Timestamp) {
        while let next = state.withLock({ state -> Scheduled? in
            state.scheduled.removeAll { $0.timer.isCancelled }
            guard
                let index = state.scheduled.indices.min(by: {
                    (state.scheduled[$0].time, state.scheduled[$0].order) < (state.scheduled[$1].time, state.scheduled[$1].order)
                }),
                state.scheduled[index].time <= time
            else { return nil }
            let next = state.scheduled.remove(at: index)
            if next.time > state.now { state.now = next.time }
            return next
        }) {
            if !next.timer.isCancelled { next.action() }
        }
        state.withLock { $0.now = time }
    }
}
