internal import Dispatch
internal import OutboxLMDB
internal import Synchronization

/// Runs every write of the log on one serial queue, and lets callers share commits: jobs that arrive
/// while a commit is in flight are run together in the next transaction, so 16 concurrent enqueues cost
/// far fewer than 16 flushes (R2.3).
///
/// What follows a commit (the observer that refreshes the status and feeds the events stream, then the
/// callers' completions) runs on a second serial queue, in commit order, so the writer goes on to the
/// next transaction at once, and a caller that is told its commit is done sees the status it made.
///
/// A job that throws (anything but an LMDB error) before appending anything fails alone; the others of its group still commit. A job
/// that throws after appending fails the whole transaction (nothing of it is written), and every job
/// of the group gets that error.
package final class GroupCommitter: Sendable {
    struct Job: Sendable {
        let sync: Environment.CommitSync
        let isEnqueue: Bool
        /// The crash point this job passes before the commit (by default enqueue's or append's).
        let crashPoint: CrashPoint?
        let work: @Sendable (inout Appender) throws -> any Sendable
        let complete: @Sendable (Result<any Sendable, any Error>) -> Void
    }

    private struct State {
        var jobs: [Job] = []
        var drainScheduled = false
    }

    private let queue = DispatchQueue(label: "outbox.log-writer")
    private let notifications = DispatchQueue(label: "outbox.log-notifications")
    private let state = Mutex(State())

    /// Jobs waiting for the next transaction.
    package var waitingCount: Int { state.withLock { $0.jobs.count } }

    /// Holds the writer before its next transaction (tests: gather a group deterministically).
    package func suspend() { queue.suspend() }

    /// Lets the writer go on after `suspend()`.
    package func resume() { queue.resume() }

    func submit(_ job: Job, to log: EventLog) {
        let schedule = state.withLock { state -> Bool in
            state.jobs.append(job)
            if state.drainScheduled { return false }
            state.drainScheduled = true
            return true
        }
        if schedule { queue.async { self.drain(log) } }
    }

    private func drain(_ log: EventLog) {
        let jobs = state.withLock { state -> [Job] in
            let jobs = state.jobs
            state.jobs = []
            state.drainScheduled = false
            return jobs
        }
        guard !jobs.isEmpty else { return }
        let sync: Environment.CommitSync = jobs.contains { $0.sync == .standard } ? .standard : .withoutMetaSync
        var results: [Result<any Sendable, any Error>] = []
        var committed: [RecordedEvent] = []
        do {
            try log.transaction(sync: sync) { appender in
                results = []
                for job in jobs {
                    let before = appender.appended.count
                    do {
                        results.append(.success(try job.work(&appender)))
                    } catch  where !(error is LMDBError) && appender.appended.count == before {
                        // Refused before writing anything (validation): this job fails alone. An LMDB
                        // error (map full included) leaves the transaction to LMDB and fails the group.
                        results.append(.failure(error))
                    }
                }
                for job in jobs {
                    log.crashPlan?.pass(job.crashPoint ?? (job.isEnqueue ? .enqueueBeforeCommit : .appendBeforeCommit))
                }
                committed = appender.appended
            }
        } catch {
            notifications.async { for job in jobs { job.complete(.failure(error)) } }
            return
        }
        for job in jobs where job.isEnqueue { log.crashPlan?.pass(.enqueueAfterCommit) }
        notifications.async { [committed, results] in
            if !committed.isEmpty { log.didCommit(committed) }
            for (job, result) in zip(jobs, results) { job.complete(result) }
        }
    }
}
