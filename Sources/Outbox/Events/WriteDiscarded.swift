/// The app discarded a refused or dead write and the body it carried.
public struct WriteDiscarded: EventPayload {
    static let type = EventType.writeDiscarded
    /// The write discarded.
    public var writeId: WriteID
    /// Whether the writes waiting on it were refused unsent (`discard(_:withDependents: true)`).
    public var withDependents: Bool

    package init(writeId: WriteID, withDependents: Bool) {
        self.writeId = writeId
        self.withDependents = withDependents
    }

    func encode(into writer: inout some ByteSink) {
        writer.varint(writeId.rawValue)
        writer.bool(withDependents)
    }

    static func decode(from reader: inout ByteReader) throws -> WriteDiscarded {
        WriteDiscarded(writeId: try reader.id(), withDependents: try reader.bool())
    }

    var writeIDs: [WriteID] { [writeId] }
    var jsonFields: [String: JSONValue] { ["writeId": .id(writeId), "withDependents": .bool(withDependents)] }
}
