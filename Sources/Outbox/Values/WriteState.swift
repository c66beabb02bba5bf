/// A write's state in the verdict table.
public enum WriteState: Hashable, Sendable {
    /// Not answered yet (it may be `waiting` on a dependency; see `QueuedWrite.waiting`).
    case pending
    /// The instance took it.
    case accepted
    /// The instance applied it over changes made since, field by field.
    case merged(fields: [String])
    /// The instance kept its value; the losing one went to a sibling item.
    case conflicted(siblingId: String, fields: [String])
    // The cases with a refusal are boxed: inline, a refusal (strings, an array, flags) would make every
    // state, and every entry of the queue that holds one, as large as itself; the fold and the pass
    // copy entries many times a write.
    /// The instance (or the library, `refusal.isFinal`) refused it.
    indirect case refused(Refusal)
    /// Stopped until something outside the queue changes.
    indirect case blocked(BlockedReason, refusal: Refusal?)
    /// Refused `maxRefusals` times; never sent again unless released.
    indirect case dead(Refusal?)

    /// The state's word: pending, accepted, merged, conflicted, refused, blocked, dead.
    public var name: String {
        switch self {
        case .pending: return "pending"
        case .accepted: return "accepted"
        case .merged: return "merged"
        case .conflicted: return "conflicted"
        case .refused: return "refused"
        case .blocked: return "blocked"
        case .dead: return "dead"
        }
    }

    /// Accepted, merged or conflicted.
    public var isAnswered: Bool {
        switch self {
        case .accepted, .merged, .conflicted: return true
        default: return false
        }
    }

    /// Refused by the library for good (unsent or unmade): never sent again, never released; it holds
    /// no write behind it, and `discard` takes it out.
    public var isRefusedForGood: Bool {
        if case .refused(let refusal) = self { return refusal.isFinal }
        return false
    }

    /// Whether a pass sends a write in this state: pending, or refused and not final.
    public var isSendable: Bool {
        switch self {
        case .pending: return true
        case .refused(let refusal): return !refusal.isFinal
        default: return false
        }
    }

    /// The refusal this state carries, if any.
    public var refusal: Refusal? {
        switch self {
        case .refused(let refusal): return refusal
        case .blocked(_, let refusal), .dead(let refusal): return refusal
        default: return nil
        }
    }

    func encode(into writer: inout some ByteSink) {
        switch self {
        case .pending: writer.byte(0)
        case .accepted: writer.byte(1)
        case .merged(let fields):
            writer.byte(2)
            writer.array(fields) { $0.string($1) }
        case .conflicted(let sibling, let fields):
            writer.byte(3)
            writer.string(sibling)
            writer.array(fields) { $0.string($1) }
        case .refused(let refusal):
            writer.byte(4)
            refusal.encode(into: &writer)
        case .blocked(let reason, let refusal):
            writer.byte(5)
            writer.byte(reason.code)
            writer.optional(refusal) { $1.encode(into: &$0) }
        case .dead(let refusal):
            writer.byte(6)
            writer.optional(refusal) { $1.encode(into: &$0) }
        }
    }

    static func decode(from reader: inout ByteReader) throws -> WriteState {
        switch try reader.byte() {
        case 0: return .pending
        case 1: return .accepted
        case 2: return .merged(fields: try reader.array { try $0.string() })
        case 3: return .conflicted(siblingId: try reader.string(), fields: try reader.array { try $0.string() })
        case 4: return .refused(try Refusal.decode(from: &reader))
        case 5:
            return .blocked(
                try BlockedReason.decode(from: &reader), refusal: try reader.optional { try Refusal.decode(from: &$0) })
        case 6: return .dead(try reader.optional { try Refusal.decode(from: &$0) })
        case let other: throw DecodeFailure("unknown write state \(other)")
        }
    }
}
