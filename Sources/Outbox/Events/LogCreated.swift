/// The first event of every log: its origin (R2.1) and the codec it was made with.
public struct LogCreated: EventPayload {
    static let type = EventType.logCreated
    public var origin: Origin

    public init(origin: Origin) { self.origin = origin }

    func encode(into writer: inout ByteWriter) { origin.encode(into: &writer) }
    static func decode(from reader: inout ByteReader) throws -> LogCreated {
        LogCreated(origin: try Origin.decode(from: &reader))
    }
    var writeIDs: [WriteID] { [] }
    var jsonFields: [String: JSONValue] { ["origin": .string(origin.description)] }
}
