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
    /// Indexed by `ProjectionTable.index`; nil for a table written through.
    private var held: [[HeldKey: Held]?]
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
        guard held[table.index] != nil else { return try access.get(tables[table.index], key: key) }
        let heldKey = HeldKey(bytes: key)
        if let entry = held[table.index]![heldKey] { return entry.value }
        // Kept, so the next read of the entry (a new write's row is read twice) stays in memory.
        let value = try access.get(tables[table.index], key: key)
        try keep(table, heldKey, Held(value: value, isWritten: true))
        return value
    }

    func set(_ table: ProjectionTable, _ key: [UInt8], _ value: [UInt8]) throws {
        if held[table.index] != nil { return try keep(table, HeldKey(bytes: key), Held(value: value, isWritten: false)) }
        try access.put(tables[table.index], key: key, value: value)
    }

    func setAtEnd(_ table: ProjectionTable, _ key: [UInt8], _ value: [UInt8]) throws {
        if held[table.index] != nil { return try keep(table, HeldKey(bytes: key), Held(value: value, isWritten: false)) }
        try key.withUnsafeBytes { k in try value.withUnsafeBytes { v in try access.putAtEnd(tables[table.index], key: k, value: v) } }
    }

    func remove(_ table: ProjectionTable, _ key: [UInt8]) throws {
        if held[table.index] != nil { return try keep(table, HeldKey(bytes: key), Held(value: nil, isWritten: false)) }
        try access.delete(tables[table.index], key: key)
    }

    private func keep(_ table: ProjectionTable, _ key: HeldKey, _ entry: Held) throws {
        if held[table.index]!.updateValue(entry, forKey: key) == nil { heldCount += 1 }
        if heldCount > Self.limit { try flush() }
    }

    /// Writes every changed held entry to LMDB, in key order, and forgets them all.
    func flush() throws {
        guard heldCount > 0 else { return }
        for table in ProjectionTable.allCases {
            guard let entries = held[table.index], !entries.isEmpty else { continue }
            let database = tables[table.index]
            for (key, entry) in entries.filter({ !$0.value.isWritten }).sorted(by: { $0.key.bytes.lexicographicallyPrecedes($1.key.bytes) }) {
                if let value = entry.value { try access.put(database, key: key.bytes, value: value) } else { try access.delete(database, key: key.bytes) }
            }
            held[table.index] = [:]
        }
        heldCount = 0
    }

    /// Entries of `table` under `prefix`, as LMDB holds them once the held ones are written.
    func scan(
        _ table: ProjectionTable, _ prefix: [UInt8], _ start: [UInt8]?, _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        if let entries = held[table.index], entries.values.contains(where: { !$0.isWritten }) { try flush() }
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

/// A held entry: its value (nil: none, or removed) and whether LMDB already holds it so.
private struct Held {
    let value: [UInt8]?
    let isWritten: Bool
}
