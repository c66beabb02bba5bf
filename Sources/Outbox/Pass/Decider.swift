/// The replayer's decisions on one answer (R4.3–R4.5, R4.7): a pure function of the answer as received,
/// the verdict table just before it, the settings in force and the time it came. The pass appends its
/// events right after the `answerReceived` event, in the same transaction; `replay --check-decisions`
/// runs it again over a log and compares (R8.4).
enum Decider {
    /// Everything a decision depends on besides the verdict table.
    struct Input {
        var passId: UInt64
        /// The writes the request carried, in order.
        var writes: [WriteID]
        /// How many writes the request's batch holds: more than `writes` when a transport sends a batch
        /// as several requests (R9.3).
        var batchCount: Int
        var answer: RequestAnswer
        var maxRefusals: Int
        /// When the answer was received.
        var at: Timestamp
    }

    /// What the pass does next.
    enum Next: Hashable {
        /// Goes on: with the rest of the batch, then the next batch.
        case goOn
        /// Stops now: a failure that may pass, a schema-cache refusal, or a broken contract.
        case stop(PassFailure)
        /// A write failed alone (R4.4): the rest of the batch goes on, those depending on it skipped,
        /// and the pass stops after the batch with this failure.
        case finishBatch(PassFailure)
        /// A multi-write batch was refused as a whole: resend it in halves, at once (R4.5).
        case split
    }

    struct Decision {
        var events: [Event] = []
        var next: Next = .goOn
        /// What the report shows for this answer.
        var verdicts: [SyncReport.Verdict] = []
    }

    /// Spacing between two schema-cache refusals that both count (R4.3).
    static let schemaRefusalSpacing = 30.0
    /// The schema-cache refusal that refuses the write.
    static let schemaRefusalLimit = 10
    /// Passes in a row of failing alone that block a write (R4.4).
    static let failingAloneStreak = 3

    static func decide(_ input: Input, entry: (WriteID) throws -> WriteEntry?) throws -> Decision {
        var decision = try decideEach(input, entry: entry)
        decision.events = joiningVerdicts(decision.events)
        return decision
    }

    /// The decision's events with every run of two or more verdicts of one pass in one
    /// `verdictsRecorded`: the log then holds a drained batch's verdicts as one event. The fold applies
    /// its verdicts in the same order, so the outcome is the same as the run's.
    static func joiningVerdicts(_ events: [Event]) -> [Event] {
        var joined: [Event] = []
        var run: [VerdictRecorded] = []
        run.reserveCapacity(events.count)
        func endRun() {
            if run.count == 1 { joined.append(.verdictRecorded(run[0])) }
            if run.count > 1, let passId = run[0].passId {
                joined.append(.verdictsRecorded(VerdictsRecorded(passId: passId, verdicts: run)))
            }
            run = []
        }
        for event in events {
            if case .verdictRecorded(let verdict) = event, verdict.passId != nil {
                if let first = run.first, first.passId != verdict.passId { endRun() }
                run.append(verdict)
            } else {
                endRun()
                joined.append(event)
            }
        }
        endRun()
        return joined
    }

    private static func decideEach(_ input: Input, entry: (WriteID) throws -> WriteEntry?) throws -> Decision {
        var decision = Decision()
        decision.events.reserveCapacity(input.writes.count)
        decision.verdicts.reserveCapacity(input.writes.count)
        // The entry of each write, by position: nil for a write no longer in the queue.
        let found = try input.writes.map(entry)
        // The planner sends an atomic group alone (R4.5), so the batch is one when its writes share one.
        let group = found.lazy.compactMap { $0 }.first?.atomicGroup
        let isAtomic = input.writes.count > 1 && group != nil && found.allSatisfy { $0 == nil || $0?.atomicGroup == group }
        switch input.answer {
        case .contractBroken:
            decision.next = .stop(PassFailure(kind: .protocol))
        case .failed(let failure):
            let entries = zip(input.writes, found).compactMap { id, entry in entry.map { (id, $0) } }
            decideRequestFailure(failure, input, entries, isAtomic: isAtomic, into: &decision)
        case .answered(let answers):
            guard answers.count == input.writes.count else {
                decision.next = .stop(PassFailure(kind: .protocol))
                return decision
            }
            // The answers line up with the request's writes, one each.
            if isAtomic {
                let answered = zip(input.writes.indices, answers).compactMap { index, answer in
                    found[index].map { (input.writes[index], $0, answer) }
                }
                decideGroup(answered, input, into: &decision)
            } else {
                for index in input.writes.indices {
                    if let entry = found[index] { decideOne(input.writes[index], entry, answers[index], input, into: &decision) }
                }
            }
        }
        return decision
    }

    // MARK: - Request-level failures

    private static func decideRequestFailure(
        _ failure: RequestFailure, _ input: Input, _ entries: [(WriteID, WriteEntry)], isAtomic: Bool,
        into decision: inout Decision
    ) {
        guard failure.kind == .http else {
            stopAfterRequest(PassFailure(kind: .network), into: &decision)
            return
        }
        let retryAfter = RetryAfter.seconds(failure.retryAfter, now: input.at)
        switch failure.meaning {
        case .mayPass, .tokenRefused:
            stopAfterRequest(
                PassFailure(kind: .http, status: failure.status, code: failure.code, retryAfter: retryAfter), into: &decision)
        case .schemaCache:
            for (id, entry) in entries { countSchemaRefusal(id, entry, failure.refusal, input, into: &decision) }
            stopAfterRequest(
                PassFailure(kind: .schemaCache, status: failure.status, code: failure.code, retryAfter: retryAfter),
                into: &decision)
        case .refused:
            if isAtomic {
                abortGroup(entries.map { ($0.0, $0.1, failure.refusal) }, input, into: &decision)
            } else if entries.count > 1 {
                decision.next = .split
            } else if let (id, entry) = entries.first {
                refuse(id, entry, failure.refusal, input, into: &decision)
            }
        }
    }

    // MARK: - Per-write answers

    private static func decideOne(
        _ id: WriteID, _ entry: WriteEntry, _ answer: WriteAnswer, _ input: Input, into decision: inout Decision
    ) {
        switch answer.verdict {
        case .accepted:
            record(id, .accepted, refusals: entry.refusals, replayed: answer.replayed, input, into: &decision)
        case .merged(let fields):
            record(
                id, .merged(fields: Refusal.names(fields)), refusals: entry.refusals, replayed: answer.replayed, input,
                into: &decision)
        case .conflicted(let sibling, let fields):
            record(
                id, .conflicted(siblingId: Refusal.cut(sibling), fields: Refusal.names(fields)), refusals: entry.refusals,
                replayed: answer.replayed, input,
                into: &decision)
        case .blocked(let reason, let refusal):
            record(
                id, .blocked(reason, refusal: refusal), refusals: entry.refusals, replayed: answer.replayed, input,
                into: &decision)
        case .refused(let refusal):
            refuse(id, entry, refusal, input, into: &decision)
        case .failed(let status, let code, let text):
            failAlone(id, entry, status: status, code: code, text: text, input, into: &decision)
        case .skipped:
            decision.verdicts.append(SyncReport.Verdict(id: id, kind: .skipped, refusals: entry.refusals))
        case .notSent(let failure):
            notSent(id, entry, failure, input, into: &decision)
        }
    }

    /// A write the transport did not send: pending, uncharged, no streak. Its own request's failure is
    /// judged as R4.3 judges a failed request of this one write. The pass does not go on past the batch:
    /// it stops with the first such failure, or as a broken contract when the transport gave none.
    private static func notSent(
        _ id: WriteID, _ entry: WriteEntry, _ failure: RequestFailure?, _ input: Input, into decision: inout Decision
    ) {
        var alone = Decision()
        if let failure { decideRequestFailure(failure, input, [(id, entry)], isAtomic: false, into: &alone) }
        decision.events += alone.events
        decision.verdicts +=
            alone.verdicts.isEmpty ? [SyncReport.Verdict(id: id, kind: .notSent, refusals: entry.refusals)] : alone.verdicts
        stopAfterNotSent(alone, into: &decision)
    }

    /// After a write not sent, the pass stops with that write's own failure as judged alone, or as a
    /// broken contract when the transport gave none.
    private static func stopAfterNotSent(_ alone: Decision, into decision: inout Decision) {
        if case .stop(let stop) = alone.next { stopAfterRequest(stop, into: &decision) }
        stopAfterRequest(PassFailure(kind: .protocol), into: &decision)
    }

    /// A per-write failure that may pass (R4.4): the write stays pending and the pass stops after the
    /// batch. Only inside a batch the instance otherwise answered does it feed the write's streak.
    private static func failAlone(
        _ id: WriteID, _ entry: WriteEntry, status: Int?, code: String?, text: String?, _ input: Input,
        into decision: inout Decision
    ) {
        decision.verdicts.append(SyncReport.Verdict(id: id, kind: .failed, refusals: entry.refusals))
        if case .goOn = decision.next { decision.next = .finishBatch(PassFailure(kind: .http, status: status, code: code)) }
        guard input.batchCount > 1 else { return }
        let streak = status == 429 ? entry.environmentalStreak : entry.environmentalStreak + 1
        decision.events.append(
            .writeFailed(WriteFailed(writeId: id, passId: input.passId, status: status, text: text, streak: streak)))
        if streak >= failingAloneStreak {
            record(id, .blocked(.failingAlone, refusal: nil), refusals: entry.refusals, replayed: false, input, into: &decision)
        }
    }

    /// Stops the pass once this request is decided. The first failure of the request is the one the
    /// pass reports; one that stops the pass at once outranks a write that failed alone before it.
    private static func stopAfterRequest(_ failure: PassFailure, into decision: inout Decision) {
        switch decision.next {
        case .goOn: decision.next = .stop(failure)
        case .finishBatch(let first): decision.next = .stop(first)
        case .stop, .split: break
        }
    }

    private static func decideGroup(
        _ answered: [(WriteID, WriteEntry, WriteAnswer)], _ input: Input, into decision: inout Decision
    ) {
        let applied = answered.allSatisfy { _, _, answer in
            switch answer.verdict {
            case .accepted, .merged, .conflicted: return true
            default: return false
            }
        }
        if applied {
            for (id, entry, answer) in answered { decideOne(id, entry, answer, input, into: &decision) }
            return
        }
        let refusedOrBlocked = answered.contains { _, _, answer in
            switch answer.verdict {
            case .refused, .blocked: return true
            default: return false
            }
        }
        guard refusedOrBlocked else {
            // Only failures that may pass, or skips: nothing applied, nothing charged.
            for (id, entry, answer) in answered {
                if case .failed(let status, let code, _) = answer.verdict {
                    decision.verdicts.append(SyncReport.Verdict(id: id, kind: .failed, refusals: entry.refusals))
                    stopAfterRequest(PassFailure(kind: .http, status: status, code: code), into: &decision)
                } else if case .notSent(let failure) = answer.verdict {
                    // Judged as a write alone, but never charged: a group is refused whole or not at all.
                    decision.verdicts.append(SyncReport.Verdict(id: id, kind: .notSent, refusals: entry.refusals))
                    var alone = Decision()
                    if let failure { decideRequestFailure(failure, input, [], isAtomic: false, into: &alone) }
                    stopAfterNotSent(alone, into: &decision)
                } else {
                    decision.verdicts.append(SyncReport.Verdict(id: id, kind: .skipped, refusals: entry.refusals))
                }
            }
            return
        }
        let aborted = Refusal(reason: "its atomic group was aborted")
        abortGroup(
            answered.map { id, entry, answer in
                switch answer.verdict {
                case .refused(let refusal): return (id, entry, refusal)
                case .blocked(let reason, let refusal):
                    return (id, entry, refusal ?? Refusal(reason: "blocked: \(reason.rawValue)"))
                default: return (id, entry, aborted)
                }
            }, input, into: &decision)
    }

    /// Nothing of an atomic group was applied: every write of it is refused (R4.5).
    private static func abortGroup(_ writes: [(WriteID, WriteEntry, Refusal)], _ input: Input, into decision: inout Decision) {
        decision.events.append(.batchAborted(BatchAborted(passId: input.passId, writes: writes.map(\.0))))
        for (id, entry, refusal) in writes { refuse(id, entry, refusal, input, into: &decision) }
    }

    // MARK: - Outcomes

    private static func refuse(
        _ id: WriteID, _ entry: WriteEntry, _ refusal: Refusal, _ input: Input, into decision: inout Decision
    ) {
        let refusals = entry.refusals + 1
        let state: WriteState = refusals >= input.maxRefusals ? .dead(refusal) : .refused(refusal)
        record(id, state, refusals: refusals, replayed: false, input, into: &decision)
    }

    /// A schema-cache failure (R4.3): counted when at least 30 s after the last counted one; the tenth
    /// refuses.
    private static func countSchemaRefusal(
        _ id: WriteID, _ entry: WriteEntry, _ refusal: Refusal, _ input: Input, into decision: inout Decision
    ) {
        if let last = entry.lastSchemaRefusalAt, input.at < last.adding(seconds: schemaRefusalSpacing) { return }
        let count = entry.schemaRefusals + 1
        decision.events.append(.schemaRefusalCounted(SchemaRefusalCounted(writeId: id, passId: input.passId, count: count)))
        if count >= schemaRefusalLimit { refuse(id, entry, refusal, input, into: &decision) }
    }

    private static func record(
        _ id: WriteID, _ state: WriteState, refusals: Int, replayed: Bool, _ input: Input, into decision: inout Decision
    ) {
        decision.events.append(
            .verdictRecorded(
                VerdictRecorded(writeId: id, passId: input.passId, state: state, refusals: refusals, replayed: replayed)))
        decision.verdicts.append(SyncReport.Verdict(id: id, state: state, refusals: refusals, replayed: replayed))
    }
}
