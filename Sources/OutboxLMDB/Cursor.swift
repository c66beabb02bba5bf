internal import COutboxLMDB

/// One entry a cursor stands on. Its bytes live only inside the transaction.
public struct CursorEntry {
    public let key: UnsafeRawBufferPointer
    public let value: UnsafeRawBufferPointer
}

/// A cursor over one database, closed when its closure returns.
public struct Cursor: ~Copyable {
    let handle: OpaquePointer
    let database: Database
    let path: String

    deinit { mdb_cursor_close(handle) }

    private func get(_ op: MDB_cursor_op, key: UnsafeRawBufferPointer? = nil) throws -> CursorEntry? {
        var k = MDB_val(mv_size: key?.count ?? 0, mv_data: UnsafeMutableRawPointer(mutating: key?.baseAddress))
        var v = MDB_val()
        let rc = mdb_cursor_get(handle, &k, &v, op)
        if rc == MDB_NOTFOUND { return nil }
        try check(rc, "mdb_cursor_get(\(database.name))", path: path)
        return CursorEntry(
            key: UnsafeRawBufferPointer(start: k.mv_data, count: k.mv_size),
            value: UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size))
    }

    /// The first entry.
    public func first() throws -> CursorEntry? { try get(MDB_FIRST) }
    /// The last entry.
    public func last() throws -> CursorEntry? { try get(MDB_LAST) }
    /// The entry after the current one.
    public func next() throws -> CursorEntry? { try get(MDB_NEXT) }
    /// The entry before the current one.
    public func previous() throws -> CursorEntry? { try get(MDB_PREV) }

    /// The first entry whose key is `key` or greater.
    public func seek(atLeast key: [UInt8]) throws -> CursorEntry? {
        if key.isEmpty { return try first() }
        return try key.withUnsafeBytes { try get(MDB_SET_RANGE, key: $0) }
    }
}
