#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// Bytes held without an array of their own when they are few: up to 32 inline, a longer run in an
/// array. Projection keys are made of them (`StoreKey`), and so are the values the transaction's store
/// holds (a row's slot, a list's value, a meta number), so the fold keeps and writes both without
/// allocating.
struct InlineBytes: Equatable {
    private var inline: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
    private var spilled: [UInt8]?
    let count: Int

    static let inlineCapacity = 32

    init(_ bytes: UnsafeRawBufferPointer) {
        count = bytes.count
        if bytes.count <= Self.inlineCapacity {
            withUnsafeMutableBytes(of: &inline) { $0.copyMemory(from: bytes) }
        } else {
            spilled = Array(bytes)
        }
    }

    init(_ bytes: [UInt8]) { self = bytes.withUnsafeBytes { InlineBytes($0) } }

    func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        if let spilled { return try spilled.withUnsafeBytes(body) }
        return try withUnsafeBytes(of: inline) { try body(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
    }

    var bytes: [UInt8] { withBytes { Array($0) } }

    static func == (a: InlineBytes, b: InlineBytes) -> Bool {
        guard a.count == b.count else { return false }
        if a.spilled != nil || b.spilled != nil { return a.spilled == b.spilled }
        return a.inline == b.inline
    }
}

/// A projection key, built on the stack: up to 32 bytes are held inline (ids, id pairs, a user's list
/// keys, row keys of one member), so the fold makes its keys without allocating; a longer key keeps its
/// bytes in an array. It carries its digest (FNV-1a, for the held tables' index) and its first eight
/// bytes big-endian (which order most pairs of keys without comparing bytes).
struct StoreKey: Equatable {
    private let stored: InlineBytes
    let digest: UInt64
    let head: UInt64

    static let inlineCapacity = InlineBytes.inlineCapacity

    init(_ bytes: UnsafeRawBufferPointer) {
        digest = StableHash.of(bytes)
        var head: UInt64 = 0
        for position in 0..<8 { head = head << 8 | UInt64(position < bytes.count ? bytes[position] : 0) }
        self.head = head
        stored = InlineBytes(bytes)
    }

    init(_ bytes: [UInt8]) { self = bytes.withUnsafeBytes { StoreKey($0) } }

    var count: Int { stored.count }

    /// An id, 8 bytes big-endian.
    static func id(_ value: UInt64) -> StoreKey { withUnsafeBytes(of: value.bigEndian) { StoreKey($0) } }

    /// Two ids, 16 bytes big-endian.
    static func pair(_ a: UInt64, _ b: UInt64) -> StoreKey {
        withUnsafeBytes(of: (a.bigEndian, b.bigEndian)) { StoreKey($0) }
    }

    /// `user` NUL-terminated, then `id` (a per-user list's key, `bytes(user:_:)`).
    static func user(_ user: String, _ id: UInt64) -> StoreKey {
        guard user.utf8.count + 9 <= inlineCapacity else { return StoreKey(StoreKey.bytes(user: user, id)) }
        var user = user
        return user.withUTF8 { name in
            var buffer: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
            return withUnsafeMutableBytes(of: &buffer) { raw in
                raw.copyMemory(from: UnsafeRawBufferPointer(name))
                raw[name.count] = 0
                withUnsafeBytes(of: id.bigEndian) { idBytes in
                    UnsafeMutableRawBufferPointer(rebasing: raw[(name.count + 1)..<(name.count + 9)]).copyMemory(from: idBytes)
                }
                return StoreKey(UnsafeRawBufferPointer(rebasing: raw[..<(name.count + 9)]))
            }
        }
    }

    func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { try stored.withBytes(body) }

    var bytes: [UInt8] { stored.bytes }

    static func == (a: StoreKey, b: StoreKey) -> Bool {
        a.digest == b.digest && a.head == b.head && a.stored == b.stored
    }

    /// LMDB's order: bytes compared as unsigned, a prefix first. Heads padded with zeros order the keys
    /// whenever they differ; equal heads fall back to the bytes.
    static func precedes(_ a: StoreKey, _ b: StoreKey) -> Bool {
        if a.head != b.head { return a.head < b.head }
        return a.withBytes { x in
            b.withBytes { y in StoreKey.precedes(x.assumingMemoryBound(to: UInt8.self), y.assumingMemoryBound(to: UInt8.self)) }
        }
    }
}

/// The stored forms of keys, as bytes for LMDB's byte-wise calls: ids and pairs of ids big-endian (so
/// LMDB's order is theirs), a user's lists under the user's name NUL-terminated; and the readers of
/// stored keys, which take a key too short for what it should hold as damage.
extension StoreKey {
    static func bytes(id value: UInt64) -> [UInt8] {
        var writer = ByteWriter(capacity: 8)
        writer.bigEndian(value)
        return writer.bytes
    }

    static func bytes(pair a: UInt64, _ b: UInt64) -> [UInt8] {
        var writer = ByteWriter(capacity: 16)
        writer.bigEndian(a)
        writer.bigEndian(b)
        return writer.bytes
    }

    /// `user` NUL-terminated (users never contain NUL, R2.4), then `id`: per-user lists in id order.
    static func bytes(user: String, _ id: UInt64) -> [UInt8] {
        var writer = ByteWriter(capacity: user.utf8.count + 9)
        writer.raw(user.utf8)
        writer.byte(0)
        writer.bigEndian(id)
        return writer.bytes
    }

    /// The user of a `bytes(userPrefix:)` key; nil when the bytes are not one.
    static func user(ofPrefix key: [UInt8]) -> String? {
        guard key.last == 0, key.firstIndex(of: 0) == key.count - 1 else { return nil }
        return String(validating: key[..<(key.count - 1)], as: UTF8.self)
    }

    static func bytes(userPrefix user: String) -> [UInt8] {
        var writer = ByteWriter(capacity: user.utf8.count + 1)
        writer.raw(user.utf8)
        writer.byte(0)
        return writer.bytes
    }

    /// LMDB's key order (and the canonical order of JSON object keys): bytes compared as unsigned,
    /// a prefix first.
    static func precedes(_ x: UnsafeBufferPointer<UInt8>, _ y: UnsafeBufferPointer<UInt8>) -> Bool {
        order(UnsafeRawBufferPointer(x), UnsafeRawBufferPointer(y)) < 0
    }

    /// LMDB's order of two runs of bytes: negative when `x` comes first, zero when they are equal.
    static func order(_ x: UnsafeRawBufferPointer, _ y: UnsafeRawBufferPointer) -> Int {
        let common = min(x.count, y.count)
        let order = common == 0 ? 0 : memcmp(x.baseAddress!, y.baseAddress!, common)
        return order != 0 ? Int(order) : x.count - y.count
    }

    static func precedes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.withUnsafeBufferPointer { x in b.withUnsafeBufferPointer { y in precedes(x, y) } }
    }

    /// The id a per-user list's key ends with (`bytes(user:_:)`).
    static func trailingID(_ key: RawSpan) throws(DecodeFailure) -> WriteID {
        WriteID(try readBigEndian(key, at: key.byteCount - 8))
    }

    /// The eight bytes at `offset`, big-endian. A stored key too short to hold them is damage.
    static func readBigEndian(_ bytes: RawSpan, at offset: Int = 0) throws(DecodeFailure) -> UInt64 {
        guard offset >= 0, bytes.byteCount - offset >= 8 else {
            throw DecodeFailure("a stored key of \(bytes.byteCount) bytes is too short")
        }
        return bytes.unsafeLoadUnaligned(fromByteOffset: offset, as: UInt64.self).bigEndian
    }

    static func readBigEndian(_ bytes: UnsafeRawBufferPointer, at offset: Int = 0) -> UInt64 {
        var value: UInt64 = 0
        for index in offset..<(offset + 8) { value = value << 8 | UInt64(bytes[index]) }
        return value
    }
}
