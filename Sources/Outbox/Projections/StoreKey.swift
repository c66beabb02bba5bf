/// A projection key, built on the stack: up to 32 bytes are held inline (ids, id pairs, a user's list
/// keys, row keys of one member), so the fold makes its keys without allocating; a longer key keeps its
/// bytes in an array. It carries its digest (FNV-1a, for the held tables' index) and its first eight
/// bytes big-endian (which order most pairs of keys without comparing bytes).
struct StoreKey: Equatable {
    private var inline: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
    private var spilled: [UInt8]?
    let count: Int
    let digest: UInt64
    let head: UInt64

    static let inlineCapacity = 32

    init(_ bytes: UnsafeRawBufferPointer) {
        count = bytes.count
        digest = StableHash.of(bytes)
        var head: UInt64 = 0
        for position in 0..<8 { head = head << 8 | UInt64(position < bytes.count ? bytes[position] : 0) }
        self.head = head
        if bytes.count <= Self.inlineCapacity {
            withUnsafeMutableBytes(of: &inline) { $0.copyMemory(from: bytes) }
        } else {
            spilled = Array(bytes)
        }
    }

    init(_ bytes: [UInt8]) { self = bytes.withUnsafeBytes { StoreKey($0) } }

    /// An id, 8 bytes big-endian.
    static func id(_ value: UInt64) -> StoreKey { withUnsafeBytes(of: value.bigEndian) { StoreKey($0) } }

    /// Two ids, 16 bytes big-endian.
    static func pair(_ a: UInt64, _ b: UInt64) -> StoreKey {
        withUnsafeBytes(of: (a.bigEndian, b.bigEndian)) { StoreKey($0) }
    }

    /// `user` NUL-terminated, then `id` (a per-user list's key, `Key.user`).
    static func user(_ user: String, _ id: UInt64) -> StoreKey {
        guard user.utf8.count + 9 <= inlineCapacity else { return StoreKey(Key.user(user, id)) }
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

    func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        if let spilled { return try spilled.withUnsafeBytes(body) }
        return try withUnsafeBytes(of: inline) { try body(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
    }

    var bytes: [UInt8] { withBytes { Array($0) } }

    static func == (a: StoreKey, b: StoreKey) -> Bool {
        guard a.digest == b.digest, a.count == b.count, a.head == b.head else { return false }
        if a.spilled != nil || b.spilled != nil { return a.spilled == b.spilled }
        return a.inline == b.inline
    }

    /// LMDB's order: bytes compared as unsigned, a prefix first. Heads padded with zeros order the keys
    /// whenever they differ; equal heads fall back to the bytes.
    static func precedes(_ a: StoreKey, _ b: StoreKey) -> Bool {
        if a.head != b.head { return a.head < b.head }
        return a.withBytes { x in
            b.withBytes { y in Key.precedes(x.assumingMemoryBound(to: UInt8.self), y.assumingMemoryBound(to: UInt8.self)) }
        }
    }
}
