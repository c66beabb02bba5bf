/// What every event's payload can do: store itself, read itself back, name the writes it touches, and
/// show itself to a person (the CLI renders events as JSON; the log stores binary).
protocol EventPayload: Hashable, Sendable {
    static var type: EventType { get }
    func encode(into writer: inout some ByteSink)
    static func decode(from reader: inout ByteReader) throws -> Self
    /// The writes whose history this event belongs to (R8.3).
    var writeIDs: [WriteID] { get }
    /// The payload's fields for the JSON view; names are camelCase and stable (Specs/json-fields.md).
    var jsonFields: [String: JSONValue] { get }
}

extension ByteSink {
    mutating func ids(_ ids: [WriteID]) { array(ids) { $0.varint($1.rawValue) } }

    /// `ids + [last]` as `ids(_:)` writes it, without making that array.
    mutating func ids(_ ids: [WriteID], then last: WriteID) {
        varint(ids.count + 1)
        for id in ids { varint(id.rawValue) }
        varint(last.rawValue)
    }
}

extension ByteReader {
    mutating func id() throws -> WriteID { WriteID(try varint()) }
    mutating func ids() throws -> [WriteID] { try array { try $0.id() } }
}

extension JSONValue {
    static func id(_ id: WriteID) -> JSONValue { .int(Int64(bitPattern: id.rawValue)) }
    static func ids(_ ids: [WriteID]) -> JSONValue { .array(ids.map { .id($0) }) }
    static func strings(_ values: [String]) -> JSONValue { .array(values.map { .string($0) }) }
    static func optional<T>(_ value: T?, _ render: (T) -> JSONValue) -> JSONValue { value.map(render) ?? .null }
    static func int(_ value: Int) -> JSONValue { .int(Int64(value)) }
}

extension Refusal {
    /// The refusal as JSON; `withMessage` is false for anything but the audit tools (R3.4).
    package func json(withMessage: Bool) -> JSONValue {
        var fields: [String: JSONValue] = [
            "status": .optional(status) { .int($0) }, "code": .optional(code) { .string($0) },
            "reason": .optional(reason) { .string($0) }, "fields": .strings(fields), "trashed": .bool(trashed),
            "restorable": .bool(restorable), "missingGrant": .optional(missingGrant) { .string($0) },
            "final": .bool(isFinal),
        ]
        if withMessage { fields["message"] = .optional(message) { .string($0) } }
        return .object(fields)
    }
}

extension WriteState {
    /// `{"state": …}` plus the state's own fields.
    package func jsonFields(withMessage: Bool) -> [String: JSONValue] {
        var fields: [String: JSONValue] = ["state": .string(name)]
        switch self {
        case .pending, .accepted: break
        case .merged(let changed): fields["fields"] = .strings(changed)
        case .conflicted(let sibling, let changed):
            fields["siblingId"] = .string(sibling)
            fields["fields"] = .strings(changed)
        case .refused(let refusal): fields["refusal"] = refusal.json(withMessage: withMessage)
        case .blocked(let reason, let refusal):
            fields["reason"] = .string(reason.rawValue)
            fields["refusal"] = .optional(refusal) { $0.json(withMessage: withMessage) }
        case .dead(let refusal): fields["refusal"] = .optional(refusal) { $0.json(withMessage: withMessage) }
        }
        return fields
    }
}

extension WriteVerdict {
    var json: JSONValue {
        var fields: [String: JSONValue] = ["verdict": .string(name)]
        switch self {
        case .accepted, .skipped: break
        case .merged(let changed): fields["fields"] = .strings(changed)
        case .conflicted(let sibling, let changed):
            fields["siblingId"] = .string(sibling)
            fields["fields"] = .strings(changed)
        case .refused(let refusal): fields["refusal"] = refusal.json(withMessage: true)
        case .blocked(let reason, let refusal):
            fields["reason"] = .string(reason.rawValue)
            fields["refusal"] = .optional(refusal) { $0.json(withMessage: true) }
        case .failed(let status, let code, let text):
            fields["status"] = .optional(status) { .int($0) }
            if let code { fields["code"] = .string(code) }
            fields["text"] = .optional(text) { .string($0) }
        case .notSent(let failure): fields["failure"] = .optional(failure) { $0.json }
        }
        return .object(fields)
    }
}

extension PassFailure {
    var json: JSONValue {
        .object([
            "kind": .string(kind.rawValue), "status": .optional(status) { .int($0) },
            "code": .optional(code) { .string($0) }, "retryAfter": .optional(retryAfter) { .double($0) },
        ])
    }
}
