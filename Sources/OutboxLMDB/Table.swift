/// How a table stores its keys. A key is encoded where the caller's stack can hold it (an integer's
/// eight big-endian bytes, a short key inline), never into an array of its own.
public protocol KeyCodec {
    associatedtype Key
    /// Calls `body` with the stored bytes of `key`.
    static func withStoredBytes<R>(of key: Key, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R
}

/// How a table stores its values. A value is encoded straight into the page LMDB reserves for it
/// (`MDB_RESERVE`), so it needs its exact size first; it is decoded from the page it lies in. Both
/// see the key's stored bytes, so a value may check that it is under its own key (a checksum over both).
public protocol ValueCodec {
    associatedtype Value
    /// The number of bytes `encode` writes.
    static func storedCount(of value: Value, key: UnsafeRawBufferPointer) -> Int
    /// Writes exactly `storedCount(of:key:)` bytes into `buffer`.
    static func encode(_ value: Value, key: UnsafeRawBufferPointer, into buffer: UnsafeMutableRawBufferPointer)
    /// Returns `storedCount(of:key:)`, and when that is at most `scratch.count` has written the value's
    /// bytes into `scratch`'s first ones. A codec whose count costs as much as its encoding does both in
    /// one pass; the default counts, then encodes when the value fits.
    static func encode(_ value: Value, key: UnsafeRawBufferPointer, fittingIn scratch: UnsafeMutableRawBufferPointer) -> Int
    static func decode(_ stored: RawSpan, key: UnsafeRawBufferPointer) throws -> Value
}

extension ValueCodec {
    public static func encode(_ value: Value, key: UnsafeRawBufferPointer, fittingIn scratch: UnsafeMutableRawBufferPointer)
        -> Int
    {
        let count = storedCount(of: value, key: key)
        if count <= scratch.count { encode(value, key: key, into: UnsafeMutableRawBufferPointer(rebasing: scratch[..<count])) }
        return count
    }

    /// How many bytes of the stack a put encodes a value into before it reserves the value's page: a
    /// value that fits is encoded once and copied, a larger one encoded again into its page.
    @inlinable
    static var scratchBytes: Int { 1024 }

    /// Calls `put` with `value`'s stored count and what fills the page reserved for it.
    @inlinable
    static func withEncoded<R>(
        _ value: Value, key: UnsafeRawBufferPointer,
        _ put: (Int, (UnsafeMutableRawBufferPointer) -> Void) throws -> R
    ) rethrows -> R {
        try withUnsafeTemporaryAllocation(byteCount: scratchBytes, alignment: 8) { scratch in
            let count = encode(value, key: key, fittingIn: scratch)
            return try put(count) { page in
                if count <= scratch.count {
                    page.copyMemory(from: UnsafeRawBufferPointer(rebasing: scratch[..<count]))
                } else {
                    encode(value, key: key, into: page)
                }
            }
        }
    }
}

/// A database whose keys and values have codecs (heed's `Database<KeyCodec, DataCodec>`): reads decode
/// from LMDB's page, writes encode into it.
///
/// The generic operations are `@inlinable`, so they are specialized for each table's codecs in the
/// module that uses them instead of calling the codecs through their protocols.
public struct Table<Keys: KeyCodec, Values: ValueCodec>: Sendable {
    public let database: Database
    public init(_ database: Database) { self.database = database }
}

extension ReadableTransaction where Self: ~Copyable {
    /// The value under `key`, decoded, or nil when there is none.
    @inlinable
    public func get<Keys, Values>(_ table: Table<Keys, Values>, _ key: Keys.Key) throws -> Values.Value? {
        try Keys.withStoredBytes(of: key) { stored in
            try withValue(table.database, key: stored) { try Values.decode($0, key: stored) }
        }
    }
}

extension WritableTransaction where Self: ~Copyable {
    /// Stores `value` under `key`, encoded in place. Returns false only with `.noOverwrite` when the key
    /// exists.
    @inlinable @discardableResult
    public func put<Keys, Values>(
        _ table: Table<Keys, Values>, _ key: Keys.Key, _ value: Values.Value, options: PutOptions = []
    ) throws -> Bool {
        try Keys.withStoredBytes(of: key) { try put(table, storedKey: $0, value, options: options) }
    }

    /// Stores `value` under the key whose stored bytes are `key`, encoded in place.
    @inlinable @discardableResult
    public func put<Keys, Values>(
        _ table: Table<Keys, Values>, storedKey key: UnsafeRawBufferPointer, _ value: Values.Value, options: PutOptions = []
    ) throws -> Bool {
        try Values.withEncoded(value, key: key) { count, fill in
            try put(table.database, key: key, reserving: count, options: options, fill)
        }
    }

    /// Removes `key`; returns whether it was there.
    @inlinable @discardableResult
    public func delete<Keys, Values>(_ table: Table<Keys, Values>, _ key: Keys.Key) throws -> Bool {
        try Keys.withStoredBytes(of: key) { try delete(table.database, key: $0) }
    }
}

/// Keys that are unsigned 64-bit integers, stored as eight big-endian bytes (so LMDB's byte order is
/// their numeric order).
public enum BigEndianKey: KeyCodec {
    public static func withStoredBytes<R>(of key: UInt64, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        try withUnsafeBytes(of: key.bigEndian) { try body($0) }
    }
}
