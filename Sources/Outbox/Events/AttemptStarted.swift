/// A request is about to be sent: written before the send, so a crash between send and answer
/// resends the same keys.
public struct AttemptStarted: EventPayload {
    static let type = EventType.attemptStarted
    /// The pass that sends the request.
    public var passId: UInt64
    /// The writes of the request, in order, each with the idempotency key it is sent under.
    public var writes: [Sent]

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

    package init(passId: UInt64, writes: [Sent]) {
        self.passId = passId
        self.writes = writes
    }

    func encode(into writer: inout some ByteSink) {
        writer.varint(passId)
        writer.array(writes) { w, sent in
            w.varint(sent.id.rawValue)
            sent.idempotencyKey.encode(into: &w)
        }
    }

    static func decode(from reader: inout ByteReader) throws -> AttemptStarted {
        AttemptStarted(
            passId: try reader.varint(),
            writes: try reader.array { Sent(id: try $0.id(), idempotencyKey: try IdempotencyKey.decode(from: &$0)) })
    }

    var writeIDs: [WriteID] { writes.map(\.id) }
    var jsonFields: [String: JSONValue] {
        [
            "passId": .int(Int64(bitPattern: passId)),
            "writes": .array(
                writes.map { .object(["writeId": .id($0.id), "idempotencyKey": .string($0.idempotencyKey.description)]) }),
        ]
    }
}
