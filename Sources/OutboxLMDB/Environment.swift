internal import COutboxLMDB
internal import Synchronization

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// An open LMDB environment: one file (and its lock file), owned by this object and closed with it.
///
/// - One environment per path per process: LMDB's locks are per process, so a second open of the same
///   path throws `LMDBError` (`isAlreadyOpen`).
/// - Opened with `MDB_NOTLS`: read transactions may run on any thread.
/// - Transactions are closures: `write` commits on return and aborts on throw; neither may `await`.
/// - `MDB_MAP_FULL` is handled inside `write`: the transaction is aborted, the map doubled with no
///   transaction open, and the closure run again. Closures must therefore have no outside side effects.
public final class Environment: @unchecked Sendable {
    // @unchecked Sendable: `handle` is set once and freed by `close` (or deinit) while `resizeLock` is held
    // exclusively; LMDB environments are thread-safe with MDB_NOTLS; writes are serialized by `writer`, and
    // map resizes and the close exclude every transaction through `resizeLock`.

    /// How an environment's commits reach the disk.
    public enum Durability: Sendable {
        /// Every commit is flushed (`fsync`) before it returns: it survives a crash of the app and of the OS.
        case full
        /// `MDB_NOSYNC`: commits are not flushed. A commit survives the app being killed, but not an OS
        /// crash or power loss, which may lose the last commits (never the file's integrity, on a
        /// file system that keeps write order).
        case noSync
    }

    /// How one commit is flushed; see `write(_:_:)`.
    public enum CommitSync: Sendable {
        /// As the environment's `Durability` says.
        case standard
        /// `MDB_NOMETASYNC` for this commit: data pages are flushed, the meta page is not; an OS crash may
        /// lose this commit, never the file's integrity.
        case withoutMetaSync
    }

    /// Settings of `init`.
    public struct Options: Sendable {
        /// The initial map size in bytes; grows on demand.
        public var mapSize: Int = 64 << 20
        /// Opens without writing anything to the data file.
        public var readOnly = false
        public var durability: Durability = .full
        /// Creates the databases that are missing (ignored when read-only).
        public var createDatabases = true
        public init() {}
    }

    /// The environment's folder (or file, for a file that is not named `data.mdb`).
    public let path: String
    public let isReadOnly: Bool
    /// Whether the environment is a folder (`data.mdb` and `lock.mdb` in it) rather than one file.
    package let isFolder: Bool
    /// The data file: `data.mdb` in the folder, or the file itself.
    private var dataFile: String { isFolder ? path + "/data.mdb" : path }
    /// Replaced only by `compactFile`, with `resizeLock` held exclusively.
    fileprivate var handle: OpaquePointer
    /// The flags `mdb_env_open` was given, for `compactFile`'s reopen.
    private let openFlags: UInt32
    /// The descriptor of the holders' lock (`holdersLockPath`), -1 when read-only.
    private let holders: Int32
    private let registryKey: String
    private let resizeLock = ReadWriteLock()
    private let writer = PlainLock()
    private let commits = Atomic<Int>(0)
    private let transactionsFromTasks = Atomic<Int>(0)
    private let lastCommitSkippedMeta = Atomic<Bool>(false)
    /// Set by `WriteTransaction.commitDurably()` on an environment opened `.noSync`: `MDB_NOSYNC` is
    /// set again once that transaction ends.
    fileprivate let syncsThisCommit = Atomic<Bool>(false)
    private let databases: [String: Database]
    private let mapSizeNow: Mutex<Int>
    /// LMDB's page size.
    package let pageSize: Int
    /// Where this process takes the data file to end (`writeAhead`): where it last found or made it,
    /// or, after a write of zeros failed, where it tries again; `fstat` is asked again when the file
    /// seems near its end.
    private let knownFileEnd = Atomic<Int>(0)
    /// Set by `close`, read under `resizeLock`.
    private let isClosed = Atomic<Bool>(false)
    /// The read transaction `holdSnapshot` holds.
    private let heldSnapshot = Mutex<OpaquePointer?>(nil)

    private static let registry = Mutex<Set<String>>([])
    /// Database handles beyond the names opened: room for a write to open the databases an earlier
    /// layout had, to delete them.
    private static let spareHandles = 4

    /// Opens (or, unless read-only, creates) the environment at `path` with the named databases.
    public init(path: String, databases names: [String], options: Options = Options()) throws(LMDBError) {
        let location = try Self.resolve(path, create: !options.readOnly)
        self.path = location.path
        self.isReadOnly = options.readOnly
        isFolder = location.isDirectory
        registryKey = location.key
        let inserted = Self.registry.withLock { $0.insert(location.key).inserted }
        guard inserted else { throw LMDBError(.alreadyOpen, path: location.path) }

        // A writer holds the holders' lock shared while it has the environment open, so that
        // `compactFile` knows when no other process holds the file it would replace.
        var holders: Int32 = -1
        if !options.readOnly {
            let lockPath = Self.holdersLockPath(location.path, isFolder: location.isDirectory)
            holders = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            if holders < 0 || flock(holders, LOCK_SH) != 0 {
                let failure = LMDBError(.system(errno, call: "open(\(lockPath))"), path: location.path)
                if holders >= 0 { closeDescriptor(holders) }
                _ = Self.registry.withLock { $0.remove(location.key) }
                throw failure
            }
        }
        self.holders = holders
        var raw: OpaquePointer?
        var rc = mdb_env_create(&raw)
        guard rc == 0, let env = raw else {
            if holders >= 0 { closeDescriptor(holders) }
            _ = Self.registry.withLock { $0.remove(location.key) }
            throw LMDBError(.lmdb(rc, call: "mdb_env_create"), path: location.path)
        }
        func fail(_ error: LMDBError) -> LMDBError {
            mdb_env_close(env)
            if holders >= 0 { closeDescriptor(holders) }
            _ = Self.registry.withLock { $0.remove(location.key) }
            return error
        }
        var flags = UInt32(MDB_NOTLS)
        if options.readOnly { flags |= UInt32(MDB_RDONLY) }
        if options.durability == .noSync { flags |= UInt32(MDB_NOSYNC) }
        if !location.isDirectory { flags |= UInt32(MDB_NOSUBDIR) }
        // Handles beyond the names: a write may open the databases of earlier layouts to delete them.
        rc = mdb_env_set_maxdbs(env, MDB_dbi(names.count + Self.spareHandles))
        if rc == 0 { rc = mdb_env_set_mapsize(env, options.mapSize) }
        if rc != 0 { throw fail(LMDBError(.lmdb(rc, call: "mdb_env_set_mapsize"), path: location.path)) }
        if options.readOnly {
            do {
                if try Self.readsWithoutLocking(location) { flags |= UInt32(MDB_NOLOCK) }
            } catch {
                throw fail(error)
            }
        }
        openFlags = flags
        rc = mdb_env_open(env, location.path, flags, 0o600)
        if rc != 0 { throw fail(Self.openFailure(rc, location, readOnly: options.readOnly)) }
        // Reader slots of processes that died inside a read (killed, or their reader child was) stay
        // taken until someone clears them; with the log held open elsewhere, ~126 of them leave no slot
        // for anyone, enqueue included. Clear them now, and again whenever a read finds none free.
        Self.clearStaleReaders(env)

        let opened: [String: Database]
        do {
            opened = try Self.openDatabases(
                env, names, readOnly: options.readOnly, create: !options.readOnly && options.createDatabases, path: location.path)
        } catch {
            throw fail(error)
        }
        var info = MDB_envinfo()
        mdb_env_info(env, &info)
        var status = MDB_stat()
        mdb_env_stat(env, &status)
        pageSize = Int(status.ms_psize)
        handle = env
        databases = opened
        mapSizeNow = Mutex(info.me_mapsize)
    }

    deinit { close() }

    /// Why `mdb_env_open` failed with `rc`, in the words a caller can act on.
    private static func openFailure(_ rc: Int32, _ location: Location, readOnly: Bool) -> LMDBError {
        let known = [MDB_INVALID, MDB_VERSION_MISMATCH, ENOENT, EACCES, EAGAIN, EBUSY]
        if readOnly && !known.contains(rc) { return LMDBError(.unreadableHeader(rc), path: location.path) }
        guard rc == EACCES else { return LMDBError(.lmdb(rc, call: "mdb_env_open"), path: location.path) }
        let dataFile = location.dataFile
        let lockFile = location.isDirectory ? location.path + "/lock.mdb" : location.path + "-lock"
        let denied = access(dataFile, readOnly ? R_OK : R_OK | W_OK) != 0 ? dataFile : lockFile
        return LMDBError(.permissionDenied(file: denied, access: readOnly ? "read" : "read and write"), path: location.path)
    }

    /// Opens every database once, in one transaction; the handles stay valid for the environment's life.
    private static func openDatabases(
        _ env: OpaquePointer, _ names: [String], readOnly: Bool, create: Bool, path: String
    ) throws(LMDBError) -> [String: Database] {
        var opened: [String: Database] = [:]
        var txn: OpaquePointer?
        var rc = mdb_txn_begin(env, nil, readOnly ? UInt32(MDB_RDONLY) : 0, &txn)
        if rc != 0 { throw LMDBError(.lmdb(rc, call: "mdb_txn_begin"), path: path) }
        for name in names {
            var dbi = MDB_dbi()
            rc = mdb_dbi_open(txn, name, create ? UInt32(MDB_CREATE) : 0, &dbi)
            if rc != 0 {
                mdb_txn_abort(txn)
                if rc == MDB_NOTFOUND { throw LMDBError(.missingDatabase(name), path: path) }
                throw LMDBError(.lmdb(rc, call: "mdb_dbi_open(\(name))"), path: path)
            }
            opened[name] = Database(dbi: dbi, name: name)
        }
        // Commit even a read-only transaction: LMDB keeps the handles it opened only on commit.
        rc = mdb_txn_commit(txn)
        if rc != 0 { throw LMDBError(.lmdb(rc, call: "mdb_txn_commit"), path: path) }
        return opened
    }

    /// Closes the environment once its running transactions end; later transactions throw `isClosed`.
    /// The path may then be opened again in this process.
    public func close() {
        resizeLock.withExclusive {
            guard !isClosed.exchange(true, ordering: .sequentiallyConsistent) else { return }
            releaseSnapshot()
            mdb_env_close(handle)
            if holders >= 0 { closeDescriptor(holders) }
            _ = Self.registry.withLock { $0.remove(registryKey) }
        }
    }

    private func checkOpen() throws(LMDBError) {
        if isClosed.load(ordering: .sequentiallyConsistent) { throw LMDBError(.closed, path: path) }
    }

    /// The database opened under `name` (one of the names given to `init`).
    public func database(_ name: String) -> Database {
        guard let db = databases[name] else { preconditionFailure("database \(name) was not opened") }
        return db
    }

    /// The current map size in bytes.
    public var mapSize: Int { mapSizeNow.withLock { $0 } }

    /// How many write transactions this environment has committed (tests count commits, not time).
    package var commitCount: Int { commits.load(ordering: .relaxed) }

    /// How many transactions began in a task's synchronous code, blocking a thread of Swift's pool
    /// (tests: the outbox makes none).
    package var transactionsBegunFromTasks: Int { transactionsFromTasks.load(ordering: .relaxed) }

    private func countIfFromTask() {
        if withUnsafeCurrentTask(body: { $0 != nil }) { transactionsFromTasks.add(1, ordering: .relaxed) }
    }

    /// Whether the last commit was made `.withoutMetaSync`: an OS crash or power loss now could undo that
    /// one commit (and only it: the next commit's data flush also flushes this commit's meta page). The
    /// simulation's storage model reads it to know what a power loss may take back.
    package var lastCommitSkippedMetaSync: Bool { lastCommitSkippedMeta.load(ordering: .relaxed) }

    /// Flushes the data file, meta pages included (`mdb_env_sync`, forced): a commit made
    /// `.withoutMetaSync` is then durable, as if it had been made `.standard`. Between commits, so
    /// that no commit of this process comes between the flush and what it says of the last one.
    package func flush() throws {
        try writer.withLock {
            try resizeLock.withShared {
                try checkOpen()
                try check(mdb_env_sync(handle, 1), "mdb_env_sync", path: path)
            }
            lastCommitSkippedMeta.store(false, ordering: .relaxed)
        }
    }

    // MARK: - Compacting the file

    /// Where the holders' lock of an environment lives: `holders-lock` in its folder, or
    /// `<file>-holders-lock` beside a single file.
    package static func holdersLockPath(_ path: String, isFolder: Bool) -> String {
        isFolder ? path + "/holders-lock" : path + "-holders-lock"
    }

    /// Writes the data file again without its free pages, and opens the new one in its place: LMDB
    /// reuses the pages a commit frees but never gives them back, so this is how the file shrinks.
    ///
    /// The copy (`mdb_env_copy2` with `MDB_CP_COMPACT`) is made beside the file, flushed, and renamed
    /// over it, so a crash at any step leaves the old file or the new one, whole. A rename would leave a
    /// process that has the old file open writing to a file no one reads: so the copy is made only when
    /// no other open of the environment holds the holders' lock (every writer holds it shared while it
    /// is open, and waits for it while a copy is made). Returns false, changing nothing, when one does.
    /// A read-only open elsewhere keeps reading the old file as it was, a consistent snapshot.
    ///
    /// Runs between this environment's transactions: it waits for the running ones to end.
    public func compactFile() throws(LMDBError) -> Bool {
        precondition(!isReadOnly, "compactFile on a read-only environment")
        return try writer.withLock { () throws(LMDBError) -> Bool in
            try checkOpen()
            guard flock(holders, LOCK_EX | LOCK_NB) == 0 else {
                _ = flock(holders, LOCK_SH)  // a refused conversion may have dropped the shared lock
                return false
            }
            defer { _ = flock(holders, LOCK_SH) }
            let target = isFolder ? path + "/compacting" : path + "-compacting"
            let copied = isFolder ? target + "/data.mdb" : target
            // What a compaction killed part way left.
            _ = unlink(copied)
            if isFolder {
                _ = rmdir(target)
                guard mkdir(target, 0o700) == 0 else { throw LMDBError(.system(errno, call: "mkdir(\(target))"), path: path) }
            }
            try resizeLock.withShared { () throws(LMDBError) in
                try check(mdb_env_copy2(handle, target, UInt32(MDB_CP_COMPACT)), "mdb_env_copy2", path: path)
            }
            try Self.flushFile(copied, path: path)
            try resizeLock.withExclusive { () throws(LMDBError) in
                // The held snapshot is of the file replaced; its holder checkpoints the new one.
                releaseSnapshot()
                mdb_env_close(handle)
                guard rename(copied, dataFile) == 0 else {
                    let failure = LMDBError(.system(errno, call: "rename(\(copied))"), path: path)
                    try reopen()
                    throw failure
                }
                if isFolder { _ = rmdir(target) }
                try Self.flushFile(isFolder ? path : Self.folder(of: path), path: path)
                try reopen()
            }
            // The copy was flushed whole before it took the file's place: no commit in it can be undone
            // by a power loss (its older meta page is an empty environment's, never one to go back to).
            lastCommitSkippedMeta.store(false, ordering: .relaxed)
            // The copy ends at its last page: the next write writes ahead again.
            knownFileEnd.store(0, ordering: .relaxed)
            return true
        }
    }

    /// Opens the environment's file again after `compactFile` closed it, with the same flags, map size
    /// and databases (whose handles must come back the same). Called with `resizeLock` held exclusively.
    private func reopen() throws(LMDBError) {
        var raw: OpaquePointer?
        var rc = mdb_env_create(&raw)
        guard rc == 0, let env = raw else {
            isClosed.store(true, ordering: .sequentiallyConsistent)
            throw LMDBError(.lmdb(rc, call: "mdb_env_create"), path: path)
        }
        rc = mdb_env_set_maxdbs(env, MDB_dbi(databases.count + Self.spareHandles))
        if rc == 0 { rc = mdb_env_set_mapsize(env, mapSizeNow.withLock { $0 }) }
        if rc == 0 { rc = mdb_env_open(env, path, openFlags, 0o600) }
        var txn: OpaquePointer?
        if rc == 0 { rc = mdb_txn_begin(env, nil, 0, &txn) }
        if rc == 0 {
            for (name, database) in databases.sorted(by: { $0.value.dbi < $1.value.dbi }) where rc == 0 {
                var dbi = MDB_dbi()
                rc = mdb_dbi_open(txn, name, 0, &dbi)
                if rc == 0 && dbi != database.dbi { rc = MDB_INCOMPATIBLE }
            }
            if rc == 0 {
                rc = mdb_txn_commit(txn)
            } else {
                mdb_txn_abort(txn)
            }
        }
        guard rc == 0 else {
            mdb_env_close(env)
            isClosed.store(true, ordering: .sequentiallyConsistent)
            _ = Self.registry.withLock { $0.remove(registryKey) }
            throw LMDBError(.lmdb(rc, call: "mdb_env_open (after compacting the file)"), path: path)
        }
        handle = env
    }

    /// `fsync` of a file or folder.
    private static func flushFile(_ file: String, path: String) throws(LMDBError) {
        let descriptor = open(file, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw LMDBError(.system(errno, call: "open(\(file))"), path: path) }
        defer { closeDescriptor(descriptor) }
        guard fsync(descriptor) == 0 else { throw LMDBError(.system(errno, call: "fsync(\(file))"), path: path) }
    }

    private static func folder(of file: String) -> String {
        let parts = file.split(separator: "/", omittingEmptySubsequences: false).dropLast()
        let parent = parts.joined(separator: "/")
        return parent.isEmpty ? (file.hasPrefix("/") ? "/" : ".") : parent
    }

    /// The size of the data file on disk, in bytes.
    public func fileSize() throws(LMDBError) -> Int {
        var info = stat()
        guard stat(dataFile, &info) == 0 else { throw LMDBError(.system(errno, call: "stat(\(dataFile))"), path: path) }
        return Int(info.st_size)
    }

    /// Frees the reader slots of processes that are gone (`mdb_reader_check`); returns how many.
    @discardableResult
    private static func clearStaleReaders(_ env: OpaquePointer) -> Int32 {
        var dead: Int32 = 0
        return mdb_reader_check(env, &dead) == 0 ? dead : 0
    }

    /// Begins a read transaction; when every reader slot is taken (`MDB_READERS_FULL`), frees the slots
    /// of dead processes and tries once more.
    private func beginRead(_ raw: inout OpaquePointer?) -> Int32 {
        let rc = mdb_txn_begin(handle, nil, UInt32(MDB_RDONLY), &raw)
        guard rc == MDB_READERS_FULL, Self.clearStaleReaders(handle) > 0 else { return rc }
        return mdb_txn_begin(handle, nil, UInt32(MDB_RDONLY), &raw)
    }

    /// Runs `body` in a read-only transaction (a consistent snapshot).
    public func read<R>(_ body: (borrowing ReadTransaction) throws -> R) throws -> R {
        countIfFromTask()
        while true {
            let outcome: R? = try resizeLock.withShared {
                try checkOpen()
                var raw: OpaquePointer?
                let rc = beginRead(&raw)
                if rc == MDB_MAP_RESIZED { return nil }
                try check(rc, "mdb_txn_begin", path: path)
                let txn = ReadTransaction(handle: raw!, environment: self)
                return try body(txn)
            }
            if let outcome { return outcome }
            try adoptMapSizeOfOtherProcess()
        }
    }

    /// Runs `body` in the write transaction and commits it. On `MDB_MAP_FULL` the map doubles and `body`
    /// runs again, so it must have no effect outside the transaction. Writes of one process are serial.
    public func write<R>(sync: CommitSync = .standard, _ body: (borrowing WriteTransaction) throws -> R) throws -> R {
        precondition(!isReadOnly, "write on a read-only environment")
        countIfFromTask()
        return try writer.withLock { () throws -> R in
            while true {
                do {
                    let result: R? = try resizeLock.withShared {
                        try checkOpen()
                        var raw: OpaquePointer?
                        let rc = mdb_txn_begin(handle, nil, 0, &raw)
                        if rc == MDB_MAP_RESIZED { return nil }
                        try check(rc, "mdb_txn_begin", path: path)
                        let txn = WriteTransaction(handle: raw!, environment: self)
                        writeAhead()
                        // `commitDurably` lasts for this transaction only, committed or not.
                        defer {
                            if syncsThisCommit.exchange(false, ordering: .relaxed) {
                                mdb_env_set_flags(handle, UInt32(MDB_NOSYNC), 1)
                            }
                        }
                        let result = try body(txn)
                        if sync == .withoutMetaSync { mdb_env_set_flags(handle, UInt32(MDB_NOMETASYNC), 1) }
                        defer { if sync == .withoutMetaSync { mdb_env_set_flags(handle, UInt32(MDB_NOMETASYNC), 0) } }
                        let id = mdb_txn_id(raw)
                        try txn.commit()
                        // A commit that changed nothing writes no meta page and leaves the last one as it was;
                        // a standard commit after a standard one has nothing to change.
                        if sync == .withoutMetaSync || lastCommitSkippedMeta.load(ordering: .relaxed) {
                            var info = MDB_envinfo()
                            mdb_env_info(handle, &info)
                            if info.me_last_txnid == id {
                                lastCommitSkippedMeta.store(sync == .withoutMetaSync, ordering: .relaxed)
                            }
                        }
                        return result
                    }
                    guard let result else {
                        try adoptMapSizeOfOtherProcess()
                        continue
                    }
                    commits.add(1, ordering: .relaxed)
                    return result
                } catch let error as LMDBError where error.isMapFull {
                    try grow()
                }
            }
        }
    }

    /// Keeps the data file written ahead of LMDB's pages with zeros: when fewer than half a step of
    /// bytes lie past the last page in use, the file is extended to a step past it (an eighth of the
    /// pages in use, 16 pages to 64 MiB, never past the map: a small log stays small). A commit then
    /// writes into blocks the file system has already allocated; on Linux's ext4 a commit that
    /// lengthens the file (nearly every commit of a growing log does) also journals the file's new
    /// size and blocks at its flush: 550 µs against 300 µs a commit of 1000 appends on this project's
    /// machine (`Specs/benchmarks.md`). Blocks reserved by `fallocate`, or a file lengthened by
    /// `ftruncate`, leave that cost to the first write, so zeros are written. Best effort: a file that
    /// cannot grow (a full disk) is left to LMDB to report.
    ///
    /// Called inside a write transaction, before anything is written: LMDB's writer lock keeps every
    /// other writer, of this process or another, from writing the file meanwhile, and no reader reads a
    /// page past the last one committed. Linux only: other systems were not measured.
    private func writeAhead() {
        #if os(Linux)
            let (used, mapSize) = pagesInUse()
            let step = min(max(used / 8, 16 * pageSize), 64 << 20)
            guard knownFileEnd.load(ordering: .relaxed) - used < step / 2 else { return }
            var descriptor: Int32 = -1
            var status = stat()
            guard mdb_env_get_fd(handle, &descriptor) == 0, fstat(descriptor, &status) == 0 else { return }
            var end = Int(status.st_size)
            let target = min(used + step, mapSize) / pageSize * pageSize
            while end < target {
                let written = pwrite(descriptor, Self.zeros, min(Self.zeroCount, target - end), off_t(end))
                guard written > 0 else {
                    // Tried again once LMDB has used half a step more.
                    knownFileEnd.store(used + step, ordering: .relaxed)
                    return
                }
                end += written
            }
            knownFileEnd.store(end, ordering: .relaxed)
        #endif
    }

    /// What `writeAhead` writes from: zeros, never changed.
    nonisolated(unsafe) private static let zeros = UnsafeRawPointer(calloc(1, zeroCount)!)
    private static let zeroCount = 1 << 20

    /// The bytes of the data file's pages in use: its size less the zeros written ahead of LMDB
    /// (`writeAhead`), and less any pages past the last one a commit used.
    public func usedBytes() throws(LMDBError) -> Int {
        try resizeLock.withShared { () throws(LMDBError) -> Int in
            try checkOpen()
            return pagesInUse().bytes
        }
    }

    /// The bytes up to the end of the last page the last commit used, and the map's size.
    private func pagesInUse() -> (bytes: Int, mapSize: Int) {
        var info = MDB_envinfo()
        mdb_env_info(handle, &info)
        return ((Int(info.me_last_pgno) + 1) * pageSize, Int(info.me_mapsize))
    }

    /// Doubles the map. Called with no transaction of this process open.
    private func grow() throws(LMDBError) {
        try resizeLock.withExclusive { () throws(LMDBError) in
            try checkOpen()
            // A held snapshot cannot live through the map's move; its holder checkpoints again.
            releaseSnapshot()
            let next = mapSizeNow.withLock { $0 } * 2
            try check(mdb_env_set_mapsize(handle, next), "mdb_env_set_mapsize", path: path)
            var info = MDB_envinfo()
            mdb_env_info(handle, &info)
            mapSizeNow.withLock { $0 = info.me_mapsize }
        }
    }

    /// Another process grew the map (`MDB_MAP_RESIZED`): adopt its size.
    private func adoptMapSizeOfOtherProcess() throws(LMDBError) {
        try resizeLock.withExclusive { () throws(LMDBError) in
            releaseSnapshot()
            try check(mdb_env_set_mapsize(handle, 0), "mdb_env_set_mapsize", path: path)
            var info = MDB_envinfo()
            mdb_env_info(handle, &info)
            mapSizeNow.withLock { $0 = info.me_mapsize }
        }
    }

    // MARK: - A snapshot held for a journal (decision 016)

    /// Holds a read transaction on the last commit until the next call, `releaseSnapshot()` or
    /// `close()`: LMDB reuses none of that snapshot's pages meanwhile, so once flushed it survives a
    /// power loss whatever the disk keeps of the commits after it, its meta pages (`metaPages()`)
    /// written back. The map cannot grow while one is held: growing it (`MDB_MAP_FULL`, or another
    /// process's growth adopted) releases it, and `holdsSnapshot` then says so.
    package func holdSnapshot() throws(LMDBError) {
        try resizeLock.withShared { () throws(LMDBError) in
            try checkOpen()
            try holdLastCommit()
        }
    }

    /// `holdSnapshot`, with `resizeLock` held shared by the caller.
    fileprivate func holdLastCommit() throws(LMDBError) {
        try heldSnapshot.withLock { (held: inout OpaquePointer?) throws(LMDBError) in
            if let held {
                mdb_txn_reset(held)
                try check(mdb_txn_renew(held), "mdb_txn_renew", path: path)
            } else {
                var txn: OpaquePointer?
                try check(mdb_txn_begin(handle, nil, UInt32(MDB_RDONLY), &txn), "mdb_txn_begin", path: path)
                held = txn
            }
        }
    }

    /// Ends the read transaction `holdSnapshot()` holds, if any.
    package func releaseSnapshot() {
        heldSnapshot.withLock { held in
            if let txn = held { mdb_txn_abort(txn) }
            held = nil
        }
    }

    /// Whether `holdSnapshot()` holds one.
    package var holdsSnapshot: Bool { heldSnapshot.withLock { $0 != nil } }

    /// LMDB's two meta pages as the data file holds them: after `flush()`, as flushed.
    package func metaPages() throws(LMDBError) -> [UInt8] {
        let fd = open(dataFile, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw LMDBError(.system(errno, call: "open(\(dataFile))"), path: path) }
        defer { closeDescriptor(fd) }
        var pages = [UInt8](repeating: 0, count: 2 * pageSize)
        let read = pages.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard read == pages.count else { throw LMDBError(.system(errno, call: "pread(\(dataFile))"), path: path) }
        return pages
    }

    /// What the data file at `path` (an environment's folder or file, as `init` takes it) would be
    /// opened as, for a caller that must act before the open; created (a folder) when missing and
    /// `create` says so.
    package static func locate(_ path: String, create: Bool) throws(LMDBError) -> (path: String, isFolder: Bool, dataFile: String)
    {
        let location = try resolve(path, create: create)
        return (location.path, location.isDirectory, location.dataFile)
    }

    /// The page size an LMDB data file records in its first meta page; nil when the file is missing or
    /// does not start with one.
    package static func pageSize(ofDataFile dataFile: String) -> Int? {
        let fd = open(dataFile, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { closeDescriptor(fd) }
        var header = [UInt8](repeating: 0, count: 44)
        guard header.withUnsafeMutableBytes({ pread(fd, $0.baseAddress, 44, 0) }) == 44 else { return nil }
        // A 16-byte page header, then the meta: its magic, and the free database's `md_pad` (the page size) at 24.
        func word(_ at: Int) -> Int { (0..<4).reduce(0) { $0 | Int(header[at + $1]) << (8 * $1) } }
        guard word(16) == 0xBEEF_C0DE else { return nil }
        let size = word(40)
        return size >= 512 && size <= 65536 ? size : nil
    }

    /// Whether the data file holds every page the meta pages `pages` (as `metaPages()` returned them)
    /// name: a file that is shorter is not the one they were taken from.
    package static func metaPagesFit(_ pages: [UInt8], dataFile: String) throws(LMDBError) -> Bool {
        var info = stat()
        guard stat(dataFile, &info) == 0 else { throw LMDBError(.system(errno, call: "stat(\(dataFile))"), path: dataFile) }
        let pageSize = pages.count / 2
        // Each meta page: a 16-byte page header, then the meta, whose last page number is at 120
        // (after the magic, version, address, map size and the two databases' records).
        func lastPage(_ page: Int) -> Int {
            (0..<8).reduce(0) { $0 | Int(pages[page * pageSize + 16 + 120 + $1]) << (8 * $1) }
        }
        return (max(lastPage(0), lastPage(1)) + 1) * pageSize <= Int(info.st_size)
    }

    /// The id of the newer commit that the meta pages `pages` (as `metaPages()` returned them) name.
    package static func transactionID(ofMetaPages pages: [UInt8]) -> UInt64 {
        let pageSize = pages.count / 2
        // Each meta page: a 16-byte page header, then the meta, whose transaction id is at 128.
        func id(_ page: Int) -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(pages[page * pageSize + 16 + 128 + $1]) << (8 * $1) } }
        return max(id(0), id(1))
    }

    /// Writes `pages` (two meta pages `metaPages()` returned) over those of the data file of the
    /// environment at `path`, which must not be open, and flushes them: LMDB then opens the snapshot
    /// they name.
    package static func restoreMetaPages(_ pages: [UInt8], path: String) throws(LMDBError) {
        let dataFile = try resolve(path, create: false).dataFile
        let fd = open(dataFile, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { throw LMDBError(.system(errno, call: "open(\(dataFile))"), path: path) }
        defer { closeDescriptor(fd) }
        let written = pages.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        guard written == pages.count, fsync(fd) == 0 else {
            throw LMDBError(.system(errno, call: "pwrite(\(dataFile))"), path: path)
        }
    }

    // MARK: - Paths

    /// Checks, before a read-only open, what LMDB would report badly: a data file that is not a regular
    /// file (`/dev/zero` read as "empty"), one this user may not read, an empty one (LMDB would take it
    /// for a new environment and write to it). Returns whether to read without LMDB's lock file: when
    /// there is none (a copied `data.mdb`, any other file), so that a read creates nothing, or when this
    /// user may not write it (no writer can then be this user's, and a read needs no reader slot).
    private static func readsWithoutLocking(_ location: Location) throws(LMDBError) -> Bool {
        let dataFile = location.dataFile
        var data = stat()
        guard stat(dataFile, &data) == 0 else { throw LMDBError(.system(errno, call: "stat(\(dataFile))"), path: location.path) }
        guard (data.st_mode & S_IFMT) == S_IFREG else { throw LMDBError(.notARegularFile(dataFile), path: location.path) }
        guard access(dataFile, R_OK) == 0 else {
            throw LMDBError(.permissionDenied(file: dataFile, access: "read"), path: location.path)
        }
        if data.st_size == 0 { throw LMDBError(.emptyFile, path: location.path) }
        let lockFile = location.isDirectory ? location.path + "/lock.mdb" : location.path + "-lock"
        return access(lockFile, F_OK) != 0 || access(lockFile, W_OK) != 0
    }

    private struct Location {
        var path: String
        var isDirectory: Bool
        var key: String

        /// The data file: `data.mdb` in the folder, or the file itself.
        var dataFile: String { isDirectory ? path + "/data.mdb" : path }
    }

    /// `path` names a folder (created 0700 if missing and allowed), or a `data.mdb` inside one (then the
    /// folder is used, so the lock file is the one an app uses), or any other file (opened `MDB_NOSUBDIR`).
    private static func resolve(_ path: String, create: Bool) throws(LMDBError) -> Location {
        var info = stat()
        var location = path
        if stat(path, &info) != 0 {
            guard errno == ENOENT else { throw LMDBError(.system(errno, call: "stat"), path: path) }
            guard create else { throw LMDBError(.doesNotExist, path: path) }
            if mkdir(path, 0o700) != 0 && errno != EEXIST {
                throw LMDBError(.system(errno, call: "mkdir"), path: path)
            }
            _ = stat(path, &info)
        } else if (info.st_mode & S_IFMT) == S_IFREG, path.split(separator: "/").last == "data.mdb" {
            let parent = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
            location = parent.isEmpty ? (path.hasPrefix("/") ? "/" : ".") : parent
            _ = stat(location, &info)
        }
        let isDirectory = (info.st_mode & S_IFMT) == S_IFDIR
        if isDirectory, !create {
            var data = stat()
            if stat(location + "/data.mdb", &data) != 0 {
                // Only a missing file is "does not exist": a folder this user may not search is not.
                guard errno == ENOENT else { throw LMDBError(.system(errno, call: "stat(\(location)/data.mdb)"), path: location) }
                throw LMDBError(.doesNotExist, path: location)
            }
        }
        guard let real = realpath(location, nil) else { throw LMDBError(.system(errno, call: "realpath"), path: location) }
        defer { free(real) }
        return Location(path: location, isDirectory: isDirectory, key: String(cString: real))
    }
}

// MARK: - A checkpoint inside the write transaction (decision 016)

extension WriteTransaction {
    /// Flushes the data file as the last commit left it (`mdb_env_sync`, forced): what this
    /// transaction wrote is not in it (LMDB writes a transaction's pages when it commits).
    package func flushLastCommit() throws(LMDBError) {
        let environment = environment.takeUnretainedValue()
        try check(mdb_env_sync(environment.handle, 1), "mdb_env_sync", path: path)
    }

    /// Holds the last commit's snapshot (`Environment.holdSnapshot`), from inside this transaction.
    package func holdLastCommit() throws(LMDBError) { try environment.takeUnretainedValue().holdLastCommit() }

    /// LMDB's two meta pages as the data file holds them (after `flushLastCommit`, as flushed).
    package func metaPages() throws(LMDBError) -> [UInt8] { try environment.takeUnretainedValue().metaPages() }

    /// Makes this transaction's commit durable as LMDB makes it (its pages flushed, then its meta
    /// page), in an environment opened `.noSync`, whose later commits flush nothing again.
    package func commitDurably() {
        let environment = environment.takeUnretainedValue()
        environment.syncsThisCommit.store(true, ordering: .relaxed)
        mdb_env_set_flags(environment.handle, UInt32(MDB_NOSYNC), 0)
    }

    /// The pages the last commit used, to its last one.
    package var pagesInUse: Int {
        var info = MDB_envinfo()
        mdb_env_info(environment.takeUnretainedValue().handle, &info)
        return Int(info.me_last_pgno) + 1
    }
}

/// `close(2)`, from inside a type whose own `close` hides it.
private func closeDescriptor(_ descriptor: Int32) { _ = close(descriptor) }
