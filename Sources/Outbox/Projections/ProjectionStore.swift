/// Where a fold reads and writes projection entries: an LMDB write transaction, or memory (for
/// `verify`, which must not write, and for the state as of a sequence number).
protocol ProjectionStore {
    func value(_ table: ProjectionTable, _ key: StoreKey) throws -> [UInt8]?
    mutating func set(_ table: ProjectionTable, _ key: StoreKey, _ value: [UInt8]) throws
    mutating func remove(_ table: ProjectionTable, _ key: StoreKey) throws
    /// The verdict table's entry of write `id`, decoded and checked.
    func entry(_ id: WriteID) throws -> WriteEntry?
    mutating func setEntry(_ entry: WriteEntry, for id: WriteID) throws
    mutating func removeEntry(_ id: WriteID) throws
    /// The user's counters (zero when none are stored).
    func counters(_ user: String) throws -> Counters
    /// Stores the user's counters; zero counters are removed.
    mutating func setCounters(_ counters: Counters, for user: String) throws
    /// Stores the next write id the queue gives (`MetaKey.nextWriteId`): each write queued sets it.
    mutating func setNextWriteID(_ id: UInt64) throws
    /// Calls `body` with the bytes under `key`, or nil when there are none, without copying them out.
    func withValue<R>(_ table: ProjectionTable, _ key: StoreKey, _ body: (UnsafeRawBufferPointer?) throws -> R) throws -> R
    /// Stores `bytes` under `key`, copied.
    mutating func set(_ table: ProjectionTable, _ key: StoreKey, bytes: UnsafeRawBufferPointer) throws
}

/// Keys as bytes, and the typed entries through the bytes, for a store that keeps only bytes.
extension ProjectionStore {
    func value(_ table: ProjectionTable, _ key: [UInt8]) throws -> [UInt8]? { try value(table, StoreKey(key)) }
    mutating func set(_ table: ProjectionTable, _ key: [UInt8], _ value: [UInt8]) throws { try set(table, StoreKey(key), value) }
    mutating func remove(_ table: ProjectionTable, _ key: [UInt8]) throws { try remove(table, StoreKey(key)) }

    func entry(_ id: WriteID) throws -> WriteEntry? {
        try value(.writes, StoreKey.bytes(id: id.rawValue)).map { try WriteEntry.decode($0, id: id) }
    }

    mutating func setEntry(_ entry: WriteEntry, for id: WriteID) throws {
        try set(.writes, StoreKey.bytes(id: id.rawValue), entry.encode(id: id))
    }

    mutating func removeEntry(_ id: WriteID) throws { try remove(.writes, StoreKey.bytes(id: id.rawValue)) }

    func counters(_ user: String) throws -> Counters {
        try value(.meta, MetaKey.counters(user)).map { try Counters.decode($0) } ?? Counters()
    }

    mutating func setCounters(_ counters: Counters, for user: String) throws {
        let key = MetaKey.counters(user)
        if counters.isZero { try remove(.meta, key) } else { try set(.meta, key, counters.encode()) }
    }

    mutating func setNextWriteID(_ id: UInt64) throws { try set(.meta, nextWriteIdStoreKey, StoreKey.bytes(id: id)) }

    func withValue<R>(_ table: ProjectionTable, _ key: StoreKey, _ body: (UnsafeRawBufferPointer?) throws -> R) throws -> R {
        guard let value = try value(table, key) else { return try body(nil) }
        return try value.withUnsafeBytes { try body($0) }
    }

    mutating func set(_ table: ProjectionTable, _ key: StoreKey, bytes: UnsafeRawBufferPointer) throws {
        try set(table, key, Array(bytes))
    }
}

/// `MetaKey.nextWriteId` as a store key, made once (a global: a generic type cannot hold a stored static).
let nextWriteIdStoreKey = StoreKey(MetaKey.nextWriteId)

/// Projections held in memory, in LMDB's key order when listed.
struct MemoryProjections: ProjectionStore {
    var tables: [ProjectionTable: [[UInt8]: [UInt8]]] = [:]

    init() {}

    /// The projections a snapshot holds, in this build's layout.
    init(_ state: ProjectionState) throws {
        for entry in try state.current() { set(entry.table, entry.key, entry.value) }
    }

    func value(_ table: ProjectionTable, _ key: StoreKey) -> [UInt8]? { tables[table]?[key.bytes] }
    func value(_ table: ProjectionTable, _ key: [UInt8]) -> [UInt8]? { tables[table]?[key] }
    mutating func set(_ table: ProjectionTable, _ key: StoreKey, _ value: [UInt8]) {
        tables[table, default: [:]][key.bytes] = value
    }
    mutating func remove(_ table: ProjectionTable, _ key: StoreKey) { tables[table]?[key.bytes] = nil }
    mutating func set(_ table: ProjectionTable, _ key: [UInt8], _ value: [UInt8]) { tables[table, default: [:]][key] = value }
    mutating func remove(_ table: ProjectionTable, _ key: [UInt8]) { tables[table]?[key] = nil }

    /// The entries of `table` in key order (byte-wise, as LMDB orders them).
    func sortedEntries(_ table: ProjectionTable) -> [(key: [UInt8], value: [UInt8])] {
        (tables[table] ?? [:]).map { (key: $0.key, value: $0.value) }.sorted { StoreKey.precedes($0.key, $1.key) }
    }
}
