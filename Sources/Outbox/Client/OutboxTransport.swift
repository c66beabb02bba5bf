/// How the outbox reaches the instance. `SimulatedInstance` is one; an HTTP transport is another.
///
/// The boundary is three calls: whether a write can be made into a request at all, the send of one
/// batch, and the row read of `withdraw`. A transport maps outcomes; the library decides what
/// they mean, so every transport is judged by the same rules.
public protocol OutboxTransport: Sendable {
    /// Sends one request of a batch's writes, in order, with the session's token, and returns what came
    /// back as received: one answer per write, one request-level failure, or a response that broke the
    /// wire contract. The library hands it at most `requestSize(for:)` writes, and records the answer
    /// before it sends the next request. A transport reports failures in the result; it does not throw.
    /// Each failure says what it means for its writes (`RequestFailure.Meaning`): the transport reads
    /// its server's codes, and the library decides from the meaning alone. It is called on the log
    /// writer's queue, between its transactions: it must await, never block its thread (a blocked
    /// send holds up every enqueue until it returns).
    func send(_ batch: OutgoingBatch, accessToken: String?) async -> RequestAnswer

    /// How many of the batch's leading writes one request carries (at least one): the whole batch for a
    /// transport whose requests carry a batch (the default), fewer for one that sends a batch as several
    /// requests (PostgREST: a run of inserts into one table, or one write). The library sends each
    /// request on its own and records its answer before the next one goes, so after a crash at most
    /// one request is in doubt. Asked between the pass's transactions, never while the log is locked,
    /// and perhaps one request ahead: it must be a quick, pure function of the writes.
    func requestSize(for batch: OutgoingBatch) -> Int

    /// Why this write can no longer be made into a request exactly as it was made (no mapping for its
    /// table or operation, a body over the size limit), or nil when it can (the write is then refused "unmade", for good).
    /// Asked as `requestSize(for:)` is: between transactions, a pure function of the write.
    func unmadeReason(for write: OutgoingWrite) -> String?

    /// Why this atomic group cannot be made into one request that is applied all or none, or
    /// nil when it can. Every write of such a group is refused unmade.
    func unmadeReason(forGroup group: OutgoingBatch) -> String?

    /// The row the instance holds for (`table`, `key`), or `nil` when it holds none (a successful read).
    /// Throws when the read fails; the caller then changes nothing.
    func readRow(table: String, key: JSONValue, accessToken: String?) async throws -> JSONValue?

    /// The key columns of `table`, when the transport knows them (PostgREST's `tables:`), or nil. A
    /// write made from a model without a key (`.insert(into: "todos", encoding: todo)`) takes its key
    /// from these members of the model at enqueue.
    func keyColumns(of table: String) -> [String]?

    /// Whether the instance forgets what it keeps for exactly-once at or below the acknowledged
    /// watermark each batch carries (`OutgoingBatch.acknowledgedWatermark`): the contract's reference
    /// instance does. False (the default): the library does not work the watermark out.
    var prunesByWatermark: Bool { get }
}

extension OutboxTransport {
    public func keyColumns(of table: String) -> [String]? { nil }
    public var prunesByWatermark: Bool { false }
    public func requestSize(for batch: OutgoingBatch) -> Int { batch.writes.count }
    public func unmadeReason(for write: OutgoingWrite) -> String? { nil }
    public func unmadeReason(forGroup group: OutgoingBatch) -> String? { nil }
}

/// One write as the instance receives it: the write the app made (`table`, `operation`, `key`, `body`,
/// `keyJSON`, `baseVersion`, … read through it), and what the queue knows of it.
@dynamicMemberLookup
public struct OutgoingWrite: Hashable, Sendable {
    /// The write's id, unique in its log.
    public var id: WriteID {
        get { box.fields.id }
        set { update { $0.id = newValue } }
    }
    /// The log's origin: with `id`, it names the write however often its key is renewed.
    public var origin: Origin {
        get { box.fields.origin }
        set { update { $0.origin = newValue } }
    }
    /// The key the instance deduplicates it by; the same on every resend.
    public var idempotencyKey: IdempotencyKey {
        get { box.fields.idempotencyKey }
        set { update { $0.idempotencyKey = newValue } }
    }
    /// The write as queued; its `dependsOn` is every write it must follow (`dependsOn` and same-row
    /// writes), whether or not in this batch.
    public var write: Write {
        get { box.fields.write }
        set { update { $0.write = newValue } }
    }
    /// The user who made it (the request carries that user's token).
    public var user: String {
        get { box.fields.user }
        set { update { $0.user = newValue } }
    }
    /// When it was queued.
    public var createdAt: Timestamp {
        get { box.fields.createdAt }
        set { update { $0.createdAt = newValue } }
    }
    /// Whether an earlier attempt sent it: its outcome may be unknown, so the instance may have
    /// applied it already (a delete that now finds no row is then accepted, replayed). Told for
    /// deletes; false for the other operations.
    public var isResend: Bool {
        get { box.fields.isResend }
        set { update { $0.isResend = newValue } }
    }

    /// One of the write's fields.
    public subscript<Value>(dynamicMember field: WritableKeyPath<Write, Value>) -> Value {
        get { box.fields.write[keyPath: field] }
        set { update { $0.write[keyPath: field] = newValue } }
    }

    /// One of the write's read-only fields (`keyJSON`, `bodyIsObject`, …).
    public subscript<Value>(dynamicMember field: KeyPath<Write, Value>) -> Value { box.fields.write[keyPath: field] }

    /// A write as a transport receives it (tests of custom transports make their own).
    public init(
        id: WriteID, origin: Origin, idempotencyKey: IdempotencyKey, table: String, operation: WriteOperation, key: JSONValue,
        body: JSONValue, baseVersion: Int64? = nil, dependsOn: [WriteID] = [], user: String = "",
        createdAt: Timestamp = Timestamp(milliseconds: 0)
    ) {
        self.init(
            id: id, origin: origin, idempotencyKey: idempotencyKey,
            write: Write(
                table: table, operation: operation, key: key, body: body, baseVersion: baseVersion, dependsOn: dependsOn),
            user: user, createdAt: createdAt)
    }

    /// `write`, sent under `idempotencyKey`.
    public init(
        id: WriteID, origin: Origin, idempotencyKey: IdempotencyKey, write: Write, user: String = "",
        createdAt: Timestamp = Timestamp(milliseconds: 0)
    ) {
        box = FrozenFields(
            Fields(
                id: id, origin: origin, idempotencyKey: idempotencyKey, write: write, user: user, createdAt: createdAt,
                isResend: false))
    }

    /// Whether the two are the same write with the same fields.
    public static func == (a: OutgoingWrite, b: OutgoingWrite) -> Bool { FrozenFields.equal(a.box, b.box) }

    /// Hashes the fields.
    public func hash(into hasher: inout Hasher) { hasher.combine(box.fields) }

    // The fields are boxed: a write is copied from the plan into its request and on to the transport
    // several times a send, and a copy of the box is one retain, where a copy of the fields retains
    // each string, array and canonical text. A box never changes: a change makes a new one.
    private struct Fields: Hashable, Sendable {
        var id: WriteID
        var origin: Origin
        var idempotencyKey: IdempotencyKey
        var write: Write
        var user: String
        var createdAt: Timestamp
        var isResend: Bool
    }

    private var box: FrozenFields<Fields>

    private mutating func update(_ change: (inout Fields) -> Void) { box = box.changed(change) }
}

/// The writes of one request, in id order.
public struct OutgoingBatch: Hashable, Sendable {
    /// The writes, in the order they must be applied.
    public var writes: [OutgoingWrite]
    /// One atomic group: the instance applies all of it or none.
    public var isAtomic: Bool
    /// The log's acknowledged watermark, for a transport that `prunesByWatermark`: every write of the
    /// log at or below it has its final answer durably in the log (answered, refused for good, or taken
    /// out), so none of them is ever sent again and the instance may forget their keys and answers.
    /// Nil when the library gives none (another transport, or a log kept with `.noSync` durability).
    public var acknowledgedWatermark: WriteID?

    /// A batch of `writes`; `isAtomic` when they must be applied all or none.
    public init(writes: [OutgoingWrite], isAtomic: Bool = false, acknowledgedWatermark: WriteID? = nil) {
        self.writes = writes
        self.isAtomic = isAtomic
        self.acknowledgedWatermark = acknowledgedWatermark
    }
}

extension OutboxTransport {
    /// The row under `key` as the instance holds it now, the key given as the write builders take one
    /// (`["id": todo.id]`); nil when it holds none.
    public func readRow(table: String, key: JSONObject, accessToken: String?) async throws -> JSONValue? {
        try await readRow(table: table, key: JSONValue(object: key), accessToken: accessToken)
    }
}
