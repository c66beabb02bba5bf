/// Which writes the next request of a pass carries (R4.1, R4.2, R4.5): read-only, over one snapshot.
struct Planner {
    let user: String
    let table: String?
    let batchSize: Int
    /// Writes answered earlier in this pass: a refused write is resent on later passes, not this one.
    let done: Set<WriteID>
    /// The user's rejected list as the pass first read it (nil: read it now). Nothing but the pass's
    /// own answers puts a sendable write on that list during a pass, and those are `done`, so a pass
    /// reads it once, not once a batch.
    var rejected: [WriteID]? = nil
    /// Writes of a request in flight, ascending, for a plan of what comes after it: not sent again, and
    /// as settled for what depends on them (as they will be when applied).
    var inFlight: [WriteID] = []

    struct Batch: Sendable {
        var writes: [WriteID] = []
        var isAtomic = false
        /// What its writes follow (R2.2): the pass flushes before sending one after an answer it
        /// follows (`Pass.noteFollowers`).
        var follows: Set<WriteID> = []
    }

    /// The next batch: consecutive sendable writes in id order, each after what it depends on (in the
    /// batch or settled); an atomic group alone. Nil when nothing can be sent now.
    func nextBatch(_ reader: StoreReader) throws -> Batch? {
        var batch = Batch()
        // Groups found not ready: their other members are not judged again (a group of n would cost n²).
        var unready = Set<WriteID>()
        let horizon = try heldBehindHorizon(reader)
        // The closure captures the fields it reads, not the planner (which each write would copy).
        let (done, inFlight, batchSize) = (done, inFlight, batchSize)
        try forEachCandidate(reader) { id, entry in
            if let horizon, id > horizon { return false }
            if let group = entry.atomicGroup, unready.contains(group.first) { return true }
            guard try Self.isReady(entry, besides: batch.writes, inFlight: inFlight, reader) else { return true }
            if let group = entry.atomicGroup {
                if !batch.writes.isEmpty { return false }
                if let (members, follows) = try Self.readyGroup(group, done: done, inFlight: inFlight, reader) {
                    batch = Batch(writes: members, isAtomic: members.count > 1, follows: follows)
                    return false
                }
                unready.insert(group.first)
                return true
            }
            batch.writes.append(id)
            batch.follows.formUnion(entry.dependencies)
            return batch.writes.count < batchSize
        }
        return batch.writes.isEmpty ? nil : batch
    }

    /// Of the writes of a split half (R4.5), those that may still go, in order: sendable, not answered
    /// in this pass, and each after what it depends on (settled, or kept earlier in the half). The
    /// other half may have been refused meanwhile.
    func stillReady(_ ids: [WriteID], _ reader: StoreReader) throws -> [WriteID] {
        var kept: [WriteID] = []
        for id in ids where !done.contains(id) {
            guard let entry = try reader.entry(id), entry.state.isSendable,
                try Self.isReady(entry, besides: kept, inFlight: inFlight, reader)
            else {
                continue
            }
            kept.append(id)
        }
        return kept
    }

    /// Writes of the pass's scope still waiting on a dependency, and (with a table) the writes held
    /// behind an earlier pending write of another table: the report's `heldCount` and
    /// `heldBehindOtherTablesCount`.
    func heldCounts(_ reader: StoreReader) throws -> (held: Int, behindOtherTables: Int) {
        var held = 0
        var behind = 0
        let horizon = try heldBehindHorizon(reader)
        let groups = GroupWaiting()
        try forEachCandidate(reader, skippingDone: false) { id, entry in
            if let horizon, id > horizon {
                behind += 1
            } else if entry.state == .pending, try reader.isWaiting(entry, groups: groups) {
                held += 1
            }
            return true
        }
        return (held, behind)
    }

    /// With a table: the id after which this table's writes are held, because an earlier write of the
    /// user in another table is still pending (R4.1). Nil when nothing holds them.
    private func heldBehindHorizon(_ reader: StoreReader) throws -> WriteID? {
        guard let table else { return nil }
        var horizon: WriteID?
        try forEachPending(reader, besides: []) { id, entry in
            guard entry.state == .pending, entry.table != table else { return true }
            horizon = id
            return false
        }
        return horizon
    }

    /// Every write of the user (and table) a pass may send, in id order: the pending writes merged
    /// with the refused writes of the rejected list.
    private func forEachCandidate(
        _ reader: StoreReader, skippingDone: Bool = true, _ body: (WriteID, WriteEntry) throws -> Bool
    ) throws {
        // Writes answered or in flight are passed over before their entries are read. The closures
        // capture the fields they read, not the planner (which each call would copy, sets and all).
        let (done, inFlight, table) = (done, inFlight, table)
        let skipped =
            skippingDone ? { (id: WriteID) in (!done.isEmpty && done.contains(id)) || inFlight.ascendingContains(id) } : nil
        try forEachPending(reader, besides: try rejected ?? rejectedList(reader), skipping: skipped) { id, entry in
            guard entry.state.isSendable else { return true }
            if let table, entry.table != table { return true }
            return try body(id, entry)
        }
    }

    /// The user's pending writes in id order, merged with the writes of `listed` (ids in order, each
    /// the user's): those behind the mark (the `behind` table), then the user's entries from the mark
    /// on (`Counters.sendFrom`), whose other users' writes and settled writes it steps over. Until
    /// `body` returns false. Ids `skipping` names are passed over without reading their entries.
    private func forEachPending(
        _ reader: StoreReader, besides listed: [WriteID], skipping: ((WriteID) -> Bool)? = nil,
        _ body: (WriteID, WriteEntry) throws -> Bool
    ) throws {
        let others = merged(try reader.listed(.behind, user: user), listed)
        var next = others.startIndex
        func visitListed() throws -> Bool {
            let id = others[next]
            next += 1
            if skipping?(id) == true { return true }
            guard let entry = try reader.entry(id) else { return true }
            // A damaged list key could name another user's write: it must never go with this token (P7).
            guard entry.user == user else {
                throw DecodeFailure("the queue of \(user) names write \(id), which belongs to another user")
            }
            return try body(id, entry)
        }
        let end = try reader.nextWriteID()
        var id = max(try reader.counters(user: user).sendFrom, 1)
        while id < end {
            while next < others.endIndex, others[next].rawValue <= id {
                let listed = others[next].rawValue == id
                if try !visitListed() { return }
                if listed { id += 1 }
            }
            guard id < end else { break }
            if skipping?(WriteID(id)) != true, let entry = try reader.entry(WriteID(id)), entry.user == user,
                entry.state == .pending
            {
                if try !body(WriteID(id), entry) { return }
            }
            id += 1
        }
        while next < others.endIndex {
            if try !visitListed() { return }
        }
    }

    /// Two id lists in order, merged in order, each id once.
    private func merged(_ a: [WriteID], _ b: [WriteID]) -> [WriteID] {
        guard !a.isEmpty else { return b }
        guard !b.isEmpty else { return a }
        var result: [WriteID] = []
        result.reserveCapacity(a.count + b.count)
        var i = a.startIndex
        var j = b.startIndex
        while i < a.endIndex || j < b.endIndex {
            if j == b.endIndex || (i < a.endIndex && a[i] < b[j]) {
                result.append(a[i])
                i += 1
            } else {
                if i < a.endIndex, a[i] == b[j] { i += 1 }
                result.append(b[j])
                j += 1
            }
        }
        return result
    }

    /// The user's rejected list, in id order.
    func rejectedList(_ reader: StoreReader) throws -> [WriteID] { try reader.listed(.rejected, user: user) }

    /// Every dependency is settled, in `inFlight`, or in `batch` (sent before it in the same request,
    /// R4.5), whose ids ascend: each batch the planner builds is in id order, so it is searched, not hashed.
    private static func isReady(
        _ entry: WriteEntry, besides batch: [WriteID], inFlight: [WriteID], _ reader: StoreReader
    ) throws -> Bool {
        try entry.dependencies.allSatisfy { id in
            try batch.ascendingContains(id) || inFlight.ascendingContains(id) || reader.isSettled(id)
        }
    }

    /// The sendable writes of an atomic group (not `done` nor `inFlight`), and what they follow, if each
    /// waits only on settled writes or on one another.
    private static func readyGroup(
        _ group: WriteQueued.AtomicGroup, done: Set<WriteID>, inFlight: [WriteID], _ reader: StoreReader
    ) throws -> ([WriteID], Set<WriteID>)? {
        var members: [WriteID] = []
        for offset in 0..<UInt64(group.count) {
            let id = WriteID(group.first.rawValue + offset)
            guard !done.contains(id), !inFlight.ascendingContains(id), let entry = try reader.entry(id), entry.state.isSendable
            else {
                continue
            }
            members.append(id)
        }
        var follows = Set<WriteID>()
        for id in members {
            guard let entry = try reader.entry(id), try isReady(entry, besides: members, inFlight: inFlight, reader) else {
                return nil
            }
            follows.formUnion(entry.dependencies)
        }
        return (members, follows)
    }
}
