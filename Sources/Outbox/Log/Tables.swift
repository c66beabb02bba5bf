internal import OutboxLMDB

/// The log's database and each projection's, with the codecs of their keys and values: the log's
/// records and the verdict table's entries are encoded straight into LMDB's pages and checked and
/// decoded where they lie; the counters likewise; the other projections hold bytes.
struct LogTables: Sendable {
    typealias Log = Table<BigEndianKey, RecordCodec>
    typealias Entries = Table<WriteIDKey, EntryCodec>
    typealias CountersTable = Table<UserKey, CountersCodec>
    typealias Bytes = Table<StoreKeyCodec, BytesValue>

    let log: Log
    let entries: Entries
    let counters: CountersTable
    /// Every projection's database, indexed by `ProjectionTable.index`.
    let projections: [Database]

    init(_ environment: Environment) {
        log = Log(environment.database("log"))
        projections = ProjectionTable.allCases.map { environment.database($0.rawValue) }
        entries = Entries(projections[ProjectionTable.writes.index])
        counters = CountersTable(projections[ProjectionTable.counters.index])
    }

    subscript(table: ProjectionTable) -> Database { projections[table.index] }

    /// A projection as a table of bytes.
    func bytes(_ table: ProjectionTable) -> Bytes { Bytes(projections[table.index]) }
}

/// Write ids, eight bytes big-endian.
enum WriteIDKey: KeyCodec {
    static func withStoredBytes<R>(of key: WriteID, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        try withUnsafeBytes(of: key.rawValue.bigEndian) { try body($0) }
    }
}

/// A user's name, NUL-terminated (`Key.userPrefix`), built on the stack.
enum UserKey: KeyCodec {
    static func withStoredBytes<R>(of user: String, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        var user = user
        return try user.withUTF8 { name in
            try withUnsafeTemporaryAllocation(byteCount: name.count + 1, alignment: 1) { buffer in
                buffer.copyMemory(from: UnsafeRawBufferPointer(name))
                buffer[name.count] = 0
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

/// The log's records (`RecordCodec`'s layout), under their sequence numbers.
extension RecordCodec: ValueCodec {
    static func storedCount(of record: RecordedEvent, key: UnsafeRawBufferPointer) -> Int {
        var count = ByteCount()
        writeBody(record.event, at: record.at, into: &count)
        return count.count + 4
    }

    static func encode(_ record: RecordedEvent, key: UnsafeRawBufferPointer, into buffer: UnsafeMutableRawBufferPointer) {
        var writer = PageWriter(buffer)
        writeBody(record.event, at: record.at, into: &writer)
        writer.littleEndian32(CRC32C.update(CRC32C.update(0, key), writer.written))
        writer.finish()
    }

    static func decode(_ stored: RawSpan, key: UnsafeRawBufferPointer) throws(Failure) -> RecordedEvent {
        let sequence = Key.readBigEndian(key)
        let result = stored.withUnsafeBytes { bytes in Result { () throws(Failure) in try decode(bytes, sequence: sequence) } }
        return try result.get()
    }
}

/// The verdict table's entries, checked against the key they are under.
enum EntryCodec: ValueCodec {
    static func storedCount(of entry: WriteEntry, key: UnsafeRawBufferPointer) -> Int {
        var count = ByteCount()
        entry.writeFields(into: &count)
        return count.count + 4
    }

    static func encode(_ entry: WriteEntry, key: UnsafeRawBufferPointer, into buffer: UnsafeMutableRawBufferPointer) {
        var writer = PageWriter(buffer)
        entry.writeFields(into: &writer)
        writer.littleEndian32(CRC32C.update(CRC32C.update(0, key), writer.written))
        writer.finish()
    }

    static func decode(_ stored: RawSpan, key: UnsafeRawBufferPointer) throws -> WriteEntry {
        let id = WriteID(Key.readBigEndian(key))
        return try stored.withUnsafeBytes { try WriteEntry.decode($0, id: id) }
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
