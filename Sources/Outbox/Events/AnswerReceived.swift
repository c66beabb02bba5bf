/// What the instance answered to one request, exactly as received: the input of every decision
/// that follows, so `replay --check-decisions` can run them again.
public struct AnswerReceived: EventPayload {
    static let type = EventType.answerReceived
    /// The pass that sent the request.
    public var passId: UInt64
    /// The writes the request carried, in order.
    public var writes: [WriteID]
    /// The answer as received: per-write answers, a failure of the whole request, or a broken contract.
    public var answer: RequestAnswer

    package init(passId: UInt64, writes: [WriteID], answer: RequestAnswer) {
        self.passId = passId
        self.writes = writes
        self.answer = answer
    }

    func encode(into writer: inout some ByteSink) {
        writer.varint(passId)
        writer.ids(writes)
        answer.encode(into: &writer)
    }

    static func decode(from reader: inout ByteReader) throws -> AnswerReceived {
        AnswerReceived(passId: try reader.varint(), writes: try reader.ids(), answer: try RequestAnswer.decode(from: &reader))
    }

    var writeIDs: [WriteID] { writes }
    var jsonFields: [String: JSONValue] {
        var fields: [String: JSONValue] = ["passId": .int(Int64(bitPattern: passId)), "writes": .ids(writes)]
        switch answer {
        case .answered(let answers):
            fields["answers"] = .array(
                answers.map { answer in
                    guard case .object(var verdict) = answer.verdict.json else { return .null }
                    verdict["replayed"] = .bool(answer.replayed)
                    return .object(verdict)
                })
        case .failed(let failure): fields["failure"] = failure.json
        case .contractBroken(let description): fields["contractBroken"] = .string(description)
        }
        return fields
    }
}

extension RequestFailure {
    var json: JSONValue {
        .object([
            "kind": .string(kind.rawValue), "status": .optional(status) { .int($0) },
            "code": .optional(code) { .string($0) }, "retryAfter": .optional(retryAfter) { .string($0) },
            "text": .optional(text) { .string($0) }, "fields": .array(fields.map { .string($0) }),
            "meaning": .string(meaning.rawValue),
        ])
    }
}
