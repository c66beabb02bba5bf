/// The app withdrew a blocked write, with the row the instance held when it was read (null when
/// it held none). The writes that waited on it are refused unsent by `verdictRecorded` events after it.
public struct WriteWithdrawn: EventPayload {
    static let type = EventType.writeWithdrawn
    /// The write withdrawn.
    public var writeId: WriteID
    /// The row the instance held when it was withdrawn (null for none).
    public var row: JSONValue

    package init(writeId: WriteID, row: JSONValue) {
        self.writeId = writeId
        self.row = row
    }

    func encode(into writer: inout some ByteSink) {
        writer.varint(writeId.rawValue)
        row.encode(into: &writer)
    }

    static func decode(from reader: inout ByteReader) throws -> WriteWithdrawn {
        WriteWithdrawn(writeId: try reader.id(), row: try JSONValue.decode(from: &reader))
    }

    var writeIDs: [WriteID] { [writeId] }
    var jsonFields: [String: JSONValue] { ["writeId": .id(writeId), "row": row] }
}
