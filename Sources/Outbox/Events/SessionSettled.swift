/// The session settled into a user, or into none. Never the token: only whether its subject was
/// not the user, which latches the `identityChanged` soft block.
public struct SessionSettled: EventPayload {
    static let type = EventType.sessionSettled
    /// The user now signed in; nil for none.
    public var user: String?
    /// Whether the token named another user than the session's: nothing is sent until it matches.
    public var identityChanged: Bool

    package init(user: String?, identityChanged: Bool) {
        self.user = user
        self.identityChanged = identityChanged
    }

    func encode(into writer: inout some ByteSink) {
        writer.optional(user) { $0.string($1) }
        writer.bool(identityChanged)
    }

    static func decode(from reader: inout ByteReader) throws -> SessionSettled {
        SessionSettled(user: try reader.optional { try $0.string() }, identityChanged: try reader.bool())
    }

    var writeIDs: [WriteID] { [] }
    var jsonFields: [String: JSONValue] { ["user": .optional(user) { .string($0) }, "identityChanged": .bool(identityChanged)] }
}
