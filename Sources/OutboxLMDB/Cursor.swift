internal import COutboxLMDB

/// A cursor over one database, closed when its closure returns. Each move hands the entry it lands on
/// to a closure, as two `RawSpan`s that cannot outlive it, and returns what the closure returns, or
/// nil when there is no entry there.
public struct Cursor: ~Copyable {
    let handle: OpaquePointer
    let database: Database
    let path: String

    deinit { mdb_cursor_close(handle) }

    private func get<R>(
        _ op: MDB_cursor_op, key: UnsafeRawBufferPointer? = nil, _ body: (_ key: RawSpan, _ value: RawSpan) throws -> R
    ) throws -> R? {
        var k = MDB_val(mv_size: key?.count ?? 0, mv_data: UnsafeMutableRawPointer(mutating: key?.baseAddress))
        var v = MDB_val()
        let rc = mdb_cursor_get(handle, &k, &v, op)
        if rc == MDB_NOTFOUND { return nil }
        try check(rc, "mdb_cursor_get(\(database.name))", path: path)
        return try withBorrowedSpan(k) { key in try withBorrowedSpan(v) { value in try body(key, value) } }
    }

    /// The first entry.
    public func first<R>(_ body: (_ key: RawSpan, _ value: RawSpan) throws -> R) throws -> R? { try get(MDB_FIRST, body) }
    /// The last entry.
    public func last<R>(_ body: (_ key: RawSpan, _ value: RawSpan) throws -> R) throws -> R? { try get(MDB_LAST, body) }
    /// The entry after the current one.
    public func next<R>(_ body: (_ key: RawSpan, _ value: RawSpan) throws -> R) throws -> R? { try get(MDB_NEXT, body) }

    /// The first entry whose key is `key` or greater.
    public func seek<R>(atLeast key: [UInt8], _ body: (_ key: RawSpan, _ value: RawSpan) throws -> R) throws -> R? {
        if key.isEmpty { return try first(body) }
        return try key.withUnsafeBytes { try get(MDB_SET_RANGE, key: $0, body) }
    }
}
