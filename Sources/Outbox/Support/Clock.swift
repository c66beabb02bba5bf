internal import Foundation
internal import Synchronization

/// Where the library reads the time (R5.6): every timestamp in the log comes from here.
public protocol OutboxClock: Sendable {
    /// The current time.
    func now() -> Timestamp
}

/// The system's wall clock.
public struct SystemClock: OutboxClock {
    public init() {}
    public func now() -> Timestamp { Timestamp(Date()) }
}

/// A clock that moves only when told: tests, scenarios and simulations.
public final class ManualClock: OutboxClock {
    private let current: Mutex<Timestamp>

    /// Starts at `start` (by default 2026-01-01T00:00:00Z, where scenarios start).
    public init(start: Timestamp = Timestamp(milliseconds: 1_767_225_600_000)) {
        current = Mutex(start)
    }

    public func now() -> Timestamp { current.withLock { $0 } }

    /// Moves the clock on by `seconds`.
    public func advance(seconds: Double) {
        current.withLock { $0 = $0.adding(seconds: seconds) }
    }

    /// Sets the clock.
    public func set(_ time: Timestamp) { current.withLock { $0 = time } }
}
