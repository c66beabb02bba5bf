/// Answered writes left the queue: taken (`answersTaken`) or forgotten (`answersForgotten`).
public struct AnswersCleared: Hashable, Sendable {
    /// The writes whose answers were cleared.
    public var writes: [WriteID]

    package init(writes: [WriteID]) { self.writes = writes }

    func encode(into writer: inout some ByteSink) { writer.ids(writes) }
    static func decode(from reader: inout ByteReader) throws -> AnswersCleared { AnswersCleared(writes: try reader.ids()) }
    var jsonFields: [String: JSONValue] { ["writes": .ids(writes)] }
}
