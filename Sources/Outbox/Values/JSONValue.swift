/// A JSON value: the key and body of a write, a row read from the instance.
///
/// Literals read naturally: `let key: JSONValue = ["id": 42]`. Values are stored in a canonical binary
/// form (object keys sorted), so equal values store equal bytes.
public enum JSONValue: Sendable, Hashable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number written without fraction or exponent that fits 64 bits.
    case int(Int64)
    /// Any other number. Not-a-number and infinities are not JSON, and enqueue refuses them.
    case double(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object; its members are kept in canonical order when stored.
    case object([String: JSONValue])

    /// The object's members, or nil for any other value.
    public var objectValue: [String: JSONValue]? {
        if case .object(let members) = self { return members }
        return nil
    }

    /// Whether every number inside is finite (NaN and infinities cannot be sent as JSON).
    public var isFinite: Bool {
        switch self {
        case .double(let value): return value.isFinite
        case .array(let values): return values.allSatisfy(\.isFinite)
        case .object(let members): return members.values.allSatisfy(\.isFinite)
        default: return true
        }
    }
}

extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}

// MARK: - Canonical binary form

extension JSONValue {
    /// The first byte of each kind of value in the canonical form.
    enum Tag: UInt8 {
        case null = 0
        case isFalse, isTrue, int, double, string, array, object
    }

    /// Writes the canonical form; returns whether the value is one a log holds (every number finite,
    /// nesting less than `JSONText.maxDepth` deep from `depth`), as a reader of the log checks.
    @discardableResult
    func encode(into writer: inout some ByteSink, depth: Int = 0) -> Bool {
        var holdable = depth < JSONText.maxDepth
        switch self {
        case .null: writer.byte(Tag.null.rawValue)
        case .bool(let value): writer.byte(value ? Tag.isTrue.rawValue : Tag.isFalse.rawValue)
        case .int(let value):
            writer.byte(Tag.int.rawValue)
            writer.signed(value)
        case .double(let value):
            writer.byte(Tag.double.rawValue)
            writer.bigEndian(value.bitPattern)
            holdable = holdable && value.isFinite
        case .string(let value):
            writer.byte(Tag.string.rawValue)
            writer.string(value)
        case .array(let values):
            writer.byte(Tag.array.rawValue)
            writer.varint(values.count)
            for value in values { holdable = value.encode(into: &writer, depth: depth + 1) && holdable }
        case .object(let members):
            writer.byte(Tag.object.rawValue)
            writer.varint(members.count)
            func member(_ key: String, _ value: JSONValue) {
                writer.string(key)
                holdable = value.encode(into: &writer, depth: depth + 1) && holdable
            }
            // One and two members (a key like `{"id": …}`, a small body) are ordered without an array.
            var iterator = members.makeIterator()
            switch members.count {
            case 0: break
            case 1:
                let only = iterator.next()!
                member(only.key, only.value)
            case 2:
                let one = iterator.next()!
                let other = iterator.next()!
                let (first, second) = Self.precedes(one.key, other.key) ? (one, other) : (other, one)
                member(first.key, first.value)
                member(second.key, second.value)
            default:
                for (key, value) in members.sorted(by: { Self.precedes($0.key, $1.key) }) { member(key, value) }
            }
        }
        return holdable
    }

    /// Whether `a` sorts before `b` byte by byte in UTF-8: the canonical order of object keys.
    static func precedes(_ a: String, _ b: String) -> Bool {
        var a = a
        var b = b
        return a.withUTF8 { x in b.withUTF8 { y in Outbox.StoreKey.precedes(x, y) } }
    }

    /// The canonical bytes: equal values, equal bytes.
    var canonicalBytes: [UInt8] {
        var writer = ByteWriter()
        encode(into: &writer)
        return writer.bytes
    }

    /// Decodes one value. With `limits` (stored bytes), a number that is not finite or nesting deeper
    /// than `JSONText.maxDepth` is a failure; without (bytes made from a value, which may hold either
    /// until enqueue refuses it), the value comes back as it was made.
    static func decode(from reader: inout ByteReader, depth: Int = 0, limits: Bool = true) throws -> JSONValue {
        guard !limits || depth < JSONText.maxDepth else { throw DecodeFailure("JSON nested deeper than \(JSONText.maxDepth)") }
        guard let tag = Tag(rawValue: try reader.byte()) else { throw DecodeFailure("unknown JSON tag") }
        switch tag {
        case .null: return .null
        case .isFalse: return .bool(false)
        case .isTrue: return .bool(true)
        case .int: return .int(try reader.signed())
        case .double:
            // JSON has no NaN or infinity, and the library never stores one (R2.4): a record holding one is damaged.
            let value = Double(bitPattern: try reader.bigEndian())
            guard !limits || value.isFinite else { throw DecodeFailure("a number that is not finite") }
            return .double(value)
        case .string: return .string(try reader.string())
        case .array: return .array(try reader.array { try decode(from: &$0, depth: depth + 1, limits: limits) })
        case .object:
            let count = try reader.count()
            var members: [String: JSONValue] = [:]
            members.reserveCapacity(count)
            var previous: String?
            for _ in 0..<count {
                let key = try reader.string()
                if let previous, !Self.precedes(previous, key) {
                    throw DecodeFailure("JSON object keys not in canonical order")
                }
                previous = key
                members[key] = try decode(from: &reader, depth: depth + 1, limits: limits)
            }
            return .object(members)
        }
    }
}
