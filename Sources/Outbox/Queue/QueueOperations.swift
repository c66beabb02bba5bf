/// The local queue operations, as work for one write transaction. Each validates with reads first and
/// appends only once it knows it will succeed, so a refused call writes nothing (R2.4).
enum QueueOperations {
    /// Enqueues `writes` for `user` (R2.1, R2.2, R2.4); with `atomic`, as one group (R4.5).
    static func enqueue(_ writes: [Write], user: String, atomic: Bool, random: any RandomSource, appender: inout Appender) throws
        -> [WriteID]
    {
        let reader = appender.reader
        let first = try reader.nextWriteID()
        for write in writes {
            for dependency in write.dependsOn {
                guard dependency.rawValue > 0, dependency.rawValue < first else {
                    throw OutboxError.invalid("dependsOn names write \(dependency), which does not exist (yet)")
                }
                guard let queued = try reader.queuedEvent(of: dependency) else {
                    throw OutboxError.invalid("dependsOn names write \(dependency), which the log does not hold")
                }
                guard queued.user == user else {
                    throw OutboxError.invalid("dependsOn names write \(dependency) of another user")
                }
                // It could never be sent after a write that is never sent (R3.1).
                if try reader.entry(dependency)?.state.isRefusedForGood == true {
                    throw OutboxError.invalid("dependsOn names write \(dependency), which was refused for good: discard it")
                }
            }
        }
        let group = atomic && writes.count > 1 ? WriteQueued.AtomicGroup(first: WriteID(first), count: writes.count) : nil
        var ids: [WriteID] = []
        ids.reserveCapacity(writes.count)
        appender.reserveCapacity(writes.count)
        for (offset, write) in writes.enumerated() {
            let id = WriteID(first + UInt64(offset))
            let slot = try appender.rowSlot(user: user, table: write.table, key: write.canonicalKey)
            try appender.append(
                queued: WriteQueued(
                    id: id, user: user, write: write, follows: slot.unsettled, idempotencyKey: IdempotencyKey(using: random),
                    atomicGroup: group),
                slot: slot)
            ids.append(id)
        }
        return ids
    }

    /// The user's answered writes that no unanswered write depends on (R6.1), optionally only `ids`.
    static func clearableAnswers(user: String, only ids: Set<WriteID>?, reader: StoreReader) throws -> [(WriteID, WriteEntry)] {
        var found: [(WriteID, WriteEntry)] = []
        if let ids {
            // Named ids are looked up, in order: the queue may hold millions the app took none of.
            for id in ids.sorted() {
                if let entry = try reader.entry(id), entry.user == user, entry.state.isAnswered { found.append((id, entry)) }
            }
        } else {
            try forEachAnswered(user: user, reader: reader) { id, entry in found.append((id, entry)) }
        }
        return try found.filter { id, _ in try !hasWaitingDependents(id, reader: reader) }
    }

    /// The user's answered writes, in id order: those below the answered mark (the `answered` table),
    /// then the entries from the mark to the last answered (`Counters`), which a cursor reads, so the
    /// writes taken since cost nothing.
    private static func forEachAnswered(user: String, reader: StoreReader, _ body: (WriteID, WriteEntry) throws -> Void) throws {
        for id in try reader.listed(.answered, user: user) {
            guard let entry = try reader.entry(id), entry.state.isAnswered else { continue }
            // A damaged list key could name another user's write: never theirs to take (P7).
            guard entry.user == user else {
                throw DecodeFailure("the answered list of \(user) names write \(id), which belongs to another user")
            }
            try body(id, entry)
        }
        let counters = try reader.counters(user: user)
        guard counters.answeredFrom < counters.answeredTo else { return }
        try reader.scan(.writes, [], StoreKey.bytes(id: counters.answeredFrom)) { key, _ in
            let id = WriteID(try StoreKey.readBigEndian(key))
            guard id.rawValue < counters.answeredTo else { return false }
            if let entry = try reader.entry(id), entry.user == user, entry.state.isAnswered { try body(id, entry) }
            return true
        }
    }

    /// Whether a write still in the queue and not answered depends on `id`.
    static func hasWaitingDependents(_ id: WriteID, reader: StoreReader) throws -> Bool {
        try reader.dependents(of: id).contains { dependent in
            guard let entry = try reader.entry(dependent) else { return false }
            return !entry.state.isAnswered
        }
    }

    /// Refuses, unsent and final, every write that waits (directly or through others) on `id` (R4.2,
    /// R6.2, R6.4), with the reason "the <kind> it waits for was <how>": pending ones, and refused (not
    /// final), blocked or dead ones too. Those were built on a write that will never reach the
    /// instance; left as they were, a refused one would be retried forever and never settle.
    static func refuseDependents(of id: WriteID, kind: WriteOperation, how: String, appender: inout Appender) throws {
        try refuse(dependentsToRefuse(of: id, reader: appender.reader), kind: kind, how: how, appender: &appender)
    }

    /// Refuses `dependents` (`dependentsToRefuse(of:)`) unsent, with the reason `refuseDependents` gives.
    private static func refuse(_ dependents: [WriteID], kind: WriteOperation, how: String, appender: inout Appender) throws {
        for dependent in dependents {
            guard let entry = try appender.reader.entry(dependent) else { continue }
            try appender.append(
                .verdictRecorded(
                    VerdictRecorded(
                        writeId: dependent, passId: nil, state: .refused(.unsent(because: "the \(kind) it waits for was \(how)")),
                        refusals: entry.refusals)))
        }
    }

    /// The writes `refuseDependents(of:)` refuses, in id order.
    static func dependentsToRefuse(of id: WriteID, reader: StoreReader) throws -> [WriteID] {
        var frontier = [id]
        var seen: Set<WriteID> = [id]
        var refused: [WriteID] = []
        while let current = frontier.popLast() {
            for dependent in try reader.dependents(of: current) where seen.insert(dependent).inserted {
                guard let entry = try reader.entry(dependent), !entry.state.isAnswered else { continue }
                frontier.append(dependent)
                if case .refused(let refusal) = entry.state, refusal.isFinal { continue }
                refused.append(dependent)
            }
        }
        return refused.sorted()
    }

    /// Whether the write's last attempt has no answer of the instance's for it yet: a pass may be
    /// sending it now, or the answer was lost and the instance may have applied it. Only the pass
    /// that resends it settles it (decision 013).
    static func isInDoubt(_ id: WriteID, reader: StoreReader) throws -> Bool {
        for sequence in try reader.historySequences(of: id).reversed() {
            switch try reader.record(sequence)?.event {
            case .attemptStarted?: return true
            // Each write of the request answered (skipped and not sent included): nothing left unknown.
            // A request that failed: unknown only when the failure may pass (a lost answer, a 5xx).
            case .answerReceived(let received)?:
                switch received.answer {
                case .answered: return false
                case .failed(let failure): return failure.kind != .http || failure.meaning == .mayPass
                case .contractBroken: return true
                }
            case .verdictRecorded?, .verdictsRecorded?: return false
            default: continue
            }
        }
        return false
    }

    /// The entry of `id` if it belongs to `user`; otherwise the queue does not hold it for them.
    static func ownedEntry(_ id: WriteID, user: String, reader: StoreReader) throws -> WriteEntry {
        guard let entry = try reader.entry(id), entry.user == user else { throw OutboxError.notFound(id) }
        return entry
    }

    /// R6.2.
    static func discard(_ id: WriteID, user: String, withDependents: Bool, appender: inout Appender) throws -> Bool {
        let entry = try ownedEntry(id, user: user, reader: appender.reader)
        switch entry.state {
        case .refused, .dead: break
        default: return false
        }
        // A write refused for good holds nothing behind it (R3.1): it goes whatever was queued after it.
        let waited = try !entry.state.isRefusedForGood && hasWaitingDependents(id, reader: appender.reader)
        if waited && !withDependents { return false }
        // Not while a send of it, or of a write it would refuse, may be on its way: the instance could
        // apply it after the log said it was taken out or refused for good.
        if try isInDoubt(id, reader: appender.reader) { return false }
        let dependents = waited ? try dependentsToRefuse(of: id, reader: appender.reader) : []
        if try dependents.contains(where: { try isInDoubt($0, reader: appender.reader) }) { return false }
        let kind = try appender.reader.queuedEvent(of: id)?.operation ?? .custom("write")
        try appender.append(.writeDiscarded(WriteDiscarded(writeId: id, withDependents: withDependents)))
        try refuse(dependents, kind: kind, how: "discarded", appender: &appender)
        return true
    }

    /// R6.6: a pending write never attempted leaves the queue; the writes that named it in `dependsOn`
    /// (and theirs) are refused unsent; same-row followers go on, a cancelled write being settled.
    /// A write of an atomic group takes the whole group with it: it was made to apply all or none.
    static func cancel(_ id: WriteID, user: String, appender: inout Appender) throws -> Bool {
        let entry = try ownedEntry(id, user: user, reader: appender.reader)
        let ids = entry.atomicGroup.map { group in (0..<UInt64(group.count)).map { WriteID(group.first.rawValue + $0) } } ?? [id]
        for member in ids {
            guard let held = try appender.reader.entry(member), held.state == .pending else { return false }
            for sequence in try appender.reader.historySequences(of: member) {
                if case .attemptStarted? = try appender.reader.record(sequence)?.event { return false }
            }
        }
        let kind = try appender.reader.queuedEvent(of: id)?.operation ?? .custom("write")
        for member in ids { try appender.append(.writeCancelled(WriteCancelled(writeId: member))) }
        var frontier = ids
        var refused = Set<WriteID>()
        while let current = frontier.popLast() {
            for dependent in try appender.reader.dependents(of: current) where !refused.contains(dependent) {
                guard let queued = try appender.reader.queuedEvent(of: dependent), queued.dependsOn.contains(current),
                    let waiting = try appender.reader.entry(dependent), !waiting.state.isAnswered,
                    !waiting.state.isRefusedForGood
                else { continue }
                refused.insert(dependent)
                frontier.append(dependent)
            }
        }
        for dependent in refused.sorted() {
            guard let waiting = try appender.reader.entry(dependent) else { continue }
            try appender.append(
                .verdictRecorded(
                    VerdictRecorded(
                        writeId: dependent, passId: nil,
                        state: .refused(.unsent(because: "the \(kind) it waits for was cancelled")),
                        refusals: waiting.refusals)))
        }
        return true
    }

    /// Whether a write in this state may be released (R6.3): blocked, refused (unless final), dead.
    static func isReleasable(_ state: WriteState) -> Bool {
        switch state {
        case .blocked(let reason, _): return reason != .identityChanged
        case .refused(let refusal): return !refusal.isFinal
        case .dead: return true
        default: return false
        }
    }

    /// R6.3.
    static func release(_ id: WriteID, user: String, random: any RandomSource, appender: inout Appender) throws -> Bool {
        let entry = try ownedEntry(id, user: user, reader: appender.reader)
        guard isReleasable(entry.state) else { return false }
        try appender.append(
            .writeReleased(WriteReleased(writeId: id, idempotencyKey: IdempotencyKey(using: random), reason: nil)))
        return true
    }

    /// R6.3, by reason: every blocked write of `user` with that reason; returns how many.
    static func release(reason: BlockedReason, user: String, random: any RandomSource, appender: inout Appender) throws -> Int {
        var ids: [WriteID] = []
        try appender.reader.scan(.blocked, StoreKey.bytes(userPrefix: user), nil) { key, value in
            if value.byteCount == 1, value.unsafeLoad(as: UInt8.self) == reason.code { ids.append(try StoreKey.trailingID(key)) }
            return true
        }
        for id in ids {
            try appender.append(
                .writeReleased(WriteReleased(writeId: id, idempotencyKey: IdempotencyKey(using: random), reason: reason)))
        }
        return ids.count
    }

    /// The reasons a blocked write may be withdrawn for (R6.4).
    static let withdrawable: Set<BlockedReason> = [.ancestorUnavailable, .conflictUnresolved, .failingAlone, .instanceChanged]

    static func isWithdrawable(_ state: WriteState) -> Bool {
        if case .blocked(let reason, _) = state { return withdrawable.contains(reason) }
        return false
    }

    /// R6.4, after the row was read: false when the write moved meanwhile.
    static func withdraw(_ id: WriteID, user: String, expected: WriteEntry, row: JSONValue, appender: inout Appender) throws
        -> Bool
    {
        let entry = try ownedEntry(id, user: user, reader: appender.reader)
        guard entry == expected, isWithdrawable(entry.state) else { return false }
        let kind = try appender.reader.queuedEvent(of: id)?.operation ?? .custom("write")
        try appender.append(.writeWithdrawn(WriteWithdrawn(writeId: id, row: row)))
        try refuseDependents(of: id, kind: kind, how: "withdrawn", appender: &appender)
        return true
    }
}
