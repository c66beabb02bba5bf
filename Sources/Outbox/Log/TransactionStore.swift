internal import OutboxLMDB

/// The projections of one LMDB write transaction, as the fold's store and its reader's source: a
/// write-back cache over the transaction.
///
/// An entry read is kept; an entry set or removed is held in memory and written to LMDB once, by
/// `flush`, in key order. A batch of 100 verdicts then reads each write's entry from LMDB once though
/// the planner, the decider and the fold all read it, a bulk enqueue of 1000 writes puts the user's
/// counters and the next write id once, not 1000 times, and the new keys of a table (new writes' ids)
/// are appended (`MDB_APPEND`: no search, full pages). Reads look in memory first, so the fold and every
/// reader of the transaction see the same state. `flush` runs before the transaction commits, before a
/// scan of a table with changes held, and when too many entries are held.
final class TransactionStore: ProjectionStore {
    private let access: WriteAccess
    private let tables: [Database]
    /// Indexed by `ProjectionTable.index`.
    private var held: [[HeldKey: Held]]
    /// Changed (not yet written) entries, per table.
    private var changed: [Int]
    private var heldCount = 0
    /// More than this many held entries are written out and forgotten (a rebuild of a large log).
    private static let limit = 4096

    /// The held entries' tables, empty, kept from one transaction to the next (`EventLog` keeps the
    /// last one's), so a transaction starts with the room the one before it made instead of growing
    /// each table again: a pass's commit of 100 verdicts grew them about 40 times. What is kept is
    /// bounded by `limit`: no table holds more than that many entries before they are written out.
    struct Memory: Sendable {
        fileprivate var held: [[HeldKey: Held]] = Array(repeating: [:], count: ProjectionTable.allCases.count)
        init() {}
    }

    init(access: WriteAccess, tables: [Database], memory: Memory = Memory()) {
        self.access = access
        self.tables = tables
        held = memory.held
        changed = Array(repeating: 0, count: ProjectionTable.allCases.count)
    }

    /// The store's tables, emptied, for the next transaction's store; the store holds nothing after.
    /// Called after `flush`, which has emptied them: emptying them again keeps a store released
    /// without one from handing its entries to a transaction that never read them.
    func releaseMemory() -> Memory {
        var memory = Memory()
        swap(&memory.held, &held)
        for index in memory.held.indices { memory.held[index].removeAll(keepingCapacity: true) }
        heldCount = 0
        changed = Array(repeating: 0, count: changed.count)
        return memory
    }

    func value(_ table: ProjectionTable, _ key: [UInt8]) throws -> [UInt8]? {
        let heldKey = HeldKey(bytes: key)
        if let entry = held[table.index][heldKey] { return entry.value }
        let value = try access.get(tables[table.index], key: key)
        try keep(table, heldKey, Held(value: value, isWritten: true))
        return value
    }

    func set(_ table: ProjectionTable, _ key: [UInt8], _ value: [UInt8]) throws {
        try keep(table, HeldKey(bytes: key), Held(value: value, isWritten: false))
    }

    func remove(_ table: ProjectionTable, _ key: [UInt8]) throws {
        try keep(table, HeldKey(bytes: key), Held(value: nil, isWritten: false))
    }

    private func keep(_ table: ProjectionTable, _ key: HeldKey, _ entry: Held) throws {
        let index = table.index
        if let before = held[index].updateValue(entry, forKey: key) {
            changed[index] += (entry.isWritten ? 0 : 1) - (before.isWritten ? 0 : 1)
        } else {
            heldCount += 1
            if !entry.isWritten { changed[index] += 1 }
        }
        if heldCount > Self.limit { try flush() }
    }

    /// Writes every changed entry to LMDB, in key order, and forgets every held entry.
    func flush() throws {
        for table in ProjectionTable.allCases { try write(table) }
    }

    /// Writes the changed entries of `table` in key order, appending those past its last key, and
    /// forgets the table's held entries (LMDB now holds what they say).
    private func write(_ table: ProjectionTable) throws {
        let index = table.index
        guard changed[index] > 0 else {
            heldCount -= held[index].count
            held[index].removeAll(keepingCapacity: true)
            return
        }
        let database = tables[index]
        var last = try access.withCursor(database) { cursor in try cursor.last().map { Array($0.key) } }
        var entries: [(key: HeldKey, entry: Held)] = []
        entries.reserveCapacity(changed[index])
        for (key, entry) in held[index] where !entry.isWritten { entries.append((key, entry)) }
        entries.sort { Key.precedes($0.key.bytes, $1.key.bytes) }
        for (key, entry) in entries {
            if let value = entry.value {
                if last.map({ Key.precedes($0, key.bytes) }) ?? true {
                    try access.put(database, key: key.bytes, value: value, options: .append)
                    last = key.bytes
                } else {
                    try access.put(database, key: key.bytes, value: value)
                }
            } else {
                try access.delete(database, key: key.bytes)
            }
        }
        heldCount -= held[index].count
        held[index].removeAll(keepingCapacity: true)
        changed[index] = 0
    }

    /// Entries of `table` under `prefix`, from `start`, as LMDB holds them once its changes are written.
    func scan(
        _ table: ProjectionTable, _ prefix: [UInt8], _ start: [UInt8]?,
        _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        if changed[table.index] > 0 { try write(table) }
        try access.forEach(tables[table.index], prefix: prefix, from: start, body)
    }
}

/// A key held in memory. Its bytes are folded once into a 64-bit digest (FNV-1a), which is all the
/// dictionary hashes, on every lookup and every regrowth; equality still compares the bytes.
private struct HeldKey: Hashable {
    let bytes: [UInt8]
    private let digest: UInt64

    init(bytes: [UInt8]) {
        self.bytes = bytes
        digest = StableHash.of(bytes)
    }

    static func == (a: HeldKey, b: HeldKey) -> Bool { a.digest == b.digest && a.bytes == b.bytes }

    func hash(into hasher: inout Hasher) { hasher.combine(digest) }
}

/// A held entry: its value (nil: none, or removed) and whether LMDB already holds it so.
private struct Held {
    let value: [UInt8]?
    let isWritten: Bool
}
