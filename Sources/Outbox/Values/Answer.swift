/// The instance's answer to one write of a request, as received.
// Indirect: a case's payload (a refusal, a failure's texts) is boxed, so a verdict is a word, and the
// answers a pass copies from the transport through the decision cost a retain each, not a copy of
// the largest payload (what `WriteState`'s failure cases do for the verdict table's entries).
public indirect enum WriteVerdict: Hashable, Sendable {
    /// Applied as sent.
    case accepted
    /// Applied over newer changes to other fields; these fields were overwritten.
    case merged(fields: [String])
    /// Not applied: these fields changed since; the write was kept as sibling `siblingId`.
    case conflicted(siblingId: String, fields: [String])
    /// Not applied: the instance refused it.
    case refused(Refusal)
    /// Blocked with a reason the instance decides (keySpent, ancestorUnavailable, conflictUnresolved,
    /// instanceChanged, credentialRefused).
    case blocked(BlockedReason, refusal: Refusal?)
    /// A per-write failure that may pass, inside an otherwise answered batch: the status, the code
    /// (a SQLSTATE, such as 42501 for row-level security), and the start of a text body (cut to 200
    /// Unicode scalars; audits only).
    case failed(status: Int?, code: String? = nil, text: String?)
    /// Not applied because a write it depends on in the same batch was not.
    case skipped
    /// Not sent: the transport stopped before this write, which a request of its own would have
    /// carried. With a failure, this write's own request failed that way (no answer came, or an answer
    /// for the whole request), judged as the same failure of a request of this one write; without one,
    /// an earlier write's request failed. The write stays pending and nothing is charged (unless its
    /// failure is a refusal), its key is resent later, and the pass stops after the batch.
    case notSent(RequestFailure?)

    func encode(into writer: inout some ByteSink) {
        switch self {
        case .accepted: writer.byte(0)
        case .merged(let fields):
            writer.byte(1)
            writer.array(fields) { $0.string($1) }
        case .conflicted(let sibling, let fields):
            writer.byte(2)
            writer.string(sibling)
            writer.array(fields) { $0.string($1) }
        case .refused(let refusal):
            writer.byte(10)
            refusal.encode(into: &writer)
        case .blocked(let reason, let refusal):
            writer.byte(4)
            writer.byte(reason.code)
            writer.optional(refusal) { $1.encode(into: &$0) }
        case .failed(let status, nil, let text):
            writer.byte(5)
            writer.optional(status) { $0.varint($1) }
            writer.optional(text) { $0.string($1) }
        case .failed(let status, let code?, let text):
            writer.byte(8)
            writer.optional(status) { $0.varint($1) }
            writer.string(code)
            writer.optional(text) { $0.string($1) }
        case .skipped: writer.byte(6)
        case .notSent(let failure):
            writer.byte(9)
            writer.optional(failure) { $1.encode(into: &$0) }
        }
    }

    static func decode(from reader: inout ByteReader) throws -> WriteVerdict {
        switch try reader.byte() {
        case 0: return .accepted
        case 1: return .merged(fields: try reader.array { try $0.string() })
        case 2: return .conflicted(siblingId: try reader.string(), fields: try reader.array { try $0.string() })
        // Codes 3 and 7 were written before transports said what a failure means (R9.1).
        case 3: return LegacyMeaning.verdict(try Refusal.decode(from: &reader))
        case 10: return .refused(try Refusal.decode(from: &reader))
        case 4:
            return .blocked(
                try BlockedReason.decode(from: &reader), refusal: try reader.optional { try Refusal.decode(from: &$0) })
        case 5: return .failed(status: try reader.optional { try $0.int() }, text: try reader.optional { try $0.string() })
        case 6: return .skipped
        case 7: return .notSent(try reader.optional { try RequestFailure.decode(from: &$0, legacy: true) })
        case 9: return .notSent(try reader.optional { try RequestFailure.decode(from: &$0) })
        case 8:
            return .failed(
                status: try reader.optional { try $0.int() }, code: try reader.string(),
                text: try reader.optional { try $0.string() })
        case let other: throw DecodeFailure("unknown verdict \(other)")
        }
    }

    /// The verdict's word, as the report and the tools show it.
    public var name: String {
        switch self {
        case .accepted: return "accepted"
        case .merged: return "merged"
        case .conflicted: return "conflicted"
        case .refused: return "refused"
        case .blocked: return "blocked"
        case .failed: return "failed"
        case .skipped: return "skipped"
        case .notSent: return "notSent"
        }
    }
}

/// One write's answer: its verdict, and whether the instance replayed an earlier answer.
public struct WriteAnswer: Hashable, Sendable {
    /// What the instance decided.
    public var verdict: WriteVerdict
    /// Whether it had applied the write before (a resend answered again).
    public var replayed: Bool

    /// An answer of `verdict`.
    public init(_ verdict: WriteVerdict, replayed: Bool = false) {
        self.verdict = verdict
        self.replayed = replayed
    }
}

/// A request that got no per-write answers: no connection, or an HTTP status for the whole request.
/// An `Error`, so a transport's own code can throw it.
public struct RequestFailure: Error, Hashable, Sendable {
    /// How a request failed.
    public enum Kind: String, CaseIterable, Hashable, Sendable, StoredCode {
        /// The request never reached the instance, or its response was lost.
        case network
        /// The request timed out.
        case timeout
        /// A failure on the device.
        case device
        /// The instance answered the whole request with an HTTP status.
        case http

        /// The stored code (Specs/log-format.md): fixed per case; a code is never reused.
        var code: UInt8 {
            switch self {
            case .network: return 0
            case .timeout: return 1
            case .device: return 2
            case .http: return 3
            }
        }
    }

    /// What a failure means for the writes of the request, as the transport maps the server's status
    /// and code; the library decides from it what happens to them and to the pass.
    public enum Meaning: String, CaseIterable, Hashable, Sendable, StoredCode {
        /// A failure that may pass (no connection, a timeout, 401, 408, 429, 5xx, a permission the
        /// server may yet grant): the writes stay pending and the pass stops.
        case mayPass
        /// The server refused the access token (expired, invalid or missing): a fresh one may pass.
        case tokenRefused
        /// The server does not know the table, a column or a function yet (a schema being deployed):
        /// counted apart from refusals, and the pass stops.
        case schemaCache
        /// The server refused what the request carries: its write is refused, or a request of several
        /// writes is sent again in halves.
        case refused

        /// The stored code (Specs/log-format.md): fixed per case; a code is never reused.
        var code: UInt8 {
            switch self {
            case .mayPass: return 0
            case .tokenRefused: return 1
            case .schemaCache: return 2
            case .refused: return 3
            }
        }

        /// What a failure means when its transport says no more than its kind and HTTP status: any
        /// other 4xx is a refusal; no answer, 401, 402, 408, 429, 5xx and any other status may pass.
        public static func of(_ kind: Kind, status: Int?) -> Meaning {
            guard kind == .http, let status, (400..<500).contains(status) else { return .mayPass }
            return [401, 402, 408, 429].contains(status) ? .mayPass : .refused
        }
    }

    /// How it failed.
    public var kind: Kind
    /// The HTTP status, for `.http`.
    public var status: Int?
    /// The server's code (a SQLSTATE, or the server's own).
    public var code: String?
    /// The `Retry-After` header as received (seconds or an HTTP-date).
    public var retryAfter: String?
    /// The start of a text body, cut to 200 Unicode scalars (audits only).
    public var text: String?
    /// The fields the server named as the cause, for a refusal.
    public var fields: [String]
    /// What the failure means, as the transport mapped it.
    public var meaning: Meaning

    /// A failure of a request; `text` is the start of the server's body, for audits only. Without a
    /// `meaning`, the failure means what its kind and status say (`Meaning.of(_:status:)`).
    public init(
        kind: Kind, status: Int? = nil, code: String? = nil, retryAfter: String? = nil, text: String? = nil,
        fields: [String] = [], meaning: Meaning? = nil
    ) {
        self.kind = kind
        self.status = Refusal.httpStatus(status)
        self.code = Refusal.identifier(code)
        self.retryAfter = retryAfter.map { Refusal.cut($0) }
        // A "code" that is no identifier is the server's text: audits only.
        self.text = (text ?? (self.code == nil ? code : nil)).map { Refusal.cut($0) }
        self.fields = Refusal.names(fields)
        self.meaning = meaning ?? .of(kind, status: self.status)
    }

    /// The refusal a write's record keeps when this failure refuses it.
    var refusal: Refusal { Refusal(status: status, code: code, message: text, fields: fields) }

    func encode(into writer: inout some ByteSink) {
        writer.byte(kind.code)
        writer.optional(status) { $0.varint($1) }
        writer.optional(code) { $0.string($1) }
        writer.optional(retryAfter) { $0.string($1) }
        writer.optional(text) { $0.string($1) }
        writer.byte(meaning.code)
        writer.array(fields) { $0.string($1) }
    }

    /// A failure as stored; `legacy`: one recorded before transports said what a failure means (stored
    /// codes 1 and 7), which means what the library then judged from its status and code.
    static func decode(from reader: inout ByteReader, legacy: Bool = false) throws -> RequestFailure {
        let code = try reader.byte()
        guard let kind = Kind(code: code) else { throw DecodeFailure("unknown request failure kind \(code)") }
        let status = try reader.optional { try $0.int() }
        let serverCode = try reader.optional { try $0.string() }
        let retryAfter = try reader.optional { try $0.string() }
        let text = try reader.optional { try $0.string() }
        let meaning: Meaning
        var fields: [String] = []
        if legacy {
            meaning = LegacyMeaning.of(kind, status: status, code: serverCode)
        } else {
            let stored = try reader.byte()
            guard let found = Meaning(code: stored) else { throw DecodeFailure("unknown request failure meaning \(stored)") }
            meaning = found
            fields = try reader.array { try $0.string() }
        }
        return RequestFailure(
            kind: kind, status: status, code: serverCode, retryAfter: retryAfter, text: text, fields: fields, meaning: meaning)
    }
}

/// What a failure recorded before transports said what it means (`answerReceived` v3 and earlier)
/// meant: the classification the library then applied to every transport's status and code, kept
/// only so that those records are judged again as they were.
enum LegacyMeaning {
    static func of(_ kind: RequestFailure.Kind, status: Int?, code: String?) -> RequestFailure.Meaning {
        guard kind == .http else { return .mayPass }
        if status == 401, let code, ["PGRST301", "PGRST302", "PGRST303"].contains(code) { return .tokenRefused }
        if let code {
            if code == "PGRST204" || code == "PGRST205" || code == "PGRST202" { return .schemaCache }
            if code == "42501" || code == "25006" { return .mayPass }
        }
        if let status {
            if status == 401 || status == 402 || status == 408 || status == 429 { return .mayPass }
            return (400..<500).contains(status) ? .refused : .mayPass
        }
        if let code, ["22", "23", "42"].contains(code.prefix(2)) || code == "P0001" || code == "0A000" { return .refused }
        return code == nil ? .refused : .mayPass
    }

    /// A per-write refusal recorded before then, as the verdict it was judged to be: a refusal, a
    /// failure of the write that may pass, or its request's schema-cache failure.
    static func verdict(_ refusal: Refusal) -> WriteVerdict {
        switch of(.http, status: refusal.status, code: refusal.code) {
        case .refused: return .refused(refusal)
        case .schemaCache:
            return .notSent(
                RequestFailure(
                    kind: .http, status: refusal.status, code: refusal.code, text: refusal.message, fields: refusal.fields,
                    meaning: .schemaCache))
        case .mayPass, .tokenRefused: return .failed(status: refusal.status, text: refusal.message)
        }
    }
}

/// What came back for one request, as received: the input every decision of a pass depends on.
public enum RequestAnswer: Hashable, Sendable {
    /// One answer per write sent, in order.
    case answered([WriteAnswer])
    /// The whole request failed.
    case failed(RequestFailure)
    /// The response broke the wire contract; the library's own description of how (never server text).
    case contractBroken(String)

    func encode(into writer: inout some ByteSink) {
        switch self {
        case .answered(let answers):
            writer.byte(0)
            writer.array(answers) { w, answer in
                answer.verdict.encode(into: &w)
                w.bool(answer.replayed)
            }
        case .failed(let failure):
            writer.byte(3)
            failure.encode(into: &writer)
        case .contractBroken(let description):
            writer.byte(2)
            writer.string(description)
        }
    }

    static func decode(from reader: inout ByteReader) throws -> RequestAnswer {
        switch try reader.byte() {
        case 0: return .answered(try reader.array { WriteAnswer(try WriteVerdict.decode(from: &$0), replayed: try $0.bool()) })
        // Code 1 was written before transports said what a failure means (R9.1).
        case 1: return .failed(try RequestFailure.decode(from: &reader, legacy: true))
        case 2: return .contractBroken(try reader.string())
        case 3: return .failed(try RequestFailure.decode(from: &reader))
        case let other: throw DecodeFailure("unknown answer kind \(other)")
        }
    }
}

extension RequestAnswer {
    /// The answer as the log keeps it: every text of the server cut (R3.4), field lists capped, and a
    /// list of answers that does not match the request (a count no request has) kept as the broken
    /// contract it is, not as millions of entries. Whatever the log keeps must read back.
    func bounded(writes: Int) -> RequestAnswer {
        switch self {
        case .answered(let answers):
            guard answers.count == writes else {
                return .contractBroken("\(answers.count) answers for a request of \(writes) writes")
            }
            return .answered(answers.map { WriteAnswer($0.verdict.bounded, replayed: $0.replayed) })
        case .failed: return self
        case .contractBroken(let description): return .contractBroken(Refusal.cut(description))
        }
    }
}

extension WriteVerdict {
    fileprivate var bounded: WriteVerdict {
        switch self {
        case .merged(let fields): return .merged(fields: Refusal.names(fields))
        case .conflicted(let sibling, let fields):
            return .conflicted(siblingId: Refusal.cut(sibling), fields: Refusal.names(fields))
        case .failed(let status, let code, let text):
            return .failed(
                status: Refusal.httpStatus(status), code: Refusal.identifier(code), text: text.map { Refusal.cut($0) })
        case .accepted, .refused, .blocked, .skipped, .notSent: return self
        }
    }
}

extension RequestAnswer {
    /// Where the server refused the token (a 401 of the token class: expired, invalid or missing, and
    /// a new one may pass, R7.5): 0 for the whole request, or the index of the first write
    /// not sent because its own request was refused so; nil when it did not.
    var tokenRefusedAt: Int? {
        switch self {
        case .failed(let failure): return failure.refusesTheToken ? 0 : nil
        case .answered(let answers):
            guard let index = answers.firstIndex(where: { $0.verdict.notSentFailure != nil }) else { return nil }
            return answers[index].verdict.notSentFailure!.refusesTheToken ? index : nil
        case .contractBroken: return nil
        }
    }

    /// This answer, with the writes from `index` on answered by `rest` instead (the same request sent
    /// again from there, after a fresh token).
    func resumed(at index: Int, with rest: RequestAnswer) -> RequestAnswer {
        guard index > 0, case .answered(let answers) = self else { return rest }
        let kept = Array(answers[..<index])
        switch rest {
        case .answered(let more): return .answered(kept + more)
        case .failed(let failure):
            let unsent = answers.count - index
            return .answered(
                kept + [WriteAnswer(.notSent(failure))] + Array(repeating: WriteAnswer(.notSent(nil)), count: unsent - 1))
        case .contractBroken: return rest
        }
    }
}

extension RequestFailure {
    /// The server refused the token, and a new one may pass (R7.5).
    var refusesTheToken: Bool { meaning == .tokenRefused }
}

extension WriteVerdict {
    /// The failure of this write's own request, when the transport did not send it because of one.
    var notSentFailure: RequestFailure? {
        if case .notSent(let failure?) = self { return failure }
        return nil
    }
}
