/// Read-only access to a log file, for the tools (R8.6): opens without creating anything and never
/// writes to the data file.
package final class LogInspector: Sendable {
    package let log: EventLog

    /// Opens the log at `path` read-only. A missing log throws `.doesNotExist`; a foreign or damaged one `.damaged`.
    package init(path: String, archive: String? = nil) throws {
        var options = EventLog.Options()
        options.readOnly = true
        options.archiveFolder = archive
        log = try EventLog(path: path, options: options)
    }

    /// Every write the queue holds, in id order; only `user`'s when given.
    package func all(user: String?) throws -> [QueuedWrite] {
        try log.read { try QueuedWrite.all(user: user, reader: $0) }
    }

    package func history(of id: WriteID) throws -> [RecordedEvent] { try log.history(of: id) }

    /// What holds write `id` now (any user's), as `queue.explain(_:)` says it; nil when the queue does
    /// not hold it.
    package func explain(_ id: WriteID, now: Timestamp) throws -> WriteExplanation? {
        try log.read { try Explainer.explain(id, reader: $0, context: Explainer.Context(now: now)) }
    }

    package func forEachEvent(from: UInt64, to: UInt64, _ body: (RecordedEvent) throws -> Bool) throws {
        try log.forEachEvent(from: from, to: to, body)
    }

    package func verify(progress: ((UInt64) -> Void)? = nil) throws -> VerifyReport { try log.verify(progress: progress) }

    package func state(asOf sequence: UInt64) throws -> QueueSnapshot { try log.state(asOf: sequence) }

    package func withState<R>(
        asOf sequence: UInt64, progress: ((UInt64) -> Void)? = nil, _ body: (PastState) throws -> R
    ) throws -> R {
        try log.withState(asOf: sequence, progress: progress, body)
    }

    /// Calls `body` with each write the queue holds, in id order; only `user`'s when given.
    package func forEachWrite(user: String?, _ body: (QueuedWrite) throws -> Void) throws {
        try log.read { reader in
            try QueuedWrite.forEach(user: user, reader: reader) { write in
                try body(write)
                return true
            }
        }
    }

    package func lastSequence() throws -> UInt64 { try log.lastSequence() }
}

extension LogInspector {
    /// Every stored record of an open client's log (the damaged-log harness).
    package static func records(of client: OutboxClient) throws -> [(sequence: UInt64, bytes: [UInt8])] {
        try client.log.storedRecords()
    }

    /// Runs `body` inside a read transaction (the reader-slot harness: a reader killed there).
    package func holdingARead(_ body: () -> Void) throws { try log.read { _ in body() } }

    package func checkDecisions() throws -> DecisionReport { try log.checkDecisions() }
}
