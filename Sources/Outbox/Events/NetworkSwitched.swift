/// The app turned the library's network access off or on (R5.5).
public struct NetworkSwitched: EventPayload {
    static let type = EventType.networkSwitched
    public var enabled: Bool

    public init(enabled: Bool) { self.enabled = enabled }

    func encode(into writer: inout ByteWriter) { writer.bool(enabled) }
    static func decode(from reader: inout ByteReader) throws -> NetworkSwitched { NetworkSwitched(enabled: try reader.bool()) }
    var writeIDs: [WriteID] { [] }
    var jsonFields: [String: JSONValue] { ["enabled": .bool(enabled)] }
}
