/// The per-user counts the status shows (R7.1), kept in one record so they are read together, and the
/// user's marks: where the planner and `takeAnswered` start reading the user's entries.
struct Counters: Hashable, Sendable {
    var pending = 0
    var rejected = 0
    var blocked = 0
    var answered = 0
    /// Of the pending writes, those in the `behind` table: below `sendFrom`.
    var behind = 0
    /// Where the planner starts reading the user's entries (R4.2): every pending write of the user
    /// below it is in the `behind` table; at it, a pending write that waits on nothing unsettled, or
    /// nothing of the user's. Moves forward as the write at it leaves the queue.
    var sendFrom: UInt64 = 0
    /// Of the answered writes, those in the `answered` table: below `answeredFrom`.
    var answeredBehind = 0
    /// Where the answered writes are read from (R6.1): every answered write of the user below it is in
    /// the `answered` table. Moves forward as the write at it leaves the queue (taken, forgotten).
    var answeredFrom: UInt64 = 0
    /// One past the highest id of the user's answered so far: where that reading stops.
    var answeredTo: UInt64 = 0

    subscript(list: WriteList) -> Int {
        get {
            switch list {
            case .pending: return pending
            case .rejected: return rejected
            case .blocked: return blocked
            case .answered: return answered
            }
        }
        set {
            switch list {
            case .pending: pending = newValue
            case .rejected: rejected = newValue
            case .blocked: blocked = newValue
            case .answered: answered = newValue
            }
        }
    }

    /// No write of the user is in the queue: the mark is then not kept (the next write queued sets it).
    var isZero: Bool { pending == 0 && rejected == 0 && blocked == 0 && answered == 0 }

    func encode() -> [UInt8] {
        var w = ByteWriter(capacity: 20)
        write(into: &w)
        return w.bytes
    }

    func write(into w: inout some ByteSink) {
        w.varint(pending)
        w.varint(rejected)
        w.varint(blocked)
        w.varint(answered)
        w.varint(behind)
        w.varint(sendFrom)
        w.varint(answeredBehind)
        w.varint(answeredFrom)
        w.varint(answeredTo)
    }

    static func decode(_ bytes: [UInt8]) throws -> Counters { try bytes.withUnsafeBytes { try decode($0) } }

    static func decode(_ raw: UnsafeRawBufferPointer) throws -> Counters {
        var r = ByteReader(raw)
        let counters = Counters(
            pending: try r.int(), rejected: try r.int(), blocked: try r.int(), answered: try r.int(), behind: try r.int(),
            sendFrom: try r.varint(), answeredBehind: try r.int(), answeredFrom: try r.varint(), answeredTo: try r.varint())
        try r.expectEnd()
        guard counters.behind <= counters.pending, counters.answeredBehind <= counters.answered else {
            throw DecodeFailure("a user's counters list more writes apart than they count")
        }
        return counters
    }

    /// Counters as an older layout stored them: the four counts (layouts 10 and 11), then the send
    /// mark (layout 12); the marks not stored are zero.
    static func decode(_ bytes: [UInt8], layout: UInt64) throws -> Counters {
        try bytes.withUnsafeBytes { raw in
            var r = ByteReader(raw)
            var counters = Counters(pending: try r.int(), rejected: try r.int(), blocked: try r.int(), answered: try r.int())
            if layout == 12 {
                counters.behind = try r.int()
                counters.sendFrom = try r.varint()
            }
            try r.expectEnd()
            return counters
        }
    }
}
