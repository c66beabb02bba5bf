internal import Outbox

/// How the tools show things: JSON objects (stable camelCase names, Specs/json-fields.md) and lines.
enum Render {
    static func json(_ write: QueuedWrite) -> JSONValue {
        var fields: [String: JSONValue] = [
            "id": .int(Int64(write.id.rawValue)), "user": .string(write.user), "table": .string(write.table),
            "op": .string(write.operation.description), "key": write.key, "body": write.body,
            "baseVersion": write.baseVersion.map { .int($0) } ?? .null,
            "dependsOn": .array(write.dependsOn.map { .int(Int64($0.rawValue)) }),
            "follows": .array(write.follows.map { .int(Int64($0.rawValue)) }),
            "idempotencyKey": .string(write.idempotencyKey.description), "createdAt": .string(write.createdAt.description),
            "refusals": .int(Int64(write.refusals)), "replayed": .bool(write.replayed), "waiting": .bool(write.waiting),
            "environmentalStreak": .int(Int64(write.environmentalStreak)), "schemaRefusals": .int(Int64(write.schemaRefusals)),
            "lastFailure": write.lastFailure.map { .object(["status": $0.status.map { .int(Int64($0)) } ?? .null, "text": $0.text.map { .string($0) } ?? .null]) } ?? .null,
            "atomicGroup": write.atomicGroup.map { .object(["first": .int(Int64($0.first.rawValue)), "count": .int(Int64($0.count))]) } ?? .null,
        ]
        for (name, value) in write.state.auditFields { fields[name] = value }
        return .object(fields)
    }

    /// One line for a person: id, user, table, op, state, refusals, waiting, key.
    static func line(_ write: QueuedWrite) -> String {
        var state = write.state.name
        if case .blocked(let reason, _) = write.state { state += "(\(reason.rawValue))" }
        if write.waiting { state += ",waiting" }
        return [
            String(write.id.rawValue), write.user.isEmpty ? "-" : write.user, write.table, write.operation.description, state,
            "refusals=\(write.refusals)", JSONText.render(write.key),
        ].joined(separator: "  ")
    }

    static func line(_ event: RecordedEvent) -> String {
        var fields = event.event.jsonFields
        fields["type"] = nil
        return "\(event.sequence)  \(event.at)  \(event.event.type.name)  \(JSONText.render(.object(fields)))"
    }
}

extension WriteState {
    /// `state`, and the state's own fields, refusal messages included (the CLI is an audit tool, R3.4).
    var auditFields: [String: JSONValue] {
        var fields: [String: JSONValue] = ["state": .string(name)]
        switch self {
        case .pending, .accepted: break
        case .merged(let changed): fields["fields"] = .array(changed.map { .string($0) })
        case .conflicted(let sibling, let changed):
            fields["siblingId"] = .string(sibling)
            fields["fields"] = .array(changed.map { .string($0) })
        case .refused(let refusal): fields["refusal"] = refusal.auditJSON
        case .blocked(let reason, let refusal):
            fields["reason"] = .string(reason.rawValue)
            fields["refusal"] = refusal?.auditJSON ?? .null
        case .dead(let refusal): fields["refusal"] = refusal?.auditJSON ?? .null
        }
        return fields
    }
}

extension Refusal {
    var auditJSON: JSONValue {
        .object([
            "status": status.map { .int(Int64($0)) } ?? .null, "code": code.map { .string($0) } ?? .null,
            "reason": reason.map { .string($0) } ?? .null, "message": message.map { .string($0) } ?? .null,
            "fields": .array(fields.map { .string($0) }), "trashed": .bool(trashed), "restorable": .bool(restorable),
            "missingGrant": missingGrant.map { .string($0) } ?? .null, "final": .bool(isFinal),
        ])
    }
}
