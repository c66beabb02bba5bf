/// The library's decisions on one answer for several writes at once: what a run of `verdictRecorded`
/// events says, in one record. An answer of 100 accepted writes is one event in the log, not 100; each
/// write's history still lists it, and `Event.verdicts` reads it as the verdicts it holds.
public struct VerdictsRecorded: EventPayload {
    static let type = EventType.verdictsRecorded
    /// The pass whose answer decided them.
    public var passId: UInt64
    /// The verdicts, in the order they apply; each names this pass.
    public var verdicts: [VerdictRecorded]

    package init(passId: UInt64, verdicts: [VerdictRecorded]) {
        self.passId = passId
        // A pass's verdicts name it already (the decider's): kept as they are, uncopied.
        self.verdicts =
            verdicts.allSatisfy { $0.passId == passId }
            ? verdicts
            : verdicts.map { verdict in
                var verdict = verdict
                verdict.passId = passId
                return verdict
            }
    }

    func encode(into writer: inout some ByteSink) {
        writer.varint(passId)
        writer.array(verdicts) { writer, verdict in
            writer.varint(verdict.writeId.rawValue)
            verdict.state.encode(into: &writer)
            writer.varint(verdict.refusals)
            writer.bool(verdict.replayed)
        }
    }

    static func decode(from reader: inout ByteReader) throws -> VerdictsRecorded {
        let passId = try reader.varint()
        let verdicts = try reader.array { reader in
            VerdictRecorded(
                writeId: try reader.id(), passId: passId, state: try WriteState.decode(from: &reader), refusals: try reader.int(),
                replayed: try reader.bool())
        }
        guard !verdicts.isEmpty else { throw DecodeFailure("a verdicts event with no verdict") }
        return VerdictsRecorded(passId: passId, verdicts: verdicts)
    }

    var writeIDs: [WriteID] { verdicts.map(\.writeId) }

    var jsonFields: [String: JSONValue] {
        [
            "passId": .int(Int64(bitPattern: passId)),
            "verdicts": .array(
                verdicts.map { verdict in
                    var fields = verdict.jsonFields
                    fields["passId"] = nil
                    return .object(fields)
                }),
        ]
    }
}
