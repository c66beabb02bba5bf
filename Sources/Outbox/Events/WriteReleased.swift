/// The app released a blocked, refused or dead write: pending again under a fresh key, its
/// refusal count kept.
public struct WriteReleased: EventPayload {
    static let type = EventType.writeReleased
    /// The write released.
    public var writeId: WriteID
    /// The new key it is sent under from now on.
    public var idempotencyKey: IdempotencyKey
    /// The reason named in `release(reason:)`, if that was the call.
    public var reason: BlockedReason?

    package init(writeId: WriteID, idempotencyKey: IdempotencyKey, reason: BlockedReason?) {
        self.writeId = writeId
        self.idempotencyKey = idempotencyKey
        self.reason = reason
    }

    func encode(into writer: inout some ByteSink) {
        writer.varint(writeId.rawValue)
        idempotencyKey.encode(into: &writer)
        writer.optional(reason) { $0.byte($1.code) }
    }

    static func decode(from reader: inout ByteReader) throws -> WriteReleased {
        WriteReleased(
            writeId: try reader.id(), idempotencyKey: try IdempotencyKey.decode(from: &reader),
            reason: try reader.optional { try BlockedReason.decode(from: &$0) })
    }

    var writeIDs: [WriteID] { [writeId] }
    var jsonFields: [String: JSONValue] {
        [
            "writeId": .id(writeId), "idempotencyKey": .string(idempotencyKey.description),
            "reason": .optional(reason) { .string($0.rawValue) },
        ]
    }
}
