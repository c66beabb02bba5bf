/// What `checkDecisions` found (R8.4, second half): the same decisions, or the first that differs.
package struct DecisionReport: Hashable, Sendable, CustomStringConvertible {
    /// How many recorded answers were decided again.
    package let answers: Int
    /// The sequence number of the first event where this version decides differently, if any.
    package let sequence: UInt64?
    /// What differs there.
    package let difference: String?

    package var isSame: Bool { difference == nil }
    package var description: String {
        guard let difference, let sequence else { return "same decisions (\(answers) answers decided again)" }
        return "event \(sequence): \(difference)"
    }
}

extension EventLog {
    /// Folds the log from its start into memory and, at every `answerReceived`, runs the replayer's
    /// decisions again with the verdict table, settings and clock reading of that moment; the events the
    /// log holds next must be those decisions, and the pass must go on or stop as they say.
    package func checkDecisions() throws -> DecisionReport {
        var projector = Projector(store: MemoryProjections())
        var settings: [UInt64: PassStarted] = [:]
        var expected: [Event] = []
        var expectedStop: (pass: UInt64, next: Decider.Next)?
        var answers = 0
        var found: (UInt64, String)?
        // A `verdictsRecorded` is checked as the run of verdicts it holds, each against what this version
        // decides: a log that recorded them one event each (an earlier version) checks the same.
        // The batch count of each pass's last request, and the failure a pass stops with once its batch
        // is sent (R4.4).
        var batchCounts: [UInt64: Int] = [:]
        var finishing: [UInt64: PassFailure] = [:]
        func check(_ recorded: RecordedEvent) throws -> Bool {
            let event = recorded.event
            if expected.isEmpty, let pass = event.passId, expectedStop?.pass == pass || finishing[pass] != nil {
                let next = expectedStop?.pass == pass ? expectedStop?.next : nil
                switch (event, next) {
                case (.passEnded(let ended), .stop(let failure)?):
                    if ended.stoppedBy != failure {
                        found = (
                            recorded.sequence,
                            "the pass ended with \(describe(ended.stoppedBy)); this version stops it with \(describe(failure))"
                        )
                    }
                    expectedStop = nil
                case (_, .stop(let failure)?) where !event.isDecision:
                    found = (
                        recorded.sequence,
                        "the pass went on (\(event.type.name)); this version stops it with \(describe(failure))"
                    )
                case (.passEnded(let ended), _):
                    if ended.stoppedBy != finishing[pass] {
                        found = (
                            recorded.sequence,
                            finishing[pass] == nil
                                ? "the pass stopped with \(describe(ended.stoppedBy)); this version goes on"
                                : "the pass ended with \(describe(ended.stoppedBy)); this version stops it after the batch with \(describe(finishing[pass]))"
                        )
                    }
                    expectedStop = nil
                case (.attemptStarted(let attempt), _) where finishing[pass] != nil && !attempt.continuesBatch:
                    found = (
                        recorded.sequence,
                        "the pass went on past the batch; this version stops it after the batch with \(describe(finishing[pass]))"
                    )
                default:
                    if !event.isDecision { expectedStop = nil }
                }
                if found != nil { return false }
            }
            if let next = expected.first {
                guard next == event else {
                    found = (
                        recorded.sequence,
                        "the log holds \(event.type.name) \(JSONText.render(recorded.json)); this version decides \(next.type.name) \(JSONText.render(RecordedEvent(sequence: recorded.sequence, at: recorded.at, event: next).json))"
                    )
                    return false
                }
                expected.removeFirst()
            } else if let pass = expectedStop?.pass, event.isDecision, event.passId == pass {
                found = (recorded.sequence, "the log holds \(event.type.name), which this version does not decide")
                return false
            }
            try projector.apply(recorded)
            switch event {
            case .passStarted(let started):
                settings[started.passId] = started
            case .attemptStarted(let attempt):
                batchCounts[attempt.passId] = attempt.batchCount
            case .passEnded(let ended):
                finishing[ended.passId] = nil
            case .answerReceived(let answer):
                guard let started = settings[answer.passId] else {
                    found = (recorded.sequence, "an answer for pass \(answer.passId), which never started")
                    return false
                }
                let batchCount = batchCounts[answer.passId] ?? answer.writes.count
                let input = Decider.Input(
                    passId: answer.passId, writes: answer.writes, batchCount: max(batchCount, answer.writes.count),
                    answer: answer.answer, maxRefusals: started.maxRefusals, at: recorded.at)
                let store = projector.store
                let decision = try Decider.decide(
                    input,
                    entry: { id in
                        try store.value(.writes, Key.id(id.rawValue)).map { try WriteEntry.decode($0, id: id) }
                    })
                expected = decision.events.flatMap(\.asSingleEvents)
                expectedStop = (answer.passId, decision.next)
                switch decision.next {
                case .finishBatch(let failure): finishing[answer.passId] = finishing[answer.passId] ?? failure
                case .stop: finishing[answer.passId] = nil
                case .goOn, .split: break
                }
                answers += 1
            default:
                break
            }
            return true
        }
        try forEachEvent { recorded in
            let parts = recorded.event.asSingleEvents
            if parts.count > 1 {
                // Each verdict against the next decision, then the event's fold, once.
                for part in parts {
                    guard let next = expected.first else {
                        found = (recorded.sequence, "the log holds verdictsRecorded, which this version does not decide")
                        return false
                    }
                    guard next == part else {
                        found = (
                            recorded.sequence,
                            "the log holds verdictsRecorded with \(JSONText.render(RecordedEvent(sequence: recorded.sequence, at: recorded.at, event: part).json)); this version decides \(next.type.name) \(JSONText.render(RecordedEvent(sequence: recorded.sequence, at: recorded.at, event: next).json))"
                        )
                        return false
                    }
                    expected.removeFirst()
                }
                try projector.apply(recorded)
                return true
            }
            return try check(recorded)
        }
        if found == nil, let next = expected.first {
            found = (try lastSequence() + 1, "the log ends where this version decides \(next.type.name)")
        }
        return DecisionReport(answers: answers, sequence: found?.0, difference: found?.1)
    }
}

private func describe(_ failure: PassFailure?) -> String {
    guard let failure else { return "no failure" }
    return "\(failure.kind.rawValue)" + (failure.status.map { " \($0)" } ?? "") + (failure.code.map { " \($0)" } ?? "")
}

extension Event {
    /// Events a decision on an answer appends.
    var isDecision: Bool {
        switch self {
        // A final refusal in a pass is the library's own (unmade), made before a request, not on an answer.
        case .verdictRecorded(let v): return v.passId != nil && v.state.refusal?.isFinal != true
        case .verdictsRecorded: return true
        case .schemaRefusalCounted, .writeFailed, .batchAborted: return true
        default: return false
        }
    }

    /// The pass an event of a pass belongs to.
    var passId: UInt64? {
        switch self {
        case .passStarted(let e): return e.passId
        case .attemptStarted(let e): return e.passId
        case .answerReceived(let e): return e.passId
        case .verdictRecorded(let e): return e.passId
        case .verdictsRecorded(let e): return e.passId
        case .schemaRefusalCounted(let e): return e.passId
        case .writeFailed(let e): return e.passId
        case .passEnded(let e): return e.passId
        case .batchAborted(let e): return e.passId
        default: return nil
        }
    }
}
