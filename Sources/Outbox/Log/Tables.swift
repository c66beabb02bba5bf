internal import OutboxLMDB

/// The log's database and each projection's, with the codecs of their keys and values: the log's
/// records and the verdict table's entries are encoded straight into LMDB's pages and checked and
/// decoded where they lie; the users' counters (in `meta`) likewise; the other projections hold bytes.
struct LogTables: Sendable {
    typealias Log = Table<BigEndianKey, RecordCodec>
    typealias Entries = Table<WriteIDKey, EntryCodec>
    typealias CountersTable = Table<CountersKey, CountersCodec>
    typealias Bytes = Table<StoreKeyCodec, InlineBytesValue>

    let log: Log
    let entries: Entries
    let counters: CountersTable
    /// Every projection's database, indexed by `ProjectionTable.index`.
    let projections: [Database]

    init(_ environment: Environment) {
        log = Log(environment.database("log"))
        projections = ProjectionTable.allCases.map { environment.database($0.rawValue) }
        entries = Entries(projections[ProjectionTable.writes.index])
        counters = CountersTable(projections[ProjectionTable.meta.index])
    }

    subscript(table: ProjectionTable) -> Database { projections[table.index] }

    /// A projection as a table of bytes, as a write transaction's store holds them.
    func bytes(_ table: ProjectionTable) -> Bytes { Bytes(projections[table.index]) }
}

/// Write ids, eight bytes big-endian.
enum WriteIDKey: KeyCodec {
    static func withStoredBytes<R>(of key: WriteID, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        try withUnsafeBytes(of: key.rawValue.bigEndian) { try body($0) }
    }
}

/// A user's counters key in `meta` (`MetaKey.counters`), built on the stack.
enum CountersKey: KeyCodec {
    static func withStoredBytes<R>(of user: String, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        var user = user
        let prefix = MetaKey.countersPrefix
        return try user.withUTF8 { name in
            try withUnsafeTemporaryAllocation(byteCount: prefix.count + name.count, alignment: 1) { buffer in
                prefix.withUnsafeBytes { buffer.copyMemory(from: $0) }
                UnsafeMutableRawBufferPointer(rebasing: buffer[prefix.count...]).copyMemory(from: UnsafeRawBufferPointer(name))
                return try body(UnsafeRawBufferPointer(buffer))
            }
        }
    }
}

/// Projection keys as `StoreKey`s.
enum StoreKeyCodec: KeyCodec {
    static func withStoredBytes<R>(of key: StoreKey, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        try key.withBytes(body)
    }
}

/// Projection values as `InlineBytes`: what a write transaction's store holds of the tables it keeps
/// as bytes, without an array for each.
enum InlineBytesValue: ValueCodec {
    static func storedCount(of value: InlineBytes, key: UnsafeRawBufferPointer) -> Int { value.count }
    static func encode(_ value: InlineBytes, key: UnsafeRawBufferPointer, into buffer: UnsafeMutableRawBufferPointer) {
        value.withBytes { buffer.copyMemory(from: $0) }
    }
    static func decode(_ stored: RawSpan, key: UnsafeRawBufferPointer) -> InlineBytes {
        stored.withUnsafeBytes { InlineBytes($0) }
    }
}

/// A value codec whose stored form is the value's fields, then a CRC32C (little-endian) over the key's
/// stored bytes and the fields: a damaged value, or one under another key, is caught when read.
protocol ChecksummedCodec: ValueCodec {
    /// The fields the checksum covers after the key.
    static func writeFields(_ value: Value, into writer: inout some ByteSink)
}

extension ChecksummedCodec {
    static func storedCount(of value: Value, key: UnsafeRawBufferPointer) -> Int {
        var count = ByteCount()
        writeFields(value, into: &count)
        return count.count + 4
    }

    static func encode(_ value: Value, key: UnsafeRawBufferPointer, into buffer: UnsafeMutableRawBufferPointer) {
        var writer = PageWriter(buffer)
        writeFields(value, into: &writer)
        writer.littleEndian32(CRC32C.update(CRC32C.update(0, key), writer.written))
        writer.finish()
    }

    /// Counts and writes in one pass (a record's fields cost as much to count as to write).
    static func encode(_ value: Value, key: UnsafeRawBufferPointer, fittingIn scratch: UnsafeMutableRawBufferPointer) -> Int {
        var writer = ScratchWriter(scratch)
        writeFields(value, into: &writer)
        writer.littleEndian32(writer.written.map { CRC32C.update(CRC32C.update(0, key), $0) } ?? 0)
        return writer.count
    }
}

/// The log's records (`RecordCodec`'s layout), under their sequence numbers.
extension RecordCodec: ChecksummedCodec {
    static func writeFields(_ record: RecordedEvent, into writer: inout some ByteSink) {
        writeBody(record.event, at: record.at, into: &writer)
    }

    static func decode(_ stored: RawSpan, key: UnsafeRawBufferPointer) throws(Failure) -> RecordedEvent {
        try decode(stored, sequence: StoreKey.readBigEndian(key))
    }
}

/// The verdict table's entries, checked against the key they are under.
enum EntryCodec: ChecksummedCodec {
    static func writeFields(_ entry: WriteEntry, into writer: inout some ByteSink) { entry.writeFields(into: &writer) }

    static func decode(_ stored: RawSpan, key: UnsafeRawBufferPointer) throws -> WriteEntry {
        try WriteEntry.decode(stored, id: WriteID(StoreKey.readBigEndian(key)))
    }
}

/// The users' counters.
enum CountersCodec: ValueCodec {
    static func storedCount(of counters: Counters, key: UnsafeRawBufferPointer) -> Int {
        var count = ByteCount()
        counters.write(into: &count)
        return count.count
    }

    static func encode(_ counters: Counters, key: UnsafeRawBufferPointer, into buffer: UnsafeMutableRawBufferPointer) {
        var writer = PageWriter(buffer)
        counters.write(into: &writer)
        writer.finish()
    }

    static func decode(_ stored: RawSpan, key: UnsafeRawBufferPointer) throws -> Counters {
        try stored.withUnsafeBytes { try Counters.decode($0) }
    }
}
