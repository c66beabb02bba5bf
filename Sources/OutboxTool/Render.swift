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

extension Render {
    /// One event of write `id`'s history as a person reads it at a glance: its sequence, its time,
    /// and what it means for that write. The server's message is shown (this is the audit view).
    static func timeline(_ recorded: RecordedEvent, of id: WriteID) -> String {
        "\(recorded.sequence)  \(recorded.at)  " + meaning(recorded.event, of: id)
    }

    private static func meaning(_ event: Event, of id: WriteID) -> String {
        switch event {
        case .writeQueued(let queued):
            var text =
                "queued by \(name(queued.user)): \(name(queued.operation.description)) \(name(queued.table)) "
                + "\(JSONText.render(queued.key)) \(TerminalText.field(JSONText.render(queued.body)))"
            if let version = queued.baseVersion { text += ", made on version \(version)" }
            if !queued.follows.isEmpty { text += ", follows \(list(queued.follows))" }
            if !queued.dependsOn.isEmpty { text += ", depends on \(list(queued.dependsOn))" }
            if let group = queued.atomicGroup { text += ", in the atomic group of \(group.count) from write \(group.first)" }
            return text
        case .attemptStarted(let attempt):
            let others = attempt.writes.map(\.id).filter { $0 != id }
            let key = attempt.writes.first { $0.id == id }.map { " under key \($0.idempotencyKey)" } ?? ""
            return "sent in pass \(attempt.passId)" + (others.isEmpty ? " alone" : " with \(list(others))") + key
        case .answerReceived(let received):
            switch received.answer {
            case .answered(let answers):
                guard let index = received.writes.firstIndex(of: id), index < answers.count else {
                    return "pass \(received.passId): the instance answered its request"
                }
                let answer = answers[index]
                return "answered in pass \(received.passId): \(verdict(answer.verdict))" + (answer.replayed ? ", replayed" : "")
            case .failed(let failure):
                return "pass \(received.passId): its request failed, \(describe(failure))"
            case .contractBroken(let how):
                return "pass \(received.passId): the response broke the contract (\(TerminalText.field(how)))"
            }
        case .verdictRecorded, .verdictsRecorded:
            guard let recorded = event.verdicts.first(where: { $0.writeId == id }) else {
                return line(RecordedEvent(sequence: 0, at: Timestamp(milliseconds: 0), event: event))
            }
            let now = state(recorded.state)
            let count = recorded.refusals > 0 ? " (refusal \(recorded.refusals))" : ""
            return "now \(now)\(count)" + (recorded.replayed ? ", already on the server" : "")
        case .schemaRefusalCounted(let counted):
            return "the server's schema cache did not know its table or column (\(counted.count) so far)"
        case .writeFailed(let failed):
            let status = failed.status.map { " \($0)" } ?? ""
            return "failed alone\(status) in pass \(failed.passId), \(failed.streak) pass(es) in a row"
                + (failed.text.map { ": «\(TerminalText.field($0))»" } ?? "")
        case .batchAborted(let aborted):
            return "its atomic group was aborted in pass \(aborted.passId): nothing of \(list(aborted.writes)) applied"
        case .writeReleased(let released):
            return "released under a new key \(released.idempotencyKey)"
                + (released.reason.map { " (it was blocked: \($0.rawValue))" } ?? "")
        case .writeWithdrawn(let withdrawn):
            return "withdrawn; the instance held \(TerminalText.field(JSONText.render(withdrawn.row)))"
        case .writeDiscarded(let discarded):
            return "discarded" + (discarded.withDependents ? " with its dependents" : "")
        case .writeCancelled:
            return "cancelled before anything sent it"
        case .answersTaken:
            return "its answer was taken by the app"
        case .answersForgotten:
            return "its answer was forgotten"
        case .localDataCleared(let cleared):
            return "\(name(cleared.user))'s local data was cleared"
        default:
            return line(RecordedEvent(sequence: 0, at: Timestamp(milliseconds: 0), event: event))
        }
    }

    private static func name(_ text: String) -> String { TerminalText.field(text) }

    private static func list(_ ids: [WriteID]) -> String {
        (ids.count == 1 ? "write " : "writes ") + ids.map { String($0.rawValue) }.joined(separator: ", ")
    }

    private static func verdict(_ verdict: WriteVerdict) -> String {
        switch verdict {
        case .accepted: return "accepted"
        case .merged(let fields): return "merged over newer changes to \(fields.joined(separator: ", "))"
        case .conflicted(let sibling, let fields):
            return "conflicted on \(fields.joined(separator: ", ")), kept as sibling \(name(sibling))"
        case .refused(let refusal): return "refused, " + describe(refusal)
        case .blocked(let reason, let refusal): return "blocked: \(reason.rawValue)" + (refusal.map { ", " + describe($0) } ?? "")
        case .failed(let status, let code, let text):
            return "failed" + (status.map { " \($0)" } ?? "") + (code.map { " \($0)" } ?? "")
                + (text.map { ": «\(TerminalText.field($0))»" } ?? "")
        case .skipped: return "skipped: a write it depends on in the same request was not applied"
        case .notSent(let failure):
            return "not sent" + (failure.map { ", \(describe($0))" } ?? ", an earlier write's request failed")
        }
    }

    private static func state(_ state: WriteState) -> String {
        switch state {
        case .pending: return "pending"
        case .accepted: return "accepted"
        case .merged(let fields): return "merged (\(fields.joined(separator: ", ")) overwritten)"
        case .conflicted(let sibling, let fields):
            return "conflicted on \(fields.joined(separator: ", ")) (sibling \(name(sibling)))"
        case .refused(let refusal): return (refusal.isFinal ? "refused: " : "refused by the instance: ") + describe(refusal)
        case .blocked(let reason, _): return "blocked: \(reason.rawValue)"
        case .dead(let refusal): return "dead" + (refusal.map { " after " + describe($0) } ?? "")
        }
    }

    /// A refusal as an auditor reads it: status, code, reason, fields, and the server's message.
    private static func describe(_ refusal: Refusal) -> String {
        var parts: [String] = []
        if let status = refusal.status { parts.append(String(status)) }
        if let code = refusal.code { parts.append(name(code)) }
        if let reason = refusal.reason { parts.append(name(reason)) }
        var text = parts.isEmpty ? "no code" : parts.joined(separator: " ")
        if !refusal.fields.isEmpty { text += " on \(refusal.fields.map(name).joined(separator: ", "))" }
        if refusal.isFinal { text += ", for good" }
        if let message = refusal.message { text += ": «\(TerminalText.field(message))»" }
        return text
    }

    private static func describe(_ failure: RequestFailure) -> String {
        var text = failure.kind.rawValue
        if let status = failure.status { text += " \(status)" }
        if let code = failure.code { text += " \(name(code))" }
        if let after = failure.retryAfter { text += ", Retry-After \(name(after))" }
        return text
    }
}
