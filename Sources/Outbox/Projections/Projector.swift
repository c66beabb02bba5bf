/// The projections' fold: `(inout projections, event)`, pure, the same whether it runs as events are
/// appended (in their transaction) or over the whole log in `rebuild` and `verify` (R8.2).
///
/// Events carry their outcomes (a `verdictRecorded` says the new state; a withdraw's dependents get
/// their own `verdictRecorded`), so the fold decides nothing and needs only point reads. It is total:
/// an event naming a write the queue does not hold changes nothing but the history index.
///
/// Every event naming a write is in the write's history exactly once (R8.3): noted among its entry's
/// recent events while the queue holds it (`RecentEvents`), else under a history index key of its own.
/// An entry's recent events go to the index under one key when the write leaves the queue, with its
/// `writeQueued`, or earlier when they do not fit. The attempt awaiting its answer is kept aside
/// (`UnansweredAttempt`) and noted with its answer, so that its commit writes no entry.
struct Projector<Store: ProjectionStore> {
    var store: Store

    /// The next write id the queue gives, once read: only `queue` changes it.
    private var nextID: UInt64?

    init(store: Store) { self.store = store }

    /// Folds `recorded`; a `writeQueued` whose row slot the caller has just read (`rowSlot`) passes it,
    /// so the fold does not read it again, or its row's key (`RowKey.storeKey`), made beforehand.
    mutating func apply(_ recorded: RecordedEvent, slot: RowSlot? = nil, rowKey: StoreKey? = nil) throws {
        if case .writeQueued(let queued) = recorded.event, try isNew(queued.id) {
            let slot =
                try slot
                ?? rowSlot(
                    rowKey ?? RowKey.storeKey(user: queued.user, table: queued.table, key: queued.canonicalKey),
                    user: queued.user, table: queued.table)
            return try queue(queued, at: recorded.sequence, slot: slot)
        }
        try fold(recorded)
    }

    /// Folds the `writeQueued` at `sequence` of a new write, whose row slot the caller has just read;
    /// false, folding nothing, when its id is not new (its event is then folded as any other).
    mutating func queueIfNew(_ queued: WriteQueued, at sequence: UInt64, slot: RowSlot) throws -> Bool {
        guard try isNew(queued.id) else { return false }
        try queue(queued, at: sequence, slot: slot)
        return true
    }

    /// Ends the attempt kept aside, if there is one, noting it in the history of each of its writes;
    /// with it, for the writes `answer` names, the answer at `sequence`, in one change of their entry.
    private mutating func endUnansweredAttempt(answer: [WriteID] = [], at sequence: UInt64 = 0) throws {
        let attempt = try store.value(.meta, MetaKey.unansweredAttempt).map { try UnansweredAttempt.decode($0) }
        if attempt != nil { try store.remove(.meta, MetaKey.unansweredAttempt) }
        let answered = UnansweredAttempt(sequence: sequence, writes: answer)
        if let attempt {
            for id in attempt.writes {
                try note(attempt.sequence, then: answered.names(id) ? sequence : nil, of: id)
            }
        }
        for id in answered.writes where attempt?.names(id) != true { try note(sequence, of: id) }
    }

    /// `ids` with each once, in their order (a batch's ids ascend: they are returned as they are).
    private static func onceEach(_ ids: [WriteID]) -> [WriteID] {
        if zip(ids, ids.dropFirst()).allSatisfy({ $0 < $1 }) { return ids }
        var seen = Set<WriteID>()
        return ids.filter { seen.insert($0).inserted }
    }

    /// Notes `sequence`, then `next` if given, in write `id`'s history.
    private mutating func note(_ sequence: UInt64, then next: UInt64? = nil, of id: WriteID) throws {
        guard var entry = try entry(id) else {
            try store.set(.history, StoreKey.pair(id.rawValue, sequence), [])
            if let next { try store.set(.history, StoreKey.pair(id.rawValue, next), []) }
            return
        }
        try note(sequence, of: id, in: &entry)
        if let next { try note(next, of: id, in: &entry) }
        try store.setEntry(entry, for: id)
    }

    /// Notes `sequence` among the recent events of write `id`'s entry: when it does not fit there, the
    /// events noted so far go to the index first, under the first one's key.
    private mutating func note(_ sequence: UInt64, of id: WriteID, in entry: inout WriteEntry) throws {
        if let noted = entry.recent.noting(sequence, after: entry.queuedSequence) {
            entry.recent = noted
            return
        }
        let sequences = entry.recent.sequences(after: entry.queuedSequence)
        if let first = sequences.first {
            var offsets = ByteWriter(capacity: RecentEvents.width)
            for later in sequences.dropFirst() { offsets.varint(later - first) }
            try store.set(.history, StoreKey.pair(id.rawValue, first), offsets.bytes)
        }
        guard let noted = RecentEvents.none.noting(sequence, after: entry.queuedSequence) else {
            entry.recent = .none
            return try store.set(.history, StoreKey.pair(id.rawValue, sequence), [])
        }
        entry.recent = noted
    }

    /// Folds what `recorded` changes in the verdict table, the lists and meta.
    private mutating func fold(_ recorded: RecordedEvent) throws {
        switch recorded.event {
        case .logCreated(let created):
            var w = ByteWriter(capacity: 16)
            created.origin.encode(into: &w)
            try store.set(.meta, MetaKey.origin, w.bytes)
            try store.set(.meta, MetaKey.layout, StoreKey.bytes(id: projectionLayoutVersion))
        case .writeQueued(let queued):
            try note(recorded.sequence, of: queued.id)  // A repeated id (R2.1): only its history notes it.
        case .sessionSettled(let session):
            var w = ByteWriter(capacity: 16)
            session.encode(into: &w)
            try store.set(.meta, MetaKey.session, w.bytes)
        case .passEnded(let ended):
            if let seconds = ended.stoppedBy?.retryAfter, seconds > 0 {
                try keepRetryAfter(until: recorded.at.adding(seconds: seconds))
            }
        case .networkSwitched, .passStarted:
            break
        case .attemptStarted(let attempt):
            try endUnansweredAttempt()
            let unanswered = UnansweredAttempt(sequence: recorded.sequence, writes: attempt.writeIDs)
            try store.set(.meta, MetaKey.unansweredAttempt, unanswered.encoded)
        case .answerReceived(let answer):
            try endUnansweredAttempt(answer: answer.writes, at: recorded.sequence)
        case .batchAborted(let aborted):
            for id in Self.onceEach(aborted.writes) { try note(recorded.sequence, of: id) }
        case .verdictRecorded(let verdict):
            try record(verdict, at: recorded.sequence)
        case .verdictsRecorded(let batch):
            // Read where they lie: a copy of a verdict retains its state's strings.
            try batch.verdicts.withUnsafeBufferPointer { verdicts in
                for index in verdicts.indices { try record(verdicts[index], at: recorded.sequence) }
            }
        case .schemaRefusalCounted(let counted):
            try update(counted.writeId, at: recorded.sequence) { entry in
                entry.schemaRefusals = counted.count
                entry.lastSchemaRefusalAt = recorded.at
            }
        case .writeFailed(let failed):
            try update(failed.writeId, at: recorded.sequence) { entry in
                entry.lastFailure = LastFailure(status: failed.status, text: failed.text)
                entry.environmentalStreak = failed.streak
            }
        case .writeReleased(let released):
            try update(released.writeId, at: recorded.sequence) { entry in
                entry.state = .pending
                entry.renewedKey = released.idempotencyKey
                entry.lastFailure = nil
                entry.environmentalStreak = 0
            }
        case .writeWithdrawn(let withdrawn):
            try remove(withdrawn.writeId, at: recorded.sequence)
        case .writeDiscarded(let discarded):
            try remove(discarded.writeId, at: recorded.sequence)
        case .writeCancelled(let cancelled):
            try remove(cancelled.writeId, at: recorded.sequence)
        case .answersTaken(let cleared), .answersForgotten(let cleared):
            for id in Self.onceEach(cleared.writes) { try remove(id, at: recorded.sequence) }
        case .localDataCleared(let cleared):
            for id in Self.onceEach(cleared.writes) { try remove(id, at: recorded.sequence) }
        case .logCompacted(let compacted):
            // The state it holds is loaded by whoever starts a fold at it (`EventLog.load`); folded
            // on from an earlier event, the projections already hold that state, but for the history
            // of the writes it archived.
            try store.set(.meta, MetaKey.compaction, Compaction(snapshot: recorded.sequence, compacted).encoded)
        }
    }

    /// Keeps the latest Retry-After deadline, so a new client honours what an earlier run was told (R5.3).
    private mutating func keepRetryAfter(until: Timestamp) throws {
        let stored = try store.value(.meta, MetaKey.retryAfterUntil).map {
            Timestamp(milliseconds: Int64(bitPattern: try MetaKey.readUInt64($0, name: MetaKey.retryAfterUntil)))
        }
        if stored.map({ until > $0 }) ?? true {
            try store.set(.meta, MetaKey.retryAfterUntil, StoreKey.bytes(id: UInt64(bitPattern: until.rawValue)))
        }
    }

    /// A write's new state (R3.1, R6.1).
    private mutating func record(_ verdict: VerdictRecorded, at sequence: UInt64) throws {
        // The closure takes the fields, not the verdict (which it would copy whole).
        let (state, refusals, replayed) = (verdict.state, verdict.refusals, verdict.replayed)
        try update(verdict.writeId, at: sequence) { entry in
            // A write blocked failingAlone keeps what it met and its streak (R4.4).
            let keepsFailure = state == .blocked(.failingAlone, refusal: nil)
            entry.state = state
            entry.refusals = refusals
            entry.replayed = replayed
            entry.schemaRefusals = 0
            entry.lastSchemaRefusalAt = nil
            if !keepsFailure {
                entry.lastFailure = nil
                entry.environmentalStreak = 0
            }
        }
    }

    /// Records the sequence the projections have applied (once per transaction, not per event).
    mutating func markApplied(_ sequence: UInt64) throws {
        try store.set(.meta, MetaKey.applied, StoreKey.bytes(id: sequence))
    }

    func entry(_ id: WriteID) throws -> WriteEntry? { try store.entry(id) }

    /// Ids are given once, in order (R2.1): a `writeQueued` below the next id repeats one and queues nothing.
    private mutating func isNew(_ id: WriteID) throws -> Bool { id.rawValue >= (try nextWriteID()) }

    private mutating func nextWriteID() throws -> UInt64 {
        if let nextID { return nextID }
        let read = try store.value(.meta, nextWriteIdStoreKey).map { try MetaKey.readUInt64($0, name: MetaKey.nextWriteId) } ?? 1
        nextID = read
        return read
    }

    private mutating func queue(_ queued: WriteQueued, at sequence: UInt64, slot: RowSlot) throws {
        let entry = WriteEntry(
            queuedSequence: sequence, user: queued.user, table: queued.table,
            dependencies: queued.dependencies, atomicGroup: queued.atomicGroup, renewedKey: nil,
            state: .pending, refusals: 0, replayed: false, schemaRefusals: 0, lastSchemaRefusalAt: nil, lastFailure: nil,
            environmentalStreak: 0)
        try store.setEntry(entry, for: queued.id)
        var counters = try store.counters(entry.user)
        // Nothing pending at or past the mark: the mark comes to this write, past every settled one
        // (or just past it, listing it behind, when it waits on a blocked write, say).
        if counters.pending == counters.behind { try advanceMark(entry.user, from: queued.id.rawValue, &counters) }
        counters.pending += 1
        try store.setCounters(counters, for: entry.user)
        // The row's slot drops the writes settled since the last write to it, and gains this one (R2.2).
        try setRow(slot.key, slot.unsettled, then: queued.id)
        for dependency in entry.dependencies {
            try store.set(.dependents, StoreKey.pair(dependency.rawValue, queued.id.rawValue), [])
        }
        nextID = queued.id.rawValue &+ 1
        try store.setNextWriteID(queued.id.rawValue &+ 1)
    }

    /// Changes write `id`'s entry as the event at `sequence` says, noting the event in its history.
    private mutating func update(_ id: WriteID, at sequence: UInt64, _ change: (inout WriteEntry.Fields) -> Void) throws {
        guard var entry = try entry(id) else { return try store.set(.history, StoreKey.pair(id.rawValue, sequence), []) }
        let before = entry.list
        entry.update(change)
        try note(sequence, of: id, in: &entry)
        let after = entry.list
        // The lists' key, made only for a list that has a table (a drained write's lists have none).
        let key = { StoreKey.user(entry.user, id.rawValue) }
        try store.setEntry(entry, for: id)
        if before != after {
            if let table = before.table { try store.remove(table, key()) }
            var counters = try store.counters(entry.user)
            try leave(before, id, user: entry.user, &counters)
            try enter(after, id, user: entry.user, &counters)
            try store.setCounters(counters, for: entry.user)
        }
        if let table = after.table, before != after || after == .blocked { try store.set(table, key(), listValue(entry.state)) }
    }

    /// Takes write `id` out of the queue by the event at `sequence`: its history goes to the index under
    /// its `writeQueued`'s key, whose value lists its recent events and this one as offsets from it.
    private mutating func remove(_ id: WriteID, at sequence: UInt64) throws {
        guard let entry = try entry(id) else { return try store.set(.history, StoreKey.pair(id.rawValue, sequence), []) }
        let queued = entry.queuedSequence
        var offsets = ByteWriter(capacity: RecentEvents.width + 4)
        var last = queued
        for noted in entry.recent.sequences(after: queued) {
            offsets.varint(noted - queued)
            last = noted
        }
        if sequence > last {
            offsets.varint(sequence - queued)
        } else {
            try store.set(.history, StoreKey.pair(id.rawValue, sequence), [])
        }
        try store.set(.history, StoreKey.pair(id.rawValue, queued), offsets.bytes)
        let list = entry.list
        if let table = list.table { try store.remove(table, StoreKey.user(entry.user, id.rawValue)) }
        try store.removeEntry(id)
        var counters = try store.counters(entry.user)
        try leave(list, id, user: entry.user, &counters)
        try store.setCounters(counters, for: entry.user)
    }

    /// A write of `user` enters `list` (its entry already says so): counted, and for the lists read
    /// from a mark, listed apart when it lies below the mark (R4.2, R6.1).
    private mutating func enter(_ list: WriteList, _ id: WriteID, user: String, _ counters: inout Counters) throws {
        switch list {
        case .pending:
            // Released below the mark, which does not move back over the settled writes since.
            if id.rawValue < counters.sendFrom {
                try store.set(.behind, StoreKey.user(user, id.rawValue), [])
                counters.behind += 1
            }
        case .answered:
            counters.answeredTo = max(counters.answeredTo, id.rawValue &+ 1)
            if id.rawValue < counters.answeredFrom {
                try store.set(.answered, StoreKey.user(user, id.rawValue), [])
                counters.answeredBehind += 1
            } else if counters.answered == counters.answeredBehind {
                // None answered at or past the mark: it comes to this write, past every one taken.
                counters.answeredFrom = id.rawValue
            }
        case .rejected, .blocked: break
        }
        counters[list] += 1
    }

    /// A write of `user` leaves `list` (its entry already says so): below a mark, it leaves the table
    /// that lists it apart; at a mark, the mark moves on (R4.2, R6.1).
    private mutating func leave(_ list: WriteList, _ id: WriteID, user: String, _ counters: inout Counters) throws {
        counters[list] = max(0, counters[list] - 1)
        switch list {
        case .pending:
            if id.rawValue < counters.sendFrom {
                try store.remove(.behind, StoreKey.user(user, id.rawValue))
                counters.behind = max(0, counters.behind - 1)
            } else if id.rawValue == counters.sendFrom {
                try advanceMark(user, from: id.rawValue &+ 1, &counters)
            }
        case .answered:
            if id.rawValue < counters.answeredFrom {
                try store.remove(.answered, StoreKey.user(user, id.rawValue))
                counters.answeredBehind = max(0, counters.answeredBehind - 1)
            } else if id.rawValue == counters.answeredFrom {
                // To the user's next answered write, or to the end of those answered so far. It passes
                // each id once: a write it passes that is answered later is listed apart.
                var next = id.rawValue &+ 1
                while next < counters.answeredTo {
                    if let entry = try entry(WriteID(next)), entry.user == user, entry.state.isAnswered { break }
                    next += 1
                }
                counters.answeredFrom = next
            }
        case .rejected, .blocked: break
        }
    }

    /// Moves the user's mark from `start` to their next pending write that waits on nothing unsettled,
    /// listing the waiting ones it passes in `behind`; past the last write queued when there is none.
    /// The mark only moves forward, so over a log's life it passes each id once.
    private mutating func advanceMark(_ user: String, from start: UInt64, _ counters: inout Counters) throws {
        // The end is read only past a missing entry: on a drain the next write is the user's, pending.
        var end: UInt64?
        var id = start
        while true {
            if let entry = try entry(WriteID(id)) {
                if entry.user == user, entry.state == .pending {
                    guard try WriteEntry.waits(entry, entryOf: { try self.entry($0) }) else { break }
                    try store.set(.behind, StoreKey.user(user, id), [])
                    counters.behind += 1
                }
            } else {
                if end == nil { end = try nextWriteID() }
                if id >= end! { break }
            }
            id += 1
        }
        counters.sendFrom = id
    }

    private func listValue(_ state: WriteState) -> [UInt8] {
        if case .blocked(let reason, _) = state { return [reason.code] }
        return []
    }

    private func rowIDs(_ row: StoreKey) throws -> [WriteID] {
        try store.withValue(.rows, row) { raw in
            guard let raw else { return [] }
            var r = ByteReader(raw)
            return try r.ids()
        }
    }

    /// Stores the row slot `row` as `ids` and then `last` (the encoding of `ids + [last]`), encoded on
    /// the stack.
    private mutating func setRow(_ row: StoreKey, _ ids: [WriteID], then last: WriteID) throws {
        try withUnsafeTemporaryAllocation(byteCount: (ids.count + 2) * 10, alignment: 8) { buffer in
            var w = ScratchWriter(buffer)
            w.ids(ids, then: last)
            try store.set(.rows, row, bytes: w.written!)
        }
    }

    /// Of `ids`, those not settled (R2.2): still in the queue and not answered. A settled write stays
    /// settled, so a row's slot keeps its settled writes until the next write to the row: settling a
    /// write (a drain of a million) then writes nothing to `rows`, whose pages it would touch at random.
    /// A slot keyed by a hash could hold another row's writes: only those of `user` and `table` count,
    /// so a collision, accidental or built, never links writes across users or tables.
    private func unsettled(_ ids: [WriteID], user: String, table: String) throws -> [WriteID] {
        try ids.filter { id in
            guard let entry = try entry(id) else { return false }
            return !WriteEntry.isSettled(entry) && entry.user == user && entry.table == table
        }
    }

    /// The slot of the row a new write to (`user`, `table`, `key`) goes to (R2.2).
    func rowSlot(user: String, table: String, key: CanonicalJSON) throws -> RowSlot {
        try rowSlot(RowKey.storeKey(user: user, table: table, key: key), user: user, table: table)
    }

    /// The slot of row `row`, the key of (`user`, `table`, a key) in `rows` (R2.2).
    private func rowSlot(_ row: StoreKey, user: String, table: String) throws -> RowSlot {
        RowSlot(key: row, unsettled: try unsettled(rowIDs(row), user: user, table: table))
    }
}

/// A row's slot in `rows` as a new write to the row finds it (R2.2): its key, and its writes not
/// settled, oldest first, which the new write follows.
struct RowSlot {
    let key: StoreKey
    let unsettled: [WriteID]
}

extension MetaKey {
    /// The eight big-endian bytes of meta value `name`; a value of another length is damage, never 0.
    static func readUInt64(_ bytes: [UInt8], name: [UInt8]) throws(DecodeFailure) -> UInt64 {
        guard bytes.count == 8 else {
            throw DecodeFailure("the meta value \(String(decoding: name, as: UTF8.self)) is \(bytes.count) bytes, not 8")
        }
        return bytes.withUnsafeBytes { StoreKey.readBigEndian($0) }
    }
}
