internal import OutboxLMDB

extension OutboxClient {
    /// Moves the log's events before sequence `horizon` (every event so far when nil) into a new
    /// segment of the archive and starts the log at a snapshot of the queue's state there; then
    /// writes the data file again without the room they took, so it shrinks on disk.
    ///
    /// Every write still in the queue (pending, refused, blocked, dead, or answered and not yet
    /// taken), and every write with an event at or after the horizon, keeps its whole history in the
    /// log. A write that left the queue before the horizon has its history in the archive, where
    /// `history(of:)` reads it; the app may delete or upload old segments (`archiveFolder`), and such a
    /// write's history then throws `.archived`, never a silent gap. The change feed resumes from the
    /// snapshot on. A crash at any point leaves the old log or the new one, and never loses a write.
    ///
    /// Waits for a running pass (of this process or another) up to `syncLockWait`, then throws
    /// `.busy`. While another process has the log open, the file is not shrunk
    /// (`CompactionReport.fileShrunk`): the next compaction does it.
    @discardableResult
    public func compact(before horizon: UInt64? = nil) async throws -> CompactionReport {
        try checkOpen()
        guard let lock = try await acquireSyncLock() else {
            throw OutboxError(.busy, "a pass holds the log's sync lock: the log was not compacted")
        }
        defer { withExtendedLifetime(lock) {} }
        let log = self.log
        let report = try await log.committer.exclusive { try log.compact(before: horizon, archive: log.archive) }
        await refreshStatusOffPool()
        return report
    }

    /// Runs a compaction when `configuration.compaction` says one is due; called between passes.
    func compactIfDue() async {
        let policy = configuration.compaction
        guard policy != .off, !isClosedNow else { return }
        let log = self.log
        let due: Bool
        do {
            due = try await log.reads.run { try log.compactionIsDue(policy) }
        } catch {
            return
        }
        guard due else { return }
        do {
            eventStream.send(.automaticCompaction(try await compact()))
        } catch let error as OutboxError {
            eventStream.send(.automaticCompactionFailed(error))
        } catch {
            eventStream.send(.automaticCompactionFailed(OutboxError(.storage, "the compaction failed: \(error)", cause: error)))
        }
    }
}

extension EventLog {
    /// Whether the log has passed a limit of `policy`: the bytes of its data file's pages in use (not
    /// the file's size, which runs ahead of them), or the writes that left the queue since their
    /// history was last archived (every write ever queued, less those the queue holds, less those the
    /// archive ends).
    func compactionIsDue(_ policy: OutboxConfiguration.CompactionPolicy) throws -> Bool {
        if let bytes = policy.logBytes, try storageErrors(path: path, { try environment.usedBytes() }) > bytes { return true }
        guard let limit = policy.settledWrites else { return false }
        return try storageErrors(path: path) {
            try environment.read { txn in
                let access = txn.unsafeAccess
                let next =
                    try access.get(tables[.meta], key: MetaKey.nextWriteId).map {
                        try MetaKey.readUInt64($0, name: MetaKey.nextWriteId)
                    } ?? 1
                let held = try access.count(tables[.writes])
                let archived = try compaction(in: access)?.segments.reduce(0) { $0 + $1.writeCount } ?? 0
                return Int(next - 1) - held - archived > limit
            }
        }
    }
}
