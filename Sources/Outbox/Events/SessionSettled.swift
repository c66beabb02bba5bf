/// The session settled into a user, or into none. Never the token (R8.7): only whether its subject was
/// not the user, which latches the `identityChanged` soft block (R7.3).
public struct SessionSettled: EventPayload {
    static let type = EventType.sessionSettled
    public var user: String?
    public var identityChanged: Bool

    public init(user: String?, identityChanged: Bool) {
        self.user = user
        self.identityChanged = identityChanged
    }

    func encode(into writer: inout ByteWriter) {
        writer.optional(user) { $0.string($1) }
        writer.bool(identityChanged)
    }

    static func decode(from reader: inout ByteReader) throws -> SessionSettled {
        SessionSettled(user: try reader.optional { try $0.string() }, identityChanged: try reader.bool())
    }

    var writeIDs: [WriteID] { [] }
    var jsonFields: [String: JSONValue] { ["user": .optional(user) { .string($0) }, "identityChanged": .bool(identityChanged)] }
}
