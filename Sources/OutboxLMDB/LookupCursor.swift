internal import COutboxLMDB

/// A cursor for lookups by key that come mostly in key order, as a planner reads consecutive write ids
/// or a reader follows a run of records: a lookup of a key a few entries past the last one found steps
/// to it (`MDB_NEXT`, within a page) instead of searching from the root as `mdb_get` does, which costs
/// several times more. Any other lookup searches (`MDB_SET_RANGE`). Either way it finds what `mdb_get`
/// would find, in a write transaction too, whose puts and deletes LMDB adjusts its cursors for.
///
/// Opened by `withLookupCursor`, which closes it when its closure returns; a lookup after that throws
/// `LMDBError` (`closed`). The C cursor is opened by the first lookup, so a transaction that looks
/// nothing up opens none. A class, so that the closures of a reader can hold it for the length of the
/// transaction's closure, which a `Cursor` (borrowed) cannot be.
public final class LookupCursor<Keys: KeyCodec, Values: ValueCodec> {
    private var handle: OpaquePointer?
    private var isClosed = false
    private let transaction: OpaquePointer
    private let database: Database
    private let path: String
    /// Whether the cursor stands on an entry (LMDB's own flag is not readable through its API).
    private var positioned = false
    /// How many entries a lookup steps over before it searches instead: a step costs a key comparison,
    /// a search a descent of the tree.
    static var maxSteps: Int { 4 }

    fileprivate init(transaction: OpaquePointer, database: Database, path: String) {
        self.transaction = transaction
        self.database = database
        self.path = path
    }

    fileprivate func close() {
        if let handle { mdb_cursor_close(handle) }
        handle = nil
        isClosed = true
    }

    private func open() throws -> OpaquePointer {
        if let handle { return handle }
        guard !isClosed else { throw LMDBError(.closed, path: path) }
        var raw: OpaquePointer?
        try check(mdb_cursor_open(transaction, database.dbi, &raw), "mdb_cursor_open(\(database.name))", path: path)
        handle = raw
        return raw!
    }

    /// The value under `key`, decoded, or nil when there is none.
    @inlinable
    public func get(_ key: Keys.Key) throws -> Values.Value? {
        try Keys.withStoredBytes(of: key) { stored in try withValue(key: stored) { try Values.decode($0, key: stored) } }
    }

    /// Calls `body` with the value stored under the key whose stored bytes are `key`, or returns nil when
    /// there is none.
    public func withValue<R>(key: UnsafeRawBufferPointer, _ body: (RawSpan) throws -> R) throws -> R? {
        let handle = try open()
        var wanted = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var foundKey = MDB_val()
        var value = MDB_val()
        if positioned, mdb_cursor_get(handle, &foundKey, &value, MDB_GET_CURRENT) == 0 {
            var steps = 0
            while true {
                let order = mdb_cmp(transaction, database.dbi, &foundKey, &wanted)
                if order == 0 { return try withBorrowedSpan(value, body) }
                // Past the key after a step: it is not there. Past it before any step: search.
                if order > 0 { if steps > 0 { return nil } else { break } }
                guard steps < Self.maxSteps else { break }
                steps += 1
                let rc = mdb_cursor_get(handle, &foundKey, &value, MDB_NEXT)
                // Past the last entry: the key is greater than every key there is. The cursor stays on
                // the last entry, so the next lookup past it is a step too.
                if rc == MDB_NOTFOUND { return nil }
                try check(rc, "mdb_cursor_get(\(database.name))", path: path)
            }
        }
        foundKey = wanted
        let rc = mdb_cursor_get(handle, &foundKey, &value, MDB_SET_RANGE)
        if rc == MDB_NOTFOUND {
            // Past every key: stand on the last one (keys that ascend past the end, as a bulk enqueue's
            // new rows do, are then found missing by a step each).
            let last = mdb_cursor_get(handle, &foundKey, &value, MDB_LAST)
            if last != MDB_NOTFOUND { try check(last, "mdb_cursor_get(\(database.name))", path: path) }
            positioned = last == 0
            return nil
        }
        try check(rc, "mdb_cursor_get(\(database.name))", path: path)
        positioned = true
        guard mdb_cmp(transaction, database.dbi, &foundKey, &wanted) == 0 else { return nil }
        return try withBorrowedSpan(value, body)
    }
}

extension ReadableTransaction where Self: ~Copyable {
    /// Runs `body` with a lookup cursor on `table`, closed when `body` returns.
    public func withLookupCursor<Keys, Values, R>(
        _ table: Table<Keys, Values>, _ body: (LookupCursor<Keys, Values>) throws -> R
    ) throws -> R {
        let cursor = LookupCursor<Keys, Values>(transaction: handle, database: table.database, path: path)
        defer { cursor.close() }
        return try body(cursor)
    }
}

extension ReadableTransaction where Self: ~Copyable {
    /// Runs `body` with a lookup cursor on each of `tables`, in their order, all closed when `body`
    /// returns.
    public func withLookupCursors<Keys, Values, R>(
        _ tables: [Table<Keys, Values>], _ body: ([LookupCursor<Keys, Values>]) throws -> R
    ) throws -> R {
        let cursors = tables.map { LookupCursor<Keys, Values>(transaction: handle, database: $0.database, path: path) }
        defer { for cursor in cursors { cursor.close() } }
        return try body(cursors)
    }
}
