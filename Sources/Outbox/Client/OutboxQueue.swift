/// The queue calls: what the current user's queue holds, and acting on it.
///
/// Every call that clears or changes a write appends an event; nothing is deleted from the log.
public struct OutboxQueue: Sendable {
    let client: OutboxClient

    /// Every write the queue holds for the current user, in id order: pending, answered (until taken or
    /// forgotten), refused, blocked and dead.
    public func all() async throws -> [QueuedWrite] {
        try client.checkOpen()
        let user = try client.owner()
        return try await client.read { try QueuedWrite.all(user: user, reader: $0) }
    }

    /// One write of the current user's, as `all()` shows it, or nil when the queue does not hold it
    /// (taken, discarded, withdrawn, cancelled, or another user's).
    public func write(_ id: WriteID) async throws -> QueuedWrite? {
        try client.checkOpen()
        let user = try client.owner()
        return try await client.read { reader in
            guard let entry = try reader.entry(id), entry.user == user else { return nil }
            let session = try reader.session()
            return try QueuedWrite.render(
                id, entry, reader: reader, identityLatchedFor: session?.identityChanged == true ? session?.user : nil)
        }
    }

    /// Why the write is where it is now, and what would move it on: what it waits behind, what holds
    /// that write (a refusal, a block, the last pass's failure, a Retry-After, the session), and the
    /// calls that would free it. Throws `.notFound` for an id the queue does not hold for the current user.
    public func explain(_ id: WriteID) async throws -> WriteExplanation {
        try client.checkOpen()
        let user = try client.owner()
        let context = Explainer.Context(now: client.configuration.clock.now(), networkDisabled: client.isNetworkDisabled)
        return try await client.read { reader in
            _ = try QueueOperations.ownedEntry(id, user: user, reader: reader)
            guard let explanation = try Explainer.explain(id, reader: reader, context: context) else {
                throw OutboxError.notFound(id)
            }
            return explanation
        }
    }

    /// The current user's writes to one row (`table` and `key`), in id order: what the queue holds of
    /// it, pending, answered, refused, blocked or dead. For an app that shows one row's sync state.
    public func writes(table: String, key: JSONValue) async throws -> [QueuedWrite] {
        try client.checkOpen()
        let user = try client.owner()
        return try await client.read { reader in
            var writes: [QueuedWrite] = []
            try QueuedWrite.forEach(user: user, reader: reader) { write in
                if write.table == table && write.key == key { writes.append(write) }
                return true
            }
            return writes
        }
    }

    /// Clears the answered writes and returns them, in one step: two callers never both get one.
    /// An answered write that an unanswered write depends on stays.
    public func takeAnswered() async throws -> [QueuedWrite] {
        try client.checkOpen()
        let user = try client.owner()
        return try await client.log.append { appender in
            let answers = try QueueOperations.clearableAnswers(user: user, only: nil, reader: appender.reader)
            guard !answers.isEmpty else { return [] }
            let session = try appender.reader.session()
            let latched = session?.identityChanged == true ? session?.user : nil
            let writes = try answers.map {
                try QueuedWrite.render($0.0, $0.1, reader: appender.reader, identityLatchedFor: latched)
            }
            try appender.append(.answersTaken(AnswersCleared(writes: answers.map(\.0))))
            return writes
        }
    }

    /// Clears the answered writes; returns how many went.
    @discardableResult
    public func forgetAnswered() async throws -> Int { try await forget(only: nil) }

    /// Clears the named answered writes; returns how many went. Ids that are not answered, or that
    /// an unanswered write depends on, stay.
    @discardableResult
    public func forgetAnswered(ids: [WriteID]) async throws -> Int { try await forget(only: Set(ids)) }

    private func forget(only ids: Set<WriteID>?) async throws -> Int {
        try client.checkOpen()
        let user = try client.owner()
        return try await client.log.append { appender in
            let answers = try QueueOperations.clearableAnswers(user: user, only: ids, reader: appender.reader)
            guard !answers.isEmpty else { return 0 }
            try appender.append(.answersForgotten(AnswersCleared(writes: answers.map(\.0))))
            return answers.count
        }
    }

    /// Takes a refused or dead write, and the body it carried, out of the queue. Returns false
    /// for any other write, or one a waiting write depends on unless `withDependents`, which refuses
    /// those unsent (final). Returns false too while the outcome of the write's last send (or of a
    /// dependent's it would refuse) is unknown: the next pass resends it under its key and settles it.
    /// Throws `.notFound` for an id the queue does not hold.
    @discardableResult
    public func discard(_ id: WriteID, withDependents: Bool = false) async throws -> Bool {
        try client.checkOpen()
        let user = try client.owner()
        let discarded = try await client.log.append { appender in
            try QueueOperations.discard(id, user: user, withDependents: withDependents, appender: &appender)
        }
        if discarded { client.trigger(.released) }
        return discarded
    }

    /// Cancels a write nothing has sent yet: the app's undo. It leaves the queue; the writes that named
    /// it in `dependsOn` are refused unsent (they would build on a write that never happens), while the
    /// later writes to its row go on. A write of an atomic group takes its whole group with it. Returns
    /// false once any attempt to send it was made (its fate is then the instance's: wait for the
    /// verdict, or withdraw it); throws `notFound` for an id the queue does not hold.
    @discardableResult
    public func cancel(_ id: WriteID) async throws -> Bool {
        try client.checkOpen()
        let user = try client.owner()
        let cancelled = try await client.log.append { appender in
            try QueueOperations.cancel(id, user: user, appender: &appender)
        }
        if cancelled { client.trigger(.released) }
        return cancelled
    }

    /// Sends a blocked, refused or dead write again on the next pass, under a fresh idempotency key; its
    /// refusal count is kept. False for any other write (and for final refusals).
    @discardableResult
    public func release(_ id: WriteID) async throws -> Bool {
        try client.checkOpen()
        let user = try client.owner()
        let random = client.configuration.random
        let released = try await client.log.append { appender in
            try QueueOperations.release(id, user: user, random: random, appender: &appender)
        }
        if released { client.trigger(.released) }
        return released
    }

    /// Releases every write blocked for `reason`; returns how many.
    @discardableResult
    public func release(reason: BlockedReason) async throws -> Int {
        try client.checkOpen()
        let user = try client.owner()
        let random = client.configuration.random
        let count = try await client.log.append { appender in
            try QueueOperations.release(reason: reason, user: user, random: random, appender: &appender)
        }
        if count > 0 { client.trigger(.released) }
        return count
    }

    /// Takes a write blocked ancestorUnavailable, conflictUnresolved, failingAlone or instanceChanged out
    /// of the queue. It first reads the row from the instance; a failed read throws and changes
    /// nothing. Returns `.withdrawn(row:)` with the row as the instance holds it (null when none), or
    /// `.notWithdrawn` for any other write or when the write moved during the read.
    public func withdraw(_ id: WriteID) async throws -> WithdrawOutcome {
        try client.checkOpen()
        let user = try client.owner()
        let (entry, queued) = try await client.read { reader in
            (try QueueOperations.ownedEntry(id, user: user, reader: reader), try reader.queuedEvent(of: id))
        }
        guard QueueOperations.isWithdrawable(entry.state), let queued else { return .notWithdrawn }
        if client.isNetworkDisabled {
            throw OutboxError(.networkDisabled, "withdraw reads the row from the instance, and network access is switched off")
        }
        guard let transport = client.transport else {
            throw OutboxError(.noTransport, "withdraw reads the row from the instance, and this client has no transport")
        }
        let token: String?
        switch try await client.resolveToken(for: user) {
        case .token(let resolved): token = resolved
        case .none:
            throw OutboxError(
                .rowReadFailed, "the token provider gave no token to read the row of write \(id); nothing changed", writeID: id)
        case .otherUser:
            throw OutboxError(
                .rowReadFailed, "the token provider's token is another user's; the row of write \(id) was not read", writeID: id)
        }
        let row: JSONValue
        do {
            row = try await transport.readRow(table: queued.table, key: queued.key, accessToken: token) ?? .null
        } catch let error as OutboxError {
            throw error
        } catch {
            // The transport's error is kept as the cause, never in the message: it may carry the server's text.
            throw OutboxError(
                .rowReadFailed, "reading the row of write \(id) from the instance failed; nothing changed", writeID: id,
                cause: error)
        }
        // What the instance holds is recorded in the log: it must read back like any write's body.
        guard let length = try? CanonicalJSON(row).checkedTextLength(), length <= Write.maxJSONBytes else {
            throw OutboxError(
                .rowReadFailed,
                "the row of write \(id) the instance holds is not a row the log can keep (over \(Write.maxJSONBytes) bytes, nested deeper than \(JSONText.maxDepth) levels, or not finite); nothing changed",
                writeID: id)
        }
        let withdrawn = try await client.log.append { appender in
            try QueueOperations.withdraw(id, user: user, expected: entry, row: row, appender: &appender)
        }
        return withdrawn ? .withdrawn(row: row) : .notWithdrawn
    }
}

/// What `withdraw` did.
public enum WithdrawOutcome: Hashable, Sendable {
    /// The write left the queue; `row` is what the instance holds (null when it holds none).
    case withdrawn(row: JSONValue)
    /// The write is not one that can be withdrawn (or it moved during the read).
    case notWithdrawn
}
