/// The library's decision on one write: its new state in the verdict table, its refusal count,
/// and whether the answer was a replay. `passId` is nil for decisions made outside a pass
/// (dependents refused unsent after a withdraw or a discard).
public struct VerdictRecorded: EventPayload {
    static let type = EventType.verdictRecorded
    /// The write.
    public var writeId: WriteID
    /// The pass whose answer decided it; nil for the app's own actions.
    public var passId: UInt64?
    /// Its state now.
    public var state: WriteState
    /// How often the instance refused it so far.
    public var refusals: Int
    /// Whether the instance had applied it before (a resend answered again).
    public var replayed: Bool

    package init(writeId: WriteID, passId: UInt64?, state: WriteState, refusals: Int, replayed: Bool = false) {
        self.writeId = writeId
        self.passId = passId
        self.state = state
        self.refusals = refusals
        self.replayed = replayed
    }

    func encode(into writer: inout some ByteSink) {
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
