internal import OutboxLMDB

/// What `verify` found: nothing, or the first problem.
public struct VerifyReport: Hashable, Sendable, CustomStringConvertible {
    /// How many events were read.
    public let events: Int
    /// The first problem, or nil when the log is sound and the projections equal a rebuild.
    public let problem: String?
    /// The sequence number of the damaged record or gap, when the problem is in the log itself.
    public let sequence: UInt64?
    /// The archive's segments that were read and found whole, their chain of digests included.
    public let segmentsChecked: Int
    /// The archive's segments that are not in its folder: deleted or shipped elsewhere, which is the
    /// app's choice, not damage. Their events' histories read as archived.
    public let segmentsMissing: [ArchiveSegment]

    init(events: Int, problem: String?, sequence: UInt64?, segmentsChecked: Int = 0, segmentsMissing: [ArchiveSegment] = []) {
        self.events = events
        self.problem = problem
        self.sequence = sequence
        self.segmentsChecked = segmentsChecked
        self.segmentsMissing = segmentsMissing
    }

    /// Whether nothing was found wrong.
    public var isOK: Bool { problem == nil }
    public var description: String {
        if let problem { return problem }
        guard segmentsChecked > 0 || !segmentsMissing.isEmpty else { return "ok" }
        var text = "ok; archive: \(segmentsChecked) segment\(segmentsChecked == 1 ? "" : "s") checked"
        for segment in segmentsMissing { text += "; \(segment) not present (archived elsewhere or deleted)" }
        return text
    }
}

extension EventLog {
    /// Re-reads every event (checksums, no gaps from 1, or from the last compaction's horizon), folds
    /// them into fresh projections in memory (from the last snapshot of a compacted log), and compares
    /// those with the stored ones byte for byte; then checks each archive segment that is present, and
    /// the chain of their digests. Writes nothing.
    /// `progress` is told how many events are folded so far, every `progressStep` events.
    package func verify(progress: ((UInt64) -> Void)? = nil) throws -> VerifyReport {
        // One read transaction for the fold and the comparison: a commit in between would look like a difference.
        try storageErrors(path: path) { try environment.read { txn in try verify(in: txn.unsafeAccess, progress: progress) } }
    }

    /// How many events a fold reads between two calls of its progress callback.
    static let progressStep: UInt64 = 4096

    private func verify(in access: ReadAccess, progress: ((UInt64) -> Void)?) throws -> VerifyReport {
        let path = self.path
        var count = 0
        var lastCompaction: LogCompacted?
        var projector = Projector(store: MemoryProjections())
        do {
            let last = try foldWhole(access, compacted: wasCompacted(access)) { step in
                if let state = step.snapshot { projector = Projector(store: try MemoryProjections(state)) }
                try projector.apply(step.event, rowKey: step.rowKey)
                if step.snapshot != nil, case .logCompacted(let compacted) = step.event.event { lastCompaction = compacted }
                count += 1
                if let progress, UInt64(count) % Self.progressStep == 0 { progress(UInt64(count)) }
            }
            if count > 0 { try projector.markApplied(last) }
        } catch let error as OutboxError where error.code == .damaged {
            return VerifyReport(events: count, problem: error.message, sequence: error.sequence)
        }
        if count == 0 { return VerifyReport(events: 0, problem: "\(path): the log holds no events", sequence: nil) }
        if let difference = try firstDifference(projector.store, access) {
            return VerifyReport(events: count, problem: "\(path): \(difference)", sequence: nil)
        }
        guard let lastCompaction else { return VerifyReport(events: count, problem: nil, sequence: nil) }
        let origin = try access.get(tables[.meta], key: MetaKey.origin) ?? []
        var previous = [UInt8](repeating: 0, count: 32)
        var checked = 0
        var missing: [ArchiveSegment] = []
        for segment in lastCompaction.segments {
            defer { previous = segment.digest }
            guard archive.holds(segment) else {
                missing.append(segment)
                continue
            }
            let problem = try archive.read(segment, what: "") { try $0.check(previousDigest: previous, origin: origin) }
            if let problem {
                return VerifyReport(
                    events: count, problem: problem, sequence: nil, segmentsChecked: checked, segmentsMissing: missing)
            }
            checked += 1
        }
        return VerifyReport(events: count, problem: nil, sequence: nil, segmentsChecked: checked, segmentsMissing: missing)
    }

    /// The first place the stored projections differ from `fresh`, or nil.
    private func firstDifference(_ fresh: MemoryProjections, _ access: ReadAccess) throws -> String? {
        for table in ProjectionTable.allCases {
            let rebuilt = fresh.sortedEntries(table)
            var index = 0
            var found: String?
            try access.forEach(environment.database(table.rawValue), prefix: []) { key, value in
                // Compared where they lie; a key is copied only to be named.
                guard index < rebuilt.count else {
                    found = "projection '\(table.rawValue)' holds key \(hexDigits(key.copiedBytes)), which a rebuild does not"
                    return false
                }
                let (freshKey, freshValue) = rebuilt[index]
                if !key.withUnsafeBytes({ freshKey.elementsEqual($0) }) {
                    found =
                        "projection '\(table.rawValue)' holds key \(hexDigits(key.copiedBytes)) where a rebuild has \(hexDigits(freshKey))"
                    return false
                }
                if !value.withUnsafeBytes({ freshValue.elementsEqual($0) }) {
                    found = "projection '\(table.rawValue)' differs from a rebuild at key \(hexDigits(freshKey))"
                    return false
                }
                index += 1
                return true
            }
            if let found { return found }
            if index < rebuilt.count {
                return "projection '\(table.rawValue)' lacks key \(hexDigits(rebuilt[index].key)), which a rebuild has"
            }
        }
        return nil
    }

    /// The queue and verdict table as they stood just after event `sequence` (R8.4): the log folded
    /// into memory up to there. Writes nothing.
    package func state(asOf sequence: UInt64) throws -> QueueSnapshot {
        try withState(asOf: sequence) { state in
            QueueSnapshot(sequence: state.sequence, user: state.user, writes: try state.writes())
        }
    }

    /// The state just after event `sequence`, handed to `body` to read while the fold lasts: the
    /// tools print its writes one at a time instead of holding them all rendered.
    /// `progress` is told how many events are folded so far, every `progressStep` events.
    package func withState<R>(
        asOf sequence: UInt64, progress: ((UInt64) -> Void)? = nil, _ body: (PastState) throws -> R
    ) throws -> R {
        var projector = Projector(store: MemoryProjections())
        var last: UInt64 = 0
        var count: UInt64 = 0
        // From the last snapshot when it is at or before `sequence`: no archive is read.
        var from: UInt64 = 1
        let compaction = try read { try $0.compaction() }
        if let snapshot = compaction?.snapshot, snapshot <= sequence,
            let event = try read({ try $0.record(snapshot) }), case .logCompacted(let compacted) = event.event
        {
            projector = Projector(store: try MemoryProjections(compacted.state))
            try projector.apply(event)
            last = snapshot
            from = snapshot + 1
        }
        if from <= sequence {
            try forEachEvent(from: from, to: sequence) { event in
                try projector.apply(event)
                last = event.sequence
                count += 1
                if let progress, count % Self.progressStep == 0 { progress(count) }
                return true
            }
        }
        let memory = projector.store
        // Before the last compaction's horizon, records the log no longer holds are the archive's.
        let archived = compaction.map { ArchivedRecords(archive: archive, segments: $0.segments) }
        return try read { logReader in
            let record: (UInt64) throws -> RecordedEvent? = { sequence in
                if let found = try logReader.record(sequence) { return found }
                guard let archived, let compaction, sequence < compaction.horizon else { return nil }
                return try archived.record(sequence)
            }
            let reader = memory.reader(record: record)
            return try body(PastState(sequence: last, user: try reader.session()?.user, reader: reader))
        }
    }

    /// Every event that touched write `id`, in order, from the history index (R8.3); from the
    /// archive for a write whose history a compaction moved there, or `.archived` when its segment
    /// is not present.
    package func history(of id: WriteID) throws -> [RecordedEvent] {
        let (events, compaction) = try read { reader -> ([RecordedEvent], Compaction?) in
            let events = try reader.historySequences(of: id).map { sequence in
                guard let event = try reader.record(sequence) else {
                    throw OutboxError.damaged(
                        path: path, "the history index names sequence \(sequence), which the log does not hold",
                        sequence: sequence)
                }
                return event
            }
            return (events, events.isEmpty ? try reader.compaction() : nil)
        }
        guard events.isEmpty, let compaction else { return events }
        var absent: ArchiveSegment?
        for segment in compaction.segments(holding: id) {
            guard archive.holds(segment) else {
                absent = absent ?? segment
                continue
            }
            let found = try archive.read(segment, what: "the history of write \(id)") { segment in
                try segment.history(of: id).map { sequence in
                    guard let event = try segment.record(sequence) else {
                        throw OutboxError.damaged(
                            path: segment.path, "the history index names sequence \(sequence), which the segment does not hold",
                            sequence: sequence)
                    }
                    return event
                }
            }
            if !found.isEmpty { return found }
        }
        if let absent { throw archive.missing(absent, what: "the history of write \(id)") }
        return []
    }
}

/// The queue as it stood after one event, while `EventLog.withState(asOf:)` holds it.
package struct PastState {
    /// The last event folded.
    package let sequence: UInt64
    /// The session's user then.
    package let user: String?
    let reader: StoreReader

    /// Calls `body` with each write held then, in id order.
    package func forEachWrite(_ body: (QueuedWrite) throws -> Void) throws {
        try QueuedWrite.forEach(user: nil, reader: reader) { write in
            try body(write)
            return true
        }
    }

    func writes() throws -> [QueuedWrite] { try QueuedWrite.all(user: nil, reader: reader) }
}
