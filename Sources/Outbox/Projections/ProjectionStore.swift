/// Where a fold reads and writes projection entries: an LMDB write transaction, or memory (for
/// `verify`, which must not write, and for the state as of a sequence number).
protocol ProjectionStore {
    func value(_ table: ProjectionTable, _ key: [UInt8]) throws -> [UInt8]?
    mutating func set(_ table: ProjectionTable, _ key: [UInt8], _ value: [UInt8]) throws
    mutating func remove(_ table: ProjectionTable, _ key: [UInt8]) throws
}

/// Projections held in memory, in LMDB's key order when listed.
struct MemoryProjections: ProjectionStore {
    var tables: [ProjectionTable: [[UInt8]: [UInt8]]] = [:]

    func value(_ table: ProjectionTable, _ key: [UInt8]) -> [UInt8]? { tables[table]?[key] }
    mutating func set(_ table: ProjectionTable, _ key: [UInt8], _ value: [UInt8]) { tables[table, default: [:]][key] = value }
    mutating func remove(_ table: ProjectionTable, _ key: [UInt8]) { tables[table]?[key] = nil }

    /// The entries of `table` in key order (byte-wise, as LMDB orders them).
    func sortedEntries(_ table: ProjectionTable) -> [(key: [UInt8], value: [UInt8])] {
        (tables[table] ?? [:]).map { (key: $0.key, value: $0.value) }.sorted { Key.precedes($0.key, $1.key) }
    }
}
