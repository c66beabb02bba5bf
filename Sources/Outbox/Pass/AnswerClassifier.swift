/// The replayer's classification of an answer, for tools and fuzzers: what the pass would do (R4.3).
package enum AnswerClassifier {
    /// "go on", "split", or "stop: <kind> <status> <code>", for an answer to a batch of `writes`
    /// pending writes, each with `refusals` refusals so far.
    package static func outcome(of answer: RequestAnswer, writes: Int, refusals: Int = 0, maxRefusals: Int = 5, at: Timestamp)
        -> String
    {
        let ids = (0..<max(writes, 0)).map { WriteID(UInt64($0) + 1) }
        let input = Decider.Input(
            passId: 1, writes: ids, batchCount: ids.count, answer: answer, maxRefusals: max(maxRefusals, 1), at: at)
        let decision = try? Decider.decide(input) { id in
            WriteEntry(
                queuedSequence: id.rawValue, user: "u", table: "t", dependencies: [], atomicGroup: nil,
                renewedKey: nil, state: .pending, refusals: refusals, replayed: false,
                schemaRefusals: 0, lastSchemaRefusalAt: nil, lastFailure: nil, environmentalStreak: 0)
        }
        switch decision?.next {
        case .goOn?: return "go on"
        case .split?: return "split"
        case .stop(let failure)?, .finishBatch(let failure)?:
            return "stop: \(failure.kind.rawValue) \(failure.status.map(String.init) ?? "-") \(failure.code ?? "-")"
        case nil: return "no decision"
        }
    }
}
