internal import Dispatch
internal import Foundation
internal import Synchronization

/// Where the library reads the time and waits: every timestamp in the log, every backoff.
public protocol OutboxClock: Sendable {
    /// The current time.
    func now() -> Timestamp
    /// Runs `action` once, when the clock reaches `time`, unless the returned timer is cancelled first.
    func schedule(at time: Timestamp, _ action: @escaping @Sendable () -> Void) -> ClockTimer
}

/// A scheduled action of a clock.
public final class ClockTimer: Sendable {
    private let cancelled = Atomic<Bool>(false)
    /// A timer not cancelled.
    public init() {}
    /// The action will not run (if it has not yet).
    public func cancel() { cancelled.store(true, ordering: .sequentiallyConsistent) }
    /// Whether `cancel()` was called.
    public var isCancelled: Bool { cancelled.load(ordering: .sequentiallyConsistent) }
}

/// The system's wall clock.
public struct SystemClock: OutboxClock {
    /// The system's wall clock.
    public init() {}
    public func now() -> Timestamp { Timestamp(Date()) }

    public func schedule(at time: Timestamp, _ action: @escaping @Sendable () -> Void) -> ClockTimer {
        let timer = ClockTimer()
        let delay = max(0, Double(time.rawValue - now().rawValue) / 1000)
        DispatchQueue.global().asyncAfter(deadline: .now() + delay) { if !timer.isCancelled { action() } }
        return timer
    }
}
