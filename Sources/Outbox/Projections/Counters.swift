/// The per-user counts the status shows (R7.1), kept in one record so they are read together, and the
/// user's mark for the planner.
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
        var w = ByteWriter(capacity: 12)
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
    }

    static func decode(_ bytes: [UInt8]) throws -> Counters { try bytes.withUnsafeBytes { try decode($0) } }

    static func decode(_ raw: UnsafeRawBufferPointer) throws -> Counters {
        var r = ByteReader(raw)
        let counters = Counters(
            pending: try r.int(), rejected: try r.int(), blocked: try r.int(), answered: try r.int(), behind: try r.int(),
            sendFrom: try r.varint())
        try r.expectEnd()
        guard counters.behind <= counters.pending else {
            throw DecodeFailure("a user's counters hold more writes behind the mark than pending")
        }
        return counters
    }

    /// Counters as layouts 10 and 11 stored them: the four counts, no mark.
    static func decodeCounts(_ bytes: [UInt8]) throws -> Counters {
        try bytes.withUnsafeBytes { raw in
            var r = ByteReader(raw)
            let counters = Counters(pending: try r.int(), rejected: try r.int(), blocked: try r.int(), answered: try r.int())
            try r.expectEnd()
            return counters
        }
    }
}
