/// The last `attemptStarted` while its answer is awaited, kept in `meta` (`MetaKey.unansweredAttempt`)
/// instead of in its writes' histories.
///
/// An attempt is recorded in the commit of the answer before it, which writes no other key of the
/// attempt's writes, and its own answer comes in the next commit. So the attempt is noted with its
/// answer: each write the answer names has both noted in its entry in one change (`RecentEvents`),
/// which its verdict then rewrites in place, and a drained write's attempt costs no write of its own.
/// The writes of the attempt the answer does not name have it noted then too, and an attempt that is
/// never answered (a crash, a pass that stopped) when the next one starts. Until then the readers of a
/// write's history take the attempt from here.
struct UnansweredAttempt: Equatable {
    /// The attempt's sequence.
    var sequence: UInt64
    /// The writes it names, ascending, each once.
    var writes: [WriteID]

    init(sequence: UInt64, writes: [WriteID]) {
        self.sequence = sequence
        var unique: [WriteID] = []
        unique.reserveCapacity(writes.count)
        for id in writes.sorted() where unique.last != id { unique.append(id) }
        self.writes = unique
    }

    /// Whether the attempt names `id`.
    func names(_ id: WriteID) -> Bool { writes.ascendingContains(id) }

    /// The sequence, the count, the first id, then each id's distance from the one before.
    var encoded: [UInt8] {
        var w = ByteWriter(capacity: 8 + writes.count)
        w.varint(sequence)
        w.varint(writes.count)
        var previous: UInt64 = 0
        for id in writes {
            w.varint(id.rawValue - previous)
            previous = id.rawValue
        }
        return w.bytes
    }

    static func decode(_ bytes: [UInt8]) throws -> UnansweredAttempt {
        do {
            return try bytes.withUnsafeBytes { raw in
                var r = ByteReader(raw)
                let sequence = try r.varint()
                let count = try r.count()
                var writes: [WriteID] = []
                writes.reserveCapacity(count)
                var previous: UInt64 = 0
                for index in 0..<count {
                    let (id, overflow) = previous.addingReportingOverflow(try r.varint())
                    guard !overflow, index == 0 || id > previous else { throw DecodeFailure("ids not ascending") }
                    writes.append(WriteID(id))
                    previous = id
                }
                try r.expectEnd()
                return UnansweredAttempt(checkedSequence: sequence, writes: writes)
            }
        } catch let failure as DecodeFailure {
            throw DecodeFailure("the meta value unansweredAttempt is damaged (\(failure.reason))")
        }
    }

    private init(checkedSequence: UInt64, writes: [WriteID]) {
        sequence = checkedSequence
        self.writes = writes
    }
}

extension MetaKey {
    /// The attempt awaiting its answer (`UnansweredAttempt`), when there is one.
    static let unansweredAttempt = Array("unansweredAttempt".utf8)
}
