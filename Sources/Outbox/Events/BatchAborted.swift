/// The instance refused a write of an atomic group, so nothing of the group was applied.
public struct BatchAborted: EventPayload {
    static let type = EventType.batchAborted
    /// The pass whose request was aborted.
    public var passId: UInt64
    /// The writes of the atomic group, none of them applied.
    public var writes: [WriteID]

    package init(passId: UInt64, writes: [WriteID]) {
        self.passId = passId
        self.writes = writes
    }

    func encode(into writer: inout some ByteSink) {
        writer.varint(passId)
        writer.ids(writes)
    }

    static func decode(from reader: inout ByteReader) throws -> BatchAborted {
        BatchAborted(passId: try reader.varint(), writes: try reader.ids())
    }

    var writeIDs: [WriteID] { writes }
    var jsonFields: [String: JSONValue] { ["passId": .int(Int64(bitPattern: passId)), "writes": .ids(writes)] }
}
