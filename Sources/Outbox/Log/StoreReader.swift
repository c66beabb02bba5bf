/// What `isWaiting` found for each atomic group, by its first id, while one snapshot is read.
final class GroupWaiting {
    var waiting: [WriteID: Bool] = [:]
}

/// The verdict table's entries one read transaction has decoded (a snapshot's never change). A pass
/// reads consecutive ids, so the memo keeps a run of them in an array, and any other id in a
/// dictionary. Bounded: a scan of a long queue (the report's held counts) starts again past `limit`
/// entries.
final class EntryMemo {
    // Unchecked exclusivity, as `TransactionStore`'s held state: only `entry` and `forEachDecoded`
    // touch these, and the reads they run do not reach the memo.

    /// The entries of the ids from `first` on, in order (nil: the write has none).
    @exclusivity(unchecked) private var run: [WriteEntry?] = []
    @exclusivity(unchecked) private var first: UInt64 = 0
    /// The entries of ids outside the run.
    @exclusivity(unchecked) private var others: [WriteID: WriteEntry?] = [:]
    private static let limit = 1024

    func entry(_ id: WriteID, _ read: () throws -> WriteEntry?) rethrows -> WriteEntry? {
        let offset = id.rawValue &- first
        if offset < UInt64(run.count) { return run[Int(offset)] }
        if let known = others[id] { return known }
        let found = try read()
        if run.count + others.count >= Self.limit {
            run.removeAll(keepingCapacity: true)
            others.removeAll(keepingCapacity: true)
        }
        if run.isEmpty {
            first = id.rawValue
            run.reserveCapacity(128)
        }
        if id.rawValue &- first == UInt64(run.count) { run.append(found) } else { others[id] = found }
        return found
    }

    /// Calls `body` with every entry decoded so far.
    func forEachDecoded(_ body: (WriteID, WriteEntry?) -> Void) {
        for (offset, entry) in run.enumerated() { body(WriteID(first + UInt64(offset)), entry) }
        for (id, entry) in others { body(id, entry) }
    }

    /// How many entries it holds.
    var count: Int { run.count + others.count }
}

/// Read access to the projections and the log, whether the projections are LMDB's (a read or write
/// transaction) or a fold held in memory. Use it only inside the closure that hands it over: it reads
/// through a transaction that ends with that closure.
struct StoreReader {
    /// The value under `key` in `table`.
    let value: (ProjectionTable, [UInt8]) throws -> [UInt8]?
    /// Entries of `table` whose key starts with the prefix, from the start key, in key order, until
    /// the body returns false.
    let scan: (ProjectionTable, [UInt8], [UInt8]?, (RawSpan, RawSpan) throws -> Bool) throws -> Void
    /// The event at a sequence number, or nil when there is none; a damaged record throws.
    let record: (UInt64) throws -> RecordedEvent?
    /// The verdict table's entry of a write, when the source decodes entries itself (a transaction's
    /// reader); nil: read through `value` (a fold held in memory).
    var decodedEntry: ((WriteID) throws -> WriteEntry?)? = nil

    func entry(_ id: WriteID) throws -> WriteEntry? {
        if let decodedEntry { return try decodedEntry(id) }
        guard let bytes = try value(.writes, StoreKey.bytes(id: id.rawValue)) else { return nil }
        return try WriteEntry.decode(bytes, id: id)
    }

    /// Settled: accepted, merged, conflicted, or no longer in the queue (discarded, withdrawn, cleared,
    /// taken or forgotten once answered) (R2.2).
    func isSettled(_ id: WriteID) throws -> Bool {
        WriteEntry.isSettled(try entry(id))
    }

    /// Pending but held (R2.2, R4.2): `WriteEntry.waits`. That is an atomic group's answer, the same
    /// for each member: `groups` keeps it, so asking for every member of a group of n reads the group
    /// once, not n times.
    func isWaiting(_ entry: WriteEntry, groups: GroupWaiting? = nil) throws -> Bool {
        guard let group = entry.atomicGroup, let groups else { return try WriteEntry.waits(entry, entryOf: self.entry) }
        if let known = groups.waiting[group.first] { return known }
        let waiting = try WriteEntry.waits(entry, entryOf: self.entry)
        groups.waiting[group.first] = waiting
        return waiting
    }

    /// The settled session: its user and whether the identity block is latched (R7.3).
    func session() throws -> SessionSettled? {
        guard let bytes = try value(.meta, MetaKey.session) else { return nil }
        return try bytes.withUnsafeBytes { raw in
            var r = ByteReader(raw)
            return try SessionSettled.decode(from: &r)
        }
    }

    /// The latest Retry-After deadline a pass was told (R5.3), if any.
    func retryAfterUntil() throws -> Timestamp? {
        try value(.meta, MetaKey.retryAfterUntil).map {
            Timestamp(milliseconds: Int64(bitPattern: try MetaKey.readUInt64($0, name: MetaKey.retryAfterUntil)))
        }
    }

    func nextWriteID() throws -> UInt64 {
        try value(.meta, MetaKey.nextWriteId).map { try MetaKey.readUInt64($0, name: MetaKey.nextWriteId) } ?? 1
    }

    /// The ids a per-user list (`rejected`, `blocked`, `behind`, `answered`) holds for `user`, in order.
    func listed(_ table: ProjectionTable, user: String) throws -> [WriteID] {
        var ids: [WriteID] = []
        try scan(table, StoreKey.bytes(userPrefix: user), nil) { key, _ in
            ids.append(try StoreKey.trailingID(key))
            return true
        }
        return ids
    }

    /// The writes that name `id` among their dependencies.
    func dependents(of id: WriteID) throws -> [WriteID] {
        var result: [WriteID] = []
        try scan(.dependents, StoreKey.bytes(id: id.rawValue), nil) { key, _ in
            result.append(WriteID(try StoreKey.readBigEndian(key, at: 8)))
            return true
        }
        return result
    }

    /// The sequence numbers of the events that touched `id`, in order (R8.3): the history index, the
    /// attempt awaiting its answer when it names the write, and while the queue holds the write, its
    /// `writeQueued` and its recent events from its entry.
    func historySequences(of id: WriteID) throws -> [UInt64] {
        var result: [UInt64] = []
        try scan(.history, StoreKey.bytes(id: id.rawValue), nil) { key, value in
            let sequence = try StoreKey.readBigEndian(key, at: 8)
            result.append(sequence)
            // The events indexed with it (an attempt's answer and verdict), as offsets from its sequence.
            guard value.byteCount > 0 else { return true }
            try value.withUnsafeBytes { bytes in
                var offsets = ByteReader(bytes)
                while !offsets.isAtEnd {
                    let (later, overflow) = sequence.addingReportingOverflow(try offsets.varint())
                    guard !overflow, later > result.last! else {
                        throw DecodeFailure("the history index of write \(id) is damaged at sequence \(sequence)")
                    }
                    result.append(later)
                }
            }
            return true
        }
        if let attempt = try unansweredAttempt(), attempt.names(id) { result.append(attempt.sequence) }
        if let entry = try entry(id) {
            result.append(entry.queuedSequence)
            result += entry.recent.sequences(after: entry.queuedSequence)
        }
        // An entry's offsets may pass the events of the write's next entries (a withdraw while its
        // request was out comes between the attempt and its answer).
        result.sort()
        return zip(result.indices, result).compactMap { $0 > 0 && result[$0 - 1] == $1 ? nil : $1 }
    }

    /// Whether any event but its `writeQueued` names `id`: its entry's recent events, the history index
    /// (which holds a pending write's events that did not fit there, never its `writeQueued`), or the
    /// attempt awaiting its answer.
    func hasEventsSinceQueued(_ id: WriteID) throws -> Bool {
        if try entry(id)?.recent.isEmpty == false { return true }
        var found = false
        try scan(.history, StoreKey.bytes(id: id.rawValue), nil) { _, _ in
            found = true
            return false
        }
        return try found || unansweredAttempt()?.names(id) == true
    }

    /// The last attempt while its answer is awaited (its writes' history index entries come with it).
    func unansweredAttempt() throws -> UnansweredAttempt? {
        try value(.meta, MetaKey.unansweredAttempt).map { try UnansweredAttempt.decode($0) }
    }

    /// The `writeQueued` event of a write, held in the queue or not.
    func queuedEvent(of id: WriteID) throws -> WriteQueued? {
        if let entry = try entry(id), case .writeQueued(let queued)? = try record(entry.queuedSequence)?.event { return queued }
        for sequence in try historySequences(of: id) {
            if case .writeQueued(let queued)? = try record(sequence)?.event, queued.id == id { return queued }
        }
        return nil
    }
}

extension MemoryProjections {
    /// A reader over this fold, with `record` reading the log.
    func reader(record: @escaping (UInt64) throws -> RecordedEvent?) -> StoreReader {
        StoreReader(
            value: { table, key in self.value(table, key) },
            scan: { table, prefix, start, body in
                for (key, value) in self.sortedEntries(table) where key.starts(with: prefix) {
                    if let start, key.lexicographicallyPrecedes(start) { continue }
                    let keep = try body(key.span.bytes, value.span.bytes)
                    if !keep { return }
                }
            },
            record: record)
    }
}
