/// What a write does to its row.
public enum WriteOperation: Hashable, Sendable, CustomStringConvertible {
    /// Makes the row (POST).
    case insert
    /// Changes fields of the row (PATCH).
    case update
    /// Makes the row or merges into it (POST with on_conflict).
    case upsert
    /// Deletes the row.
    case delete
    /// A named mutation the instance knows (an RPC-like custom write).
    case custom(String)

    /// Parses the word the CLI and scenarios use: insert, update, upsert, delete, or any other word.
    public init(word: String) {
        switch word {
        case "insert": self = .insert
        case "update": self = .update
        case "upsert": self = .upsert
        case "delete": self = .delete
        default: self = .custom(word)
        }
    }

    /// The word for this operation.
    public var description: String {
        switch self {
        case .insert: return "insert"
        case .update: return "update"
        case .upsert: return "upsert"
        case .delete: return "delete"
        case .custom(let name): return name
        }
    }

    func encode(into writer: inout some ByteSink) {
        switch self {
        case .insert: writer.byte(0)
        case .update: writer.byte(1)
        case .upsert: writer.byte(2)
        case .delete: writer.byte(3)
        case .custom(let name):
            writer.byte(4)
            writer.string(name)
        }
    }

    static func decode(from reader: inout ByteReader) throws -> WriteOperation {
        switch try reader.byte() {
        case 0: return .insert
        case 1: return .update
        case 2: return .upsert
        case 3: return .delete
        case 4: return .custom(try reader.string())
        case let other: throw DecodeFailure("unknown operation \(other)")
        }
    }
}
