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

    /// Appends `event` and folds it into the projections.
    @discardableResult
    package mutating func append(_ event: Event) throws -> RecordedEvent {
        let recorded = RecordedEvent(sequence: nextSequence, at: time, event: event)
        try putRecord(recorded)
        try projector.apply(recorded)
        appended.append(recorded)
        nextSequence += 1
        return recorded
    }

    /// Records the last applied sequence; called once when the transaction's work is done.
    mutating func finish() throws {
        if !appended.isEmpty { try projector.markApplied(nextSequence - 1) }
        try projector.store.flush()
    }

    /// Unsettled writes to the row (R2.2), as this transaction sees them.
    func unsettledWrites(user: String, table: String, key: CanonicalJSON) throws -> [WriteID] {
        try projector.unsettledWrites(user: user, table: table, key: key)
    }
}
