/// FNV-1a, 64 bits: a stable hash (Swift's `Hasher` is seeded per process, so it cannot be stored).
enum StableHash {
    private static let basis: UInt64 = 0xCBF2_9CE4_8422_2325
    private static let prime: UInt64 = 0x0000_0100_0000_01B3

    /// The hash of one run of bytes.
    static func of(_ bytes: [UInt8]) -> UInt64 { bytes.withUnsafeBytes { of($0) } }

    /// The hash of one run of bytes, where they lie.
    static func of(_ bytes: UnsafeRawBufferPointer) -> UInt64 { add(bytes, to: basis) }

    private static func add(_ bytes: UnsafeRawBufferPointer, to hash: UInt64) -> UInt64 {
        var hash = hash
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* prime }
        return hash
    }

    /// A string's UTF-8 bytes, read contiguously (a small string from a copy on the stack).
    private static func add(_ text: String, to hash: UInt64) -> UInt64 {
        var text = text
        return text.withUTF8 { add(UnsafeRawBufferPointer($0), to: hash) }
    }

    /// The hash of `user`, `table` and a member name's UTF-8 bytes, as `of(user, table, name)`.
    static func of(_ user: String, _ table: String, _ name: UnsafeRawBufferPointer) -> UInt64 {
        var hash = add(user, to: basis)
        hash = add(table, to: (hash ^ 0xFF) &* prime)
        return add(name, to: (hash ^ 0xFF) &* prime)
    }

    /// The hash of `parts`, each after the first preceded by 0xFF.
    static func of(_ parts: String...) -> UInt64 {
        var hash = basis
        for (index, part) in parts.enumerated() {
            if index > 0 { hash = (hash ^ 0xFF) &* prime }
            hash = add(part, to: hash)
        }
        return hash
    }
}
