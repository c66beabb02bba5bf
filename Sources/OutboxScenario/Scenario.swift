package import Outbox
import OutboxHTTP
package import OutboxTesting

/// A scenario file (SCENARIOS.md): a name, the client's settings, and steps with expectations.
package struct Scenario: Sendable {
    package var name: String
    package var autoSync = false
    package var batchSize = 1
    package var maxRefusals = 5
    /// Tables the simulated instance's transport cannot make requests for (an extension: R4.3 "unmade").
    package var unmadeTables: [String] = []
    package var steps: [Step]
    /// A subset of the `final` document that must hold.
    package var expectFinal: JSONValue?

    package struct Step: Sendable {
        package var action: Action
        /// A subset of the step's output that must hold.
        package var expect: JSONValue?
    }

    /// One write of an `enqueue` step.
    package struct WriteSpec: Sendable {
        package var ref: String?
        package var table: String
        package var op: String
        package var key: JSONValue
        package var body: JSONValue
        package var dependsOn: [String]
        package var baseVersion: Int64?
    }

    package enum Action: Sendable {
        case signIn(user: String, tokenSubject: String)
        case signOut
        case enqueue(WriteSpec)
        case enqueueGroup([WriteSpec])
        case respond([SimulatedInstance.Scripted])
        case sync(table: String?)
        case advance(seconds: Double)
        case network(String)
        case release(ref: String)
        case releaseReason(BlockedReason)
        case discard(ref: String, withDependents: Bool)
        case withdraw(ref: String)
        case cancel(ref: String)
        case explain(ref: String)
        case takeAnswered
        case forgetAnswered
        case crash
        /// An extension of SCENARIOS.md: `{"clearLocalData": "alice"}` (R7.3).
        case clearLocalData(user: String)

        /// The action's key, as the output names it.
        package var name: String {
            switch self {
            case .signIn: return "signIn"
            case .signOut: return "signOut"
            case .enqueue: return "enqueue"
            case .enqueueGroup: return "enqueueGroup"
            case .respond: return "respond"
            case .sync: return "sync"
            case .advance: return "advance"
            case .network: return "network"
            case .release, .releaseReason: return "release"
            case .discard: return "discard"
            case .withdraw: return "withdraw"
            case .cancel: return "cancel"
            case .explain: return "explain"
            case .takeAnswered: return "takeAnswered"
            case .forgetAnswered: return "forgetAnswered"
            case .crash: return "crash"
            case .clearLocalData: return "clearLocalData"
            }
        }
    }
}

/// Why a file is not a valid scenario: the step and the field at fault.
package struct ScenarioError: Error, CustomStringConvertible, Sendable {
    package var step: Int?
    package var field: String
    package var problem: String

    package var description: String {
        (step.map { "step \($0), " } ?? "") + "field \"\(field)\": \(problem)"
    }
}

extension Scenario {
    /// Parses a scenario document; a file that is not one throws `ScenarioError` naming step and field.
    package static func parse(_ text: String) throws -> Scenario {
        let document: JSONValue
        do {
            document = try JSONText.parse(text)
        } catch {
            throw ScenarioError(step: nil, field: "(document)", problem: "not JSON: \(error)")
        }
        guard case .object(let top) = document else {
            throw ScenarioError(step: nil, field: "(document)", problem: "not a JSON object")
        }
        for key in top.keys where !["name", "config", "steps", "expectFinal"].contains(key) {
            throw ScenarioError(step: nil, field: key, problem: "not a field of a scenario")
        }
        guard case .string(let name)? = top["name"] else {
            throw ScenarioError(step: nil, field: "name", problem: "a string is required")
        }
        guard case .array(let steps)? = top["steps"] else {
            throw ScenarioError(step: nil, field: "steps", problem: "an array is required")
        }
        var scenario = Scenario(name: name, steps: [], expectFinal: top["expectFinal"])
        if let config = top["config"] {
            guard case .object(let fields) = config else {
                throw ScenarioError(step: nil, field: "config", problem: "an object is required")
            }
            for (key, value) in fields {
                switch (key, value) {
                case ("autoSync", .bool(let on)): scenario.autoSync = on
                case ("batchSize", .int(let n)) where n >= 1 && n <= 10_000: scenario.batchSize = Int(n)
                case ("maxRefusals", .int(let n)) where n >= 1 && n <= 1000: scenario.maxRefusals = Int(n)
                case ("unmadeTables", .array(let tables)):
                    scenario.unmadeTables = try tables.map {
                        guard case .string(let table) = $0 else {
                            throw ScenarioError(
                                step: nil, field: "config.unmadeTables", problem: "an array of table names is required")
                        }
                        return table
                    }
                default: throw ScenarioError(step: nil, field: "config.\(key)", problem: "not a known setting with a valid value")
                }
            }
        }
        for (index, step) in steps.enumerated() {
            scenario.steps.append(try parseStep(step, index: index))
        }
        return scenario
    }

    private static func parseStep(_ value: JSONValue, index: Int) throws -> Step {
        guard case .object(let fields) = value else {
            throw ScenarioError(step: index, field: "(step)", problem: "a step is an object")
        }
        let extras: Set<String> = ["expect", "tokenSubject", "withDependents"]
        let actions = fields.keys.filter { !extras.contains($0) }.sorted()
        guard actions.count == 1, let key = actions.first else {
            throw ScenarioError(
                step: index, field: actions.first ?? "(step)",
                problem: actions.isEmpty ? "the step has no action" : "a step has exactly one action, not \(actions)")
        }
        let action = try parseAction(key, fields[key]!, fields, step: index)
        if fields["tokenSubject"] != nil, key != "signIn" {
            throw ScenarioError(step: index, field: "tokenSubject", problem: "only a signIn step takes it")
        }
        if fields["withDependents"] != nil, key != "discard" {
            throw ScenarioError(step: index, field: "withDependents", problem: "only a discard step takes it")
        }
        return Step(action: action, expect: fields["expect"])
    }

    /// The action `key` of a step, with its `argument` (and the step's other `fields`).
    private static func parseAction(_ key: String, _ argument: JSONValue, _ fields: [String: JSONValue], step index: Int) throws
        -> Action
    {
        func fail(_ field: String, _ problem: String) -> ScenarioError {
            ScenarioError(step: index, field: field, problem: problem)
        }
        func ref(_ value: JSONValue) throws -> String {
            guard case .string(let ref) = value, !ref.isEmpty else { throw fail(key, "a write's ref (a string) is required") }
            return ref
        }
        switch key {
        case "signIn":
            guard case .string(let user) = argument, !user.isEmpty else { throw fail(key, "a user name is required") }
            guard let given = fields["tokenSubject"] else { return .signIn(user: user, tokenSubject: user) }
            guard case .string(let subject) = given else { throw fail("tokenSubject", "a string is required") }
            return .signIn(user: user, tokenSubject: subject)
        case "signOut": return .signOut
        case "enqueue": return .enqueue(try parseWrite(argument, field: key, step: index))
        case "enqueueGroup":
            guard case .array(let writes) = argument, !writes.isEmpty else {
                throw fail(key, "a non-empty array of writes is required")
            }
            return .enqueueGroup(try writes.enumerated().map { try parseWrite($1, field: "\(key)[\($0)]", step: index) })
        case "respond":
            guard case .array(let answers) = argument else { throw fail(key, "an array of answers is required") }
            return .respond(try answers.enumerated().map { try parseAnswer($1, field: "respond[\($0)]", step: index) })
        case "sync":
            guard case .object(let options) = argument else { throw fail(key, "an object is required") }
            var table: String?
            for (name, value) in options {
                guard name == "table", case .string(let t) = value else {
                    throw fail("sync.\(name)", "only a table name (a string) is allowed")
                }
                table = t
            }
            return .sync(table: table)
        case "advance":
            guard let seconds = argument.number, seconds >= 0, seconds <= 86_400 * 365 else {
                throw fail(key, "a number of seconds, 0 or more, is required")
            }
            return .advance(seconds: seconds)
        case "network":
            guard case .string(let word) = argument, ["disabled", "enabled", "offline", "online"].contains(word) else {
                throw fail(key, "one of disabled, enabled, offline, online is required")
            }
            return .network(word)
        case "release":
            guard case .object(let options) = argument else { return .release(ref: try ref(argument)) }
            guard options.count == 1, case .string(let word)? = options["reason"], let reason = BlockedReason(rawValue: word)
            else {
                throw fail("release.reason", "a blocked reason is required")
            }
            return .releaseReason(reason)
        case "discard":
            guard let flag = fields["withDependents"] else { return .discard(ref: try ref(argument), withDependents: false) }
            guard case .bool(let on) = flag else { throw fail("withDependents", "true or false is required") }
            return .discard(ref: try ref(argument), withDependents: on)
        case "withdraw": return .withdraw(ref: try ref(argument))
        case "cancel": return .cancel(ref: try ref(argument))
        case "explain": return .explain(ref: try ref(argument))
        case "takeAnswered": return .takeAnswered
        case "forgetAnswered": return .forgetAnswered
        case "crash": return .crash
        case "clearLocalData":
            guard case .string(let user) = argument, !user.isEmpty else { throw fail(key, "a user name is required") }
            return .clearLocalData(user: user)
        default: throw fail(key, "not a known action")
        }
    }

    private static func parseWrite(_ value: JSONValue, field: String, step: Int) throws -> WriteSpec {
        func fail(_ name: String, _ problem: String) -> ScenarioError {
            ScenarioError(step: step, field: "\(field).\(name)", problem: problem)
        }
        guard case .object(let fields) = value else {
            throw ScenarioError(step: step, field: field, problem: "a write is an object")
        }
        for name in fields.keys where !["ref", "table", "op", "key", "body", "dependsOn", "baseVersion"].contains(name) {
            throw fail(name, "not a field of a write")
        }
        var ref: String?
        if let given = fields["ref"] {
            guard case .string(let r) = given, !r.isEmpty else { throw fail("ref", "a non-empty string is required") }
            ref = r
        }
        guard case .string(let table)? = fields["table"] else { throw fail("table", "a string is required") }
        guard case .string(let op)? = fields["op"], !op.isEmpty else { throw fail("op", "a string is required") }
        guard let key = fields["key"] else { throw fail("key", "a JSON object is required") }
        var dependsOn: [String] = []
        if let given = fields["dependsOn"] {
            guard case .array(let refs) = given else { throw fail("dependsOn", "an array of refs is required") }
            dependsOn = try refs.map {
                guard case .string(let r) = $0 else { throw fail("dependsOn", "an array of refs is required") }
                return r
            }
        }
        var baseVersion: Int64?
        if let given = fields["baseVersion"] {
            guard case .int(let v) = given else { throw fail("baseVersion", "an integer is required") }
            baseVersion = v
        }
        return WriteSpec(
            ref: ref, table: table, op: op, key: key, body: fields["body"] ?? [:], dependsOn: dependsOn, baseVersion: baseVersion)
    }

    private static func parseAnswer(_ value: JSONValue, field: String, step: Int) throws -> SimulatedInstance.Scripted {
        func fail(_ problem: String) -> ScenarioError { ScenarioError(step: step, field: field, problem: problem) }
        guard case .object(let fields) = value else { throw fail("an answer is an object") }
        func string(_ name: String) throws -> String? {
            guard let v = fields[name] else { return nil }
            guard case .string(let s) = v else { throw fail("\(name) must be a string") }
            return s
        }
        func status() throws -> Int? {
            guard let v = fields["status"] else { return nil }
            guard case .int(let n) = v, (100...599).contains(n) else { throw fail("status must be an HTTP status") }
            return Int(n)
        }
        func names(_ name: String) throws -> [String] {
            guard let v = fields[name] else { return [] }
            guard case .array(let items) = v else { throw fail("\(name) must be an array of strings") }
            return try items.map {
                guard case .string(let s) = $0 else { throw fail("\(name) must be an array of strings") }
                return s
            }
        }
        if let verdict = fields["verdict"] {
            guard case .string(let word) = verdict else { throw fail("verdict must be a string") }
            switch word {
            case "accepted": return .verdict(.accepted)
            case "merged": return .verdict(.merged(fields: try names("fields")))
            case "conflicted": return .verdict(.conflicted(siblingId: "", fields: try names("fields")))
            case "refused":
                return .verdict(
                    .refused(
                        Refusal(
                            status: try status() ?? 400, code: try string("code"), reason: try string("reason"),
                            message: try string("message"),
                            fields: try names("fields"))))
            case "failed": return .verdict(.failed(status: try status() ?? 503, text: try string("message")))
            case "blocked":
                guard let word = try string("reason"), let reason = BlockedReason(rawValue: word),
                    reason != .failingAlone, reason != .identityChanged
                else {
                    throw fail(
                        "reason must be keySpent, ancestorUnavailable, conflictUnresolved, instanceChanged or credentialRefused")
                }
                return .verdict(.blocked(reason, refusal: nil))
            default: throw fail("unknown verdict \"\(word)\"")
            }
        }
        if let status = try status() {
            var retryAfter: String?
            switch fields["retryAfter"] {
            case nil: break
            case .int(let n)?: retryAfter = String(n)
            case .double(let d)?:
                // Checked before it becomes an integer: 1e308 or NaN would trap (exit 132).
                guard d.isFinite, d >= 0, d <= 1e15 else { throw fail("retryAfter must be seconds from 0 to 1e15, or a string") }
                retryAfter = String(Int64(d.rounded(.up)))
            case .string(let s)?: retryAfter = s
            default: throw fail("retryAfter must be seconds or a string")
            }
            // The scenario's instance answers as PostgREST does, and its codes mean what they mean there.
            let code = try string("code")
            return .status(status, code: code, retryAfter: retryAfter, meaning: .postgREST(status: status, code: code))
        }
        if fields["network"] == .string("down") { return .networkDown }
        if fields["lostResponse"] == .bool(true) { return .lostResponse }
        if fields["malformed"] == .bool(true) { return .malformed }
        if fields["crashAfterApply"] == .bool(true) { return .crashAfterApply }
        if fields["read"] == .string("fails") { return .readFails }
        throw fail("not a known answer")
    }
}

extension JSONValue {
    /// The value as a number, if it is one.
    var number: Double? {
        switch self {
        case .int(let n): return Double(n)
        case .double(let d): return d
        default: return nil
        }
    }
}
