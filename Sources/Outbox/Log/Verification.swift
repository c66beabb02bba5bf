internal import OutboxLMDB

/// What `verify` found: nothing, or the first problem.
public struct VerifyReport: Hashable, Sendable, CustomStringConvertible {
    /// How many events were read.
    public let events: Int
    /// The first problem, or nil when the log is sound and the projections equal a rebuild.
    public let problem: String?
    /// The sequence number of the damaged record or gap, when the problem is in the log itself.
    public let sequence: UInt64?

    /// Whether nothing was found wrong.
    public var isOK: Bool { problem == nil }
    public var description: String { problem ?? "ok" }
}

extension EventLog {
    /// Re-reads every event (checksums, no gaps from 1), folds them into fresh projections in memory,
    /// and compares those with the stored ones byte for byte. Writes nothing.
    /// `progress` is told how many events are folded so far, every `progressStep` events.
    package func verify(progress: ((UInt64) -> Void)? = nil) throws -> VerifyReport {
        // One read transaction for the fold and the comparison: a commit in between would look like a difference.
        try storageErrors(path: path) { try environment.read { txn in try verify(in: txn.unsafeAccess, progress: progress) } }
    }

    /// How many events a fold reads between two calls of its progress callback.
    static let progressStep: UInt64 = 4096

    private func verify(in access: ReadAccess, progress: ((UInt64) -> Void)?) throws -> VerifyReport {
        let path = self.path
        var fresh = MemoryProjections()
        var expected: UInt64 = 1
        var count = 0
        do {
            var projector = Projector(store: fresh)
            try forEachEvent(in: access) { event in
                try projector.apply(event)
                expected += 1
                count += 1
                if let progress, UInt64(count) % Self.progressStep == 0 { progress(UInt64(count)) }
                return true
            }
            if count > 0 { try projector.markApplied(expected - 1) }
            fresh = projector.store
        } catch let error as OutboxError where error.code == .damaged {
            return VerifyReport(events: count, problem: error.message, sequence: error.sequence)
        }
        if count == 0 { return VerifyReport(events: 0, problem: "\(path): the log holds no events", sequence: nil) }
        let difference = try firstDifference(fresh, access)
        return VerifyReport(events: count, problem: difference.map { "\(path): \($0)" }, sequence: nil)
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
                    found = "projection '\(table.rawValue)' holds key \(hex(key.copiedBytes)), which a rebuild does not"
                    return false
                }
                let (freshKey, freshValue) = rebuilt[index]
                if !key.withUnsafeBytes({ freshKey.elementsEqual($0) }) {
                    found =
                        "projection '\(table.rawValue)' holds key \(hex(key.copiedBytes)) where a rebuild has \(hex(freshKey))"
                    return false
                }
                if !value.withUnsafeBytes({ freshValue.elementsEqual($0) }) {
                    found = "projection '\(table.rawValue)' differs from a rebuild at key \(hex(freshKey))"
                    return false
                }
                index += 1
                return true
            }
            if let found { return found }
            if index < rebuilt.count {
                return "projection '\(table.rawValue)' lacks key \(hex(rebuilt[index].key)), which a rebuild has"
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
        try forEachEvent(to: sequence) { event in
            try projector.apply(event)
            last = event.sequence
            count += 1
            if let progress, count % Self.progressStep == 0 { progress(count) }
            return true
        }
        let memory = projector.store
        return try read { logReader in
            let reader = memory.reader(record: logReader.record)
            return try body(PastState(sequence: last, user: try reader.session()?.user, reader: reader))
        }
    }

    /// Every event that touched write `id`, in order, from the history index (R8.3).
    package func history(of id: WriteID) throws -> [RecordedEvent] {
        try read { reader in
            try reader.historySequences(of: id).map { sequence in
                guard let event = try reader.record(sequence) else {
                    throw OutboxError.damaged(
                        path: path, "the history index names sequence \(sequence), which the log does not hold",
                        sequence: sequence)
                }
                return event
            }
        }
    }
}

private func hex(_ bytes: some Sequence<UInt8>) -> String {
    bytes.map { byte in
        let digits = String(byte, radix: 16)
        return digits.count == 1 ? "0" + digits : digits
    }.joined()
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
