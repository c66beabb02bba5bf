/// The per-user counts the status shows (R7.1), kept in one record so they are read together.
struct Counters: Hashable, Sendable {
    var pending = 0
    var rejected = 0
    var blocked = 0
    var answered = 0

    subscript(list: ProjectionTable) -> Int {
        get {
            switch list {
            case .pending: return pending
            case .rejected: return rejected
            case .blocked: return blocked
            default: return answered
            }
        }
        set {
            switch list {
            case .pending: pending = newValue
            case .rejected: rejected = newValue
            case .blocked: blocked = newValue
            default: answered = newValue
            }
        }
    }

    var isZero: Bool { pending == 0 && rejected == 0 && blocked == 0 && answered == 0 }

    func encode() -> [UInt8] {
        var w = ByteWriter(capacity: 8)
        write(into: &w)
        return w.bytes
    }

    func write(into w: inout some ByteSink) {
        w.varint(pending)
        w.varint(rejected)
        w.varint(blocked)
        w.varint(answered)
    }

    static func decode(_ bytes: [UInt8]) throws -> Counters { try bytes.withUnsafeBytes { try decode($0) } }

    static func decode(_ raw: UnsafeRawBufferPointer) throws -> Counters {
        var r = ByteReader(raw)
        let counters = Counters(pending: try r.int(), rejected: try r.int(), blocked: try r.int(), answered: try r.int())
        try r.expectEnd()
        return counters
    }
}
