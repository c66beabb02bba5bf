internal import Foundation
internal import Synchronization

#if canImport(Glibc)
    internal import Glibc
#endif

/// Named places the engine passes where a crash would matter (TESTING.md §2). Each is a no-op unless
/// a `CrashPlan` is armed on it.
public enum CrashPoint: String, CaseIterable, Sendable {
    /// Inside an enqueue's transaction, its events written, before the commit.
    case enqueueBeforeCommit = "enqueue.beforeCommit"
    /// An enqueue committed, before its caller is told.
    case enqueueAfterCommit = "enqueue.afterCommit"
    /// Inside any other event's transaction, before the commit.
    case appendBeforeCommit = "append.beforeCommit"
    /// Half way through a rebuild's fold.
    case rebuildMidway = "rebuild.midway"
    /// A request was sent and its answer came back, before anything of it is recorded (R4.6).
    case passAfterSend = "pass.afterSend"
    /// Inside the transaction of an answer and its verdicts, before the commit.
    case passAnswerBeforeCommit = "pass.answerBeforeCommit"
    /// Inside the transaction that switches the session's user, before the commit.
    case sessionBeforeCommit = "session.beforeCommit"
}

/// Arms one crash point: at its `n`-th pass, `action` runs (by default the process kills itself with
/// SIGKILL, as the crash harness wants). `OUTBOX_CRASHPOINT=label#n` arms one from the environment.
public final class CrashPlan: Sendable {
    public let point: CrashPoint
    public let occurrence: Int
    private let passes = Mutex(0)
    private let action: @Sendable () -> Void

    public init(point: CrashPoint, occurrence: Int, action: (@Sendable () -> Void)? = nil) {
        self.point = point
        self.occurrence = occurrence
        self.action = action ?? { kill(getpid(), SIGKILL) }
    }

    /// The plan `OUTBOX_CRASHPOINT` names, if set and well formed.
    public static func fromEnvironment() -> CrashPlan? {
        guard let text = ProcessInfo.processInfo.environment["OUTBOX_CRASHPOINT"] else { return nil }
        let parts = text.split(separator: "#")
        guard parts.count == 2, let point = CrashPoint(rawValue: String(parts[0])), let n = Int(parts[1]), n > 0 else {
            return nil
        }
        return CrashPlan(point: point, occurrence: n)
    }

    /// How often the armed point has been passed.
    public var passCount: Int { passes.withLock { $0 } }

    func pass(_ point: CrashPoint) {
        guard point == self.point else { return }
        let due = passes.withLock { count -> Bool in
            count += 1
            return count == occurrence
        }
        if due { action() }
    }
}
