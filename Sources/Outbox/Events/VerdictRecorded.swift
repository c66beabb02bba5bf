/// The library's decision on one write: its new state in the verdict table (R3.1), its refusal count,
/// and whether the answer was a replay (R3.2). `passId` is nil for decisions made outside a pass
/// (dependents refused unsent after a withdraw or a discard, R4.2, R6.2).
public struct VerdictRecorded: EventPayload {
    static let type = EventType.verdictRecorded
    public var writeId: WriteID
    public var passId: UInt64?
    public var state: WriteState
    public var refusals: Int
    public var replayed: Bool

    public init(writeId: WriteID, passId: UInt64?, state: WriteState, refusals: Int, replayed: Bool = false) {
        self.writeId = writeId
        self.passId = passId
        self.state = state
        self.refusals = refusals
        self.replayed = replayed
    }

    func encode(into writer: inout ByteWriter) {
        writer.varint(writeId.rawValue)
        writer.optional(passId) { $0.varint($1) }
        state.encode(into: &writer)
        writer.varint(refusals)
        writer.bool(replayed)
    }

    static func decode(from reader: inout ByteReader) throws -> VerdictRecorded {
        VerdictRecorded(
            writeId: try reader.id(), passId: try reader.optional { try $0.varint() },
            state: try WriteState.decode(from: &reader),
            refusals: try reader.int(), replayed: try reader.bool())
    }

    var writeIDs: [WriteID] { [writeId] }
    var jsonFields: [String: JSONValue] {
        var fields = state.jsonFields(withMessage: true)
        fields["writeId"] = .id(writeId)
        fields["passId"] = .optional(passId) { .int(Int64(bitPattern: $0)) }
        fields["refusals"] = .int(refusals)
        fields["replayed"] = .bool(replayed)
        return fields
    }
}
