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
            "lastFailure": write.lastFailure.map {
                .object(["status": $0.status.map { .int(Int64($0)) } ?? .null, "text": $0.text.map { .string($0) } ?? .null])
            } ?? .null,
            "atomicGroup": write.atomicGroup.map {
                .object(["first": .int(Int64($0.first.rawValue)), "count": .int(Int64($0.count))])
            } ?? .null,
        ]
        // Refusal messages included: the CLI is an audit tool (R3.4).
        for (name, value) in write.state.jsonFields(withMessage: true) { fields[name] = value }
        return .object(fields)
    }

    /// One line for a person: id, user, table, op, state, refusals, waiting, key.
    static func line(_ write: QueuedWrite) -> String {
        var state = write.state.name
        if case .blocked(let reason, _) = write.state { state += "(\(reason.rawValue))" }
        if write.waiting { state += ",waiting" }
        return [
            String(write.id.rawValue), write.user.isEmpty ? "-" : TerminalText.field(write.user), TerminalText.field(write.table),
            TerminalText.field(write.operation.description), state,
            "refusals=\(write.refusals)", JSONText.render(write.key),
        ].joined(separator: "  ")
    }

    static func line(_ event: RecordedEvent) -> String {
        var fields = event.event.jsonFields
        fields["type"] = nil
        return "\(event.sequence)  \(event.at)  \(event.event.type.name)  \(JSONText.render(.object(fields)))"
    }
}
