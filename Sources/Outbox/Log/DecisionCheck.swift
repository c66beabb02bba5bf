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
        var checker = DecisionChecker()
        var found: (UInt64, String)?
        try forEachEvent { recorded in
            guard let difference = try checker.check(recorded) else { return true }
            found = (recorded.sequence, difference)
            return false
        }
        if found == nil, let next = checker.expected.first {
            found = (try lastSequence() + 1, "the log ends where this version decides \(next.type.name)")
        }
        return DecisionReport(answers: checker.answers, sequence: found?.0, difference: found?.1)
    }
}

/// The state of `checkDecisions` from one event to the next: the fold so far, and what this version
/// decides the log must hold next.
private struct DecisionChecker {
    var projector = Projector(store: MemoryProjections())
    var settings: [UInt64: PassStarted] = [:]
    /// The decisions on the last answer not yet met in the log, in order.
    var expected: [Event] = []
    var expectedStop: (pass: UInt64, next: Decider.Next)?
    var answers = 0
    /// The batch count of each pass's last request, and the failure a pass stops with once its batch
    /// is sent (R4.4).
    var batchCounts: [UInt64: Int] = [:]
    var finishing: [UInt64: PassFailure] = [:]

    /// Checks and folds `recorded`; what differs from this version's decisions, if anything.
    mutating func check(_ recorded: RecordedEvent) throws -> String? {
        let parts = recorded.event.asSingleEvents
        guard parts.count > 1 else {
            if let difference = checkPassGoesOn(recorded) ?? checkExpected(recorded) { return difference }
            try projector.apply(recorded)
            return try note(recorded)
        }
        // A `verdictsRecorded` is checked as the run of verdicts it holds, each against what this
        // version decides (a log that recorded them one event each checks the same), then folded once.
        for part in parts {
            guard let next = expected.first else {
                return "the log holds verdictsRecorded, which this version does not decide"
            }
            guard next == part else {
                return
                    "the log holds verdictsRecorded with \(json(part, at: recorded)); this version decides \(next.type.name) \(json(next, at: recorded))"
            }
            expected.removeFirst()
        }
        try projector.apply(recorded)
        return nil
    }

    /// Whether the pass goes on or stops as the last decision on it said (R4.4).
    private mutating func checkPassGoesOn(_ recorded: RecordedEvent) -> String? {
        let event = recorded.event
        guard expected.isEmpty, let pass = event.passId, expectedStop?.pass == pass || finishing[pass] != nil else { return nil }
        let next = expectedStop?.pass == pass ? expectedStop?.next : nil
        switch (event, next) {
        case (.passEnded(let ended), .stop(let failure)?):
            expectedStop = nil
            if ended.stoppedBy != failure {
                return "the pass ended with \(describe(ended.stoppedBy)); this version stops it with \(describe(failure))"
            }
        case (_, .stop(let failure)?) where !event.isDecision:
            return "the pass went on (\(event.type.name)); this version stops it with \(describe(failure))"
        case (.passEnded(let ended), _):
            expectedStop = nil
            if ended.stoppedBy != finishing[pass] {
                return finishing[pass] == nil
                    ? "the pass stopped with \(describe(ended.stoppedBy)); this version goes on"
                    : "the pass ended with \(describe(ended.stoppedBy)); this version stops it after the batch with \(describe(finishing[pass]))"
            }
        case (.attemptStarted(let attempt), _) where finishing[pass] != nil && !attempt.continuesBatch:
            return "the pass went on past the batch; this version stops it after the batch with \(describe(finishing[pass]))"
        default:
            if !event.isDecision { expectedStop = nil }
        }
        return nil
    }

    /// Whether `recorded` is the next decision this version expects, or no decision when it expects none.
    private mutating func checkExpected(_ recorded: RecordedEvent) -> String? {
        let event = recorded.event
        if let next = expected.first {
            guard next == event else {
                return
                    "the log holds \(event.type.name) \(JSONText.render(recorded.json)); this version decides \(next.type.name) \(json(next, at: recorded))"
            }
            expected.removeFirst()
        } else if let pass = expectedStop?.pass, event.isDecision, event.passId == pass {
            return "the log holds \(event.type.name), which this version does not decide"
        }
        return nil
    }

    /// Keeps what later checks need of `recorded`: a pass's settings and batch, and at an answer the
    /// decisions this version makes on it.
    private mutating func note(_ recorded: RecordedEvent) throws -> String? {
        switch recorded.event {
        case .passStarted(let started):
            settings[started.passId] = started
        case .attemptStarted(let attempt):
            batchCounts[attempt.passId] = attempt.batchCount
        case .passEnded(let ended):
            finishing[ended.passId] = nil
        case .answerReceived(let answer):
            guard let started = settings[answer.passId] else { return "an answer for pass \(answer.passId), which never started" }
            let batchCount = batchCounts[answer.passId] ?? answer.writes.count
            let input = Decider.Input(
                passId: answer.passId, writes: answer.writes, batchCount: max(batchCount, answer.writes.count),
                answer: answer.answer, maxRefusals: started.maxRefusals, at: recorded.at)
            let store = projector.store
            let decision = try Decider.decide(
                input,
                entry: { id in try store.value(.writes, StoreKey.bytes(id: id.rawValue)).map { try WriteEntry.decode($0, id: id) }
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
        return nil
    }

    private func json(_ event: Event, at recorded: RecordedEvent) -> String {
        JSONText.render(RecordedEvent(sequence: recorded.sequence, at: recorded.at, event: event).json)
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
