internal import OutboxLMDB

/// One sync pass (R4): sends the user's sendable writes in id order, batch by batch, and records what
/// came back. It keeps no state of its own that matters after a crash: it reads the projections, and
/// appends `attemptStarted` before each send and the answer with its decisions after (R4.6).
struct Pass {
    let log: EventLog
    let transport: any OutboxTransport
    let user: String
    let token: String?
    let table: String?
    let automatic: Bool
    let maxRefusals: Int
    let batchSize: Int
    /// True when the pass must end before its next request (network switched off, data being cleared).
    let shouldStop: @Sendable () -> Bool
    /// Throws when the client was closed or killed: the pass then records nothing more.
    let checkAlive: @Sendable () throws -> Void

    func run() async throws -> SyncReport {
        var report = SyncReport()
        if let session = try log.read({ try $0.session() }), session.identityChanged, session.user == user {
            report.stoppedBy = PassFailure(kind: .identityChanged)
            report.remainingCount = try remaining()
            return report
        }
        var passId: UInt64?
        var done = Set<WriteID>()
        var halves: [[WriteID]] = []
        var stoppedBy: PassFailure?
        passLoop: while !shouldStop() {
            try checkAlive()
            let planner = Planner(user: user, table: table, batchSize: batchSize, done: done)
            let planned: Planner.Batch?
            if halves.isEmpty {
                planned = try log.read { try planner.nextBatch($0) }
            } else {
                let half = halves.removeFirst()
                planned = Planner.Batch(writes: try log.read { try planner.stillReady(half, $0) })
            }
            guard let batch = planned else { break }
            let (outgoing, unmade) = try log.read { try requests(for: batch.writes, $0) }
            let id = try await begin(passId)
            passId = id
            if !unmade.isEmpty {
                for verdict in try await recordUnmade(unmade, passId: id) {
                    report.add(verdict)
                    done.insert(verdict.id)
                }
                continue
            }
            guard !outgoing.isEmpty else { continue }
            let sent = outgoing.map { AttemptStarted.Sent(id: $0.id, idempotencyKey: $0.idempotencyKey) }
            _ = try await log.append(sync: .withoutMetaSync) { try $0.append(.attemptStarted(AttemptStarted(passId: id, writes: sent))) }
            let answer = await transport.send(OutgoingBatch(writes: outgoing, isAtomic: batch.isAtomic), accessToken: token)
            log.crashPlan?.pass(.passAfterSend)
            try checkAlive()
            let writes = outgoing.map(\.id)
            let maxRefusals = self.maxRefusals
            let decision = try await log.append(sync: .withoutMetaSync, crashPoint: .passAnswerBeforeCommit) { appender in
                try appender.append(.answerReceived(AnswerReceived(passId: id, writes: writes, answer: answer)))
                let input = Decider.Input(passId: id, writes: writes, answer: answer, maxRefusals: maxRefusals, at: appender.time)
                let reader = appender.reader
                let decision = try Decider.decide(input, entry: { try reader.entry($0) })
                for event in decision.events { try appender.append(event) }
                return decision.sendable
            }
            for verdict in decision.verdicts {
                report.add(verdict)
                done.insert(verdict.id)
            }
            switch decision.next {
            case .goOn: continue
            case .stop(let failure):
                stoppedBy = failure
                break passLoop
            case .split:
                let middle = writes.count / 2
                halves.insert(contentsOf: [Array(writes[..<middle]), Array(writes[middle...])], at: 0)
            }
        }
        if let passId {
            try checkAlive()
            let stoppedBy = stoppedBy
            _ = try await log.append(sync: .withoutMetaSync) { try $0.append(.passEnded(PassEnded(passId: passId, stoppedBy: stoppedBy))) }
        }
        report.stoppedBy = stoppedBy
        report.retryAfter = stoppedBy?.retryAfter
        let planner = Planner(user: user, table: table, batchSize: batchSize, done: [])
        (report.heldCount, report.heldBehindOtherTablesCount) = try log.read { try planner.heldCounts($0) }
        report.remainingCount = try remaining()
        return report
    }

    /// Appends `passStarted` before the first request (a pass with nothing to send leaves no trace).
    private func begin(_ passId: UInt64?) async throws -> UInt64 {
        if let passId { return passId }
        let (user, table, automatic, maxRefusals, batchSize) = (user, table, automatic, maxRefusals, batchSize)
        return try await log.append(sync: .withoutMetaSync) { appender in
            let id = appender.nextSequence
            try appender.append(
                .passStarted(
                    PassStarted(passId: id, user: user, table: table, automatic: automatic, maxRefusals: maxRefusals, batchSize: batchSize)))
            return id
        }
    }

    /// The user's writes still pending.
    private func remaining() throws -> Int {
        try log.read { try $0.counters(user: user).pending }
    }

    /// The requests of a batch, and the writes that can no longer be made into one (R4.3 "unmade").
    private func requests(for ids: [WriteID], _ reader: StoreReader) throws -> ([OutgoingWrite], [(WriteID, String)]) {
        let origin = try reader.origin()
        var outgoing: [OutgoingWrite] = []
        var unmade: [(WriteID, String)] = []
        for id in ids {
            guard let entry = try reader.entry(id), entry.state.isSendable else { continue }
            let queued: WriteQueued
            do {
                guard case .writeQueued(let found)? = try reader.record(entry.queuedSequence)?.event, found.id == id else {
                    unmade.append((id, "its queued event is missing"))
                    continue
                }
                queued = found
            } catch {
                unmade.append((id, "the stored write no longer decodes"))
                continue
            }
            let write = OutgoingWrite(
                id: id, origin: origin, idempotencyKey: entry.idempotencyKey, table: queued.table, operation: queued.operation,
                key: queued.key, body: queued.body, baseVersion: queued.baseVersion, dependsOn: queued.dependencies)
            if let reason = transport.unmadeReason(for: write) {
                unmade.append((id, reason))
            } else {
                outgoing.append(write)
            }
        }
        return (outgoing, unmade)
    }

    /// Refuses, final and with no server error, the writes that cannot be made into a request.
    private func recordUnmade(_ unmade: [(WriteID, String)], passId: UInt64) async throws -> [SyncReport.Verdict] {
        try await log.append(sync: .withoutMetaSync) { appender in
            var verdicts: [SyncReport.Verdict] = []
            for (id, reason) in unmade {
                guard let entry = try appender.reader.entry(id) else { continue }
                let state = WriteState.refused(Refusal(reason: "unmade: \(reason)", isFinal: true))
                try appender.append(
                    .verdictRecorded(VerdictRecorded(writeId: id, passId: passId, state: state, refusals: entry.refusals)))
                verdicts.append(SyncReport.Verdict(id: id, state: state, refusals: entry.refusals, replayed: false))
            }
            return verdicts
        }
    }
}

extension Decider.Decision {
    /// What the pass keeps of a decision once its events are appended.
    var sendable: Outcome { Outcome(next: next, verdicts: verdicts) }

    struct Outcome: Sendable {
        var next: Decider.Next
        var verdicts: [SyncReport.Verdict]
    }
}

extension StoreReader {
    /// The log's origin (R2.1).
    func origin() throws -> Origin {
        guard let bytes = try value(.meta, MetaKey.origin) else { throw OutboxError(.damaged, "the log has no origin") }
        return try bytes.withUnsafeBytes { raw in
            var r = ByteReader(raw)
            return try Origin.decode(from: &r)
        }
    }

    /// The user's counts, read together (R7.1).
    func counters(user: String) throws -> Counters {
        try value(.counters, Key.userPrefix(user)).map { try Counters.decode($0) } ?? Counters()
    }
}
