/// A schema-cache failure was counted against a write: `count` so far, at the event's time.
public struct SchemaRefusalCounted: EventPayload {
    static let type = EventType.schemaRefusalCounted
    /// The write refused.
    public var writeId: WriteID
    /// The pass it was refused in.
    public var passId: UInt64
    /// How many such refusals it has met so far.
    public var count: Int

    package init(writeId: WriteID, passId: UInt64, count: Int) {
        self.writeId = writeId
        self.passId = passId
        self.count = count
    }

    func encode(into writer: inout some ByteSink) {
        writer.varint(writeId.rawValue)
        writer.varint(passId)
        writer.varint(count)
    }

    static func decode(from reader: inout ByteReader) throws -> SchemaRefusalCounted {
        SchemaRefusalCounted(writeId: try reader.id(), passId: try reader.varint(), count: try reader.int())
    }

    var writeIDs: [WriteID] { [writeId] }
    var jsonFields: [String: JSONValue] {
        ["writeId": .id(writeId), "passId": .int(Int64(bitPattern: passId)), "count": .int(count)]
    }
}
