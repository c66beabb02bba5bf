/// The app cancelled a pending write that had never been sent (its undo): it leaves the queue.
public struct WriteCancelled: EventPayload {
    static let type = EventType.writeCancelled
    /// The write cancelled.
    public var writeId: WriteID

    package init(writeId: WriteID) { self.writeId = writeId }

    func encode(into writer: inout some ByteSink) { writer.varint(writeId.rawValue) }

    static func decode(from reader: inout ByteReader) throws -> WriteCancelled {
        WriteCancelled(writeId: try reader.id())
    }

    var writeIDs: [WriteID] { [writeId] }
    var jsonFields: [String: JSONValue] { ["writeId": .id(writeId)] }
}
