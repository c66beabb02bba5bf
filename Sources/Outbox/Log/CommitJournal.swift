internal import OutboxLMDB
internal import Synchronization

/// A log's commits through its journal (decision 016): LMDB commits without flushing anything, and
/// each commit's records are appended to the `Journal`, inside the write transaction, before LMDB
/// commits; flushed there, but for a pass's commits (R2.3), which a later flush carries (the next
/// commit flushed, a flush before a request or at the end of the pass). A checkpoint flushes LMDB,
/// keeps its meta pages in the journal's head and holds that snapshot, so that after a power loss the
/// log is that snapshot and the commits after it the journal kept (`EventLog`'s recovery on open).
///
/// LMDB's newest meta page may reach the disk before the pages it names, so the next open puts LMDB
/// back to the head whatever it holds, unless the head says LMDB is whole after it (`lmdbIsWhole`): a
/// commit LMDB makes durable itself (a large one, a rebuild's, a compaction's) follows such a head,
/// and so does nothing, once the log is closed.
///
/// The journal's head is trusted only while the process that wrote it holds its snapshot; so a
/// transaction checkpoints before its work whenever this process did not make the last commit
/// through the journal (another process wrote since, or this one outside the journal: a rebuild, a
/// compaction), whenever another process checkpointed since (a newer head in the file), whenever
/// its snapshot is no longer held (the map grew or the file was compacted), and when LMDB has used
/// many pages since the checkpoint (they cannot be reused while it is held). It checkpoints after its
/// work when its records do not fit after the last commit.
final class CommitJournal: Sendable {
    /// Where the journal of the environment at `environmentPath` lives.
    static func path(forEnvironment environmentPath: String, isFolder: Bool) -> String {
        isFolder ? environmentPath + "/journal" : environmentPath + "-journal"
    }

    private struct State {
        let journal: Journal
        /// The id of the last transaction this process committed through the journal, or whose
        /// snapshot it checkpointed; nil before the first.
        var ownedThrough: UInt64?
        /// Where the commit after that transaction's goes (a transaction LMDB failed to commit is
        /// written over by the one run again).
        var committedEnd = 0
        /// LMDB's pages in use at the last checkpoint.
        var pagesAtCheckpoint = 0
        /// Whether this process appended commits since its last checkpoint.
        var appendedSinceCheckpoint = false
        /// Whether this process's last checkpoint says LMDB is whole after it (commits LMDB makes
        /// durable itself follow it): a commit appended to the journal checkpoints first.
        var headIsWhole = false
        var checkpoints = 0
        /// The records added to the transaction's commit (`add`), whether the commit is to be flushed
        /// (`begin`), and whether, flushed, it grew past `largeCommit`: LMDB then commits it durably,
        /// and its records are counted, not kept.
        var added = 0
        var flushesCommit = false
        var isLarge = false
    }

    /// Held for every use of the journal: the writer's, inside the write transaction, and a flush
    /// asked for from outside it (`flush`).
    private let state: Mutex<State>
    let path: String
    /// Whether commits are flushed in the journal (a `.full` log); a `.noSync` open of a log that has
    /// a journal appends its commits without flushing them, so that a killed process loses none (a
    /// power loss may then cost that log its integrity, as `.noSync` says).
    let flushes: Bool

    init(_ journal: Journal, flushes: Bool) {
        path = journal.path
        self.flushes = flushes
        state = Mutex(State(journal: journal))
    }

    /// Whether the log's close must checkpoint: this process appended commits after its last
    /// checkpoint, or the newest head (any process's) does not say LMDB is whole after it.
    func needsCheckpointOnClose() throws -> Bool {
        try state.withLock { state in
            try state.appendedSinceCheckpoint || !state.journal.newestHeadSaysLMDBIsWhole()
        }
    }

    /// Where the commits written since the last flush lie in the journal's file (the simulation's
    /// power losses take them back).
    package var unflushedCommits: Range<Int> { state.withLock { $0.journal.flushedEnd..<$0.journal.end } }

    /// How many checkpoints this process made (tests).
    var checkpoints: Int { state.withLock { $0.checkpoints } }

    /// Whether commits were appended without a flush since the last one (a `.noSync` open): a power
    /// loss now would take them back.
    var hasUnflushedCommits: Bool { state.withLock { $0.journal.hasUnflushedCommits } }

    /// Flushes the commits appended without a flush.
    func flush() throws {
        try state.withLock { state in
            if state.journal.hasUnflushedCommits { try state.journal.flush() }
        }
    }

    /// Before a transaction's work: checkpoints unless this process made the last commit through the
    /// journal, holds its checkpoint's snapshot, and LMDB has not used many pages since; then starts
    /// the transaction's commit, whose records follow `lastSequence` (`add`), to be flushed when
    /// `flush` says so (and the log `flushes`). `recordBytes` says at least how many bytes of records
    /// the transaction appends: over `largeCommit`, a flushed commit is known to be large from the
    /// start, and none of its records is kept (were it smaller after all, LMDB commits it durably all
    /// the same).
    func begin(
        _ txn: borrowing WriteTransaction, holdsSnapshot: Bool, lastSequence: UInt64, flush: Bool, recordBytes: Int = 0
    ) throws {
        try state.withLock { state in
            defer {
                state.journal.startCommit(first: lastSequence + 1)
                state.added = 0
                state.flushesCommit = flushes && flush
                state.isLarge = state.flushesCommit && recordBytes > Self.largeCommit
            }
            let base = txn.transactionID - 1
            let pages = txn.pagesInUse
            let growth = max(2048, state.pagesAtCheckpoint / 8)
            let stale = !holdsSnapshot || state.ownedThrough != base || pages - state.pagesAtCheckpoint > growth
            if try stale || state.journal.hasNewerHead() {
                try Self.checkpoint(txn, &state, lastSequence: lastSequence)
            } else {
                state.journal.rewind(to: state.committedEnd)
            }
        }
    }

    /// The records' bytes above which a flushed commit is made durable by LMDB itself (its pages
    /// flushed, then its meta page) instead of through the journal: a bulk enqueue's new pages are
    /// written in runs, and the journal would write its records a second time.
    static let largeCommit = 64 << 10

    /// Adds the next record the transaction put in the log, its bytes as stored, to its commit.
    func add(_ record: UnsafeRawBufferPointer) {
        state.withLock { state in
            state.added += 1
            guard !state.isLarge else { return }
            state.journal.add(record)
            state.isLarge = state.flushesCommit && state.journal.pendingSize > Self.largeCommit
        }
    }

    /// After a transaction's work: its commit (the log's records `range`, added as they were put)
    /// written, and flushed when `begin` was told so (and the log `flushes`); a checkpoint first when
    /// it does not fit, or when the head says LMDB is whole after it. A flushed commit larger than
    /// `largeCommit` is not written: LMDB commits it durably, after a head that says so.
    ///
    /// A commit not flushed may be lost with a power loss, and LMDB's meta page of it may reach the
    /// disk without its pages: the head, which does not say LMDB is whole, makes the next open put
    /// LMDB back to it and replay the commits the journal kept.
    func commit(_ txn: borrowing WriteTransaction, _ range: ClosedRange<UInt64>) throws {
        try state.withLock { state in
            let journal = state.journal
            precondition(state.added == range.count, "a transaction's records missing from its commit")
            if state.isLarge {
                // Written once by LMDB rather than twice, after a head that says LMDB is whole after it
                // (a recovery would put LMDB back behind this commit otherwise).
                try Self.commitDurably(txn, &state, lastSequence: range.lowerBound - 1)
                return
            }
            if !journal.commitFits || state.headIsWhole {
                try Self.checkpoint(txn, &state, lastSequence: range.lowerBound - 1)
            }
            try journal.writeCommit(flush: state.flushesCommit)
            state.appendedSinceCheckpoint = true
        }
    }

    /// Makes the transaction `txn` commit durably through LMDB (its pages flushed, then its meta page),
    /// after a head that says LMDB is whole after it: for a commit made outside the journal (a
    /// rebuild's, a compaction's). `lastSequence` is the log's last when LMDB last committed.
    func commitDurably(_ txn: borrowing WriteTransaction, lastSequence: UInt64) throws {
        try state.withLock { state in try Self.commitDurably(txn, &state, lastSequence: lastSequence) }
    }

    private static func commitDurably(_ txn: borrowing WriteTransaction, _ state: inout State, lastSequence: UInt64) throws {
        // Another process's newer head may not say so.
        if try !state.headIsWhole || state.journal.hasNewerHead() {
            try checkpoint(txn, &state, lastSequence: lastSequence, lmdbIsWhole: true)
        }
        txn.commitDurably()
    }

    /// After LMDB committed the transaction `id`, whose records were appended (or not, `appended`).
    func didCommit(transaction id: UInt64, appended: Bool) {
        state.withLock { state in
            if appended { state.ownedThrough = id }
            state.committedEnd = state.journal.end
        }
    }

    /// A checkpoint inside the write transaction `txn`, before its work: the log's last commit,
    /// ending at `lastSequence`, is flushed and becomes the journal's head; `lmdbIsWhole` when no
    /// commit through the journal follows (the log is closing, or its file is about to be replaced).
    func checkpoint(_ txn: borrowing WriteTransaction, lastSequence: UInt64, lmdbIsWhole: Bool) throws {
        try state.withLock { state in try Self.checkpoint(txn, &state, lastSequence: lastSequence, lmdbIsWhole: lmdbIsWhole) }
    }

    /// LMDB's last commit flushed, its meta pages made the journal's head, its snapshot held. Inside
    /// a write transaction, whatever it wrote: no page it wrote is one that snapshot uses, since LMDB
    /// hands a transaction only pages that no snapshot at or after the oldest one read still uses.
    private static func checkpoint(
        _ txn: borrowing WriteTransaction, _ state: inout State, lastSequence: UInt64, lmdbIsWhole: Bool = false
    ) throws {
        try txn.flushLastCommit()
        try state.journal.checkpoint(sequence: lastSequence, metaPages: try txn.metaPages(), lmdbIsWhole: lmdbIsWhole)
        try txn.holdLastCommit()
        state.ownedThrough = txn.transactionID - 1
        state.committedEnd = state.journal.end
        state.pagesAtCheckpoint = txn.pagesInUse
        state.appendedSinceCheckpoint = false
        state.headIsWhole = lmdbIsWhole
        state.checkpoints += 1
    }

    func close() { state.withLock { $0.journal.close() } }
}
