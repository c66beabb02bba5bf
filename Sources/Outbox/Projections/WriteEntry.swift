/// One row of the verdict table: a write's current state and what the pass needs to decide on it,
/// without reading its `writeQueued` event (whose sequence it keeps, for the key and body).
struct WriteEntry: Hashable, Sendable {
    var queuedSequence: UInt64
    var user: String
    var table: String
    /// `dependsOn` and `follows`, ascending.
    var dependencies: [WriteID]
    var atomicGroup: WriteQueued.AtomicGroup?
    var idempotencyKey: IdempotencyKey
    var state: WriteState
    var refusals: Int
    var replayed: Bool
    /// Schema-cache failures counted (R4.3) and when the last one was.
    var schemaRefusals: Int
    var lastSchemaRefusalAt: Timestamp?
    /// The last per-write failure that may pass (R4.4), and the streak of passes that met one.
    var lastFailure: LastFailure?
    var environmentalStreak: Int

    /// The stored entry of write `id`: its fields, then a CRC32C (little-endian) over `id`'s 8
    /// big-endian bytes and the fields, so a damaged entry, or one under another write's key, is
    /// caught wherever it is read (Specs/log-format.md).
    func encode(id: WriteID) -> [UInt8] {
        var w = ByteWriter(capacity: 64)
        writeFields(into: &w)
        let crc = w.bytes.withUnsafeBytes { Self.checksum(id: id, fields: $0) }
        w.littleEndian32(crc)
        return w.bytes
    }

    /// The fields the checksum covers after the id.
    func writeFields(into w: inout some ByteSink) {
        w.varint(queuedSequence)
        w.string(user)
        w.string(table)
        w.ids(dependencies)
        w.optional(atomicGroup) { w, group in
            w.varint(group.first.rawValue)
            w.varint(group.count)
        }
        idempotencyKey.encode(into: &w)
        state.encode(into: &w)
        w.varint(refusals)
        w.bool(replayed)
        w.varint(schemaRefusals)
        w.optional(lastSchemaRefusalAt) { $0.signed($1.rawValue) }
        w.optional(lastFailure) { w, failure in
            w.optional(failure.status) { $0.varint($1) }
            w.optional(failure.text) { $0.string($1) }
        }
        w.varint(environmentalStreak)
    }

    private static func checksum(id: WriteID, fields: UnsafeRawBufferPointer) -> UInt32 {
        let head = withUnsafeBytes(of: id.rawValue.bigEndian) { CRC32C.update(0, $0) }
        return CRC32C.update(head, fields)
    }

    /// The entry stored for write `id`; damage (a checksum that does not match) is a `DecodeFailure`
    /// naming the write.
    static func decode(_ bytes: UnsafeRawBufferPointer, id: WriteID) throws -> WriteEntry {
        guard bytes.count > 4 else { throw DecodeFailure("the verdict table's entry for write \(id) is too short") }
        let fields = UnsafeRawBufferPointer(rebasing: bytes[..<(bytes.count - 4)])
        let stored = (0..<4).reduce(UInt32(0)) { $0 | UInt32(bytes[bytes.count - 4 + $1]) << (8 * $1) }
        guard checksum(id: id, fields: fields) == stored else {
            throw DecodeFailure("the verdict table's entry for write \(id) is damaged (checksum mismatch)")
        }
        do {
            return try decodeFields(fields)
        } catch let failure as DecodeFailure {
            throw DecodeFailure("the verdict table's entry for write \(id) is damaged (\(failure.reason))")
        }
    }

    private static func decodeFields(_ bytes: UnsafeRawBufferPointer) throws -> WriteEntry {
        var r = ByteReader(bytes)
        let entry = WriteEntry(
            queuedSequence: try r.varint(), user: try r.string(), table: try r.string(),
            dependencies: try r.ids(),
            atomicGroup: try r.optional { WriteQueued.AtomicGroup(first: try $0.id(), count: try $0.int()) },
            idempotencyKey: try IdempotencyKey.decode(from: &r), state: try WriteState.decode(from: &r),
            refusals: try r.int(), replayed: try r.bool(), schemaRefusals: try r.int(),
            lastSchemaRefusalAt: try r.optional { Timestamp(milliseconds: try $0.signed()) },
            lastFailure: try r.optional {
                LastFailure(status: try $0.optional { try $0.int() }, text: try $0.optional { try $0.string() })
            },
            environmentalStreak: try r.int())
        try r.expectEnd()
        return entry
    }

    static func decode(_ bytes: [UInt8], id: WriteID) throws -> WriteEntry {
        try bytes.withUnsafeBytes { try decode($0, id: id) }
    }

    static func decode(_ bytes: RawSpan, id: WriteID) throws -> WriteEntry {
        try bytes.withUnsafeBytes { try decode($0, id: id) }
    }

    /// Settled (R2.2, R3.1): answered, refused for good, or (no entry) no longer in the queue. Each is
    /// final: a write refused for good never goes, so nothing waits behind it.
    static func isSettled(_ entry: WriteEntry?) -> Bool {
        entry.map { $0.state.isAnswered || $0.state.isRefusedForGood } ?? true
    }

    /// Which per-user list the state puts the write in.
    var list: ProjectionTable {
        switch state {
        case .pending: return .pending
        case .refused, .dead: return .rejected
        case .blocked: return .blocked
        case .accepted, .merged, .conflicted: return .answered
        }
    }
}

/// What a write met the last time it failed alone: the status and the start of a text body.
public struct LastFailure: Hashable, Sendable {
    /// The HTTP status it failed with, if one came.
    public var status: Int?
    /// Cut to 200 Unicode scalars; audits only.
    public var text: String?
    /// A failure with its status and the start of the server's text.
    public init(status: Int?, text: String?) {
        self.status = status
        self.text = text
    }
}

/// The per-user counts the status shows (R7.1), kept in one record so they are read together.
struct Counters: Hashable, Sendable {
    var pending = 0
    var rejected = 0
    var blocked = 0
    var answered = 0

    subscript(list: ProjectionTable) -> Int {
        get {
            switch list {
            case .pending: return pending
            case .rejected: return rejected
            case .blocked: return blocked
            default: return answered
            }
        }
        set {
            switch list {
            case .pending: pending = newValue
            case .rejected: rejected = newValue
            case .blocked: blocked = newValue
            default: answered = newValue
            }
        }
    }

    var isZero: Bool { pending == 0 && rejected == 0 && blocked == 0 && answered == 0 }

    func encode() -> [UInt8] {
        var w = ByteWriter(capacity: 8)
        write(into: &w)
        return w.bytes
    }

    func write(into w: inout some ByteSink) {
        w.varint(pending)
        w.varint(rejected)
        w.varint(blocked)
        w.varint(answered)
    }

    static func decode(_ bytes: [UInt8]) throws -> Counters { try bytes.withUnsafeBytes { try decode($0) } }

    static func decode(_ raw: UnsafeRawBufferPointer) throws -> Counters {
        var r = ByteReader(raw)
        let counters = Counters(pending: try r.int(), rejected: try r.int(), blocked: try r.int(), answered: try r.int())
        try r.expectEnd()
        return counters
    }
}

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
        let canonical = key.bytes
        let kept: Bool = canonical.withUnsafeBytes { raw in
            // One member: the object tag, a count of 1, the member's name, then its value.
            var r = ByteReader(raw)
            guard (try? r.byte()) == JSONValue.Tag.object.rawValue, (try? r.count()) == 1, let name = try? r.skipString(),
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
                guard let text = try? r.skipString(), text.count <= maxKeptString else { return false }
                w.bigEndian(hash)
                w.byte(3)
                r.withBytes(text) { w.raw($0) }
                return true
            default: return false
            }
        }
        if kept { return w.bytes }
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
        return w.bytes
    }

    /// The longest key (its canonical bytes) kept whole in a row key: with the 9 bytes before it, well
    /// inside LMDB's 511-byte keys.
    static let maxKeptBytes = 400
}
