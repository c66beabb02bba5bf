internal import Dispatch
internal import OutboxLMDB
internal import Synchronization

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// Runs every write of the log on one serial queue, and lets callers share commits: jobs that arrive
/// while a commit is in flight are run together in the next transaction, so 16 concurrent enqueues cost
/// far fewer than 16 flushes (R2.3). After a transaction of several enqueues, the next waits a moment
/// for their callers to come back with their next writes (`awaitCallers`), so that concurrent
/// enqueuers share one flush rather than two halves of them taking turns; the writer's thread stays
/// awake meanwhile (`lingerForCallers`), so that the next transaction starts on it with no thread
/// woken.
///
/// What follows a commit (the observer that refreshes the status and feeds the events stream, then each
/// job's completion) runs before the next transaction, in commit order, so a caller that
/// is told its commit is done sees the status it made. It runs as a block of a second serial queue that
/// the writer's thread runs itself (`sync`): not on the writer's queue (`isWriting` is false there, and
/// the observer reads the log), and with no other thread to wake. Handing it to a thread
/// of its own let the writer go on at once, but the wake-up cost more than the work: a durable enqueue
/// took 14 to 22 % longer, 16 concurrent ones 5 to 51 % (`Specs/benchmarks.md`).
///
/// A pass runs its own code on the writer's queue too, between transactions (`executor`): the commit
/// that records an answer resumes it there, and the job it submits next runs there, so a drained
/// request costs no thread wake-up on either side of its commit (two of them, about 70 µs a request on
/// this machine, were some 15 % of a drain's time).
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
        /// At least how many bytes of records the work appends (a bulk enqueue's keys and bodies): a
        /// transaction known from the start to commit more than a journal takes keeps none of them.
        var recordBytes = 0
        /// Whether the caller is told, with the result, which transaction committed it and whether
        /// the job ran alone in it (`EventLog.Commit`): a pass that read ahead on the snapshot before
        /// the commit knows then that nothing but its own job came between.
        var reportsCommit = false
    }

    /// A job's result with the commit that made it (`Job.reportsCommit`).
    struct Committed: Sendable {
        let value: any Sendable
        let commit: EventLog.Commit
    }

    /// A job and what tells its caller the result.
    private typealias Submitted = (job: Job, complete: @Sendable (Result<any Sendable, any Error>) -> Void)

    private struct State {
        var jobs: [Submitted] = []
        var drainScheduled = false
        /// Held by `suspend()`: jobs wait, and no transaction starts, until `resume()`.
        var suspended = false
        /// When the last transaction held only enqueues: how many jobs the next one may expect, those
        /// that waited as it committed and one for each of its callers, resumed, and until when
        /// (`awaitCallers`).
        var expected = 0
        var expectedUntil = DispatchTime(uptimeNanoseconds: 0)
        /// While the writer waits for them: how many jobs end the wait (nil again once they came).
        var awaited: Int?
        var callersWaitMicroseconds = 150
    }

    /// How long after a transaction of several enqueues the writer waits for their callers to come
    /// back with their next writes (tests lengthen it, to see who waits for whom without a race).
    package var callersWaitMicroseconds: Int {
        get { state.withLock { $0.callersWaitMicroseconds } }
        set { state.withLock { $0.callersWaitMicroseconds = newValue } }
    }
    /// Wakes the writer when the jobs it waits for have come.
    private let callersCame = DispatchSemaphore(value: 0)

    private let queue = DispatchQueue(label: "outbox.log-writer")
    /// Runs a task's code on the writer's queue, between its transactions (a pass: `executor`).
    package let executor: WriterExecutor
    private let notifications = DispatchQueue(label: "outbox.log-notifications")
    private let state = Mutex(State())
    /// On the writer's queue: whether a transaction (or the rebuild) is running there now, which the
    /// writer's own blocks set; a pass's code runs on the same queue between them.
    private static let writerKey = DispatchSpecificKey<TransactionFlag>()
    private let inTransaction = TransactionFlag()
    private let transactions = Atomic<Int>(0)

    /// How many write transactions it ran so far (tests: what a pass costs in commits).
    package var transactionCount: Int { transactions.load(ordering: .acquiring) }

    /// Whether the caller runs inside one of a log's write transactions (or its rebuild): what a
    /// transport's code must never do (R9.1; the tests check it). A pass runs on the writer's queue
    /// between them (`executor`).
    package static var isWriting: Bool { DispatchQueue.getSpecific(key: writerKey)?.isSet == true }

    /// Whether the caller runs on a log writer's queue, in a transaction or between them (a pass).
    package static var isOnWritersQueue: Bool { DispatchQueue.getSpecific(key: writerKey) != nil }

    init() {
        queue.setSpecific(key: Self.writerKey, value: inTransaction)
        executor = WriterExecutor(queue: queue)
    }

    /// Jobs waiting for the next transaction.
    package var waitingCount: Int { state.withLock { $0.jobs.count } }

    /// Runs `body` on the writer's queue between two transactions (the rebuild): every write of the
    /// log goes through the one writer, and no caller's thread of Swift's pool waits on it.
    func exclusive<R: Sendable>(_ body: @escaping @Sendable () throws -> R) async throws -> R {
        try await queue.run { [inTransaction] in try inTransaction.while(body) }
    }

    /// Holds the writer before its next transaction (tests: gather a group deterministically). A
    /// pass's own code, which runs on the writer's queue between transactions, goes on.
    func suspend() { state.withLock { $0.suspended = true } }

    /// Lets the writer go on after `suspend()`.
    func resume(with log: EventLog) {
        let schedule = state.withLock { state -> Bool in
            state.suspended = false
            return Self.claimDrain(&state)
        }
        if schedule { queue.async { self.drain(log) } }
    }

    func submit(_ job: Job, to log: EventLog, complete: @escaping @Sendable (Result<any Sendable, any Error>) -> Void) {
        let (schedule, wake) = state.withLock { state -> (Bool, Bool) in
            state.jobs.append((job, complete))
            var wake = false
            if let awaited = state.awaited, state.jobs.count >= awaited || !job.isEnqueue {
                state.awaited = nil
                wake = true
            }
            return (Self.claimDrain(&state), wake)
        }
        if wake { callersCame.signal() }
        if schedule { queue.async { self.drain(log) } }
    }

    /// Before a transaction of enqueues only, while the callers the last one resumed (all enqueuers)
    /// are not back: waits for them, until `callersWaitMicroseconds` after that transaction, so that
    /// the transaction holds their next writes too. Concurrent enqueuers otherwise fall into two
    /// halves, one committing while the other, just resumed, makes its next writes; each flush then
    /// carries half of them (R2.3). A lone enqueuer, or a transaction with any other job (a pass's),
    /// never waits, and a job that is not an enqueue ends the wait.
    private func awaitCallers() {
        let until = state.withLock { state -> DispatchTime? in
            let expected = state.expected
            state.expected = 0
            guard expected > state.jobs.count, .now() < state.expectedUntil, !state.suspended,
                state.jobs.allSatisfy({ $0.job.isEnqueue })
            else { return nil }
            state.awaited = expected
            return state.expectedUntil
        }
        guard let until else { return }
        let woken = callersCame.wait(timeout: until) == .success
        let signalled = state.withLock { state -> Bool in
            defer { state.awaited = nil }
            return state.awaited == nil
        }
        // A signal sent as the wait timed out is taken back, so that the next wait waits.
        if signalled && !woken { callersCame.wait() }
    }

    /// Whether the caller is to schedule a drain (then marked scheduled): jobs wait, the writer is not
    /// held, and no drain is scheduled already. Under the state's lock.
    private static func claimDrain(_ state: inout State) -> Bool {
        if state.drainScheduled || state.suspended || state.jobs.isEmpty { return false }
        state.drainScheduled = true
        return true
    }

    private func drain(_ log: EventLog) {
        awaitCallers()
        let submitted = state.withLock { state -> [Submitted] in
            if state.suspended {
                state.drainScheduled = false
                return []
            }
            let jobs = state.jobs
            state.jobs = []
            state.drainScheduled = false
            return jobs
        }
        guard !submitted.isEmpty else { return }
        let jobs = submitted.map(\.job)
        transactions.add(1, ordering: .releasing)
        let sync: Environment.CommitSync = jobs.contains { $0.sync == .standard } ? .standard : .withoutMetaSync
        var results: [Result<any Sendable, any Error>] = []
        var committed: [RecordedEvent] = []
        var transaction: UInt64 = 0
        do {
            try inTransaction.while {
                try log.transaction(sync: sync, recordBytes: jobs.reduce(0) { $0 + $1.recordBytes }) { appender in
                    results = []
                    for job in jobs {
                        let before = appender.appended.count
                        do {
                            results.append(.success(try job.work(&appender)))
                        } catch  where !(error is LMDBError) && appender.appended.count == before {
                            // Refused before writing anything (validation, or projection bytes that no
                            // longer decode): this job fails alone. An LMDB error (map full included) leaves
                            // the transaction to LMDB and fails the group.
                            results.append(.failure(storageError(error, path: log.path)))
                        }
                    }
                    for job in jobs {
                        log.crashPlan?.pass(job.crashPoint ?? (job.isEnqueue ? .enqueueBeforeCommit : .appendBeforeCommit))
                    }
                    committed = appender.appended
                    transaction = appender.transactionID
                }
            }
        } catch {
            notifications.sync { for (_, complete) in submitted { complete(.failure(error)) } }
            return
        }
        for job in jobs where job.isEnqueue { log.crashPlan?.pass(.enqueueAfterCommit) }
        let commit = EventLog.Commit(transaction: transaction, isAlone: jobs.count == 1)
        // Several enqueuers at once: the next transaction may wait for them to come back.
        let callersReturn = jobs.count > 1 && jobs.allSatisfy(\.isEnqueue)
        if callersReturn {
            state.withLock { state in
                state.expected = state.jobs.count + jobs.count
                state.expectedUntil = .now() + .microseconds(state.callersWaitMicroseconds)
            }
        }
        notifications.sync { [committed, results] in
            if !committed.isEmpty { log.didCommit(committed) }
            for ((job, complete), result) in zip(submitted, results) {
                complete(job.reportsCommit ? result.map { Committed(value: $0, commit: commit) } : result)
            }
        }
        if callersReturn { lingerForCallers() }
    }

    /// The most the writer's thread stays awake for the callers of its last transaction
    /// (`lingerForCallers`), however long `callersWaitMicroseconds` is: a longer wait sleeps.
    private static let lingerNanoseconds: UInt64 = 1_000_000

    /// After a transaction of several enqueues, their callers resumed: keeps the writer's thread
    /// awake, yielding its core between looks, until the jobs it expects have come (or a job that is
    /// not an enqueue, or the writer is held), at most `callersWaitMicroseconds` (and a millisecond).
    /// The callers' submits then find the next transaction claimed by this thread, which starts it as
    /// soon as this returns: no thread is woken for it. Returning to the queue let the thread sleep,
    /// and the first caller back had to wake it: on this project's machine, whose idle cores halt,
    /// some 150 µs a commit passed between the callers' return and the writer's next transaction,
    /// as long as the enqueues' own work in it (`Specs/benchmarks.md`, "Row 2: where a commit of 16
    /// callers' time goes").
    private func lingerForCallers() {
        let wait = state.withLock { UInt64($0.callersWaitMicroseconds) * 1000 }
        let until = DispatchTime.now().uptimeNanoseconds + min(wait, Self.lingerNanoseconds)
        while DispatchTime.now().uptimeNanoseconds < until {
            let done = state.withLock { state in
                state.suspended || state.jobs.count >= state.expected || state.jobs.contains { !$0.job.isEnqueue }
            }
            if done { return }
            sched_yield()
        }
    }
}

/// Runs the reads the API offers as `async` on threads of their own, never on Swift's cooperative
/// pool: a read of a large log can wait on the disk for its pages, and a pool thread held that long
/// holds up every task of the app (there are as many pool threads as cores). Reads run side by side.
package final class ReadExecutor: Sendable {
    private let queue = DispatchQueue(label: "outbox.log-reads", attributes: .concurrent)
    private let submitted = Atomic<Int>(0)
    private let finished = Atomic<Int>(0)

    /// How many reads were handed to it so far.
    package var submittedCount: Int { submitted.load(ordering: .acquiring) }

    /// How many of them have ended.
    package var finishedCount: Int { finished.load(ordering: .acquiring) }

    /// Runs `body` on a read thread and returns what it returns.
    package func run<R: Sendable>(_ body: @escaping @Sendable () throws -> R) async throws -> R {
        submitted.add(1, ordering: .releasing)
        return try await queue.run { try self.ending(body) }
    }

    /// Runs a read's body and counts it ended.
    private func ending<R>(_ body: () throws -> R) rethrows -> R {
        defer { finished.add(1, ordering: .releasing) }
        return try body()
    }

    /// Starts `body` on a read thread and returns at once; its result is awaited through what it
    /// returns. The caller goes on meanwhile (a pass reads ahead while its commit is made).
    func start<R: Sendable>(_ body: @escaping @Sendable () throws -> R) -> PendingRead<R> {
        submitted.add(1, ordering: .releasing)
        let pending = PendingRead<R>()
        queue.async { pending.finish(self.ending { Result { try body() } }) }
        return pending
    }

    /// Holds the reads not yet started (tests: show that a read waits for this executor, not the pool).
    package func suspend() { queue.suspend() }

    /// Lets them go on after `suspend()`.
    package func resume() { queue.resume() }
}

/// The result of a read `ReadExecutor.start` began, for one caller to await: at once when the read
/// is done, without a thread switch.
final class PendingRead<R: Sendable>: Sendable {
    private enum State {
        case running(waiting: CheckedContinuation<R, any Error>?)
        case finished(Result<R, any Error>)
    }

    private let state = Mutex(State.running(waiting: nil))

    fileprivate func finish(_ result: Result<R, any Error>) {
        let waiting = state.withLock { state -> CheckedContinuation<R, any Error>? in
            guard case .running(let waiting) = state else { return nil }
            state = .finished(result)
            return waiting
        }
        waiting?.resume(with: result)
    }

    /// What the read returned, or what it threw.
    var value: R {
        get async throws {
            if case .finished(let result) = state.withLock({ $0 }) { return try result.get() }
            return try await withCheckedThrowingContinuation { continuation in
                let result = state.withLock { state -> Result<R, any Error>? in
                    if case .finished(let result) = state { return result }
                    state = .running(waiting: continuation)
                    return nil
                }
                if let result { continuation.resume(with: result) }
            }
        }
    }
}

/// Whether the writer's queue runs a transaction now: set and read on that queue only.
private final class TransactionFlag: @unchecked Sendable {
    private(set) var isSet = false

    func `while`<R>(_ body: () throws -> R) rethrows -> R {
        isSet = true
        defer { isSet = false }
        return try body()
    }
}

/// Runs the jobs of a task that prefers it on the log writer's queue, between two transactions.
package final class WriterExecutor: TaskExecutor {
    private let queue: DispatchQueue

    init(queue: DispatchQueue) { self.queue = queue }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}

extension DispatchQueue {
    /// Runs `body` on this queue and returns what it returns, the awaiting task holding no thread.
    func run<R: Sendable>(_ body: @escaping @Sendable () throws -> R) async throws -> R {
        try await withCheckedThrowingContinuation { continuation in
            self.async { continuation.resume(with: Result { try body() }) }
        }
    }
}
