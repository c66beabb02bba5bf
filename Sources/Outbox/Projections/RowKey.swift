/// The key of one user's row in `rows` (R2.2): which earlier writes a new write to the row follows.
///
/// A key of one member keeps its order, so writes to rows made one after another land side by side at
/// the end of the table, and a transaction of a thousand new rows touches a few pages of `rows` rather
/// than a thousand (decision 007):
/// - one integer member (`{"id": 42}`, autoincrement or client counters): the hash of (user, table,
///   member name), 0x01, then the integer big-endian with its sign bit flipped;
/// - one string member of at most `maxKeptString` UTF-8 bytes (`{"id": "0190b6e2-…"}`): the same
///   hash, 0x03, then the string's bytes. Time-ordered ids (UUIDv7, ULID, KSUID) then keep their order;
///   random ones (UUIDv4) land anywhere, as they would hashed.
/// Any other key: the hash of (user, table), 0x02, then the hash of the key's canonical bytes. The tag
/// byte keeps the forms apart. A hash collision only puts two rows in one slot: a write then also
/// follows the other row's writes; it never loses a dependency.
enum RowKey {
    /// The longest string member kept whole in a row key; a longer one is hashed.
    static let maxKeptString = 64

    static func of(user: String, table: String, key: JSONValue) -> [UInt8] {
        of(user: user, table: table, key: CanonicalJSON(key))
    }

    /// The row key, read straight from the key's canonical bytes.
    static func of(user: String, table: String, key: CanonicalJSON) -> [UInt8] {
        var w = ByteWriter(capacity: 17)
        write(user: user, table: table, key: key, into: &w)
        return w.bytes
    }

    /// The row key as a store key, made on the stack (`of`'s bytes, without an array of their own).
    static func storeKey(user: String, table: String, key: CanonicalJSON) -> StoreKey {
        withUnsafeTemporaryAllocation(byteCount: maxBytes, alignment: 8) { buffer in
            var w = ScratchWriter(buffer)
            write(user: user, table: table, key: key, into: &w)
            return StoreKey(w.written!)
        }
    }

    /// The longest row key: a hash, a tag and a key kept whole.
    private static let maxBytes = 9 + max(maxKeptBytes, maxKeptString)

    private static func write(user: String, table: String, key: CanonicalJSON, into w: inout some ByteSink) {
        let canonical = key.bytes
        let kept: Bool = canonical.withUnsafeBytes { raw in
            // One member: the object tag, a count of 1, the member's name, then its value.
            var r = ByteReader(raw)
            guard (try? r.byte()) == JSONValue.Tag.object.rawValue, (try? r.count()) == 1, let name = try? r.skipTrustedString(),
                let tag = try? r.byte()
            else { return false }
            let hash = r.withBytes(name) { StableHash.of(user, table, $0) }
            switch JSONValue.Tag(rawValue: tag) {
            case .int:
                guard let number = try? r.signed() else { return false }
                w.bigEndian(hash)
                w.byte(1)
                w.bigEndian(UInt64(bitPattern: number) ^ (1 << 63))
                return true
            case .string:
                guard let text = try? r.skipTrustedString(), text.count <= maxKeptString else { return false }
                w.bigEndian(hash)
                w.byte(3)
                r.withBytes(text) { w.raw($0) }
                return true
            default: return false
            }
        }
        if kept { return }
        w.bigEndian(StableHash.of(user, table))
        // The key itself when it fits (every realistic composite key): no two rows share a slot. A
        // longer one is hashed, and the slot's writes are checked against the write's user and table.
        if canonical.count <= maxKeptBytes {
            w.byte(4)
            w.raw(canonical)
        } else {
            w.byte(2)
            w.bigEndian(StableHash.of(canonical))
        }
    }

    /// The longest key (its canonical bytes) kept whole in a row key: with the 9 bytes before it, well
    /// inside LMDB's 511-byte keys.
    static let maxKeptBytes = 400
}
