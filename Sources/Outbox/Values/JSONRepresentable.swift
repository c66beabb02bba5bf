public import Foundation

/// A Swift value that stands for a JSON value: strings, booleans, integers and floating-point numbers,
/// optionals of them (`nil` is `null`), arrays and string-keyed dictionaries of them, and `JSONValue`.
/// It lets keys and bodies be made from variables:
///
/// ```swift
/// .insert(into: "todos", key: ["id": todo.id], body: ["title": title, "due": dueDay, "done": false])
/// ```
public protocol JSONRepresentable {
    /// The JSON value it stands for.
    var jsonValue: JSONValue { get }
}

/// A JSON object made of Swift values, as a write's key or body takes it.
public typealias JSONObject = [String: (any JSONRepresentable)?]

extension JSONValue: JSONRepresentable {
    public var jsonValue: JSONValue { self }

    /// The JSON value `value` stands for: `JSONValue(title)`, `JSONValue(tags)`.
    public init(_ value: some JSONRepresentable) { self = value.jsonValue }

    /// A JSON object of Swift values: `JSONValue(object: ["title": title, "id": id])`; `nil` is `null`.
    public init(object members: JSONObject) {
        self = .object(members.mapValues { $0?.jsonValue ?? .null })
    }
}

extension String: JSONRepresentable {
    public var jsonValue: JSONValue { .string(self) }
}

extension Substring: JSONRepresentable {
    public var jsonValue: JSONValue { .string(String(self)) }
}

extension Bool: JSONRepresentable {
    public var jsonValue: JSONValue { .bool(self) }
}

/// Integers of up to 64 bits are JSON integers.
extension JSONRepresentable where Self: BinaryInteger {
    /// The integer as a JSON integer.
    public var jsonValue: JSONValue { .int(Int64(self)) }
}

extension Int: JSONRepresentable {}
extension Int8: JSONRepresentable {}
extension Int16: JSONRepresentable {}
extension Int32: JSONRepresentable {}
extension Int64: JSONRepresentable {}
extension UInt8: JSONRepresentable {}
extension UInt16: JSONRepresentable {}
extension UInt32: JSONRepresentable {}

extension Double: JSONRepresentable {
    /// Not-a-number and the infinities are not JSON: a write holding one is refused at enqueue.
    public var jsonValue: JSONValue { .double(self) }
}

extension Float: JSONRepresentable {
    public var jsonValue: JSONValue { .double(Double(self)) }
}

extension Optional: JSONRepresentable where Wrapped: JSONRepresentable {
    public var jsonValue: JSONValue { self?.jsonValue ?? .null }
}

extension Array: JSONRepresentable where Element: JSONRepresentable {
    public var jsonValue: JSONValue { .array(map(\.jsonValue)) }
}

extension Dictionary: JSONRepresentable where Key == String, Value: JSONRepresentable {
    public var jsonValue: JSONValue { .object(mapValues(\.jsonValue)) }
}

// MARK: - Codable

extension JSONValue: Codable {
    public init(from decoder: any Decoder) throws {
        if var array = try? decoder.unkeyedContainer() {
            var values: [JSONValue] = []
            while !array.isAtEnd { values.append(try array.decode(JSONValue.self)) }
            self = .array(values)
            return
        }
        if let object = try? decoder.container(keyedBy: MemberKey.self) {
            var members: [String: JSONValue] = [:]
            for key in object.allKeys { members[key.stringValue] = try object.decode(JSONValue.self, forKey: key) }
            self = .object(members)
            return
        }
        let single = try decoder.singleValueContainer()
        if single.decodeNil() {
            self = .null
        } else if let value = try? single.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? single.decode(Int64.self) {
            self = .int(value)
        } else if let value = try? single.decode(Double.self) {
            self = .double(value)
        } else {
            self = .string(try single.decode(String.self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .array(let values):
            var array = encoder.unkeyedContainer()
            for value in values { try array.encode(value) }
        case .object(let members):
            var object = encoder.container(keyedBy: MemberKey.self)
            for (key, value) in members { try object.encode(value, forKey: MemberKey(key)) }
        case .null, .bool, .int, .double, .string:
            var single = encoder.singleValueContainer()
            switch self {
            case .bool(let value): try single.encode(value)
            case .int(let value): try single.encode(value)
            case .double(let value): try single.encode(value)
            case .string(let value): try single.encode(value)
            default: try single.encodeNil()
            }
        }
    }

    /// An object member's name as a coding key.
    private struct MemberKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ name: String) { stringValue = name }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// The JSON value of an `Encodable` model, through `encoder`: what a write's body takes from it.
    /// Throws `invalidWrite` when the encoder fails or makes what is not JSON.
    public init(encoding value: some Encodable, with encoder: JSONEncoder = JSONEncoder()) throws {
        let data: Data
        do {
            data = try encoder.encode(value)
        } catch {
            throw OutboxError.invalid("the value could not be encoded: \(error)", cause: error)
        }
        do {
            self = try JSONText.parse(String(decoding: data, as: UTF8.self))
        } catch {
            throw OutboxError.invalid("the encoder made text that is not JSON: \(error)", cause: error)
        }
    }

    /// This value decoded as `type` (a model read back from a queued write's body). Throws
    /// `invalidWrite` when it does not decode.
    public func decode<T: Decodable>(as type: T.Type, with decoder: JSONDecoder = JSONDecoder()) throws -> T {
        do {
            return try decoder.decode(T.self, from: Data(JSONText.render(self).utf8))
        } catch {
            throw OutboxError.invalid("the value does not decode as \(T.self): \(error)", cause: error)
        }
    }
}
