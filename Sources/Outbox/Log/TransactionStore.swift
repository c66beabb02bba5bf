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
///
/// Two tables are held decoded, because every part of a transaction reads them: the verdict table's
/// entries (`WriteEntry`, decoded and checked once when first read, encoded once when written) and the
/// users' counters. The others are held as bytes, inline up to 32 of them (`InlineBytes`: a row's
/// slot, a list's value, a meta number), so holding one allocates nothing. Each table keeps its entries
/// in the order they were first touched, which is nearly always key order (ids ascend), so putting them
/// in key order at the flush is a merge of a few runs, not a sort of a hash table's order.
final class TransactionStore: ProjectionStore {
    private let access: WriteAccess
    private let tables: LogTables
    /// What the store reads from LMDB it looks up through these: a transaction reads mostly in key
    /// order (the next ids, the rows of keys that ascend), so most lookups are a step.
    private let lookups: Lookups
    // The held state is `@exclusivity(unchecked)`: only the store's own methods touch it, on the one
    // thread that runs the transaction, and none of them runs code that reaches the store while it
    // changes one of these (the cursors and codecs they call do not), so the runtime's check of every
    // access (some 20 a drained write, 60 to 150 instructions each) guards nothing.

    /// Indexed by `ProjectionTable.index`; the slot of `.writes` stays empty, and `.meta`'s holds
    /// its bytes but the counters.
    @exclusivity(unchecked) private var held: [HeldTable<StoreKey, InlineBytes>]
    @exclusivity(unchecked) private var entries: HeldTable<WriteID, WriteEntry>
    @exclusivity(unchecked) private var counters: HeldTable<String, Counters>
    @exclusivity(unchecked) private var heldCount = 0
    /// Whether the store wrote anything to LMDB in this transaction.
    @exclusivity(unchecked) private var hasWritten = false
    /// Whether it wrote out entries and forgot them (a transaction past the limit): some it changed
    /// may be among them.
    @exclusivity(unchecked) private var forgotEntries = false
    /// The next write id, when this transaction set it: held apart from `meta`'s bytes until written
    /// out, since a bulk enqueue sets it for every write.
    @exclusivity(unchecked) private var nextWriteID: UInt64?
    /// More than this many held entries are written out and forgotten (a rebuild of a large log).
    fileprivate static let limit = 4096

    /// What one transaction hands the next (`EventLog` keeps the last one's): the held tables, empty,
    /// so a transaction starts with the room the one before it made instead of growing each table
    /// again (a commit of 100 verdicts would otherwise regrow each some 40 times); and the verdict
    /// table's entries as that transaction committed them, decoded. The next transaction keeps them
    /// only when it directly follows that commit (its id is the commit's plus one: no other writer, of
    /// this process or another, committed in between, and the commit did not fail), so a batch planned
    /// in one commit is decided on in the next without reading its entries again. What is kept is
    /// bounded by `limit`.
    struct Memory: Sendable {
        fileprivate var held = Array(repeating: HeldTable<StoreKey, InlineBytes>(), count: ProjectionTable.allCases.count)
        fileprivate var entries = HeldTable<WriteID, WriteEntry>()
        fileprivate var counters = HeldTable<String, Counters>()
        /// The last committed transaction whose entries `entries` holds.
        fileprivate var entriesAsOf: UInt64?
        /// Whether `entries` holds every entry that transaction changed.
        fileprivate var holdsEveryChange = false
        init() {}

        /// Adds entries a read transaction decoded, when the room allows and it read the state these
        /// entries are of (`snapshot` is its id) or the one just before, when they hold every entry
        /// changed since: an entry they do not hold is then as it was read.
        mutating func adopt(_ decoded: EntryMemo, asOf snapshot: UInt64) {
            guard entriesAsOf == snapshot || (entriesAsOf == snapshot &+ 1 && holdsEveryChange),
                entries.count + decoded.count <= TransactionStore.limit / 2
            else { return }
            decoded.forEachDecoded { id, entry in if !entries.holds(id) { _ = entries.keep(id, entry, isWritten: true) } }
        }
    }

    /// The cursors of one write transaction through which its stores look up each projection's bytes,
    /// the verdict table's entries and the users' counters (`LookupCursor`).
    struct Lookups {
        fileprivate let bytes: [LookupCursor<StoreKeyCodec, InlineBytesValue>]
        fileprivate let entries: LookupCursor<WriteIDKey, EntryCodec>
        fileprivate let counters: LookupCursor<CountersKey, CountersCodec>

        /// Runs `body` with the lookups of the transaction `access`, closed when it returns (before the
        /// transaction commits, as LMDB requires of a write transaction's cursors).
        static func with<R>(_ access: WriteAccess, _ tables: LogTables, _ body: (Lookups) throws -> R) throws -> R {
            try access.withLookupCursors(ProjectionTable.allCases.map(tables.bytes)) { bytes in
                try access.withLookupCursor(tables.entries) { entries in
                    try access.withLookupCursor(tables.counters) { counters in
                        try body(Lookups(bytes: bytes, entries: entries, counters: counters))
                    }
                }
            }
        }
    }

    init(access: WriteAccess, tables: LogTables, lookups: Lookups, memory: Memory = Memory()) {
        self.access = access
        self.tables = tables
        self.lookups = lookups
        held = memory.held
        entries = memory.entries
        counters = memory.counters
        if memory.entriesAsOf.map({ $0 &+ 1 != access.transactionID }) ?? true { entries.removeAll() }
        heldCount = entries.count
    }

    /// The store's tables for the next transaction's store, emptied but the entries `flush` wrote,
    /// which hold what this transaction commits; `transaction` is its id, and `appended` whether it
    /// appended to the log. The store holds nothing after.
    func releaseMemory(transaction: UInt64, appended: Bool) -> Memory {
        var memory = Memory()
        swap(&memory.held, &held)
        swap(&memory.entries, &entries)
        swap(&memory.counters, &counters)
        for index in memory.held.indices { memory.held[index].removeAll() }
        // Entries not written out are not what the transaction commits.
        let wrote = hasWritten || appended
        memory.holdsEveryChange = wrote && !forgotEntries && memory.entries.changed == 0
        if memory.entries.changed > 0 { memory.entries.removeAll() }
        // A commit that wrote nothing leaves LMDB's last transaction as it was (the one this one
        // read), and the next writer, of this process or another, then takes this one's id.
        memory.entriesAsOf = wrote ? transaction : transaction &- 1
        memory.counters.removeAll()
        hasWritten = false
        forgotEntries = false
        nextWriteID = nil
        heldCount = 0
        return memory
    }

    // MARK: - Bytes

    /// The value under `key`, for a reader of the transaction.
    func value(_ table: ProjectionTable, _ key: [UInt8]) throws -> [UInt8]? { try value(table, StoreKey(key)) }

    func value(_ table: ProjectionTable, _ key: StoreKey) throws -> [UInt8]? {
        if table == .meta, let nextWriteID, key == nextWriteIdStoreKey { return StoreKey.bytes(id: nextWriteID) }
        if table == .meta, let user = countersUser(key) {
            let found = try counters(user)
            return found.isZero ? nil : found.encode()
        }
        switch table {
        case .writes:
            guard key.count == 8 else { return try key.withBytes { try lmdbValue(table, $0) } }
            let id = WriteID(key.head)
            return try entry(id).map { $0.encode(id: id) }
        default: return try withHeld(table, key) { $0?.bytes }
        }
    }

    /// Calls `body` with the bytes held under `key` in `table` (one the store keeps as bytes), read from
    /// LMDB and kept when not held yet; nil when there are none.
    private func withHeld<R>(_ table: ProjectionTable, _ key: StoreKey, _ body: (InlineBytes?) throws -> R) throws -> R {
        if let value = held[table.index].lookup(key) { return try body(value) }
        let value = try key.withBytes { stored in
            try lookups.bytes[table.index].withValue(key: stored) { InlineBytesValue.decode($0, key: stored) }
        }
        try keep { $0.held[table.index].keep(key, value, isWritten: true) }
        return try body(value)
    }

    func withValue<R>(_ table: ProjectionTable, _ key: StoreKey, _ body: (UnsafeRawBufferPointer?) throws -> R) throws -> R {
        switch table {
        case .writes, .meta:
            guard let value = try value(table, key) else { return try body(nil) }
            return try value.withUnsafeBytes { try body($0) }
        default: return try withHeld(table, key) { value in try value.map { try $0.withBytes(body) } ?? body(nil) }
        }
    }

    /// The user whose counters a `meta` key names (`MetaKey.counters`), checked where the key lies; nil
    /// for every other key, which `meta` holds as bytes.
    private func countersUser(_ key: StoreKey) -> String? { key.withBytes { MetaKey.user(ofCounters: $0) } }

    private func lmdbValue(_ table: ProjectionTable, _ key: UnsafeRawBufferPointer) throws -> [UInt8]? {
        try lookups.bytes[table.index].withValue(key: key) { $0.copiedBytes }
    }

    func set(_ table: ProjectionTable, _ key: StoreKey, _ value: [UInt8]) throws {
        if table == .meta, key == nextWriteIdStoreKey { nextWriteID = nil }
        if table == .meta, let user = countersUser(key) { return try setCounters(Counters.decode(value), for: user) }
        switch table {
        case .writes:
            let id = WriteID(key.head)
            try setEntry(WriteEntry.decode(value, id: id), for: id)
        default:
            try keep { $0.held[table.index].keep(key, InlineBytes(value), isWritten: false) }
        }
    }

    func set(_ table: ProjectionTable, _ key: StoreKey, bytes: UnsafeRawBufferPointer) throws {
        switch table {
        case .writes, .meta: try set(table, key, Array(bytes))
        default: try keep { $0.held[table.index].keep(key, InlineBytes(bytes), isWritten: false) }
        }
    }

    func remove(_ table: ProjectionTable, _ key: StoreKey) throws {
        if table == .meta, key == nextWriteIdStoreKey { nextWriteID = nil }
        if table == .meta, let user = countersUser(key) { return try setCounters(Counters(), for: user) }
        switch table {
        case .writes: try removeEntry(WriteID(key.head))
        default:
            try keep { $0.held[table.index].keep(key, nil, isWritten: false) }
        }
    }

    // MARK: - Decoded

    func entry(_ id: WriteID) throws -> WriteEntry? {
        if let entry = entries.lookup(id) { return entry }
        let found = try lookups.entries.get(id)
        try keep { $0.entries.keep(id, found, isWritten: true) }
        return found
    }

    func setEntry(_ entry: WriteEntry, for id: WriteID) throws {
        try keep { $0.entries.keep(id, entry, isWritten: false) }
    }

    func removeEntry(_ id: WriteID) throws {
        try keep { $0.entries.keep(id, nil, isWritten: false) }
    }

    func counters(_ user: String) throws -> Counters {
        if let held = counters.lookup(user) { return held ?? Counters() }
        let found = try lookups.counters.get(user)
        try keep { $0.counters.keep(user, found, isWritten: true) }
        return found ?? Counters()
    }

    func setCounters(_ counters: Counters, for user: String) throws {
        try keep { $0.counters.keep(user, counters.isZero ? nil : counters, isWritten: false) }
    }

    func setNextWriteID(_ id: UInt64) { nextWriteID = id }

    /// Runs `change` (which adds or replaces one held entry) and writes everything out past the limit.
    private func keep(_ change: (TransactionStore) -> Bool) throws {
        if change(self) { heldCount += 1 }
        if heldCount > Self.limit { try flush() }
    }

    // MARK: - Writing

    /// Writes every changed entry to LMDB, in key order, and forgets every held entry but the verdict
    /// table's, which then hold what LMDB holds (for the next transaction, `releaseMemory`).
    func flush() throws {
        for table in ProjectionTable.allCases { try write(table, keepingEntries: true) }
    }

    /// Writes the changed entries of `table` in key order, appending those past its last key, and
    /// forgets the table's held entries (LMDB now holds what they say); with `keepingEntries`, the
    /// verdict table's stay, up to half the limit.
    private func write(_ table: ProjectionTable, keepingEntries: Bool = false) throws {
        if changes(table) > 0 { hasWritten = true }
        switch table {
        case .writes:
            let keeping = keepingEntries && entries.count <= Self.limit / 2
            if !keeping {
                heldCount -= entries.count
                forgotEntries = true
            }
            try entries.write(through: lookups.entries, keepingSlots: keeping)
        case .meta:
            if let nextWriteID {
                if held[table.index].keep(nextWriteIdStoreKey, InlineBytes(StoreKey.bytes(id: nextWriteID)), isWritten: false) {
                    heldCount += 1
                }
                self.nextWriteID = nil
            }
            heldCount -= counters.count + held[table.index].count
            try counters.write(through: lookups.counters)
            try held[table.index].write(through: lookups.bytes[table.index])
        default:
            heldCount -= held[table.index].count
            try held[table.index].write(through: lookups.bytes[table.index])
        }
    }

    /// How many of `table`'s held entries LMDB does not hold yet.
    private func changes(_ table: ProjectionTable) -> Int {
        switch table {
        case .writes: entries.changed
        case .meta: counters.changed + held[table.index].changed + (nextWriteID == nil ? 0 : 1)
        default: held[table.index].changed
        }
    }

    /// Entries of `table` under `prefix`, from `start`, as LMDB holds them once its changes are written.
    func scan(
        _ table: ProjectionTable, _ prefix: [UInt8], _ start: [UInt8]?,
        _ body: (RawSpan, RawSpan) throws -> Bool
    ) throws {
        if changes(table) > 0 { try write(table) }
        try access.forEach(tables[table], prefix: prefix, from: start, body)
    }
}

/// A held table's key: its order in LMDB, and a digest to find it by.
private protocol HeldTableKey: Equatable {
    static func precedes(_ a: Self, _ b: Self) -> Bool
    /// A well-mixed 64-bit hash of the key, stable within the process.
    var digest: UInt64 { get }
}

extension WriteID: HeldTableKey {
    fileprivate static func precedes(_ a: WriteID, _ b: WriteID) -> Bool { a.rawValue < b.rawValue }
    /// Fibonacci hashing: consecutive ids spread over the whole table.
    fileprivate var digest: UInt64 { rawValue &* 0x9E37_79B9_7F4A_7C15 }
}

extension String: HeldTableKey {
    /// The order of the keys `MetaKey.counters` makes: a common prefix, then the UTF-8 bytes.
    fileprivate static func precedes(_ a: String, _ b: String) -> Bool { a.utf8.lexicographicallyPrecedes(b.utf8) }
    fileprivate var digest: UInt64 { StableHash.of(self) }
}

/// One table's held entries, in the order they were first touched, with an index by key.
private struct HeldTable<K: HeldTableKey, Value>: @unchecked Sendable {
    // @unchecked: `Value` is a byte array, a `WriteEntry` or `Counters`, all Sendable; the table is
    // only ever moved between transactions, never shared.
    struct Slot {
        let key: K
        /// Nil: none in LMDB, or removed.
        var value: Value?
        /// Whether LMDB already holds `value`.
        var isWritten: Bool
    }

    private var index = HeldIndex()
    private var slots: [Slot] = []
    /// The slot last looked up or held: the fold reads and then sets one user's counters for each
    /// verdict, and a hit here spares hashing the user's name each time.
    private var recent: Int?
    /// Slots whose value LMDB does not hold yet.
    private(set) var changed = 0
    /// Where they are, in the order they changed: the verdict table's slots stay from one transaction
    /// to the next (up to half the limit), and a commit of a few writes looks at its own slots only.
    /// A slot that `keep` marks as held by LMDB and that then changes again is listed twice; `write`
    /// takes it once.
    private var unwritten: [Int] = []

    var count: Int { slots.count }

    /// The value held under `key`: nil when the key is not held, `.some(nil)` when it is held as absent.
    /// Mutating, though it changes only `recent`: the store calls it on a stored property of a class,
    /// which a non-mutating call would copy whole (its slots and index retained and released) first.
    mutating func lookup(_ key: K) -> Value?? {
        guard let position = position(of: key) else { return nil }
        recent = position
        return slots[position].value
    }

    func holds(_ key: K) -> Bool { position(of: key) != nil }

    private func position(of key: K) -> Int? {
        if let recent, slots[recent].key == key { return recent }
        return index.find(key.digest) { slots[$0].key == key }
    }

    /// Holds `value` under `key`; returns whether the key was not held before.
    mutating func keep(_ key: K, _ value: Value?, isWritten: Bool) -> Bool {
        if let position = position(of: key) {
            let wasWritten = slots[position].isWritten
            changed += (isWritten ? 0 : 1) - (wasWritten ? 0 : 1)
            slots[position].value = value
            slots[position].isWritten = isWritten
            if wasWritten && !isWritten { unwritten.append(position) }
            recent = position
            return false
        }
        slots.append(Slot(key: key, value: value, isWritten: isWritten))
        index.insert(key.digest, at: slots.count - 1) { slots[$0].key.digest }
        if !isWritten {
            changed += 1
            unwritten.append(slots.count - 1)
        }
        recent = slots.count - 1
        return true
    }

    mutating func removeAll() {
        recent = nil
        index.removeAll()
        slots.removeAll(keepingCapacity: true)
        unwritten.removeAll(keepingCapacity: true)
        changed = 0
    }

    /// Marks every slot as held by LMDB (after they were written), keeping them.
    private mutating func markWritten() {
        for position in unwritten { slots[position].isWritten = true }
        unwritten.removeAll(keepingCapacity: true)
        changed = 0
    }

    /// Writes the changed slots in key order (new keys past the table's last with `MDB_APPEND`), each
    /// value encoded into its page, then forgets every slot. The slots are nearly in order already: the
    /// stable sort merges their runs.
    mutating func write<Keys: KeyCodec, Values: ValueCodec>(
        through cursor: LookupCursor<Keys, Values>, keepingSlots: Bool = false
    ) throws where Keys.Key == K, Values.Value == Value {
        defer { if keepingSlots { markWritten() } else { removeAll() } }
        guard changed > 0 else { return }
        var order: [Int] = []
        order.reserveCapacity(changed)
        for position in unwritten where !slots[position].isWritten { order.append(position) }
        order.sort { K.precedes(slots[$0].key, slots[$1].key) }
        // The keys go in ascending order, through one cursor: a key after the last one written is a step
        // away, and once one is past the table's last key, so is every one after (appended).
        let last = try cursor.withLastKey { $0.copiedBytes }
        var appending = last == nil
        for (rank, position) in order.enumerated() where rank == 0 || order[rank - 1] != position {
            try Keys.withStoredBytes(of: slots[position].key) { key in
                if !appending, let last {
                    appending = last.withUnsafeBufferPointer { StoreKey.precedes($0, key.assumingMemoryBound(to: UInt8.self)) }
                }
                guard let value = slots[position].value else {
                    try cursor.delete(key: key)
                    return
                }
                try cursor.put(storedKey: key, value, appending: appending)
            }
        }
    }
}

extension StoreKey: HeldTableKey {}

/// A held table's index: slot positions by key digest, open addressing with linear probing in a
/// power-of-two table at most half full. It spares every lookup the dictionary's per-instance hashing
/// (SipHash over a digest the key already carries); equality is the caller's `matches`.
private struct HeldIndex {
    /// -1: empty; otherwise a slot position.
    private var buckets: [Int32] = []
    private var count = 0

    func find(_ digest: UInt64, matches: (Int) -> Bool) -> Int? {
        guard !buckets.isEmpty else { return nil }
        let mask = buckets.count - 1
        var bucket = Int(truncatingIfNeeded: digest >> 7) & mask
        while true {
            let position = Int(buckets[bucket])
            if position < 0 { return nil }
            if matches(position) { return position }
            bucket = (bucket + 1) & mask
        }
    }

    /// Adds a position not yet in the index; `digestAt` gives the digest of any held position, for regrowth.
    mutating func insert(_ digest: UInt64, at position: Int, digestAt: (Int) -> UInt64) {
        if (count + 1) * 2 > buckets.count {
            let positions = buckets.filter { $0 >= 0 }
            buckets = Array(repeating: -1, count: max(64, buckets.count * 2))
            for held in positions { place(digestAt(Int(held)), Int(held)) }
        }
        place(digest, position)
        count += 1
    }

    private mutating func place(_ digest: UInt64, _ position: Int) {
        let mask = buckets.count - 1
        var bucket = Int(truncatingIfNeeded: digest >> 7) & mask
        while buckets[bucket] >= 0 { bucket = (bucket + 1) & mask }
        buckets[bucket] = Int32(position)
    }

    /// Empties the index, keeping its room.
    mutating func removeAll() {
        guard count > 0 else { return }
        buckets.withUnsafeMutableBufferPointer { $0.update(repeating: -1) }
        count = 0
    }
}
