internal import OutboxLMDB

/// The log's last compaction, as `meta` keeps it (`MetaKey.compaction`).
struct Compaction: Hashable, Sendable {
    /// The sequence of its `logCompacted` event.
    var snapshot: UInt64
    /// The log holds every event from here on; those before it are in the archive.
    var horizon: UInt64
    var segments: [ArchiveSegment]

    init(snapshot: UInt64, horizon: UInt64, segments: [ArchiveSegment]) {
        self.snapshot = snapshot
        self.horizon = horizon
        self.segments = segments
    }

    init(snapshot: UInt64, _ compacted: LogCompacted) {
        self.init(snapshot: snapshot, horizon: compacted.horizon, segments: compacted.segments)
    }

    var encoded: [UInt8] {
        var writer = ByteWriter(capacity: 64 + 64 * segments.count)
        writer.varint(snapshot)
        writer.varint(horizon)
        writer.array(segments) { $1.encode(into: &$0) }
        return writer.bytes
    }

    static func decode(_ bytes: [UInt8]) throws -> Compaction {
        try bytes.withUnsafeBytes { raw in
            var reader = ByteReader(raw)
            let snapshot = try reader.varint()
            let horizon = try reader.varint()
            let segments = try reader.array { try ArchiveSegment.decode(from: &$0) }
            try reader.expectEnd()
            return Compaction(snapshot: snapshot, horizon: horizon, segments: segments)
        }
    }

    /// The segments that may end write `id`'s history, newest first.
    func segments(holding id: WriteID) -> [ArchiveSegment] { segments.reversed().filter { $0.mayHold(id) } }
}

extension StoreReader {
    /// The log's last compaction; nil when it has none.
    func compaction() throws -> Compaction? {
        try value(.meta, MetaKey.compaction).map { try Compaction.decode($0) }
    }
}

/// What a compaction did.
public struct CompactionReport: Hashable, Sendable, CustomStringConvertible {
    /// The log now holds every event from this sequence on.
    public let horizon: UInt64
    /// The sequence of the snapshot it started the log at; nil when nothing was before the horizon.
    public let snapshot: UInt64?
    /// The archive segment it wrote; nil when nothing was before the horizon.
    public let segment: ArchiveSegment?
    /// Events moved out of the log into the segment.
    public let archivedEvents: Int
    /// Writes whose history is now in the archive.
    public let archivedWrites: Int
    /// Events before the horizon the log keeps, because they are of writes it still holds.
    public let keptEvents: Int
    /// The data file's size on disk before the compaction.
    public let bytesBefore: Int
    /// The data file's size on disk after it.
    public let bytesAfter: Int
    /// Whether the data file was written again without its free pages. It is not while another
    /// process has the log open: the next compaction does it.
    public let fileShrunk: Bool

    public var description: String {
        guard let segment, let snapshot else {
            let file =
                fileShrunk
                ? "data file \(bytesBefore) → \(bytesAfter) bytes"
                : "the data file was not rewritten (another process has the log open)"
            return "nothing before sequence \(horizon) to archive; \(file)"
        }
        var text =
            "archived \(archivedEvents) events and the history of \(archivedWrites) writes into \(segment); the log starts at snapshot \(snapshot) and holds every event from \(horizon) on"
        if keptEvents > 0 { text += ", and \(keptEvents) earlier events of the writes it still holds" }
        text += "; data file \(bytesBefore) → \(bytesAfter) bytes"
        if !fileShrunk { text += " (not shrunk: another process has the log open)" }
        return text
    }
}

extension EventLog {
    /// Moves the events before `horizon` (all of them when nil) into a new archive segment, but for
    /// those of writes the log still holds whole (every write the queue holds, and every write with an
    /// event at or after the horizon), starts the log at a `logCompacted` snapshot of the projections,
    /// and writes the data file again without its free pages when no other process holds it (R8.5).
    ///
    /// The segment is written and flushed before the transaction that removes the prefix commits: a
    /// crash at any step leaves the old log (and a segment the next compaction replaces) or the new
    /// one. Runs with no other write of this process in flight (the client holds its writer).
    package func compact(before horizon: UInt64? = nil, archive: Archive) throws -> CompactionReport {
        let bytesBefore = try storageErrors(path: path) { try environment.fileSize() }
        let planned = try storageErrors(path: path) {
            try environment.write { txn in
                let access = txn.unsafeAccess
                // Made outside the journal: durable as LMDB makes it.
                if let journal {
                    try journal.commitDurably(
                        txn, lastSequence: try EventLog.lastSequence(access, tables.log.database, path: path) ?? 0)
                }
                return try compact(access, before: horizon, archive: archive, logBytes: bytesBefore)
            }
        }
        guard let planned else {
            // Nothing to archive; the file may still hold the free pages of a compaction that could not shrink it.
            let last = try lastSequence()
            let held = try read { try $0.compaction()?.horizon } ?? 1
            // The journal's head must say LMDB is whole after it: a recovery then never writes the
            // replaced file's meta pages over the copy.
            try checkpoint(lmdbIsWhole: true)
            let shrunk = try storageErrors(path: path) { try environment.compactFile() }
            if shrunk { try checkpoint(lmdbIsWhole: true) }
            return CompactionReport(
                horizon: min(horizon ?? last + 1, last + 1, max(held, 1)), snapshot: nil, segment: nil, archivedEvents: 0,
                archivedWrites: 0, keptEvents: 0, bytesBefore: bytesBefore,
                bytesAfter: try storageErrors(path: path) { try environment.fileSize() }, fileShrunk: shrunk)
        }
        // Committed durably, after a head that says LMDB is whole after it: a recovery never writes
        // the replaced file's meta pages over the copy made next.
        commitMark?.advance(to: planned.snapshot.sequence)
        didCommit([planned.snapshot])
        crashPlan?.pass(.compactionBeforeShrink)
        let shrunk = try storageErrors(path: path) { try environment.compactFile() }
        if shrunk { try checkpoint(lmdbIsWhole: true) }
        let bytesAfter = try storageErrors(path: path) { try environment.fileSize() }
        return CompactionReport(
            horizon: planned.horizon, snapshot: planned.snapshot.sequence, segment: planned.segment,
            archivedEvents: planned.archived, archivedWrites: planned.writes, keptEvents: planned.kept,
            bytesBefore: bytesBefore, bytesAfter: bytesAfter, fileShrunk: shrunk)
    }

    private struct Planned {
        var horizon: UInt64
        var snapshot: RecordedEvent
        var segment: ArchiveSegment
        var archived: Int
        var writes: Int
        var kept: Int
    }

    /// The compaction's transaction; nil when nothing is before the horizon.
    private func compact(
        _ access: WriteAccess, before requested: UInt64?, archive: Archive, logBytes: Int
    ) throws -> Planned? {
        let log = tables.log
        let meta = tables[.meta]
        let history = tables[.history]
        guard
            let last = try access.withCursor(
                log.database, { cursor in try cursor.last { key, _ in try StoreKey.readBigEndian(key) } })
        else { return nil }
        let earlier = try access.get(meta, key: MetaKey.compaction).map { try Compaction.decode($0) }
        let first = earlier?.horizon ?? 1
        let horizon = min(requested ?? last + 1, last + 1)
        // Nothing before the horizon, or nothing since the last snapshot (which would archive just it).
        guard horizon > first, last != earlier?.snapshot else { return nil }

        let kept = try keptWrites(access, from: horizon, to: last)
        // The writes whose history ends in this segment: every other write the history index names.
        // Their index entries are read again, in order, as the segment is written; here only their keys.
        var endingKeys: [(UInt64, UInt64)] = []
        try access.forEach(history, prefix: []) { key, _ in
            let id = try StoreKey.readBigEndian(key)
            if !kept.contains(WriteID(id)) { endingKeys.append((id, try StoreKey.readBigEndian(key, at: 8))) }
            return true
        }
        let (removed, carried, keptCount) = try sortRecords(access, before: horizon, segmentFrom: first, kept: kept)
        let origin = try access.get(meta, key: MetaKey.origin) ?? []
        let segment = try archive.write(
            Archive.Contents(
                number: (earlier?.segments.count ?? 0) + 1,
                previousDigest: earlier?.segments.last?.digest ?? Array(repeating: 0, count: 32),
                origin: origin, first: first, last: horizon - 1,
                records: { body in
                    try access.forEach(log.database, prefix: [], from: StoreKey.bytes(id: first)) { key, value in
                        let sequence = try StoreKey.readBigEndian(key)
                        guard sequence < horizon else { return false }
                        try body(sequence, value)
                        return true
                    }
                },
                carried: carried,
                histories: { body in try self.forEachHistory(access, except: kept, body) }, sizeHint: logBytes),
            crashPlan: crashPlan)
        for sequence in removed { _ = try access.delete(log.database, key: StoreKey.bytes(id: sequence)) }
        for (id, sequence) in endingKeys { _ = try access.delete(history, key: StoreKey.bytes(pair: id, sequence)) }
        try removeUnusedRowsAndDependents(access, kept: kept)
        let snapshot = RecordedEvent(
            sequence: last + 1, at: clock.now(),
            event: .logCompacted(
                LogCompacted(
                    horizon: horizon, segments: (earlier?.segments ?? []) + [segment], state: try projectionState(access))))
        _ = try access.put(log, snapshot.sequence, snapshot, options: .append)
        try TransactionStore.Lookups.with(access, tables) { lookups in
            let store = TransactionStore(access: access, tables: tables, lookups: lookups)
            var projector = Projector(store: store)
            try projector.apply(snapshot)
            try projector.markApplied(snapshot.sequence)
            try store.flush()
        }
        crashPlan?.pass(.compactionBeforeCommit)
        return Planned(
            horizon: horizon, snapshot: snapshot, segment: segment, archived: removed.count, writes: segment.writeCount,
            kept: keptCount
        )
    }

    /// The records before the horizon: kept when they name a kept write, else removed; carried into
    /// the segment when they lie before its range (`first`) and name a write whose history ends in it.
    private func sortRecords(_ access: WriteAccess, before horizon: UInt64, segmentFrom first: UInt64, kept: Set<WriteID>)
        throws -> (removed: [UInt64], carried: [(UInt64, [UInt8])], kept: Int)
    {
        let history = tables[.history]
        func ends(_ id: WriteID) throws -> Bool {
            guard !kept.contains(id) else { return false }
            let prefix = StoreKey.bytes(id: id.rawValue)
            return try access.withCursor(history) { cursor in
                try cursor.seek(atLeast: prefix) { key, _ in key.starts(with: prefix) }
            } ?? false
        }
        var removed: [UInt64] = []
        var carried: [(UInt64, [UInt8])] = []
        var keptCount = 0
        let path = self.path
        try access.forEach(tables.log.database, prefix: []) { key, value in
            let sequence = try StoreKey.readBigEndian(key)
            guard sequence < horizon else { return false }
            let names = try Self.decode(value, sequence: sequence, path: path).event.writeIDs
            if names.contains(where: kept.contains) {
                keptCount += 1
            } else {
                removed.append(sequence)
            }
            if sequence < first, try names.contains(where: ends) { carried.append((sequence, value.copiedBytes)) }
            return true
        }
        return (removed, carried, keptCount)
    }

    /// The writes the log keeps whole: those the queue holds, those with an event from `horizon` on,
    /// and those of the attempt awaiting its answer (whose history index entries come with it).
    private func keptWrites(_ access: WriteAccess, from horizon: UInt64, to last: UInt64) throws -> Set<WriteID> {
        var kept = Set<WriteID>()
        if let attempt = try access.get(tables[.meta], key: MetaKey.unansweredAttempt) {
            kept.formUnion(try UnansweredAttempt.decode(attempt).writes)
        }
        try access.forEach(tables[.writes], prefix: []) { key, _ in
            kept.insert(WriteID(try StoreKey.readBigEndian(key)))
            return true
        }
        try forEachEvent(in: access, from: horizon, to: last) { event in
            kept.formUnion(event.event.writeIDs)
            return true
        }
        return kept
    }

    /// Calls `body` with each write the history index names, but the `kept` ones, and the sequences of
    /// its events in order. The index holds a write's events under one key each, or a verdict's
    /// answers as offsets from it: a write's sequences are gathered, then handed on.
    private func forEachHistory(
        _ access: WriteAccess, except kept: Set<WriteID>, _ body: (WriteID, [UInt64]) throws -> Void
    ) throws {
        var id: UInt64?
        var sequences: [UInt64] = []
        func handOn() throws {
            if let id { try body(WriteID(id), sequences.sorted()) }
            sequences.removeAll(keepingCapacity: true)
        }
        try access.forEach(tables[.history], prefix: []) { key, value in
            let next = try StoreKey.readBigEndian(key)
            guard !kept.contains(WriteID(next)) else { return true }
            if next != id {
                try handOn()
                id = next
            }
            let sequence = try StoreKey.readBigEndian(key, at: 8)
            sequences.append(sequence)
            try value.withUnsafeBytes { bytes in
                var offsets = ByteReader(bytes)
                while !offsets.isAtEnd { sequences.append(sequence + (try offsets.varint())) }
            }
            return true
        }
        try handOn()
    }

    /// A row's slot that names no kept write, and a dependency between two writes that have both left
    /// the queue, say nothing a reader or the next write to the row reads (both skip writes the queue
    /// no longer holds): they go with the history.
    private func removeUnusedRowsAndDependents(_ access: WriteAccess, kept: Set<WriteID>) throws {
        var unused: [(Database, [UInt8])] = []
        try access.forEach(tables[.rows], prefix: []) { key, value in
            let ids = try value.withUnsafeBytes { raw in
                var reader = ByteReader(raw)
                return try reader.ids()
            }
            if !ids.contains(where: kept.contains) { unused.append((tables[.rows], key.copiedBytes)) }
            return true
        }
        try access.forEach(tables[.dependents], prefix: []) { key, _ in
            let pair = (WriteID(try StoreKey.readBigEndian(key)), WriteID(try StoreKey.readBigEndian(key, at: 8)))
            if !kept.contains(pair.0) && !kept.contains(pair.1) { unused.append((tables[.dependents], key.copiedBytes)) }
            return true
        }
        for (database, key) in unused { _ = try access.delete(database, key: key) }
    }

    /// Every projection's entries as they stand, the snapshot's state (the applied mark aside).
    private func projectionState(_ access: WriteAccess) throws -> ProjectionState {
        var state = ProjectionState(layout: projectionLayoutVersion, entries: [])
        for table in ProjectionTable.allCases {
            try access.forEach(tables[table], prefix: []) { key, value in
                if table == .meta, key.starts(with: MetaKey.applied), key.byteCount == MetaKey.applied.count { return true }
                state.entries.append(.init(table: table, key: key.copiedBytes, value: value.copiedBytes))
                return true
            }
        }
        return state
    }
}

extension CompactionReport {
    /// The report as JSON, for the tools.
    package var json: JSONValue {
        .object([
            "horizon": .int(Int64(bitPattern: horizon)), "snapshot": .optional(snapshot) { .int(Int64(bitPattern: $0)) },
            "segment": .optional(segment) { $0.json }, "archivedEvents": .int(archivedEvents),
            "archivedWrites": .int(archivedWrites), "keptEvents": .int(keptEvents), "bytesBefore": .int(bytesBefore),
            "bytesAfter": .int(bytesAfter), "fileShrunk": .bool(fileShrunk),
        ])
    }
}

extension EventLog {
    /// The first sequence from the last compaction's horizon on whose event was recorded at or after
    /// `time`; one past the last event when none was.
    package func firstSequence(recordedAtOrAfter time: Timestamp) throws -> UInt64 {
        let from = try read { try $0.compaction()?.horizon } ?? 1
        var found: UInt64?
        try forEachEvent(from: from) { event in
            if event.at >= time { found = event.sequence }
            return found == nil
        }
        return try found ?? (lastSequence() + 1)
    }
}
