/// The app turned the library's network access off or on.
public struct NetworkSwitched: EventPayload {
    static let type = EventType.networkSwitched
    /// Whether network access is now on.
    public var enabled: Bool

    package init(enabled: Bool) { self.enabled = enabled }

    func encode(into writer: inout some ByteSink) { writer.bool(enabled) }
    static func decode(from reader: inout ByteReader) throws -> NetworkSwitched { NetworkSwitched(enabled: try reader.bool()) }
    var writeIDs: [WriteID] { [] }
    var jsonFields: [String: JSONValue] { ["enabled": .bool(enabled)] }
}
