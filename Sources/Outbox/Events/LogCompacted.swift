/// The log was compacted: the events before `horizon` were moved into the archive's last segment,
/// but for those of the writes the log still holds whole, and this event holds the projections' state
/// here, from which a rebuild and `verify` start. Sequence numbers are never reused: the log runs on
/// without a gap from `horizon`, and this event's sequence is after every event it archived.
public struct LogCompacted: EventPayload {
    static let type = EventType.logCompacted
    /// Every event before this sequence is in the archive; the log holds every one from it on.
    public var horizon: UInt64
    /// The archive's segments, oldest first; the last one is this compaction's.
    public var segments: [ArchiveSegment]
    /// The projections' state at this event.
    var state: ProjectionState

    init(horizon: UInt64, segments: [ArchiveSegment], state: ProjectionState) {
        self.horizon = horizon
        self.segments = segments
        self.state = state
    }

    func encode(into writer: inout some ByteSink) {
        writer.varint(horizon)
        writer.array(segments) { $1.encode(into: &$0) }
        state.encode(into: &writer)
    }

    static func decode(from reader: inout ByteReader) throws -> LogCompacted {
        LogCompacted(
            horizon: try reader.varint(), segments: try reader.array { try ArchiveSegment.decode(from: &$0) },
            state: try ProjectionState.decode(from: &reader))
    }

    var writeIDs: [WriteID] { [] }
    var jsonFields: [String: JSONValue] {
        [
            "horizon": .int(Int64(bitPattern: horizon)), "segments": .array(segments.map(\.json)),
            "stateEntries": .int(state.entries.count),
        ]
    }
}

/// One segment of a log's archive: the events of a range of sequences, moved out of the log by a
/// compaction, in a file of the log's format (`segment-000001.mdb`, …, in the archive's folder).
public struct ArchiveSegment: Hashable, Sendable, CustomStringConvertible {
    /// 1 for the first segment, and one more for each after it.
    public var number: Int
    /// The first sequence it holds; it holds every one from there to `lastSequence`, none missing.
    public var firstSequence: UInt64
    /// The last sequence it holds.
    public var lastSequence: UInt64
    /// The lowest id of the writes whose history it ends (those whose every event is archived by
    /// now), nil when there are none.
    public var lowestWrite: WriteID?
    /// The highest id of the writes whose history it ends, nil when there are none.
    public var highestWrite: WriteID?
    /// How many writes' histories it ends.
    public var writeCount: Int
    /// SHA-256 over the digest of the segment before it (32 zero bytes for the first) and each of its
    /// records, sequence and stored bytes: a chain, so a replaced, damaged or missing segment is named.
    public var digest: [UInt8]

    /// The segment's file name in the archive's folder.
    public var fileName: String {
        let digits = String(number)
        return "segment-" + String(repeating: "0", count: max(0, 6 - digits.count)) + digits + ".mdb"
    }

    /// Whether the segment ends the history of write `id`: its history is read from this segment.
    func mayHold(_ id: WriteID) -> Bool {
        guard let lowestWrite, let highestWrite else { return false }
        return lowestWrite <= id && id <= highestWrite
    }

    public var description: String {
        "segment \(number) (sequences \(firstSequence)–\(lastSequence), \(fileName))"
    }

    func encode(into writer: inout some ByteSink) {
        writer.varint(number)
        writer.varint(firstSequence)
        writer.varint(lastSequence)
        writer.optional(lowestWrite) { $0.varint($1.rawValue) }
        writer.optional(highestWrite) { $0.varint($1.rawValue) }
        writer.varint(writeCount)
        writer.data(digest)
    }

    static func decode(from reader: inout ByteReader) throws -> ArchiveSegment {
        let segment = ArchiveSegment(
            number: try reader.int(), firstSequence: try reader.varint(), lastSequence: try reader.varint(),
            lowestWrite: try reader.optional { try $0.id() }, highestWrite: try reader.optional { try $0.id() },
            writeCount: try reader.int(), digest: try reader.data())
        guard segment.digest.count == 32, segment.firstSequence <= segment.lastSequence, segment.number > 0 else {
            throw DecodeFailure("archive segment \(segment.number) is described badly")
        }
        return segment
    }

    var json: JSONValue {
        .object([
            "number": .int(number), "firstSequence": .int(Int64(bitPattern: firstSequence)),
            "lastSequence": .int(Int64(bitPattern: lastSequence)), "file": .string(fileName),
            "lowestWrite": .optional(lowestWrite) { .id($0) }, "highestWrite": .optional(highestWrite) { .id($0) },
            "writeCount": .int(writeCount),
            "digest": .string(hexDigits(digest)),
        ])
    }
}

/// Every projection's entries, table by table in key order, as the layout stores them: the state a
/// `logCompacted` event starts the log at. Kept as stored (its layout's table numbers), so the record
/// reads back to its own bytes; `current()` gives the entries in this build's layout.
struct ProjectionState: Hashable, Sendable {
    struct Entry: Hashable, Sendable {
        /// The table's number in the state's layout (`ProjectionTable.index` in this one).
        var tableNumber: UInt8
        var key: [UInt8]
        var value: [UInt8]

        init(table: ProjectionTable, key: [UInt8], value: [UInt8]) {
            self.init(tableNumber: UInt8(table.index), key: key, value: value)
        }

        init(tableNumber: UInt8, key: [UInt8], value: [UInt8]) {
            self.tableNumber = tableNumber
            self.key = key
            self.value = value
        }
    }

    /// The projections' layout the bytes are in.
    var layout: UInt64
    var entries: [Entry]

    /// The layouts whose snapshots this build reads: 10 (the first to compact) to this one.
    static let readableLayouts: ClosedRange<UInt64> = 10...projectionLayoutVersion
    /// Layout 10 numbered its tables as this one does, and had a tenth: each user's counters, under the
    /// user's name and a NUL, which later layouts keep in `meta` (`MetaKey.counters`).
    private static let layout10Counters: UInt8 = 9

    /// The entries in this build's layout.
    func current() throws -> [(table: ProjectionTable, key: [UInt8], value: [UInt8])] {
        guard Self.readableLayouts.contains(layout) else {
            throw DecodeFailure("a snapshot of layout \(layout), which this build does not read")
        }
        // `decode` took only the numbers of the state's layout. Layout 13's tables are this one's: it
        // indexed every attempt at once, where later ones keep the last aside until its answer, and
        // such a snapshot has no attempt aside.
        let tables =
            layout < 13
            ? try Self.fromOlder(entries, layout: layout)
            : entries.map { (table: ProjectionTable.allCases[Int($0.tableNumber)], key: $0.key, value: $0.value) }
        guard layout < 16 else { return tables }
        // Before layout 15 an entry noted no recent events (the index held them all); before 16 it held
        // its key, renewed or not, which it keeps as renewed.
        return try tables.map { entry in
            guard entry.table == .writes, entry.key.count == 8 else { return entry }
            let id = WriteID(entry.key.withUnsafeBytes { StoreKey.readBigEndian($0) })
            return (entry.table, entry.key, try WriteEntry.decode(entry.value, id: id, layout: layout).encode(id: id))
        }
    }

    /// The entries of a snapshot of an older layout in this one. Layouts 10 and 11 listed every
    /// pending write in table 2 (`pending`), and kept four counts a user (layout 10 in a table of its
    /// own); layout 12 listed there only the pending writes behind each user's send mark, which its
    /// counters kept; all three listed every answered write in `answered`. This layout lists in those
    /// tables only the writes below each user's marks, which the counters keep: the marks are put where
    /// the fold would move them from the user's first pending write (to the first that waits on nothing
    /// unsettled, listing those before it) and from their first answered write.
    private static func fromOlder(_ entries: [Entry], layout: UInt64) throws -> [(
        table: ProjectionTable, key: [UInt8], value: [UInt8]
    )] {
        var result: [(table: ProjectionTable, key: [UInt8], value: [UInt8])] = []
        var counts: [String: Counters] = [:]
        var pending: [String: [WriteID]] = [:]
        var answered: [String: [WriteID]] = [:]
        var stored: [WriteID: [UInt8]] = [:]
        var nextWriteID: UInt64 = 1
        for entry in entries {
            if layout == 10, entry.tableNumber == layout10Counters {
                guard let user = StoreKey.user(ofPrefix: entry.key) else {
                    throw DecodeFailure("a snapshot's counters are under a key that names no user")
                }
                counts[user] = try Counters.decode(entry.value, layout: layout)
                continue
            }
            let table = ProjectionTable.allCases[Int(entry.tableNumber)]
            if table == .meta, let user = entry.key.withUnsafeBytes({ MetaKey.user(ofCounters: $0) }) {
                counts[user] = try Counters.decode(entry.value, layout: layout)
            } else if (table == .behind && layout < 12) || table == .answered {
                let (user, id) = try listKey(entry.key)
                if table == .answered { answered[user, default: []].append(id) } else { pending[user, default: []].append(id) }
            } else {
                if table == .writes, entry.key.count == 8 {
                    stored[WriteID(entry.key.withUnsafeBytes { StoreKey.readBigEndian($0) })] = entry.value
                }
                if table == .meta, entry.key == MetaKey.nextWriteId {
                    nextWriteID = try MetaKey.readUInt64(entry.value, name: MetaKey.nextWriteId)
                }
                result.append((table, entry.key, entry.value))
            }
        }
        func entryOf(_ id: WriteID) throws -> WriteEntry? {
            try stored[id].map { try WriteEntry.decode($0, id: id, layout: layout) }
        }
        for (user, var counters) in counts {
            if layout < 12 {
                counters.sendFrom = nextWriteID
                for id in (pending[user] ?? []).sorted() {
                    guard let entry = try entryOf(id), try WriteEntry.waits(entry, entryOf: entryOf) else {
                        counters.sendFrom = id.rawValue
                        break
                    }
                    result.append((.behind, StoreKey.bytes(user: user, id.rawValue), []))
                    counters.behind += 1
                }
            }
            if let ids = answered[user]?.sorted(), let first = ids.first, let last = ids.last {
                counters.answeredFrom = first.rawValue
                counters.answeredTo = last.rawValue &+ 1
            }
            result.append((.meta, MetaKey.counters(user), counters.encode()))
        }
        return result
    }

    /// The user and id of a per-user list's key (`StoreKey.bytes(user:_:)`).
    private static func listKey(_ key: [UInt8]) throws -> (String, WriteID) {
        guard let separator = key.firstIndex(of: 0), key.count == separator + 9,
            let user = StoreKey.user(ofPrefix: Array(key[...separator]))
        else { throw DecodeFailure("a snapshot's list has a key that names no write") }
        return (user, WriteID(key.withUnsafeBytes { StoreKey.readBigEndian($0, at: separator + 1) }))
    }

    func encode(into writer: inout some ByteSink) {
        writer.varint(layout)
        writer.array(entries) { writer, entry in
            writer.byte(entry.tableNumber)
            writer.data(entry.key)
            writer.data(entry.value)
        }
    }

    static func decode(from reader: inout ByteReader) throws -> ProjectionState {
        let layout = try reader.varint()
        // Layout 10 had one table more than later ones.
        let tables = layout == 10 ? Int(layout10Counters) + 1 : ProjectionTable.allCases.count
        let entries = try reader.array { reader in
            let number = try reader.byte()
            guard Int(number) < tables else { throw DecodeFailure("a snapshot names projection \(number)") }
            return Entry(tableNumber: number, key: try reader.data(), value: try reader.data())
        }
        return ProjectionState(layout: layout, entries: entries)
    }
}

/// Bytes as lowercase hexadecimal digits.
func hexDigits(_ bytes: some Sequence<UInt8>) -> String {
    bytes.map { byte in
        let digits = String(byte, radix: 16)
        return digits.count == 1 ? "0" + digits : digits
    }.joined()
}
