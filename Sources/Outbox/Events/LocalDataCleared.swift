/// The app cleared a user's local data (R7.3): every write of that user the queue held left it.
public struct LocalDataCleared: EventPayload {
    static let type = EventType.localDataCleared
    public var user: String
    public var writes: [WriteID]

    public init(user: String, writes: [WriteID]) {
        self.user = user
        self.writes = writes
    }

    func encode(into writer: inout ByteWriter) {
        writer.string(user)
        writer.ids(writes)
    }

    static func decode(from reader: inout ByteReader) throws -> LocalDataCleared {
        LocalDataCleared(user: try reader.string(), writes: try reader.ids())
    }

    var writeIDs: [WriteID] { writes }
    var jsonFields: [String: JSONValue] { ["user": .string(user), "writes": .ids(writes)] }
}
