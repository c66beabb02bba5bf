internal import Foundation
internal import Synchronization

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// Named places the engine passes where a crash would matter (TESTING.md §2). Each is a no-op unless
/// a `CrashPlan` is armed on it. A harness seam: an app cannot reach it.
package enum CrashPoint: String, CaseIterable, Sendable {
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
    /// A compaction's archive segment written and flushed, before its final name.
    case compactionSegmentWritten = "compaction.segmentWritten"
    /// Inside a compaction's transaction, the segment in place and the log's prefix removed, before
    /// the commit.
    case compactionBeforeCommit = "compaction.beforeCommit"
    /// A compaction committed, before the data file is copied without its free pages.
    case compactionBeforeShrink = "compaction.beforeShrink"
    /// Inside any transaction of a journaled log, its records appended to the journal and flushed,
    /// before LMDB commits: the next open recovers the commit from the journal.
    case journalAppended = "journal.appended"
}

/// Arms one crash point: at its `n`-th pass, `action` runs (by default the process kills itself with
/// SIGKILL, as the crash harness wants). Only a harness arms one, explicitly: the crash worker reads
/// `OUTBOX_CRASHPOINT=label#n` with `fromEnvironment()`; an app's configuration never does.
package final class CrashPlan: Sendable {
    package let point: CrashPoint
    package let occurrence: Int
    private let passes = Mutex(0)
    private let action: @Sendable () -> Void

    package init(point: CrashPoint, occurrence: Int, action: (@Sendable () -> Void)? = nil) {
        self.point = point
        self.occurrence = occurrence
        self.action = action ?? { kill(getpid(), SIGKILL) }
    }

    /// The plan `label#n` names (`enqueue.afterCommit#2`), or nil when it is not of that form.
    package static func parse(_ text: String) -> CrashPlan? {
        let parts = text.split(separator: "#", omittingEmptySubsequences: false)
        guard parts.count == 2, let point = CrashPoint(rawValue: String(parts[0])), let n = Int(parts[1]), n > 0 else {
            return nil
        }
        return CrashPlan(point: point, occurrence: n)
    }

    /// The variable the crash harness names a worker's plan in.
    package static let environmentVariable = "OUTBOX_CRASHPOINT"

    /// The crash worker's plan: none when `OUTBOX_CRASHPOINT` is unset; a malformed value throws, so a
    /// typo cannot run a worker with no crash point and pass.
    package static func fromEnvironment() throws -> CrashPlan? {
        guard let text = ProcessInfo.processInfo.environment[environmentVariable] else { return nil }
        guard let plan = parse(text) else {
            throw OutboxError(.invalidWrite, "\(environmentVariable)=\(text) is not of the form label#n")
        }
        return plan
    }

    /// How often the armed point has been passed.
    package var passCount: Int { passes.withLock { $0 } }

    func pass(_ point: CrashPoint) {
        guard point == self.point else { return }
        let due = passes.withLock { count -> Bool in
            count += 1
            return count == occurrence
        }
        if due { action() }
    }
}
