/// Appends events inside one write transaction: each gets the next sequence number and the
/// transaction's time, is stored with `MDB_APPEND`, and is folded into the projections at once, so the
/// next read in the same transaction sees it.
package struct Appender {
    /// The time every event of this transaction records.
    let time: Timestamp
    /// Reads the projections and log as this transaction sees them.
    let reader: StoreReader
    /// LMDB's id of this transaction: one more than the last commit's when it began.
    let transactionID: UInt64
    private(set) var nextSequence: UInt64
    package private(set) var appended: [RecordedEvent] = []
    private var projector: Projector<TransactionStore>
    private let putRecord: (RecordedEvent) throws -> Void

    init(
        time: Timestamp, nextSequence: UInt64, store: TransactionStore, reader: StoreReader, transactionID: UInt64,
        putRecord: @escaping (RecordedEvent) throws -> Void
    ) {
        self.time = time
        self.transactionID = transactionID
        self.nextSequence = nextSequence
        self.projector = Projector(store: store)
        self.reader = reader
        self.putRecord = putRecord
    }

    /// Appends `event` and folds it into the projections; returns its sequence number.
    @discardableResult
    package mutating func append(_ event: consuming Event) throws -> UInt64 { try append(consume event, slot: nil) }

    /// Makes room for `count` more events in the transaction's list (a bulk enqueue's writes).
    mutating func reserveCapacity(_ count: Int) { appended.reserveCapacity(appended.count + count) }

    /// Appends `event`; `folded` when the projections took it in already.
    private mutating func append(_ event: consuming Event, slot: RowSlot?, folded: Bool = false) throws -> UInt64 {
        let sequence = nextSequence
        let recorded = RecordedEvent(sequence: sequence, at: time, event: consume event)
        try putRecord(recorded)
        if !folded { try projector.apply(recorded, slot: slot) }
        // Its last use: the event moves into the list, not copied (a write's strings retained again).
        appended.append(recorded)
        nextSequence += 1
        return sequence
    }

    /// Records the last applied sequence; called once when the transaction's work is done.
    mutating func finish() throws {
        if !appended.isEmpty { try projector.markApplied(nextSequence - 1) }
        try projector.store.flush()
    }

    /// The slot of the row a new write goes to (R2.2), as this transaction sees it now: its writes
    /// not settled are what the write follows. Good for the next `append(queued:slot:)` only.
    func rowSlot(user: String, table: String, key: CanonicalJSON) throws -> PreparedRowSlot {
        PreparedRowSlot(slot: try projector.rowSlot(user: user, table: table, key: key), before: nextSequence)
    }

    /// Appends `queued`, whose row slot `prepared` was read just before, with nothing appended since.
    @discardableResult
    mutating func append(queued: consuming WriteQueued, slot prepared: PreparedRowSlot) throws -> UInt64 {
        precondition(prepared.before == nextSequence, "a row slot read before another event was appended")
        // Folded before it goes into its event: the fold reads the write where it lies, not a copy.
        let folded = try projector.queueIfNew(queued, at: nextSequence, slot: prepared.slot)
        return try append(.writeQueued(consume queued), slot: prepared.slot, folded: folded)
    }
}

/// A row slot read for the write an appender appends next.
struct PreparedRowSlot {
    let slot: RowSlot
    /// The sequence the next event had when the slot was read.
    let before: UInt64
    /// The writes the new write follows (R2.2).
    var unsettled: [WriteID] { slot.unsettled }
}
