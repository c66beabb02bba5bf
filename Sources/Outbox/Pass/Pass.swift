internal import OutboxLMDB

/// One sync pass (R4): sends the user's sendable writes in id order, batch by batch, and records what
/// came back. It keeps no state of its own that matters after a crash: it reads the projections, and
/// appends `attemptStarted` before each send and the answer with its decisions after (R4.6).
struct Pass: Sendable {
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
    /// Asks the app's token provider again, after the server refused the token as expired or invalid
    /// (R7.5); nil when the app gives tokens through the session.
    var refreshToken: (@Sendable () async -> String?)? = nil

    /// What the pass carries from one transaction to the next.
    struct Progress: Sendable {
        var passId: UInt64?
        /// Writes answered in this pass and still sendable (refused, skipped, failed, not sent): not sent
        /// again in it (R3.1).
        var done = Set<WriteID>()
        /// The user's rejected list as the pass first read it, less the writes done since (`Planner.rejected`).
        var rejected: [WriteID]?
        /// The batch being sent: its writes not sent yet, in parts sent one after the other (the batch as
        /// planned, or before it the halves of a refused request, R4.5), each part as the transport's
        /// requests (R9.3). Empty between batches.
        var batch: [Part] = []
        /// Whether a request of the batch being sent was attempted already.
        var inBatch = false
        /// Whether the batch being sent was planned in an earlier transaction than its next request's.
        var plannedEarlier = false
        /// A write of the batch failed alone (R4.4): the pass stops once the batch is sent.
        var finishing: PassFailure?
        /// The report lines of the last transaction.
        var verdicts: [SyncReport.Verdict] = []
        var stoppedBy: PassFailure?
        /// Whether the request planned next follows a write answered in a commit that a power loss could
        /// still undo: that commit is made durable before the request goes (R9.3, decision 013).
        var flushBeforeSend = false
        /// The acknowledged watermark read before the last planning commit, which its request carries
        /// (R8.9); nil when the transport does not prune by it.
        var watermark: UInt64?
    }

    /// Writes of a batch still to send, planned together (its writes may follow one another).
    struct Part: Sendable {
        var writes: [OutgoingWrite]
        var isAtomic: Bool
        /// How many writes the part had when planned: the batch that a request's answer is judged in.
        var count: Int
        /// What the writes of its batch follow (`Planner.Batch.follows`).
        var follows: Set<WriteID>
    }

    /// One request, its `attemptStarted` committed.
    struct Request: Sendable {
        var writes: [OutgoingWrite]
        var isAtomic: Bool
        /// How many writes its batch holds (`Part.count`).
        var batchCount: Int
        /// What the writes of its batch follow (`Part.follows`).
        var follows: Set<WriteID>
    }

    /// What a transaction of the pass leaves to do next.
    enum Step: Sendable {
        /// Send this request (its `attemptStarted` committed).
        case send(Request)
        /// Ask the transport about these writes, outside any transaction, then plan again.
        case prepare(Lookup)
        /// The pass ended (its `passEnded` appended, if it started).
        case ended
    }

    /// Writes the pass means to send and has not asked the transport about yet.
    enum Lookup: Sendable {
        /// A batch the planner chose: what each write's request is, or why it cannot be made.
        case batch(Planner.Batch)
        /// The rest of a batch: how the transport splits it into requests.
        case part(Part)
    }

    /// What the transport said of the writes a request may carry, asked outside any transaction
    /// (R9.1): the pass plans in its write transactions from this alone, so a transport's mapping
    /// never runs while the log is locked. Each transaction finds here what the one before foresaw;
    /// what it did not foresee is prepared between two transactions (one commit more, rare).
    struct Prepared: Sendable {
        enum Made: Sendable {
            case write(OutgoingWrite)
            case unmade(String)
        }

        /// What is made of each write, by id: a batch's ids ascend, so they are kept in order and
        /// searched, not hashed.
        struct MadeWrites: Sendable {
            private var ids: [WriteID] = []
            private var made: [Made] = []

            mutating func reserveCapacity(_ count: Int) {
                ids.reserveCapacity(count)
                made.reserveCapacity(count)
            }

            subscript(id: WriteID) -> Made? { ids.ascendingIndex(of: id).map { made[$0] } }

            /// Calls `body` with each write's id and what is made of it, in id order.
            func forEachMade(_ body: (WriteID, Made) throws -> Void) rethrows {
                for index in ids.indices { try body(ids[index], made[index]) }
            }

            /// Keeps what is made of write `id` (in place of what was, if anything was).
            mutating func set(_ made: Made, for id: WriteID) {
                if ids.last.map({ $0 < id }) ?? true {
                    ids.append(id)
                    self.made.append(made)
                    return
                }
                let index = ids.ascendingInsertionIndex(of: id)
                if index < ids.endIndex, ids[index] == id {
                    self.made[index] = made
                } else {
                    ids.insert(id, at: index)
                    self.made.insert(made, at: index)
                }
            }
        }

        /// Each write as the instance would receive it, or why the transport cannot make it.
        var writes = MadeWrites()
        /// The atomic group asked about (its writes, in order), and why it cannot go as one request
        /// (nil when it can).
        var group: (writes: [WriteID], unmade: String?)?
        /// How many leading writes of a batch's rest (its writes, in order) one request carries.
        var sizes: [[WriteID]: Int] = [:]
        /// The batch planned ahead, on the snapshot `snapshot` (a read transaction's id; moved to the
        /// commit after it when that commit ran the pass's job alone), with the writes `inFlight`
        /// counted as answered (`Pass.carriedPlan`).
        var plan: (batch: Planner.Batch, snapshot: UInt64, inFlight: [WriteID])?
    }

    func run() async throws -> SyncReport {
        var report = SyncReport()
        if let session = try await offPool({ [log] in try log.read { try $0.session() } }), session.identityChanged,
            session.user == user
        {
            report.stoppedBy = PassFailure(kind: .identityChanged)
            report.remainingCount = try await remaining()
            // R7.3: they count as blocked while the session is latched.
            report.blockedCount = report.remainingCount
            return report
        }
        try checkAlive()
        // The first request is planned in a transaction of its own; every later one in the transaction
        // that records the answer before it, so a batch costs one commit (R2.3: pass events with
        // MDB_NOMETASYNC), and its `attemptStarted` is committed before it is sent (R4.6). What the
        // transport says of the writes is asked between transactions (`Prepared`).
        var prepared = try await offPool { [self] in try readAhead(after: Progress(), inFlight: []) }
        var first = Progress()
        first.watermark = try await acknowledgedWatermark(after: nil)
        var (progress, step, preparedNext) = try await appendStep(readingAhead: prepared, after: first) {
            [self, prepared, first] appender in
            var progress = first
            let step = try next(&appender, &progress, prepared)
            return (progress, step)
        }
        var token = self.token
        var refreshed = false
        var answered: Leftovers?
        passing: while true {
            report.add(progress.verdicts)
            progress.verdicts = []
            var carried = progress
            switch step {
            case .ended:
                break passing
            case .prepare(let lookup):
                prepared = try await offPool { [self] in try prepare(lookup) }
                carried.watermark = try await acknowledgedWatermark(after: carried.watermark)
                (progress, step, preparedNext) = try await appendStep(readingAhead: prepared, after: carried) {
                    [self, prepared, carried] appender in
                    var progress = carried
                    let step = try next(&appender, &progress, prepared)
                    noteFollowers(of: step, &progress)
                    return (progress, step)
                }
            case .send(let sending):
                // A power loss may undo the last commit: the request must not go ahead of the answers
                // it follows while they could be lost, or a resend of them would come after it (R9.3).
                if progress.flushBeforeSend { try await offPool { [log] in try log.makeLastCommitDurable() } }
                prepared = preparedNext
                let watermark = progress.watermark.flatMap { $0 > 0 ? WriteID($0) : nil }
                let batch = OutgoingBatch(writes: sending.writes, isAtomic: sending.isAtomic, acknowledgedWatermark: watermark)
                let received = await send(batch, token: &token, refreshed: &refreshed)
                log.crashPlan?.pass(.passAfterSend)
                try checkAlive()
                carried.watermark = try await acknowledgedWatermark(after: carried.watermark)
                (progress, step, preparedNext) = try await appendStep(
                    crashPoint: .passAnswerBeforeCommit, readingAhead: prepared, after: carried, answering: sending,
                    freeing: answered
                ) { [self, prepared, carried] appender in
                    var progress = carried
                    progress.flushBeforeSend = false
                    let step = try record(received, to: sending, &appender, &progress, prepared)
                    noteFollowers(of: step, &progress)
                    return (progress, step)
                }
                answered = Leftovers(consume sending, consume batch)
            }
        }
        report.add(progress.verdicts)
        // A journaled log commits a pass's answers without flushing each: they reach the disk when the
        // pass returns. A pass stopped by a Retry-After flushes in any log, so that its deadline (R5.3)
        // outlives a power loss.
        let stoppedForAWhile = progress.stoppedBy?.retryAfter != nil
        try await offPool { [log] in try stoppedForAWhile ? log.makeLastCommitDurable() : log.makePassDurable() }
        report.stoppedBy = progress.stoppedBy
        report.retryAfter = progress.stoppedBy?.retryAfter
        let planner = Planner(user: user, table: table, batchSize: batchSize, done: [])
        (report.heldCount, report.heldBehindOtherTablesCount, report.heldBehindDeadOrBlockedCount) = try await offPool {
            [log, user] in
            try log.read {
                let (held, behindOtherTables) = try planner.heldCounts($0)
                return (held, behindOtherTables, try Explainer.holders(user: user, reader: $0).held.count)
            }
        }
        report.remainingCount = try await remaining()
        return report
    }

    /// Sends `batch` with `token`. A token the server calls expired or invalid is asked for once more
    /// in the pass (R7.5), and the same request goes again under the same keys (from the first write
    /// it kept from being sent); a second refusal stops the pass as any 401.
    private func send(_ batch: OutgoingBatch, token: inout String?, refreshed: inout Bool) async -> RequestAnswer {
        let answer = await transport.send(batch, accessToken: token)
        guard !refreshed, let refreshToken, let index = answer.tokenRefusedAt else { return answer }
        refreshed = true
        guard let fresh = await refreshToken(), !fresh.isEmpty else { return answer }
        token = fresh
        let rest = OutgoingBatch(
            writes: Array(batch.writes[index...]), isAtomic: batch.isAtomic, acknowledgedWatermark: batch.acknowledgedWatermark)
        return answer.resumed(at: index, with: await transport.send(rest, accessToken: fresh))
    }

    /// The acknowledged watermark of the log as committed now (R8.9), for the request the next planning
    /// commit plans, when the transport prunes by it and commits reach the disk; nil otherwise.
    private func acknowledgedWatermark(after known: UInt64?) async throws -> UInt64? {
        guard transport.prunesByWatermark, log.commitsAreDurableAsFull else { return nil }
        return try await offPool { [log] in
            let watermark = try log.read { try Watermark.acknowledged($0, from: known ?? 0) }
            // The instance forgets the answers under it: they reach the disk before a request carries
            // it (a journaled log's pass commits are not flushed one by one).
            if watermark > 0 { try log.makeLastCommitDurable() }
            return watermark
        }
    }

    /// Appends a transaction of the pass (R2.3: `MDB_NOMETASYNC`), and reads ahead for the request
    /// after the one it leaves to send, the transport asked about it (`prepare`). When the transaction
    /// is to send the batch `prepared` planned ahead, the batch after it is planned on a read thread
    /// while the transaction runs and commits (`readAhead`, on the snapshot before the commit, with the
    /// request answered and that batch counted as answered): the read and the commit's flush overlap.
    /// It stands when the commit ran this job alone (`carriedPlan` checks the rest); otherwise the
    /// read is made again after.
    private func appendStep(
        crashPoint: CrashPoint? = nil, readingAhead prepared: Prepared, after progress: Progress,
        answering request: Request? = nil, freeing leftovers: Leftovers? = nil,
        _ work: @escaping @Sendable (inout Appender) throws -> (Progress, Step)
    ) async throws -> (Progress, Step, Prepared) {
        var early: PendingRead<Prepared>?
        if progress.batch.isEmpty, progress.finishing == nil, let plan = prepared.plan {
            let inFlight = (request?.writes.map(\.id) ?? []) + plan.batch.writes
            early = log.reads.start { [self] in
                defer { leftovers?.free() }
                return try readAhead(after: progress, inFlight: inFlight)
            }
        }
        let committed: ((Progress, Step), EventLog.Commit)
        do {
            committed = try await log.appendReportingCommit(sync: .withoutMetaSync, crashPoint: crashPoint, work)
        } catch {
            // The read ends before the pass does: the log may be closed after.
            _ = try? await early?.value
            throw error
        }
        let ((progress, step), commit) = committed
        let read = try await early?.value
        guard case .send(let sending) = step else { return (progress, step, Prepared()) }
        if let part = progress.batch.first { return (progress, step, prepare(part)) }
        if var read, let snapshot = read.plan?.snapshot {
            // Read after the commit, or before it when the commit was this job's alone.
            if snapshot == commit.transaction { return (progress, step, read) }
            if snapshot &+ 1 == commit.transaction, commit.isAlone {
                read.plan?.snapshot = commit.transaction
                return (progress, step, read)
            }
        }
        let inFlight = sending.writes.map(\.id)
        return (progress, step, try await offPool { [self] in try readAhead(after: progress, inFlight: inFlight) })
    }

    /// A request answered and recorded, which the pass no longer needs: its writes (their bodies and
    /// keys, read and made on a read thread) are freed by the next read ahead, on that thread, rather than
    /// by the pass on the log's writer, whose commits they would lengthen (decision 012).
    final class Leftovers: @unchecked Sendable {
        // @unchecked: set when made, then taken once, by the read that frees it.
        private var request: Request?
        private var batch: OutgoingBatch?

        init(_ request: consuming Request, _ batch: consuming OutgoingBatch) {
            self.request = request
            self.batch = batch
        }

        func free() {
            request = nil
            batch = nil
        }
    }

    /// Runs `body` on the log's read threads: the pass runs on Swift's pool, where no thread may wait
    /// on LMDB or the disk.
    private func offPool<R: Sendable>(_ body: @escaping @Sendable () throws -> R) async throws -> R {
        try await log.reads.run(body)
    }

    /// Notes whether the request `step` sends may follow (R2.2) a write given a verdict in this
    /// transaction: one of its batch's writes does (a later request of the batch may flush once more
    /// than it needs; a batch of independent writes never does).
    private func noteFollowers(of step: Step, _ progress: inout Progress) {
        guard case .send(let request) = step, !request.follows.isEmpty else { return }
        if progress.verdicts.contains(where: { request.follows.contains($0.id) }) { progress.flushBeforeSend = true }
    }

    /// Records an answer and the decisions on it (R4.3–R4.5); then ends the pass, or plans the next request.
    private func record(
        _ answer: RequestAnswer, to request: Request, _ appender: inout Appender, _ progress: inout Progress,
        _ prepared: Prepared
    ) throws -> Step {
        guard let passId = progress.passId else { return .ended }
        // Whether this job is the transaction's first: nothing before it changed what the plan read.
        let first = appender.appended.isEmpty
        let writes = request.writes.map(\.id)
        let answer = answer.bounded(writes: writes.count)
        try appender.append(.answerReceived(AnswerReceived(passId: passId, writes: writes, answer: answer)))
        let input = Decider.Input(
            passId: passId, writes: writes, batchCount: request.batchCount, answer: answer, maxRefusals: maxRefusals,
            at: appender.time)
        let reader = appender.reader
        let decision = try Decider.decide(input, entry: { try reader.entry($0) })
        for event in decision.events { try appender.append(event) }
        progress.verdicts += decision.verdicts
        // Only answers that leave a write sendable need remembering: the others take it out of the lists
        // the planner reads (a drain of a million accepted writes keeps no million-entry set).
        progress.done.formUnion(decision.verdicts.filter { [.refused, .skipped, .failed, .notSent].contains($0.kind) }.map(\.id))
        switch decision.next {
        case .goOn: break
        case .stop(let failure):
            progress.stoppedBy = failure
            progress.batch = []
            try appender.append(.passEnded(PassEnded(passId: passId, stoppedBy: failure)))
            return .ended
        case .finishBatch(let failure):
            progress.finishing = progress.finishing ?? failure
        case .split:
            // The halves go before the rest of the batch, each a part of its own, at once (R4.5).
            let middle = request.writes.count / 2
            let halves = [Array(request.writes[..<middle]), Array(request.writes[middle...])]
            progress.batch.insert(
                contentsOf: halves.map {
                    Part(writes: $0, isAtomic: request.isAtomic, count: $0.count, follows: request.follows)
                },
                at: 0)
        }
        let plan = first ? try carriedPlan(prepared, answering: writes, decision, appender) : nil
        return try next(&appender, &progress, prepared, plan: plan)
    }

    /// The batch planned ahead, when it is the batch the planner would choose now: it was planned on
    /// the snapshot this transaction follows directly (no commit between, of this process or another,
    /// and no job before this one in it; or only a commit of this pass's alone, `appendStep`), counting
    /// some writes as answered (the request in flight, and the one before it when read before that
    /// one's commit) that all are now, this request's among them: nothing the plan read has changed
    /// but what it foresaw. A batch is then planned once, not again in the commit that records the
    /// answer before it.
    private func carriedPlan(
        _ prepared: Prepared, answering writes: [WriteID], _ decision: Decider.Decision, _ appender: Appender
    ) throws -> Planner.Batch? {
        guard let plan = prepared.plan, plan.snapshot &+ 1 == appender.transactionID, case .goOn = decision.next
        else { return nil }
        for id in writes where !plan.inFlight.ascendingContains(id) { return nil }
        for id in plan.inFlight where try appender.reader.entry(id)?.state.isAnswered != true { return nil }
        return plan.batch
    }

    /// Plans the next request and appends its `attemptStarted`: the rest of the batch being sent, or
    /// else a new batch, refusing on the way the writes that can no longer be made; or ends the pass
    /// when nothing can be sent now, or when a write of the batch just sent failed alone (R4.4). The
    /// pass starts (`passStarted`) with its first request: a pass with nothing to send leaves no trace.
    /// Writes the transport was not asked about yet are left for `prepare`, between transactions.
    private func next(
        _ appender: inout Appender, _ progress: inout Progress, _ prepared: Prepared, plan: Planner.Batch? = nil
    ) throws -> Step {
        // Carried only into the planning of a new batch, first thing.
        var carried = progress.batch.isEmpty ? plan : nil
        while !shouldStop() {
            var planner = Planner(user: user, table: table, batchSize: batchSize, done: progress.done)
            let done = progress.done
            progress.rejected =
                try progress.rejected.map { $0.filter { !done.contains($0) } } ?? planner.rejectedList(appender.reader)
            planner.rejected = progress.rejected
            if !progress.batch.isEmpty {
                switch try nextRequest(of: &progress, planner, &appender, prepared) {
                case .ended: continue
                case let step: return step
                }
            }
            if progress.finishing != nil { break }
            let isCarried = carried != nil
            let planned = try carried ?? planner.nextBatch(appender.reader)
            carried = nil
            guard let batch = planned else { break }
            // A batch goes once the transport was asked about every write of it.
            guard batch.writes.allSatisfy({ prepared.writes[$0] != nil }) else { return .prepare(.batch(batch)) }
            var (outgoing, unmade) = try requests(for: batch.writes, prepared, isCarried ? nil : appender.reader)
            // A group the transport cannot send as one all-or-none request is unmade whole (R4.3, R4.5).
            if batch.isAtomic, unmade.isEmpty, outgoing.count > 1 {
                guard let group = prepared.group, group.writes == outgoing.map(\.id) else { return .prepare(.batch(batch)) }
                if let reason = group.unmade {
                    unmade = outgoing.map { ($0.id, reason) }
                    outgoing = []
                }
            }
            if !unmade.isEmpty {
                let passId = try progress.passId ?? start(&appender)
                progress.passId = passId
                for (id, reason) in unmade {
                    guard let entry = try appender.reader.entry(id) else { continue }
                    let state = WriteState.refused(Refusal(reason: "unmade: \(reason)", isFinal: true))
                    try appender.append(
                        .verdictRecorded(VerdictRecorded(writeId: id, passId: passId, state: state, refusals: entry.refusals)))
                    progress.verdicts.append(SyncReport.Verdict(id: id, state: state, refusals: entry.refusals, replayed: false))
                    progress.done.insert(id)
                }
                continue
            }
            if !outgoing.isEmpty {
                progress.batch = [Part(writes: outgoing, isAtomic: batch.isAtomic, count: outgoing.count, follows: batch.follows)]
                progress.inBatch = false
                progress.plannedEarlier = false
            }
        }
        if let passId = progress.passId {
            progress.stoppedBy = progress.finishing
            try appender.append(.passEnded(PassEnded(passId: passId, stoppedBy: progress.finishing)))
        }
        progress.batch = []
        return .ended
    }

    /// The next request of the batch being sent, its `attemptStarted` appended: as many of the first
    /// part's leading writes as the transport sends in one request. Writes of the part that can no
    /// longer go (one before them in the batch was not applied, or the app took them out meanwhile)
    /// are left for a later pass, reported as skipped (R4.5). `.ended` when the first part had none
    /// left; `.prepare` when the transport was not asked how the part goes.
    private func nextRequest(
        of progress: inout Progress, _ planner: Planner, _ appender: inout Appender, _ prepared: Prepared
    ) throws -> Step {
        var part = progress.batch.removeFirst()
        // A batch's first request goes as planned, in this transaction; a later one is judged again:
        // answers and the app's calls may have changed its writes since.
        if progress.inBatch || progress.plannedEarlier {
            let ready = Set(try planner.stillReady(part.writes.map(\.id), appender.reader))
            for write in part.writes where !ready.contains(write.id) {
                guard let entry = try appender.reader.entry(write.id), entry.state.isSendable else { continue }
                progress.verdicts.append(SyncReport.Verdict(id: write.id, kind: .skipped, refusals: entry.refusals))
                progress.done.insert(write.id)
            }
            part.writes.removeAll { !ready.contains($0.id) }
            guard !part.writes.isEmpty else { return .ended }
            for index in part.writes.indices {
                part.writes[index].takeRenewedKey(of: try appender.reader.entry(part.writes[index].id))
            }
        }
        // An atomic group is one request, or it was unmade (`unmadeReason(forGroup:)`).
        let size: Int
        if part.isAtomic {
            size = part.writes.count
        } else if let known = prepared.sizes[part.writes.map(\.id)] {
            size = known
        } else {
            progress.batch.insert(part, at: 0)
            progress.plannedEarlier = true
            return .prepare(.part(part))
        }
        // The whole part in one request (the contract's batches) moves it, uncopied.
        let writes = size == part.writes.count ? part.writes : Array(part.writes.prefix(size))
        let passId = try progress.passId ?? start(&appender)
        progress.passId = passId
        let sent = writes.map { AttemptStarted.Sent(id: $0.id, idempotencyKey: $0.idempotencyKey) }
        try appender.append(
            .attemptStarted(
                AttemptStarted(passId: passId, writes: sent, batchCount: part.count, continuesBatch: progress.inBatch)))
        progress.inBatch = true
        if size < part.writes.count {
            part.writes.removeFirst(size)
            progress.batch.insert(part, at: 0)
        }
        return .send(Request(writes: writes, isAtomic: part.isAtomic, batchCount: part.count, follows: part.follows))
    }

    private func start(_ appender: inout Appender) throws -> UInt64 {
        let id = appender.nextSequence
        try appender.append(
            .passStarted(
                PassStarted(
                    passId: id, user: user, table: table, automatic: automatic, maxRefusals: maxRefusals, batchSize: batchSize)))
        return id
    }

    /// The user's writes still pending.
    private func remaining() async throws -> Int {
        try await offPool { [log, user] in try log.read { try $0.counters(user: user).pending } }
    }

    /// The requests of a batch, and the writes that can no longer be made into one (R4.3 "unmade"),
    /// as the transport said when it was asked (`prepare`): writes still sendable, each under its
    /// current key, as `reader` reads them; with no reader, as they were read ahead (a plan carried
    /// from the read ahead: nothing it read has changed since).
    private func requests(for ids: [WriteID], _ prepared: Prepared, _ reader: StoreReader?) throws -> (
        [OutgoingWrite], [(WriteID, String)]
    ) {
        var outgoing: [OutgoingWrite] = []
        outgoing.reserveCapacity(ids.count)
        var unmade: [(WriteID, String)] = []
        for id in ids {
            guard let made = prepared.writes[id] else { continue }
            var entry: WriteEntry?
            if let reader {
                entry = try reader.entry(id)
                guard entry?.state.isSendable == true else { continue }
            }
            switch made {
            case .write(var write):
                if let entry { write.takeRenewedKey(of: entry) }
                outgoing.append(write)
            case .unmade(let reason):
                unmade.append((id, reason))
            }
        }
        return (outgoing, unmade)
    }

    // MARK: - Asking the transport, between transactions

    /// The batch the next transaction will likely plan, between batches, after this one's request is
    /// sent: planned on the snapshot this reads, with the writes `inFlight` (the request's, and the
    /// batch's before it when read before its commit) as answered, its writes read, and the transport
    /// asked about them (`prepare`); nothing planned when the pass is ending or nothing is ready. The
    /// batch is planned and its writes are read in one snapshot, which reads each entry once.
    private func readAhead(after progress: Progress, inFlight: [WriteID]) throws -> Prepared {
        guard progress.finishing == nil, progress.stoppedBy == nil, !shouldStop() else { return Prepared() }
        var planner = Planner(user: user, table: table, batchSize: batchSize, done: progress.done)
        planner.rejected = progress.rejected
        let inFlight = inFlight.sorted()
        planner.inFlight = inFlight
        let (planned, snapshot) = try log.readAhead { reader in
            try planner.nextBatch(reader).map { batch in (batch, try outgoingWrites(of: batch, reader)) }
        }
        guard let (batch, built) = planned else { return Prepared() }
        var prepared = prepare(batch, built)
        prepared.plan = (batch, snapshot, inFlight)
        return prepared
    }

    /// Asks the transport about the writes of `lookup`, outside any transaction: what each write's
    /// request is or why it cannot be made, whether an atomic group goes as one request, and how the
    /// rest of a batch splits into requests (R9.1, R9.3).
    private func prepare(_ lookup: Lookup) throws -> Prepared {
        switch lookup {
        case .part(let part): return prepare(part)
        case .batch(let batch):
            return prepare(batch, try log.readAhead { reader in try outgoingWrites(of: batch, reader) }.result)
        }
    }

    /// How the rest of a batch splits into requests.
    private func prepare(_ part: Part) -> Prepared {
        var prepared = Prepared()
        prepared.sizes = requestSizes(of: part.writes)
        return prepared
    }

    /// What the transport says of a batch's writes, as `outgoingWrites` read them.
    private func prepare(_ batch: Planner.Batch, _ built: Prepared.MadeWrites) -> Prepared {
        var prepared = Prepared()
        prepared.writes = built
        var outgoing: [OutgoingWrite] = []
        outgoing.reserveCapacity(batch.writes.count)
        built.forEachMade { id, made in
            guard case .write(let write) = made else { return }
            if let reason = transport.unmadeReason(for: write) {
                prepared.writes.set(.unmade(reason), for: id)
            } else {
                outgoing.append(write)
            }
        }
        if batch.isAtomic {
            if outgoing.count > 1 {
                prepared.group = (
                    outgoing.map(\.id), transport.unmadeReason(forGroup: OutgoingBatch(writes: outgoing, isAtomic: true))
                )
            }
        } else {
            prepared.sizes = requestSizes(of: outgoing)
        }
        return prepared
    }

    /// The writes of `batch` as the instance would receive them, read from one snapshot; those no longer
    /// sendable left out.
    private func outgoingWrites(of batch: Planner.Batch, _ reader: StoreReader) throws -> Prepared.MadeWrites {
        let origin = try reader.origin()
        var built = Prepared.MadeWrites()
        built.reserveCapacity(batch.writes.count)
        for id in batch.writes {
            if let made = try outgoingWrite(id, origin, reader) { built.set(made, for: id) }
        }
        return built
    }

    /// How the transport sends `writes` as requests: for the writes left before each request, how many
    /// of them it carries (at least one).
    private func requestSizes(of writes: [OutgoingWrite]) -> [[WriteID]: Int] {
        var sizes: [[WriteID]: Int] = [:]
        var rest = writes[...]
        while !rest.isEmpty {
            let size = min(max(transport.requestSize(for: OutgoingBatch(writes: Array(rest))), 1), rest.count)
            sizes[rest.map(\.id)] = size
            rest = rest.dropFirst(size)
        }
        return sizes
    }

    /// Write `id` as the instance would receive it, or why it can no longer be made from the log; nil
    /// when it is no longer sendable.
    private func outgoingWrite(_ id: WriteID, _ origin: Origin, _ reader: StoreReader) throws -> Prepared.Made? {
        guard let entry = try reader.entry(id), entry.state.isSendable else { return nil }
        let queued: WriteQueued
        let createdAt: Timestamp
        do {
            guard let recorded = try reader.record(entry.queuedSequence), case .writeQueued(let found) = recorded.event,
                found.id == id
            else { return .unmade("its queued event is missing") }
            queued = found
            createdAt = recorded.at
        } catch {
            return .unmade("the stored write no longer decodes")
        }
        // Made field by field: every write it follows, not only those the app named.
        let made = Write(
            table: queued.table, operation: queued.operation, key: queued.canonicalKey, body: queued.canonicalBody,
            baseVersion: queued.baseVersion, dependsOn: entry.dependencies)
        var write = OutgoingWrite(
            id: id, origin: origin, idempotencyKey: entry.renewedKey ?? queued.idempotencyKey, write: made, user: queued.user,
            createdAt: createdAt)
        // R9.3: a delete sent before may have been applied by then.
        if queued.operation == .delete { write.isResend = try reader.hasEventsSinceQueued(id) }
        return .write(write)
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

    /// How many writes of users other than `user` are pending: their counters, nothing else decoded.
    func pendingCount(exceptUser user: String) throws -> Int {
        var count = 0
        try scan(.meta, MetaKey.countersPrefix, nil) { key, value in
            let other = key.withUnsafeBytes { MetaKey.user(ofCounters: $0) }
            if other != user { count += try value.withUnsafeBytes { try Counters.decode($0) }.pending }
            return true
        }
        return count
    }

    /// The user's counts, read together (R7.1).
    func counters(user: String) throws -> Counters {
        try value(.meta, MetaKey.counters(user)).map { try Counters.decode($0) } ?? Counters()
    }
}

extension OutgoingWrite {
    /// A write released since it was made goes under the fresh key its entry holds (R3.1).
    fileprivate mutating func takeRenewedKey(of entry: WriteEntry?) {
        if let renewed = entry?.renewedKey, idempotencyKey != renewed { idempotencyKey = renewed }
    }
}
