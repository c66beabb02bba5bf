/// One row of the verdict table: a write's current state and what the pass needs to decide on it,
/// without reading its `writeQueued` event (whose sequence it keeps, for the key and body).
///
/// The fields are boxed: the plan, the decider, the fold and the marks read an entry
/// from the transaction's write-back cache about fifteen times a drained write, and each read is a
/// copy. Unboxed, a copy retains the strings, the dependencies and the state's payload one by one
/// (some 140 instructions, and as many again to destroy it); boxed, it is one retain. A box never
/// changes: `update` makes a new one, which the fold does once a verdict.
@dynamicMemberLookup
struct WriteEntry: Hashable, Sendable {
    struct Fields: Hashable, Sendable {
        var queuedSequence: UInt64
        var user: String
        var table: String
        /// `dependsOn` and `follows`, ascending.
        var dependencies: [WriteID]
        var atomicGroup: WriteQueued.AtomicGroup?
        /// The key a release gave the write (R3.1); nil while it goes under its `writeQueued`'s.
        var renewedKey: IdempotencyKey?
        var state: WriteState
        var refusals: Int
        var replayed: Bool
        /// Schema-cache failures counted (R4.3) and when the last one was.
        var schemaRefusals: Int
        var lastSchemaRefusalAt: Timestamp?
        /// The last per-write failure that may pass (R4.4), and the streak of passes that met one.
        var lastFailure: LastFailure?
        var environmentalStreak: Int
    }

    private var box: FrozenFields<Fields>
    /// The write's latest events but its `writeQueued`, which the history index does not hold yet. Out
    /// of the box: the fold notes an event in an entry without making a new one.
    var recent: RecentEvents

    init(_ fields: Fields, recent: RecentEvents = .none) {
        box = FrozenFields(fields)
        self.recent = recent
    }

    init(
        queuedSequence: UInt64, user: String, table: String, dependencies: [WriteID], atomicGroup: WriteQueued.AtomicGroup?,
        renewedKey: IdempotencyKey?, state: WriteState, refusals: Int, replayed: Bool, schemaRefusals: Int,
        lastSchemaRefusalAt: Timestamp?, lastFailure: LastFailure?, environmentalStreak: Int, recent: RecentEvents = .none
    ) {
        self.init(
            Fields(
                queuedSequence: queuedSequence, user: user, table: table, dependencies: dependencies, atomicGroup: atomicGroup,
                renewedKey: renewedKey, state: state, refusals: refusals, replayed: replayed,
                schemaRefusals: schemaRefusals, lastSchemaRefusalAt: lastSchemaRefusalAt, lastFailure: lastFailure,
                environmentalStreak: environmentalStreak), recent: recent)
    }

    subscript<Value>(dynamicMember field: KeyPath<Fields, Value>) -> Value { box.fields[keyPath: field] }

    /// Changes the entry's fields (a new box: the old one may be shared).
    mutating func update(_ change: (inout Fields) throws -> Void) rethrows { box = try box.changed(change) }

    static func == (a: WriteEntry, b: WriteEntry) -> Bool {
        a.recent == b.recent && FrozenFields.equal(a.box, b.box)
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(box.fields)
        hasher.combine(recent)
    }

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
        box.fields.writeFields(into: &w)
        recent.encode(into: &w)
    }

    private static func checksum(id: WriteID, fields: UnsafeRawBufferPointer) -> UInt32 {
        let head = withUnsafeBytes(of: id.rawValue.bigEndian) { CRC32C.update(0, $0) }
        return CRC32C.update(head, fields)
    }

    /// The entry stored for write `id`, in the layout `layout` (before 15, an entry had no recent
    /// events; before 16, it held its key whether a release had renewed it or not); damage (a checksum
    /// that does not match) is a `DecodeFailure` naming the write.
    static func decode(_ bytes: UnsafeRawBufferPointer, id: WriteID, layout: UInt64 = projectionLayoutVersion) throws
        -> WriteEntry
    {
        guard bytes.count > 4 else { throw DecodeFailure("the verdict table's entry for write \(id) is too short") }
        let fields = UnsafeRawBufferPointer(rebasing: bytes[..<(bytes.count - 4)])
        let stored = (0..<4).reduce(UInt32(0)) { $0 | UInt32(bytes[bytes.count - 4 + $1]) << (8 * $1) }
        guard checksum(id: id, fields: fields) == stored else {
            throw DecodeFailure("the verdict table's entry for write \(id) is damaged (checksum mismatch)")
        }
        do {
            return try decodeFields(fields, layout: layout)
        } catch let failure as DecodeFailure {
            throw DecodeFailure("the verdict table's entry for write \(id) is damaged (\(failure.reason))")
        }
    }

    private static func decodeFields(_ bytes: UnsafeRawBufferPointer, layout: UInt64) throws -> WriteEntry {
        var r = ByteReader(bytes)
        let entry = WriteEntry(
            queuedSequence: try r.varint(), user: try r.string(), table: try r.string(),
            dependencies: try r.ids(),
            atomicGroup: try r.optional { WriteQueued.AtomicGroup(first: try $0.id(), count: try $0.int()) },
            renewedKey: layout < 16
                ? try IdempotencyKey.decode(from: &r) : try r.optional { try IdempotencyKey.decode(from: &$0) },
            state: try WriteState.decode(from: &r),
            refusals: try r.int(), replayed: try r.bool(), schemaRefusals: try r.int(),
            lastSchemaRefusalAt: try r.optional { Timestamp(milliseconds: try $0.signed()) },
            lastFailure: try r.optional {
                LastFailure(status: try $0.optional { try $0.int() }, text: try $0.optional { try $0.string() })
            },
            environmentalStreak: try r.int(), recent: layout >= 15 ? try RecentEvents.decode(from: &r) : .none)
        try r.expectEnd()
        return entry
    }

    static func decode(_ bytes: [UInt8], id: WriteID, layout: UInt64 = projectionLayoutVersion) throws -> WriteEntry {
        try bytes.withUnsafeBytes { try decode($0, id: id, layout: layout) }
    }

    static func decode(_ bytes: RawSpan, id: WriteID) throws -> WriteEntry {
        try bytes.withUnsafeBytes { try decode($0, id: id) }
    }

    /// Settled (R2.2, R3.1): answered, refused for good, or (no entry) no longer in the queue. Each is
    /// final: a write refused for good never goes, so nothing waits behind it.
    static func isSettled(_ entry: WriteEntry?) -> Bool {
        entry.map { $0.state.isAnswered || $0.state.isRefusedForGood } ?? true
    }

    /// Whether a pending write waits (R2.2, R4.2): a write it depends on is not settled; in an atomic
    /// group (which goes whole, R4.5), a member that would go with it depends on a write that is
    /// neither settled nor going too. `entryOf` reads an entry of the queue.
    static func waits(_ entry: WriteEntry, entryOf: (WriteID) throws -> WriteEntry?) throws -> Bool {
        guard let group = entry.atomicGroup else { return try entry.dependencies.contains { try !isSettled(entryOf($0)) } }
        var going: [WriteID: WriteEntry] = [:]
        for offset in 0..<UInt64(group.count) {
            let member = WriteID(group.first.rawValue + offset)
            if let other = try entryOf(member), other.state.isSendable { going[member] = other }
        }
        for other in going.values {
            if try other.dependencies.contains(where: { id in try going[id] == nil && !isSettled(entryOf(id)) }) { return true }
        }
        return false
    }

    /// Which per-user list the state puts the write in.
    var list: WriteList {
        switch self.state {
        case .pending: return .pending
        case .refused, .dead: return .rejected
        case .blocked: return .blocked
        case .accepted, .merged, .conflicted: return .answered
        }
    }
}

/// The per-user lists a write's state puts it in, each with its count in `Counters`.
enum WriteList: Hashable, Sendable {
    case pending, rejected, blocked, answered

    /// The table keyed by user and id that lists every write of the list; pending and answered writes
    /// have none: they are read from the entries, from the user's marks (`Counters`), and the tables
    /// `behind` and `answered` list only those below the marks.
    var table: ProjectionTable? {
        switch self {
        case .pending, .answered: return nil
        case .rejected: return .rejected
        case .blocked: return .blocked
        }
    }
}

extension WriteEntry.Fields {
    fileprivate func writeFields(into w: inout some ByteSink) {
        w.varint(queuedSequence)
        w.string(user)
        w.string(table)
        w.ids(dependencies)
        w.optional(atomicGroup) { w, group in
            w.varint(group.first.rawValue)
            w.varint(group.count)
        }
        w.optional(renewedKey) { $1.encode(into: &$0) }
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
}
