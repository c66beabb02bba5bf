/// A pass ended: ran out of sendable writes, or stopped by a failure (kind, status, code, Retry-After).
public struct PassEnded: EventPayload {
    static let type = EventType.passEnded
    /// The pass.
    public var passId: UInt64
    /// The failure that stopped it; nil when it ran to its end.
    public var stoppedBy: PassFailure?

    package init(passId: UInt64, stoppedBy: PassFailure?) {
        self.passId = passId
        self.stoppedBy = stoppedBy
    }

    func encode(into writer: inout some ByteSink) {
        writer.varint(passId)
        writer.optional(stoppedBy) { $1.encode(into: &$0) }
    }

    static func decode(from reader: inout ByteReader) throws -> PassEnded {
        PassEnded(passId: try reader.varint(), stoppedBy: try reader.optional { try PassFailure.decode(from: &$0) })
    }

    var writeIDs: [WriteID] { [] }
    var jsonFields: [String: JSONValue] {
        ["passId": .int(Int64(bitPattern: passId)), "stoppedBy": .optional(stoppedBy) { $0.json }]
    }
}
