/// A request is about to be sent: written before the send, so a crash between send and answer
/// resends the same keys.
public struct AttemptStarted: EventPayload {
    static let type = EventType.attemptStarted
    /// The pass that sends the request.
    public var passId: UInt64
    /// The writes of the request, in order, each with the idempotency key it is sent under.
    public var writes: [Sent]
    /// How many writes the batch this request belongs to holds: more than `writes` when the transport
    /// sends a batch as several requests, each answer recorded before the next request goes.
    public var batchCount: Int
    /// Whether this request goes on with the batch of the request before it in the pass, rather than
    /// starting a batch of its own.
    public var continuesBatch: Bool

    /// One write of the request, and the key it is sent under.
    public struct Sent: Hashable, Sendable {
        /// The write sent.
        public var id: WriteID
        /// The key it is sent under.
        public var idempotencyKey: IdempotencyKey
        package init(id: WriteID, idempotencyKey: IdempotencyKey) {
            self.id = id
            self.idempotencyKey = idempotencyKey
        }
    }

    /// A request of `writes`; by default a batch of its own, sent as this one request.
    package init(passId: UInt64, writes: [Sent], batchCount: Int? = nil, continuesBatch: Bool = false) {
        self.passId = passId
        self.writes = writes
        self.batchCount = max(batchCount ?? writes.count, writes.count)
        self.continuesBatch = continuesBatch
    }

    func encode(into writer: inout some ByteSink) {
        writer.varint(passId)
        writer.array(writes) { w, sent in
            w.varint(sent.id.rawValue)
            sent.idempotencyKey.encode(into: &w)
        }
        writer.varint(UInt64(batchCount))
        writer.bool(continuesBatch)
    }

    static func decode(from reader: inout ByteReader) throws -> AttemptStarted {
        let passId = try reader.varint()
        let writes = try reader.array { Sent(id: try $0.id(), idempotencyKey: try IdempotencyKey.decode(from: &$0)) }
        let count = try reader.varint()
        guard count <= UInt64(Int32.max) else { throw DecodeFailure("a batch of \(count) writes") }
        return AttemptStarted(passId: passId, writes: writes, batchCount: Int(count), continuesBatch: try reader.bool())
    }

    var writeIDs: [WriteID] { writes.map(\.id) }
    var jsonFields: [String: JSONValue] {
        var fields: [String: JSONValue] = [
            "passId": .int(Int64(bitPattern: passId)),
            "writes": .array(
                writes.map { .object(["writeId": .id($0.id), "idempotencyKey": .string($0.idempotencyKey.description)]) }),
        ]
        // A request that is its own batch reads as it always did.
        if batchCount != writes.count { fields["batchCount"] = .int(Int64(batchCount)) }
        if continuesBatch { fields["continuesBatch"] = .bool(true) }
        return fields
    }
}
