/// The first event of every log: its origin and the codec it was made with.
public struct LogCreated: EventPayload {
    static let type = EventType.logCreated
    /// The log's origin: with a write's id, it names the write on every server.
    public var origin: Origin

    package init(origin: Origin) { self.origin = origin }

    func encode(into writer: inout some ByteSink) { origin.encode(into: &writer) }
    static func decode(from reader: inout ByteReader) throws -> LogCreated {
        LogCreated(origin: try Origin.decode(from: &reader))
    }
    var writeIDs: [WriteID] { [] }
    var jsonFields: [String: JSONValue] { ["origin": .string(origin.description)] }
}
