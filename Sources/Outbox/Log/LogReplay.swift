/// Folds events into projections held in memory, with no log file: what a whole log replays to
/// (R8.4). Public for tools and fuzzers: every sequence of decodable events must fold without a crash,
/// and anything it cannot fold is a thrown error.
package enum LogReplay {
    /// The queue and verdict table after `events`, folded in the order given.
    package static func snapshot(of events: [RecordedEvent]) throws -> QueueSnapshot {
        var projector = Projector(store: MemoryProjections())
        for event in events { try projector.apply(event) }
        let bySequence = Dictionary(events.map { ($0.sequence, $0) }, uniquingKeysWith: { first, _ in first })
        let reader = projector.store.reader(record: { bySequence[$0] })
        return QueueSnapshot(
            sequence: events.last?.sequence ?? 0, user: try reader.session()?.user,
            writes: try QueuedWrite.all(user: nil, reader: reader))
    }
}

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
                idempotencyKey: IdempotencyKey(high: 0, low: id.rawValue), state: .pending, refusals: refusals, replayed: false,
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
