/// A write met a per-write failure that may pass while the instance answered others: what it
/// met, and its streak of such passes (a 429 adds nothing).
public struct WriteFailed: EventPayload {
    static let type = EventType.writeFailed
    /// The write that failed.
    public var writeId: WriteID
    /// The pass it failed in.
    public var passId: UInt64
    /// The HTTP status it failed with, if one came.
    public var status: Int?
    /// The start of a text body, cut to 200 Unicode scalars (audits only).
    public var text: String?
    /// How many passes in a row it failed alone.
    public var streak: Int

    package init(writeId: WriteID, passId: UInt64, status: Int?, text: String?, streak: Int) {
        self.writeId = writeId
        self.passId = passId
        self.status = status
        self.text = text.map { Refusal.cut($0) }
        self.streak = streak
    }

    func encode(into writer: inout some ByteSink) {
        writer.varint(writeId.rawValue)
        writer.varint(passId)
        writer.optional(status) { $0.varint($1) }
        writer.optional(text) { $0.string($1) }
        writer.varint(streak)
    }

    static func decode(from reader: inout ByteReader) throws -> WriteFailed {
        WriteFailed(
            writeId: try reader.id(), passId: try reader.varint(), status: try reader.optional { try $0.int() },
            text: try reader.optional { try $0.string() }, streak: try reader.int())
    }

    var writeIDs: [WriteID] { [writeId] }
    var jsonFields: [String: JSONValue] {
        [
            "writeId": .id(writeId), "passId": .int(Int64(bitPattern: passId)), "status": .optional(status) { .int($0) },
            "text": .optional(text) { .string($0) }, "streak": .int(streak),
        ]
    }
}
