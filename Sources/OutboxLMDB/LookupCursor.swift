internal import COutboxLMDB

/// A cursor for lookups, puts and deletes by key that come mostly in key order, as a planner reads
/// consecutive write ids, a reader follows a run of records, or a write transaction writes its changes
/// out in key order: a key a few entries past the last one reached is stepped to (`MDB_NEXT`, within a
/// page) instead of searched for from the root as `mdb_get` and `mdb_put` do, which costs several times
/// more, and a value rewritten at its own size is overwritten in place (`MDB_CURRENT`). Any other key
/// is searched for (`MDB_SET_RANGE`). Either way it finds and stores what `mdb_get` and `mdb_put`
/// would, in a write transaction too, whose other puts and deletes LMDB adjusts its cursors for.
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

    @usableFromInline
    init(transaction: OpaquePointer, database: Database, path: String) {
        self.transaction = transaction
        self.database = database
        self.path = path
    }

    @usableFromInline
    func close() {
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
        guard let value = try move(handle, to: key) else { return nil }
        return try withBorrowedSpan(value, body)
    }

    /// Stores `value` under `key`, encoded into LMDB's page: in place when the key is there and the
    /// value keeps its size. With `appending`, the key must be past every key of the table
    /// (`MDB_APPEND`: no search, and the cursor stays at the end for the next).
    @inlinable
    public func put(_ key: Keys.Key, _ value: Values.Value, appending: Bool = false) throws {
        try Keys.withStoredBytes(of: key) { try put(storedKey: $0, value, appending: appending) }
    }

    /// As `put(_:_:appending:)`, then calls `stored` with the value's bytes as they lie in the page.
    @inlinable
    public func put(
        _ key: Keys.Key, _ value: Values.Value, appending: Bool = false, stored: (UnsafeRawBufferPointer) -> Void
    ) throws {
        try Keys.withStoredBytes(of: key) { key in
            try Values.withEncoded(value, key: key) { count, fill in
                try put(key: key, reserving: count, appending: appending) { page in
                    fill(page)
                    stored(UnsafeRawBufferPointer(page))
                }
            }
        }
    }

    /// Stores `value` under the key whose stored bytes are `key`, encoded into LMDB's page; see
    /// `put(_:_:appending:)`.
    @inlinable
    public func put(storedKey key: UnsafeRawBufferPointer, _ value: Values.Value, appending: Bool = false) throws {
        try Values.withEncoded(value, key: key) { count, fill in
            try put(key: key, reserving: count, appending: appending, fill)
        }
    }

    /// Stores `count` bytes under the key whose stored bytes are `key`, which `fill` writes straight into
    /// LMDB's page (`MDB_RESERVE`); `fill` must write every byte and may not touch the transaction. See
    /// `put(_:_:appending:)`. In a write transaction only.
    public func put(
        key: UnsafeRawBufferPointer, reserving count: Int, appending: Bool,
        _ fill: (UnsafeMutableRawBufferPointer) throws -> Void
    ) throws {
        let handle = try open()
        if key.count > 511 { throw LMDBError(.keyTooLong(key.count), path: path) }
        var flags = UInt32(MDB_RESERVE)
        if appending {
            flags |= UInt32(MDB_APPEND)
        } else if try move(handle, to: key) != nil {
            flags |= UInt32(MDB_CURRENT)
        }
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val(mv_size: count, mv_data: nil)
        try check(mdb_cursor_put(handle, &k, &v, flags), "mdb_cursor_put(\(database.name))", path: path)
        positioned = true
        try fill(UnsafeMutableRawBufferPointer(start: v.mv_data, count: count))
    }

    /// Removes `key`; returns whether it was there. In a write transaction only.
    @inlinable @discardableResult
    public func delete(_ key: Keys.Key) throws -> Bool {
        try Keys.withStoredBytes(of: key) { try delete(key: $0) }
    }

    /// Removes the key whose stored bytes are `key`; returns whether it was there.
    @discardableResult
    public func delete(key: UnsafeRawBufferPointer) throws -> Bool {
        let handle = try open()
        guard try move(handle, to: key) != nil else { return false }
        try check(mdb_cursor_del(handle, 0), "mdb_cursor_del(\(database.name))", path: path)
        return true
    }

    /// Calls `body` with the table's last key, and leaves the cursor there; nil when the table is empty.
    public func withLastKey<R>(_ body: (RawSpan) throws -> R) throws -> R? {
        let handle = try open()
        var key = MDB_val()
        var value = MDB_val()
        let rc = mdb_cursor_get(handle, &key, &value, MDB_LAST)
        positioned = rc == 0
        if rc == MDB_NOTFOUND { return nil }
        try check(rc, "mdb_cursor_get(\(database.name))", path: path)
        return try withBorrowedSpan(key, body)
    }

    /// Moves the cursor to `key` and returns the value there, or nil when the key is not there (the
    /// cursor then stands near it, or nowhere).
    private func move(_ handle: OpaquePointer, to key: UnsafeRawBufferPointer) throws -> MDB_val? {
        var wanted = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var foundKey = MDB_val()
        var value = MDB_val()
        if positioned, mdb_cursor_get(handle, &foundKey, &value, MDB_GET_CURRENT) == 0 {
            var steps = 0
            while true {
                let order = mdb_cmp(transaction, database.dbi, &foundKey, &wanted)
                if order == 0 { return value }
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
        return mdb_cmp(transaction, database.dbi, &foundKey, &wanted) == 0 ? value : nil
    }
}

extension ReadableTransaction where Self: ~Copyable {
    /// Runs `body` with a lookup cursor on `table`, closed when `body` returns. Inlinable, so that the
    /// caller's module makes the cursor of its own table's type, whose type it knows once, rather than
    /// asking the runtime for the generic class's metadata at each call.
    @inlinable
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
    /// returns. Inlinable, as `withLookupCursor`.
    @inlinable
    public func withLookupCursors<Keys, Values, R>(
        _ tables: [Table<Keys, Values>], _ body: ([LookupCursor<Keys, Values>]) throws -> R
    ) throws -> R {
        let cursors = tables.map { LookupCursor<Keys, Values>(transaction: handle, database: $0.database, path: path) }
        defer { for cursor in cursors { cursor.close() } }
        return try body(cursors)
    }
}
