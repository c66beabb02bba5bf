internal import OutboxLMDB

/// The projections of one LMDB write transaction, as the fold's store and its reader's source.
///
/// Entries the fold rewrites many times a transaction (`meta`, `counters`, `rows`) are held in memory
/// and written once each, in key order, by `flush`: a bulk enqueue of 1000 writes then puts the user's
/// counters and the next write id once, not 1000 times. Reads look in memory first, so the fold and
/// every reader of the transaction see the same state. `flush` runs before the transaction commits,
/// before a scan of a held table, and when too many entries are held.
final class TransactionStore: ProjectionStore {
    private let access: WriteAccess
    private let tables: [Database]
    /// Indexed by `ProjectionTable.index`; nil for a table written through. A nil value is a removal.
    private var held: [[HeldKey: [UInt8]?]?]
    private var heldCount = 0
    /// More than this many held entries are written out at once (a rebuild of a large log).
    private static let limit = 4096

    init(access: WriteAccess, tables: [Database]) {
        self.access = access
        self.tables = tables
        held = ProjectionTable.allCases.map { Self.isHeld($0) ? [:] : nil }
    }

    private static func isHeld(_ table: ProjectionTable) -> Bool {
        switch table {
        case .meta, .counters, .rows: return true
        default: return false
        }
    }

    func value(_ table: ProjectionTable, _ key: [UInt8]) throws -> [UInt8]? {
        if let entries = held[table.index], let entry = entries[HeldKey(bytes: key)] { return entry }
        return try access.get(tables[table.index], key: key)
    }

    func set(_ table: ProjectionTable, _ key: [UInt8], _ value: [UInt8]) throws {
        if held[table.index] != nil { return try hold(table, key, value) }
        try access.put(tables[table.index], key: key, value: value)
    }

    func setAtEnd(_ table: ProjectionTable, _ key: [UInt8], _ value: [UInt8]) throws {
        if held[table.index] != nil { return try hold(table, key, value) }
        try key.withUnsafeBytes { k in try value.withUnsafeBytes { v in try access.putAtEnd(tables[table.index], key: k, value: v) } }
    }

    func remove(_ table: ProjectionTable, _ key: [UInt8]) throws {
        if held[table.index] != nil { return try hold(table, key, nil) }
        try access.delete(tables[table.index], key: key)
    }

    private func hold(_ table: ProjectionTable, _ key: [UInt8], _ value: [UInt8]?) throws {
        if held[table.index]!.updateValue(value, forKey: HeldKey(bytes: key)) == nil { heldCount += 1 }
        if heldCount > Self.limit { try flush() }
    }

    /// Writes every held entry to LMDB, in key order.
    func flush() throws {
        guard heldCount > 0 else { return }
        for table in ProjectionTable.allCases {
            guard let entries = held[table.index], !entries.isEmpty else { continue }
            let database = tables[table.index]
            for (key, value) in entries.sorted(by: { $0.key.bytes.lexicographicallyPrecedes($1.key.bytes) }) {
                if let value { try access.put(database, key: key.bytes, value: value) } else { try access.delete(database, key: key.bytes) }
            }
            held[table.index] = [:]
        }
        heldCount = 0
    }

    /// Entries of `table` under `prefix`, as LMDB holds them once the held ones are written.
    func scan(
        _ table: ProjectionTable, _ prefix: [UInt8], _ start: [UInt8]?, _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        if let entries = held[table.index], !entries.isEmpty { try flush() }
        try access.forEach(tables[table.index], prefix: prefix, from: start, body)
    }
}

/// A key held in memory, hashed as one run of bytes (an array of bytes hashes byte by byte).
private struct HeldKey: Hashable {
    let bytes: [UInt8]

    func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }
}
