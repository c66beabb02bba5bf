/// Answered writes left the queue (R6.1): taken (`answersTaken`) or forgotten (`answersForgotten`).
public struct AnswersCleared: Hashable, Sendable {
    public var writes: [WriteID]

    public init(writes: [WriteID]) { self.writes = writes }

    func encode(into writer: inout ByteWriter) { writer.ids(writes) }
    static func decode(from reader: inout ByteReader) throws -> AnswersCleared { AnswersCleared(writes: try reader.ids()) }
    var jsonFields: [String: JSONValue] { ["writes": .ids(writes)] }
}
