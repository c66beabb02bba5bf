internal import COutboxLMDB

/// What both kinds of transaction can do: read. Stored bytes reach a closure as a `RawSpan`, which
/// cannot outlive the closure, so bytes LMDB owns never outlive the transaction; decode or copy them
/// before returning.
public protocol ReadableTransaction: ~Copyable {
    /// The C handle. Never escapes the transaction's closure.
    var handle: OpaquePointer { get }
    /// The environment's path, for error messages.
    var path: String { get }
}

extension ReadableTransaction where Self: ~Copyable {
    /// The transaction's id. A read transaction's is that of the last write transaction committed when
    /// it began (the snapshot it reads); a write transaction's is one more, so a write that follows a
    /// commit directly has that commit's id plus one.
    public var transactionID: UInt64 { UInt64(mdb_txn_id(handle)) }

    /// Calls `body` with the value stored under `key`, or returns `nil` when there is none (`MDB_NOTFOUND`).
    public func withValue<R>(_ db: Database, key: UnsafeRawBufferPointer, _ body: (RawSpan) throws -> R) throws -> R? {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val()
        let rc = mdb_get(handle, db.dbi, &k, &v)
        if rc == MDB_NOTFOUND { return nil }
        try check(rc, "mdb_get(\(db.name))", path: path)
        return try withBorrowedSpan(v, body)
    }

    /// A copy of the value stored under `key`, or `nil`.
    public func get(_ db: Database, key: [UInt8]) throws -> [UInt8]? {
        try key.withUnsafeBytes { k in try withValue(db, key: k) { $0.copiedBytes } }
    }

    /// Number of entries in `db`.
    public func count(_ db: Database) throws -> Int {
        var stat = MDB_stat()
        try check(mdb_stat(handle, db.dbi, &stat), "mdb_stat(\(db.name))", path: path)
        return stat.ms_entries
    }

    /// Bytes of the pages `db` uses (branch, leaf and overflow).
    public func usedBytes(_ db: Database) throws -> Int {
        var stat = MDB_stat()
        try check(mdb_stat(handle, db.dbi, &stat), "mdb_stat(\(db.name))", path: path)
        return (stat.ms_branch_pages + stat.ms_leaf_pages + stat.ms_overflow_pages) * Int(stat.ms_psize)
    }

    /// Runs `body` with a cursor on `db`; the cursor is closed when `body` returns.
    public func withCursor<R>(_ db: Database, _ body: (borrowing Cursor) throws -> R) throws -> R {
        var raw: OpaquePointer?
        try check(mdb_cursor_open(handle, db.dbi, &raw), "mdb_cursor_open(\(db.name))", path: path)
        let cursor = Cursor(handle: raw!, database: db, path: path)
        return try body(cursor)
    }

    /// Calls `body` for each entry whose key starts with `prefix`, in key order, from `start`
    /// (which must itself start with `prefix`; the prefix when omitted). `body` returns false to stop.
    public func forEach(
        _ db: Database, prefix: [UInt8], from start: [UInt8]? = nil,
        _ body: (_ key: RawSpan, _ value: RawSpan) throws -> Bool
    ) throws {
        func visit(_ key: RawSpan, _ value: RawSpan) throws -> Bool { key.starts(with: prefix) ? try body(key, value) : false }
        try withCursor(db) { cursor in
            var more = try cursor.seek(atLeast: start ?? prefix, visit)
            while more == true { more = try cursor.next(visit) }
        }
    }
}

/// A read-only transaction: a consistent snapshot of the file. Aborted when it goes out of scope.
public struct ReadTransaction: ~Copyable, ReadableTransaction {
    public let handle: OpaquePointer
    private let environment: Unmanaged<Environment>
    public var path: String { environment.takeUnretainedValue().path }

    init(handle: OpaquePointer, environment: Environment) {
        self.handle = handle
        self.environment = .passUnretained(environment)
    }

    deinit { mdb_txn_abort(handle) }
}

/// The one write transaction. Committed by the environment when its closure returns, aborted when it
/// throws; a value of this type never outlives its closure.
public struct WriteTransaction: ~Copyable, WritableTransaction {
    public let handle: OpaquePointer
    // Unmanaged keeps every stored property trivial, which `discard self` in `commit` requires; the
    // environment outlives the transaction because it runs the closure the transaction lives in.
    let environment: Unmanaged<Environment>
    public var path: String { environment.takeUnretainedValue().path }

    init(handle: OpaquePointer, environment: Environment) {
        self.handle = handle
        self.environment = .passUnretained(environment)
    }

    consuming func commit() throws(LMDBError) {
        let handle = self.handle
        let path = self.path
        discard self
        try check(mdb_txn_commit(handle), "mdb_txn_commit", path: path)
    }

    deinit { mdb_txn_abort(handle) }
}

/// Options of `put`.
public struct PutOptions: OptionSet, Sendable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    /// The key is greater than every key in the database (`MDB_APPEND`): no search, dense pages.
    public static let append = PutOptions(rawValue: UInt32(MDB_APPEND))
    /// Fail with `false` instead of overwriting an existing key (`MDB_NOOVERWRITE`).
    public static let noOverwrite = PutOptions(rawValue: UInt32(MDB_NOOVERWRITE))
}

/// What the write transaction (and its access view) can do besides reading.
public protocol WritableTransaction: ReadableTransaction, ~Copyable {}

extension WritableTransaction where Self: ~Copyable {
    /// Stores `value` under `key`. Returns false only with `.noOverwrite` when the key exists.
    @discardableResult
    public func put(
        _ db: Database, key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, options: PutOptions = []
    ) throws -> Bool {
        if key.count > 511 { throw LMDBError(.keyTooLong(key.count), path: path) }
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val(mv_size: value.count, mv_data: UnsafeMutableRawPointer(mutating: value.baseAddress))
        let rc = mdb_put(handle, db.dbi, &k, &v, options.rawValue)
        if rc == MDB_KEYEXIST && options.contains(.noOverwrite) { return false }
        try check(rc, "mdb_put(\(db.name))", path: path)
        return true
    }

    /// Stores `count` bytes under `key` that `fill` writes straight into LMDB's page (`MDB_RESERVE`): no
    /// buffer of the caller's and no copy. `fill` must write every byte, and may not touch the
    /// transaction. Returns false only with `.noOverwrite` when the key exists (and `fill` is not called).
    @discardableResult
    public func put(
        _ db: Database, key: UnsafeRawBufferPointer, reserving count: Int, options: PutOptions = [],
        _ fill: (UnsafeMutableRawBufferPointer) throws -> Void
    ) throws -> Bool {
        if key.count > 511 { throw LMDBError(.keyTooLong(key.count), path: path) }
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val(mv_size: count, mv_data: nil)
        let rc = mdb_put(handle, db.dbi, &k, &v, options.rawValue | UInt32(MDB_RESERVE))
        if rc == MDB_KEYEXIST && options.contains(.noOverwrite) { return false }
        try check(rc, "mdb_put(\(db.name))", path: path)
        try fill(UnsafeMutableRawBufferPointer(start: v.mv_data, count: count))
        return true
    }

    /// Stores `value` under `key`.
    @discardableResult
    public func put(_ db: Database, key: [UInt8], value: [UInt8], options: PutOptions = []) throws -> Bool {
        try key.withUnsafeBytes { k in try value.withUnsafeBytes { v in try put(db, key: k, value: v, options: options) } }
    }

    /// Removes `key`; returns whether it was there.
    @discardableResult
    public func delete(_ db: Database, key: UnsafeRawBufferPointer) throws -> Bool {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        let rc = mdb_del(handle, db.dbi, &k, nil)
        if rc == MDB_NOTFOUND { return false }
        try check(rc, "mdb_del(\(db.name))", path: path)
        return true
    }

    /// Removes `key`; returns whether it was there.
    @discardableResult
    public func delete(_ db: Database, key: [UInt8]) throws -> Bool {
        try key.withUnsafeBytes { try delete(db, key: $0) }
    }

    /// Removes every entry of `db` (the database itself stays).
    public func clear(_ db: Database) throws {
        try check(mdb_drop(handle, db.dbi, 0), "mdb_drop(\(db.name))", path: path)
    }

    /// Deletes the named database `name` with its entries, when the environment holds one that it did
    /// not open (one an earlier layout had); returns whether there was one.
    @discardableResult
    public func deleteDatabase(named name: String) throws -> Bool {
        var dbi = MDB_dbi()
        let rc = mdb_dbi_open(handle, name, 0, &dbi)
        if rc == MDB_NOTFOUND { return false }
        try check(rc, "mdb_dbi_open(\(name))", path: path)
        try check(mdb_drop(handle, dbi, 1), "mdb_drop(\(name))", path: path)
        return true
    }

}

/// Calls `body` with the bytes of an `MDB_val` LMDB filled in, as a span that cannot outlive the call.
func withBorrowedSpan<R>(_ value: MDB_val, _ body: (RawSpan) throws -> R) rethrows -> R {
    try body(RawSpan(_unsafeBytes: UnsafeRawBufferPointer(start: value.mv_data, count: value.mv_size)))
}

extension RawSpan {
    /// The bytes, copied out of the transaction.
    public var copiedBytes: [UInt8] { withUnsafeBytes { Array($0) } }

    /// Whether the bytes start with `prefix`.
    public func starts(with prefix: [UInt8]) -> Bool {
        guard byteCount >= prefix.count else { return false }
        return withUnsafeBytes { bytes in prefix.withUnsafeBytes { bytes.prefix($0.count).elementsEqual($0) } }
    }
}

/// A copyable view of a transaction, for closures that must reach it (a fold's store, a reader).
/// It is valid only until the transaction's closure returns: never keep one beyond it.
public struct ReadAccess: ReadableTransaction {
    public let handle: OpaquePointer
    public let path: String
}

/// A copyable view of the write transaction; see `ReadAccess`.
public struct WriteAccess: WritableTransaction {
    public let handle: OpaquePointer
    public let path: String
}

extension ReadTransaction {
    /// A view of this transaction that closures may capture; valid only inside the transaction's closure.
    public var unsafeAccess: ReadAccess { ReadAccess(handle: handle, path: path) }
}

extension WriteTransaction {
    /// A view of this transaction that closures may capture; valid only inside the transaction's closure.
    public var unsafeAccess: WriteAccess { WriteAccess(handle: handle, path: path) }
}
