internal import Foundation
package import OutboxLMDB
internal import Synchronization

/// The append-only event log on LMDB and the projections folded from it, in one environment.
///
/// Databases: `log` (sequence, big-endian → record) and one per `ProjectionTable`. Every write goes
/// through `transaction`, which appends events and folds them in the same LMDB transaction.
package final class EventLog: Sendable {
    package let environment: Environment
    /// The path the log was opened at, as given.
    package let path: String
    let clock: any OutboxClock
    let random: any RandomSource
    let crashPlan: CrashPlan?
    /// Whether commits reach the disk (`.full`: every commit's data is flushed, a pass's meta page by
    /// the next commit) or not (`.noSync`).
    let durability: Environment.Durability
    /// Whether a power loss can undo only a commit made without the meta sync, as with `.full`
    /// durability: true for `.full`, and for the simulation's `.noSync` logs.
    var commitsAreDurableAsFull: Bool { durability == .full || powerLossIsSimulated }
    let powerLossIsSimulated: Bool
    /// `Options.journalIsSimulated`, for a log that has a journal.
    let journalIsSimulated: Bool
    /// The log's and the projections' tables; projections are found by index, not by name, on the path
    /// of every put and get.
    let tables: LogTables
    package let committer = GroupCommitter()
    /// Where the reads the API offers as `async` run (see `ReadExecutor`).
    package let reads = ReadExecutor()
    /// Told of each commit of the group committer (a class box: see `Callback`).
    private let commitObserver = Mutex<Callback<[RecordedEvent]>?>(nil)
    /// The last write transaction's store tables, for the next one (`TransactionStore.Memory`).
    private let storeMemory = Mutex<TransactionStore.Memory?>(nil)
    /// The last flushed commit, kept beside the log (a log opened for writing with `.full` durability).
    let commitMark: CommitMark?
    /// The journal every commit goes through (a log opened for writing with `.full` durability and
    /// `Options.journaled`; decision 016): LMDB then commits without flushing.
    let journal: CommitJournal?
    /// Where the segments that compactions moved out of the log are (R8.5).
    package let archive: Archive
    /// Cleared by `leaveJournalOnClose`.
    private let checkpointsOnClose = Atomic<Bool>(true)

    package static let databaseNames = ["log"] + ProjectionTable.allCases.map(\.rawValue)

    /// Settings of `open`.
    package struct Options: Sendable {
        package var readOnly = false
        package var durability: Environment.Durability = .full
        package var mapSize = 64 << 20
        package var clock: any OutboxClock = SystemClock()
        package var random: any RandomSource = SystemRandomSource()
        package var crashPlan: CrashPlan?
        /// `OutboxConfiguration.powerLossIsSimulated`.
        package var powerLossIsSimulated = false
        /// The archive's folder; beside the log when nil (`Archive.beside(log:)`).
        package var archiveFolder: String?
        /// Whether a log opened for writing with `.full` durability commits through its journal
        /// (`CommitJournal`): each commit flushed once, sequentially, where LMDB flushes its pages in
        /// place and its meta page after them.
        package var journaled = true
        /// `OutboxConfiguration.journalIsSimulated`.
        package var journalIsSimulated = false
        package init() {}
    }

    /// Opens the log at `path`, creating it unless read-only (R8.8). A new log gets its `logCreated`
    /// event; projections of an older layout, or behind the log, are rebuilt. Nothing scans the log
    /// otherwise, so opening a log of a million writes is immediate.
    package init(path: String, options: Options = Options()) throws {
        // A log opened for writing that has a journal commits through it, whatever the durability
        // asked: a recovery would otherwise write over the commits made without it.
        let simulated = options.journalIsSimulated && options.durability == .noSync
        let opened =
            options.readOnly
            ? nil
            : try Self.openJournal(
                path: path, create: options.journaled && (options.durability == .full || simulated), simulated: simulated)
        var environmentOptions = Environment.Options()
        environmentOptions.readOnly = options.readOnly
        environmentOptions.durability = opened != nil ? .noSync : options.durability
        environmentOptions.mapSize = options.mapSize
        let environment = try storageErrors(path: path) {
            try Environment(path: path, databases: Self.databaseNames, options: environmentOptions)
        }
        self.environment = environment
        self.path = path
        journal = opened.map { CommitJournal($0.journal, flushes: options.durability == .full || simulated) }
        journalIsSimulated = simulated
        clock = options.clock
        random = options.random
        crashPlan = options.crashPlan
        durability = options.durability
        powerLossIsSimulated = options.powerLossIsSimulated
        archive = options.archiveFolder.map(Archive.init(folder:)) ?? Archive.beside(log: path)
        let tables = LogTables(environment)
        self.tables = tables
        if let recovered = opened?.recovered {
            try Self.replay(recovered, environment: environment, tables: tables, path: path, journalPath: opened!.journal.path)
        }

        let (last, applied, layout, storedOrigin) = try storageErrors(path: path) {
            try environment.read { txn in
                let last = try Self.lastSequence(txn.unsafeAccess, tables.log.database, path: path)
                // A value of the wrong length reads as none: the projections are then rebuilt from the log.
                let applied = try txn.get(tables[.meta], key: MetaKey.applied).flatMap {
                    try? MetaKey.readUInt64($0, name: MetaKey.applied)
                }
                let layout = try txn.get(tables[.meta], key: MetaKey.layout).flatMap {
                    try? MetaKey.readUInt64($0, name: MetaKey.layout)
                }
                let origin = try txn.get(tables[.meta], key: MetaKey.origin).flatMap { bytes in
                    bytes.withUnsafeBytes { raw in
                        var reader = ByteReader(raw)
                        return try? Origin.decode(from: &reader)
                    }
                }
                return (last, applied, layout, origin)
            }
        }
        if options.readOnly { try Self.refuseUnrecovered(environment: environment, last: last ?? 0, path: path) }
        let markPath = CommitMark.path(forEnvironment: environment.path, isFolder: environment.isFolder)
        if let last, let storedOrigin, let mark = CommitMark.read(at: markPath), mark.origin == storedOrigin,
            mark.sequence > last
        {
            throw OutboxError.damaged(
                path: path,
                "the log ends at sequence \(last), but sequence \(mark.sequence) was committed and flushed before: its last commits are gone (a damaged LMDB meta page rolls a log back). Restore it from a copy; to read what it holds anyway, remove \(markPath)",
                sequence: last + 1)
        }
        let origin = storedOrigin ?? Origin(using: random)
        commitMark =
            options.readOnly || options.durability != .full ? nil : CommitMark(path: markPath, origin: origin)
        if options.readOnly {
            guard last != nil else { throw OutboxError.damaged(path: path, "the log holds no events: not an outbox log") }
            return
        }
        if last == nil {
            try transaction(sync: .standard) { appender in _ = try appender.append(.logCreated(LogCreated(origin: origin))) }
        } else if layout != projectionLayoutVersion || applied != last {
            try rebuild()
        }
        if let opened, opened.isAlone {
            // What was recovered is flushed before another process may open the log.
            if opened.recovered?.isEmpty == false { try checkpoint() }
            try opened.journal.lockShared()
        }
    }

    /// Opens the journal of the log at `path` (made when missing and `create` says so; nil when
    /// missing otherwise). When no other process has the log open for writing, and the journal's head
    /// does not say LMDB is whole after it (the last writer was killed, or the power failed, before it
    /// closed the log), LMDB's meta pages are put back to the head's, before LMDB opens: whatever the
    /// disk kept of the commits after it, its pages are whole. The commits the journal holds past the
    /// head are returned, to be replayed. The journal stays locked alone until the caller has done so
    /// (`lockShared`); otherwise it is locked shared, waiting for a recovery under way.
    private static func openJournal(
        path: String, create: Bool, simulated: Bool
    ) throws -> (journal: Journal, isAlone: Bool, recovered: [(sequence: UInt64, record: [UInt8])]?)? {
        let location = try storageErrors(path: path) { try Environment.locate(path, create: true) }
        let journalPath = CommitJournal.path(forEnvironment: location.path, isFolder: location.isFolder)
        guard create || access(journalPath, F_OK) == 0 else { return nil }
        let pageSize = Environment.pageSize(ofDataFile: location.dataFile) ?? Int(sysconf(Int32(_SC_PAGESIZE)))
        let journal =
            simulated
            ? try Journal(path: journalPath, metaPagesSize: 2 * pageSize, capacity: 256 << 10, syncs: false)
            : try Journal(path: journalPath, metaPagesSize: 2 * pageSize)
        guard journal.lockAlone() else {
            try journal.lockShared()
            return (journal, false, nil)
        }
        guard let head = journal.head, !head.lmdbIsWhole else { return (journal, true, nil) }
        if let newer = try journal.generationOfCommitsPastTheHead() {
            throw damagedNewestHead(generation: newer, journalPath: journalPath, path: path)
        }
        let pending = try journal.committed()
        guard try storageErrors(path: path, { try Environment.metaPagesFit(head.metaPages, dataFile: location.dataFile) }) else {
            throw OutboxError.damaged(
                path: path,
                "its journal \(journalPath) was checkpointed on a data file larger than this one (the file was replaced since): its commits cannot be recovered onto it. Remove the journal to open the log as its data file holds it"
            )
        }
        try storageErrors(path: path) { try Environment.restoreMetaPages(head.metaPages, path: path) }
        return (journal, true, pending)
    }

    /// The journal's newest head, of `generation`, no longer reads though it was written whole
    /// (`Journal.generationOfCommitsPastTheHead`): the head before it may name pages LMDB reused since.
    private static func damagedNewestHead(generation: UInt64, journalPath: String, path: String) -> OutboxError {
        OutboxError.damaged(
            path: path,
            "the newest head of its journal \(journalPath) (generation \(generation)) no longer reads, though it was written whole: putting the log back to the head before it could undo what was written since. Restore the log from a copy; to open it as its data file holds it, remove the journal"
        )
    }

    /// Throws `.needsRecovery` when the log was not closed (its journal's head does not say LMDB is
    /// whole after it) and no writer has it open, and either its journal holds commits past `last`
    /// (the log's last sequence in its data file) or LMDB committed after that head, without flushing,
    /// pages a power loss may have torn: its writer was killed or lost power, and only an open for
    /// writing recovers the log. Throws `.damaged` when the journal's newest head no longer reads
    /// though it was written whole, as an open for writing does. A log with no journal (or one this
    /// user may not read), or one a writer has open, is read as its data file holds it.
    private static func refuseUnrecovered(environment: Environment, last: UInt64, path: String) throws {
        let journalPath = CommitJournal.path(forEnvironment: environment.path, isFolder: environment.isFolder)
        // No journal (a log written without one, a copied data file), or one this user may not read.
        guard access(journalPath, R_OK) == 0 else { return }
        let journal: Journal
        do {
            journal = try Journal(path: journalPath, metaPagesSize: 2 * environment.pageSize, readOnly: true)
        } catch let error as OutboxError where error.code == .doesNotExist {
            return  // removed since
        }
        defer { journal.close() }
        guard let head = journal.head, !head.lmdbIsWhole else { return }
        // What an open for writing refuses, a read-only open refuses alike (a closed log's newest head
        // is the one that says LMDB is whole: damaged, the head before it is found).
        if let newer = try journal.generationOfCommitsPastTheHead(), journal.hasNoWriter() {
            throw damagedNewestHead(generation: newer, journalPath: journalPath, path: path)
        }
        let journaled = try journal.committed().last?.sequence ?? head.sequence
        let committed = try storageErrors(path: path) { try environment.read { $0.transactionID } }
        let checkpointed = Environment.transactionID(ofMetaPages: head.metaPages)
        guard journaled > last || committed != checkpointed, journal.hasNoWriter() else { return }
        if journaled > last {
            throw OutboxError(
                .needsRecovery,
                "\(path): the log's commits through sequence \(journaled) are in its journal, its data file holds them through \(last) (its writer was killed or lost power): open it for writing once to recover them"
            )
        }
        throw OutboxError(
            .needsRecovery,
            "\(path): the log was not closed (its writer was killed or lost power), and its data file holds commits made after its journal's last checkpoint without a flush, whose pages a power loss may have torn: open it for writing once to recover it"
        )
    }

    /// Appends the journal's commits past the log's last record (LMDB put back to the journal's head)
    /// to the log, as they were, and folds them into the projections, in one transaction.
    private static func replay(
        _ records: [(sequence: UInt64, record: [UInt8])], environment: Environment, tables: LogTables, path: String,
        journalPath: String
    ) throws {
        try storageErrors(path: path) {
            try environment.write { txn in
                let access = txn.unsafeAccess
                let last = try lastSequence(access, tables.log.database, path: path) ?? 0
                let tail = records.drop { $0.sequence <= last }
                guard let first = tail.first?.sequence else { return }
                guard first == last + 1 else {
                    throw OutboxError.damaged(
                        path: path,
                        "its journal \(journalPath) holds commits from sequence \(first) on, but the log ends at sequence \(last): the journal is not of this log. Remove the journal to open the log as its data file holds it",
                        sequence: last + 1)
                }
                try TransactionStore.Lookups.with(access, tables) { lookups in
                    var projector = Projector(store: TransactionStore(access: access, tables: tables, lookups: lookups))
                    for (sequence, record) in tail {
                        let recorded: RecordedEvent
                        do throws(RecordCodec.Failure) {
                            recorded = try RecordCodec.decode(record, sequence: sequence)
                        } catch {
                            throw OutboxError.damagedRecord(path: path, sequence: sequence, reason: error.reason, cause: error)
                        }
                        try access.put(tables.log.database, key: StoreKey.bytes(id: sequence), value: record, options: .append)
                        try projector.apply(recorded)
                    }
                    try projector.markApplied(tail.last!.sequence)
                    try projector.store.flush()
                }
            }
        }
    }

    /// Makes every commit so far durable and the journal's head (a journaled log; nothing otherwise):
    /// after a recovery, around a file's compaction, and before the log is closed; `lmdbIsWhole` when no
    /// commit through the journal follows it (`Journal.Head.lmdbIsWhole`).
    package func checkpoint(lmdbIsWhole: Bool = false) throws {
        guard let journal else { return }
        let tables = self.tables
        let path = self.path
        try storageErrors(path: path) {
            try environment.write { txn in
                let last = try Self.lastSequence(txn.unsafeAccess, tables.log.database, path: path) ?? 0
                try journal.checkpoint(txn, lastSequence: last, lmdbIsWhole: lmdbIsWhole)
            }
        }
    }

    /// Makes a pass's commits so far durable (a journaled `.full` log's, whose pass commits are not
    /// flushed one by one; nothing otherwise): when the pass ends, its answers are on the disk. The
    /// simulation's journals leave them, so that its power losses may take back a pass's last commits,
    /// as one before this flush would.
    func makePassDurable() throws {
        guard let journal, journal.flushes, !journalIsSimulated else { return }
        try storageErrors(path: path) { try journal.flush() }
    }

    /// Whether a power loss now could undo the last commit: it was a pass commit, made without syncing
    /// LMDB's meta page (R2.3). The simulation's storage model asks before it takes a commit back.
    package var lastCommitMayBeUndoneByPowerLoss: Bool {
        journal?.hasUnflushedCommits ?? environment.lastCommitSkippedMetaSync
    }

    /// Where a journaled log's commits not yet flushed lie in its journal (nil without a journal): the
    /// simulation's power losses take them back.
    package var unflushedJournalCommits: Range<Int>? { journal?.unflushedCommits }

    /// Transactions on the log begun in a task's synchronous code, on Swift's pool (tests: none).
    package var transactionsBegunFromTasks: Int { environment.transactionsBegunFromTasks }

    /// Makes the last commit durable, when it was made without the meta sync (R2.3).
    func makeLastCommitDurable() throws {
        if let journal { return try storageErrors(path: path) { try journal.flush() } }
        guard environment.lastCommitSkippedMetaSync else { return }
        try storageErrors(path: path) { try environment.flush() }
    }

    // MARK: - Writing

    /// Runs `body` in one write transaction with an appender, and commits. On `MDB_MAP_FULL` the map
    /// grows and `body` runs again, so `body` must have no effect outside the transaction.
    /// A commit flushed with the full sync moves the log's commit mark (`CommitMark`).
    /// A journaled log appends the transaction's records to its journal and flushes them before LMDB
    /// commits, whatever `sync` says: a sequential flush costs less than LMDB's data flush did.
    /// `recordBytes` says at least how many bytes of records `body` appends (`CommitJournal.begin`).
    func transaction<R>(sync: Environment.CommitSync, recordBytes: Int = 0, _ body: (inout Appender) throws -> R) throws -> R {
        var appended: ClosedRange<UInt64>?
        var committed: UInt64 = 0
        let journal = self.journal
        let log = tables.log.database
        let path = self.path
        let result = try storageErrors(path: path) {
            try environment.write(sync: journal == nil ? sync : .standard) { txn in
                let last = try Self.lastSequence(txn.unsafeAccess, log, path: path) ?? 0
                try journal?.begin(
                    txn, holdsSnapshot: environment.holdsSnapshot, lastSequence: last, flush: sync == .standard,
                    recordBytes: recordBytes)
                appended = nil
                let result = try withAppender(txn, after: last) { appender in
                    let result = try body(&appender)
                    try appender.finish()
                    if let first = appender.appended.first?.sequence, let last = appender.appended.last?.sequence {
                        appended = first...last
                    }
                    return result
                }
                if let journal, let appended {
                    try journal.commit(txn, appended)
                    crashPlan?.pass(.journalAppended)
                }
                committed = txn.transactionID
                return result
            }
        }
        journal?.didCommit(transaction: committed, appended: appended != nil)
        if sync == .standard, let appended { commitMark?.advance(to: appended.upperBound) }
        return result
    }

    /// `body` with an appender whose first event follows `last`, the log's last sequence.
    private func withAppender<R>(
        _ txn: borrowing WriteTransaction, after last: UInt64, _ body: (inout Appender) throws -> R
    ) throws -> R {
        let access = txn.unsafeAccess
        let log = tables.log
        // Records are appended through one cursor, which stays at the log's end: no search a record.
        // A journaled log's commit takes each record's bytes from the page they were written into.
        let journal = self.journal
        return try access.withLookupCursor(log) { records in
            let putRecord: (RecordedEvent) throws -> Void =
                if let journal {
                    { recorded in try records.put(recorded.sequence, recorded, appending: true) { journal.add($0) } }
                } else {
                    { recorded in try records.put(recorded.sequence, recorded, appending: true) }
                }
            return try TransactionStore.Lookups.with(access, tables) { lookups in
                let store = TransactionStore(
                    access: access, tables: tables, lookups: lookups, memory: storeMemory.withLock { $0.take() } ?? .init())
                var appender = Appender(
                    time: clock.now(), nextSequence: last + 1, store: store, reader: reader(store, access),
                    transactionID: access.transactionID, putRecord: putRecord
                )
                let result = try body(&appender)
                let memory = store.releaseMemory(transaction: access.transactionID, appended: !appender.appended.isEmpty)
                storeMemory.withLock { $0 = memory }
                return result
            }
        }
    }

    /// A reader over a write transaction: the projections through its store, the log directly.
    private func reader(_ store: TransactionStore, _ access: WriteAccess) -> StoreReader {
        StoreReader(value: store.value, scan: store.scan, record: recordReader(access), decodedEntry: store.entry)
    }

    /// Reads one event of the log in a transaction; nil when there is none.
    private func recordReader(_ access: some ReadableTransaction) -> (UInt64) throws -> RecordedEvent? {
        let log = tables.log
        return namingDamage { sequence in try access.get(log, sequence) }
    }

    /// `read`, whose damaged record throws `OutboxError` naming its sequence.
    private func namingDamage(
        _ read: @escaping (UInt64) throws -> RecordedEvent?
    ) -> (UInt64) throws -> RecordedEvent? {
        let path = self.path
        return { sequence in
            do {
                return try read(sequence)
            } catch let failure as RecordCodec.Failure {
                throw OutboxError.damagedRecord(path: path, sequence: sequence, reason: failure.reason)
            }
        }
    }

    /// Runs `body` as `read` does; then offers the entries its reader decoded to the next write
    /// transaction, which keeps them when nothing was committed since this snapshot: a pass plans its
    /// next batch and reads its writes between commits, and the commit that plans it again reads none
    /// of their entries anew. Returns the snapshot's transaction id with the result: the next write
    /// transaction's id is one more when nothing was committed since.
    func readAhead<R>(_ body: (StoreReader) throws -> R) throws -> (result: R, snapshot: UInt64) {
        try storageErrors(path: path) {
            try environment.read { txn in
                let access = txn.unsafeAccess
                let memo = EntryMemo()
                let result = try withReader(access, memo: memo, body)
                let snapshot = access.transactionID
                storeMemory.withLock { $0?.adopt(memo, asOf: snapshot) }
                return (result, snapshot)
            }
        }
    }

    /// Runs `body` with a reader over a read transaction's projections and log. The verdict table's
    /// entries are decoded where they lie and kept for the transaction (`EntryMemo`): a pass plans a
    /// batch and builds its requests in one snapshot, and reads each entry once. Entries and records
    /// are looked up through a cursor each (`LookupCursor`): a planner reads consecutive ids, and the
    /// requests' `writeQueued` records mostly follow one another, so most lookups are a step, not a
    /// search of the tree.
    private func withReader<R>(
        _ access: ReadAccess, memo: EntryMemo = EntryMemo(), _ body: (StoreReader) throws -> R
    ) throws -> R {
        let tables = self.tables
        return try access.withLookupCursor(tables.entries) { entries in
            try access.withLookupCursor(tables.log) { records in
                try body(
                    StoreReader(
                        value: { table, key in try access.get(tables[table], key: key) },
                        scan: { table, prefix, start, visit in
                            try access.forEach(tables[table], prefix: prefix, from: start, visit)
                        },
                        record: namingDamage { sequence in try records.get(sequence) },
                        decodedEntry: { id in try memo.entry(id) { try entries.get(id) } }))
            }
        }
    }

    /// Appends through the group committer: callers arriving while a commit is in flight share the
    /// next one (R2.3). Returns once the commit is durable as `sync` says. `recordBytes`: at least how
    /// many bytes of records `work` appends (`GroupCommitter.Job.recordBytes`).
    package func append<R: Sendable>(
        sync: Environment.CommitSync = .standard, isEnqueue: Bool = false, crashPoint: CrashPoint? = nil,
        recordBytes: Int = 0, _ work: @escaping @Sendable (inout Appender) throws -> R
    ) async throws -> R {
        try await submit(
            GroupCommitter.Job(
                sync: sync, isEnqueue: isEnqueue, crashPoint: crashPoint, work: { try work(&$0) }, recordBytes: recordBytes))
    }

    /// A write transaction that committed: its id (`ReadAccess.transactionID`), and whether one
    /// caller's job ran alone in it.
    struct Commit: Sendable, Equatable {
        let transaction: UInt64
        let isAlone: Bool
    }

    /// Appends as `append` does, and tells which transaction committed the work and whether the work
    /// ran alone in it: what a read of the snapshot before that commit missed is then this work's.
    func appendReportingCommit<R: Sendable>(
        sync: Environment.CommitSync = .standard, crashPoint: CrashPoint? = nil,
        _ work: @escaping @Sendable (inout Appender) throws -> R
    ) async throws -> (R, Commit) {
        let committed: GroupCommitter.Committed = try await submit(
            GroupCommitter.Job(
                sync: sync, isEnqueue: false, crashPoint: crashPoint, work: { try work(&$0) }, reportsCommit: true))
        return (committed.value as! R, committed.commit)
    }

    /// Hands `job` to the group committer and waits for it, told what it returns.
    private func submit<R: Sendable>(_ job: GroupCommitter.Job) async throws -> R {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<R, any Error>) in
            committer.submit(job, to: self) { result in continuation.resume(with: result.map { $0 as! R }) }
        }
    }

    /// Holds the writer before its next transaction (tests: gather a group deterministically).
    package func suspendWriter() { committer.suspend() }

    /// Lets the writer go on after `suspendWriter()`.
    package func resumeWriter() { committer.resume(with: self) }

    /// Closes the LMDB environment once running transactions end: the path can be opened again.
    package func close() {
        // The next open then finds nothing to recover (a failure here leaves it to that open).
        if let journal, checkpointsOnClose.load(ordering: .relaxed), (try? journal.needsCheckpointOnClose()) ?? true {
            try? checkpoint(lmdbIsWhole: true)
        }
        journal?.close()
        commitMark?.close()
        archive.close()
        environment.close()
    }

    /// Calls `observer` after every commit of the group committer with the events it committed, in
    /// commit order, on the committer's notification queue (not the writer's), before the callers of
    /// that commit are told it is done. Status and the events stream are fed from here.
    func observeCommits(_ observer: (@Sendable ([RecordedEvent]) -> Void)?) {
        let callback = observer.map { Callback($0) }
        commitObserver.withLock { $0 = callback }
    }

    /// Makes `close` leave the journal as a killed process would, its commits after the head not
    /// checkpointed (the simulation's crashes).
    package func leaveJournalOnClose() { checkpointsOnClose.store(false, ordering: .relaxed) }

    /// Tells the observer of a commit's events.
    func didCommit(_ events: [RecordedEvent]) {
        commitObserver.withLock { $0 }?.call(events)
    }

    // MARK: - Reading

    /// Runs `body` with a reader over a consistent snapshot of the projections and the log.
    func read<R>(_ body: (StoreReader) throws -> R) throws -> R {
        try storageErrors(path: path) { try environment.read { txn in try withReader(txn.unsafeAccess, body) } }
    }

    /// Calls `body` with every event from `from` through `to`, in order, decoding each; a damaged record
    /// throws `OutboxError` (`.damaged`) naming its sequence. `body` returns false to stop.
    /// Events before the last compaction's horizon are read from the archive's segments; one that is
    /// not there throws `.archived` naming it.
    package func forEachEvent(from: UInt64 = 1, to: UInt64 = .max, _ body: (RecordedEvent) throws -> Bool) throws {
        try storageErrors(path: path) {
            try environment.read { txn in
                let access = txn.unsafeAccess
                guard let compaction = try compaction(in: access), from < compaction.horizon else {
                    return try forEachEvent(in: access, from: from, to: to, body)
                }
                for segment in compaction.segments where segment.lastSequence >= from && segment.firstSequence <= to {
                    let first = max(from, segment.firstSequence)
                    let goOn = try archive.read(segment, what: "sequence \(first)") {
                        try $0.forEachEvent(from: first, to: to, body)
                    }
                    guard goOn else { return }
                }
                if to >= compaction.horizon { try forEachEvent(in: access, from: compaction.horizon, to: to, body) }
            }
        }
    }

    /// Whether the projections say the log was compacted, even when what they say of it is damaged.
    func wasCompacted(_ access: some ReadableTransaction) -> Bool {
        (try? access.get(tables[.meta], key: MetaKey.compaction)) != nil
    }

    /// The last compaction, as the projections keep it.
    func compaction(in access: some ReadableTransaction) throws -> Compaction? {
        try access.get(tables[.meta], key: MetaKey.compaction).map { try Compaction.decode($0) }
    }

    /// Up to `limit` events after `sequence`, in order, from one snapshot: a page of the change feed.
    /// Throws `.compacted` for a sequence before the last compaction's snapshot.
    package func events(after sequence: UInt64, limit: Int) throws -> [RecordedEvent] {
        guard sequence < .max else { return [] }
        if let snapshot = try read({ try $0.compaction()?.snapshot }), sequence + 1 < snapshot {
            throw OutboxError(
                .compacted,
                "\(path): the log was compacted at sequence \(snapshot), its snapshot: the change feed resumes from there (after sequence \(snapshot - 1) or later), and the events before it are in the archive"
            )
        }
        var events: [RecordedEvent] = []
        try forEachEvent(from: sequence + 1) { event in
            events.append(event)
            return events.count < limit
        }
        return events
    }

    /// `forEachEvent` inside a transaction the caller holds (a consistent snapshot with other reads).
    /// Sequences run on from `from` without a gap: a missing one (a damaged key) throws `.damaged`
    /// naming it, before anything past it is read.
    func forEachEvent(
        in access: some ReadableTransaction, from: UInt64 = 1, to: UInt64 = .max, _ body: (RecordedEvent) throws -> Bool
    ) throws {
        let path = self.path
        var expected = max(from, 1)
        func visit(_ key: RawSpan, _ value: RawSpan) throws -> Bool {
            guard expected <= to else { return false }
            let sequence = try Self.sequence(ofKey: key, expected: expected, path: path)
            guard try body(try Self.decode(value, sequence: sequence, path: path)) else { return false }
            expected += 1
            return true
        }
        try access.withCursor(tables.log.database) { cursor in
            var more = try cursor.seek(atLeast: StoreKey.bytes(id: expected), visit)
            while more == true { more = try cursor.next(visit) }
        }
    }

    /// The sequence of the log's last record, nil for an empty log; a key that is not 8 bytes is damage.
    static func lastSequence(_ access: some ReadableTransaction, _ log: Database, path: String) throws -> UInt64? {
        try access.withCursor(log) { cursor in
            try cursor.last { key, _ in
                guard key.byteCount == 8 else {
                    throw OutboxError.damaged(path: path, "the log's last key is \(key.byteCount) bytes, not 8")
                }
                return try StoreKey.readBigEndian(key)
            }
        }
    }

    /// The sequence a log key holds, which must be `expected`: the log's keys are 8 bytes and run on
    /// without a gap (R8.2). Anything else is damage, named by the first sequence that is missing.
    static func sequence(ofKey key: RawSpan, expected: UInt64, path: String) throws(OutboxError) -> UInt64 {
        guard key.byteCount == 8 else {
            throw OutboxError.damaged(
                path: path,
                "the key after sequence \(expected - 1) is \(key.byteCount) bytes, not 8: sequence \(expected) is missing",
                sequence: expected)
        }
        let sequence = key.unsafeLoadUnaligned(as: UInt64.self).bigEndian  // 8 bytes, checked above
        guard sequence == expected else {
            throw OutboxError.damaged(
                path: path, "sequence \(expected) is missing: the log holds \(sequence) after \(expected - 1)", sequence: expected
            )
        }
        return sequence
    }

    /// Every stored record's bytes, by sequence (the damaged-log harness finds them in the data file).
    package func storedRecords() throws -> [(sequence: UInt64, bytes: [UInt8])] {
        try storageErrors(path: path) {
            try environment.read { txn in
                var found: [(UInt64, [UInt8])] = []
                try txn.unsafeAccess.forEach(tables.log.database, prefix: []) { key, value in
                    found.append((try StoreKey.readBigEndian(key), value.copiedBytes))
                    return true
                }
                return found
            }
        }
    }

    /// Every entry of the verdict table (`writes`), key and value (the damaged-log harness finds them in
    /// the data file).
    package func storedWriteEntries() throws -> [(key: [UInt8], value: [UInt8])] {
        let writes = tables[.writes]
        return try storageErrors(path: path) {
            try environment.read { txn in
                var found: [([UInt8], [UInt8])] = []
                try txn.unsafeAccess.forEach(writes, prefix: []) { key, value in
                    found.append((key.copiedBytes, value.copiedBytes))
                    return true
                }
                return found
            }
        }
    }

    /// The sequence number of the last event.
    package func lastSequence() throws -> UInt64 {
        try storageErrors(path: path) {
            try environment.read { txn in try Self.lastSequence(txn.unsafeAccess, tables.log.database, path: path) }
                ?? 0
        }
    }

    /// Decodes one stored record; damage becomes an `OutboxError` naming the file and sequence (R8.6).
    static func decode(_ bytes: RawSpan, sequence: UInt64, path: String) throws(OutboxError) -> RecordedEvent {
        do {
            return try RecordCodec.decode(bytes, sequence: sequence)
        } catch {
            throw OutboxError.damagedRecord(path: path, sequence: sequence, reason: error.reason, cause: error)
        }
    }

    // MARK: - Rebuild

    /// Drops every projection and folds the log from its first event, in one transaction: a crash
    /// part way leaves the old projections as they were (R8.2). A compacted log is folded from its
    /// last snapshot.
    package func rebuild() throws {
        let tables = self.tables
        let path = self.path
        let crashPlan = self.crashPlan
        try storageErrors(path: path) {
            try environment.write { txn in
                let access = txn.unsafeAccess
                // Made outside the journal: durable as LMDB makes it.
                if let journal {
                    try journal.commitDurably(
                        txn, lastSequence: try Self.lastSequence(access, tables.log.database, path: path) ?? 0)
                }
                let compacted = wasCompacted(access)
                for table in ProjectionTable.allCases { try access.clear(tables[table]) }
                for name in retiredProjectionDatabases { try access.deleteDatabase(named: name) }
                let total = try access.count(tables.log.database)
                try TransactionStore.Lookups.with(access, tables) { lookups in
                    var projector = Projector(store: TransactionStore(access: access, tables: tables, lookups: lookups))
                    var folded = 0
                    let last = try foldWholeReadAhead(compacted: compacted) { step in
                        if let state = step.snapshot {
                            try projector.store.flush()
                            for table in ProjectionTable.allCases { try access.clear(tables[table]) }
                            for entry in try state.current() {
                                _ = try access.put(tables[entry.table], key: entry.key, value: entry.value)
                            }
                            projector = Projector(store: TransactionStore(access: access, tables: tables, lookups: lookups))
                        }
                        try projector.apply(step.event, rowKey: step.rowKey)
                        folded += 1
                        if folded == total / 2 { crashPlan?.pass(.rebuildMidway) }
                    }
                    if last > 0 { try projector.markApplied(last) }
                    try projector.store.flush()
                }
            }
        }
    }

    /// `foldWhole` with the records read and decoded on a thread of their own, in a read transaction,
    /// while `body` folds those before them on the caller's: a rebuild's decoding is a quarter of its
    /// work. The caller must hold the log's write transaction, so that the reader's snapshot holds the
    /// same log (no commit can come between), and it gets the same steps, in order, with the same
    /// error at the same record. The reader is stopped and waited for before this returns or throws.
    func foldWholeReadAhead(compacted: Bool, _ body: (borrowing FoldStep) throws -> Void) throws -> UInt64 {
        let steps = FoldSteps()
        let reader = Thread { [self] in
            steps.end(
                Result {
                    try environment.read { txn in
                        try foldWhole(txn.unsafeAccess, compacted: compacted) { try steps.put($0) }
                    }
                })
        }
        reader.name = "outbox.rebuild-reader"
        reader.start()
        defer { steps.stopAndWait() }
        while var batch = steps.next() {
            // Each step is moved out to be read and back in after, so the fold reads it without a copy
            // (a step read through a pointer is copied before each call it is passed to), and the batch
            // is handed back whole to be freed by the reader that made it.
            try batch.withUnsafeMutableBufferPointer { batch in
                guard let first = batch.baseAddress else { return }
                for index in batch.indices {
                    let step = (first + index).move()
                    defer { (first + index).initialize(to: step) }
                    try body(step)
                }
            }
            steps.spend(consume batch)
        }
        return try steps.result()
    }

    /// One record of `foldWhole`: an event to fold, or a snapshot to start again from. (A struct, not an
    /// enum: a fold reads its event where it lies, where binding an enum's payload would copy it.)
    struct FoldStep: Sendable {
        let event: RecordedEvent
        /// For a `logCompacted` event, the state it holds: the fold starts again from that state.
        let snapshot: ProjectionState?
        /// For a `writeQueued` event, its row's key in `rows`: made where the record is decoded (on a
        /// rebuild's reader thread, beside the fold), a function of the event alone.
        let rowKey: StoreKey?

        init(event: RecordedEvent, snapshot: ProjectionState? = nil) {
            self.event = event
            self.snapshot = snapshot
            if case .writeQueued(let queued) = event.event {
                rowKey = RowKey.storeKey(user: queued.user, table: queued.table, key: queued.canonicalKey)
            } else {
                rowKey = nil
            }
        }
    }

    /// Reads every record of the log in order, checking each, for a fold that starts again at each
    /// snapshot (a rebuild, `verify`). The log must run on without a gap from the last compaction's
    /// horizon, and from 1 when it has none: a gap there throws `.damaged` naming the first missing
    /// sequence. Returns the last sequence read, 0 for none.
    /// `compacted` says whether gaps may lie before a horizon, as the projections say whether the log
    /// was compacted (`wasCompacted`): a damaged key of a log never compacted is named as the gap it
    /// makes, not as a later record.
    func foldWhole(_ access: some ReadableTransaction, compacted: Bool, _ body: (FoldStep) throws -> Void) throws -> UInt64 {
        let path = self.path
        var expected: UInt64 = 1
        // Gaps not yet known to lie before a horizon: their first and last missing sequence, and what followed.
        var gaps: [(first: UInt64, last: UInt64, found: UInt64)] = []
        try access.forEach(tables.log.database, prefix: []) { key, value in
            guard key.byteCount == 8 else {
                _ = try Self.sequence(ofKey: key, expected: expected, path: path)
                return false
            }
            let sequence = try StoreKey.readBigEndian(key)
            if sequence != expected {
                // A sequence past the next is a gap, which a log never compacted has none of; one before
                // it (keys out of order, on a damaged page), or the last possible one, is damage.
                guard compacted, sequence > expected, sequence < .max else {
                    _ = try Self.sequence(ofKey: key, expected: expected, path: path)
                    return false
                }
                gaps.append((expected, sequence - 1, sequence))
            }
            expected = sequence + 1
            let event = try Self.decode(value, sequence: sequence, path: path)
            if case .logCompacted(let compaction) = event.event {
                guard ProjectionState.readableLayouts.contains(compaction.state.layout) else {
                    throw OutboxError.damaged(
                        path: path,
                        "the snapshot at sequence \(sequence) holds projections of layout \(compaction.state.layout), which this build does not read",
                        sequence: sequence)
                }
                gaps = gaps.compactMap { gap in
                    gap.last < compaction.horizon ? nil : (max(gap.first, compaction.horizon), gap.last, gap.found)
                }
                try body(FoldStep(event: event, snapshot: compaction.state))
            } else {
                try body(FoldStep(event: event))
            }
            return true
        }
        if let gap = gaps.first {
            throw OutboxError.damaged(
                path: path, "sequence \(gap.first) is missing: the log holds \(gap.found) after \(gap.first - 1)",
                sequence: gap.first)
        }
        return expected - 1
    }
}

/// The steps a reader thread hands to a fold (`EventLog.foldWholeReadAhead`): batches of them, at most
/// `depth` waiting, then how the read ended.
private final class FoldSteps: @unchecked Sendable {
    private static let batchCount = 256
    private static let depth = 4
    private let condition = NSCondition()
    /// Guarded by `condition`.
    private var ready: [[EventLog.FoldStep]] = []
    private var ended: Result<UInt64, any Error>?
    private var stopped = false
    /// Batches the fold is done with, for the reader to free, at most `depth`.
    private var spent: [[EventLog.FoldStep]] = []
    /// The reader's own batch, not yet handed over.
    private var filling: [EventLog.FoldStep] = []

    /// The reader hands over `step`; throws when the fold stopped taking them.
    func put(_ step: EventLog.FoldStep) throws {
        filling.append(step)
        if filling.count == Self.batchCount { try handOver() }
    }

    private func handOver() throws {
        condition.lock()
        while ready.count >= Self.depth, !stopped { condition.wait() }
        if stopped {
            condition.unlock()
            throw CancellationError()
        }
        ready.append(filling)
        var reused = spent.popLast() ?? []
        condition.broadcast()
        condition.unlock()
        // A folded batch's steps are freed here, on the thread that made them, outside the lock, and its
        // storage filled again.
        reused.removeAll(keepingCapacity: true)
        reused.reserveCapacity(Self.batchCount)
        filling = reused
    }

    /// The fold hands back a batch it folded, for the reader to free and fill again; once the reader
    /// ended (or with `depth` handed back already), the fold frees it.
    func spend(_ batch: consuming [EventLog.FoldStep]) {
        condition.lock()
        defer { condition.unlock() }
        if ended == nil, spent.count < Self.depth { spent.append(batch) }
    }

    /// The reader ends, having read every record (its last sequence) or thrown.
    func end(_ result: Result<UInt64, any Error>) {
        var result = result
        if !filling.isEmpty {
            do { try handOver() } catch { result = .failure(error) }
        }
        condition.lock()
        ended = result
        condition.broadcast()
        condition.unlock()
    }

    /// The next batch, in order, or nil once the reader ended and every batch was taken.
    func next() -> [EventLog.FoldStep]? {
        condition.lock()
        defer { condition.unlock() }
        while ready.isEmpty, ended == nil { condition.wait() }
        if ready.isEmpty { return nil }
        condition.broadcast()
        return ready.removeFirst()
    }

    /// How the read ended: its last sequence, or what it threw.
    func result() throws -> UInt64 {
        condition.lock()
        defer { condition.unlock() }
        return try ended!.get()
    }

    /// Stops the reader (it throws at its next batch) and waits for it to end.
    func stopAndWait() {
        condition.lock()
        defer { condition.unlock() }
        stopped = true
        condition.broadcast()
        while ended == nil { condition.wait() }
    }
}
