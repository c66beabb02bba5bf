/// The app cleared a user's local data: every write of that user the queue held left it.
public struct LocalDataCleared: EventPayload {
    static let type = EventType.localDataCleared
    /// The user whose data was cleared.
    public var user: String
    /// The writes that left the queue with it.
    public var writes: [WriteID]

    package init(user: String, writes: [WriteID]) {
        self.user = user
        self.writes = writes
    }

    func encode(into writer: inout some ByteSink) {
        writer.string(user)
        writer.ids(writes)
    }

    static func decode(from reader: inout ByteReader) throws -> LocalDataCleared {
        LocalDataCleared(user: try reader.string(), writes: try reader.ids())
    }

    var writeIDs: [WriteID] { writes }
    var jsonFields: [String: JSONValue] { ["user": .string(user), "writes": .ids(writes)] }
}
