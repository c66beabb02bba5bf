/// A pass began: whose writes, which table, who started it, and the settings in force.
public struct PassStarted: EventPayload {
    static let type = EventType.passStarted
    /// The pass, numbered in the log.
    public var passId: UInt64
    /// The user whose writes it sends.
    public var user: String
    /// The one table it sends, when the app asked for one.
    public var table: String?
    /// Whether the library started it by itself rather than the app.
    public var automatic: Bool
    /// The refusals that make a write dead, in force for this pass.
    public var maxRefusals: Int
    /// The most writes one request carries, in force for this pass.
    public var batchSize: Int

    package init(passId: UInt64, user: String, table: String?, automatic: Bool, maxRefusals: Int, batchSize: Int) {
        self.passId = passId
        self.user = user
        self.table = table
        self.automatic = automatic
        self.maxRefusals = maxRefusals
        self.batchSize = batchSize
    }

    func encode(into writer: inout some ByteSink) {
        writer.varint(passId)
        writer.string(user)
        writer.optional(table) { $0.string($1) }
        writer.bool(automatic)
        writer.varint(maxRefusals)
        writer.varint(batchSize)
    }

    static func decode(from reader: inout ByteReader) throws -> PassStarted {
        PassStarted(
            passId: try reader.varint(), user: try reader.string(), table: try reader.optional { try $0.string() },
            automatic: try reader.bool(), maxRefusals: try reader.int(), batchSize: try reader.int())
    }

    var writeIDs: [WriteID] { [] }
    var jsonFields: [String: JSONValue] {
        [
            "passId": .int(Int64(bitPattern: passId)), "user": .string(user), "table": .optional(table) { .string($0) },
            "automatic": .bool(automatic), "maxRefusals": .int(maxRefusals), "batchSize": .int(batchSize),
        ]
    }
}
