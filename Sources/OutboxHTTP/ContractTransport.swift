public import Foundation
public import Outbox
internal import Synchronization

#if canImport(FoundationNetworking)
    internal import FoundationNetworking
#endif

/// Speaks the outbox's own wire contract (version 2, or 1 to an instance that speaks only that) to a reference instance: SQL inside PostgreSQL
/// behind PostgREST or Supabase's Data API, which answers every verdict (accepted, merged field by
/// field, conflicted with a sibling, refused, blocked) and applies each write exactly once.
///
/// ```swift
/// let transport = try ContractTransport(
///     url: URL(string: "https://abcd.supabase.co")!, apiKey: anonKey, pathPrefix: "/rest/v1")
/// ```
///
/// A batch is one request, `POST /rpc/outbox_push`, applied in order in one transaction (an atomic
/// group all or none, across tables); `withdraw` reads the row through `POST /rpc/outbox_row`. Keys
/// and bodies go as the canonical JSON bytes queued, so a resend is the same write byte for byte.
/// The transport maps answers; the library decides what they mean, as for every transport. Each batch
/// carries the log's acknowledged watermark (version 2), and the instance forgets the keys and answers
/// at or below it: what it keeps per device is bounded by the writes in flight.
public struct ContractTransport: OutboxTransport {
    /// Why a transport could not be made.
    public typealias ConfigurationError = TransportConfigurationError

    /// The version of the contract this transport speaks, in every request; an answer of another
    /// version is a broken contract (the pass stops, nothing is charged).
    public static let contractVersion = 2

    /// The versions it speaks: to an instance that answers `version_unsupported` with only version 1,
    /// it speaks 1 from then on (no watermark: the instance keeps every answer, as before).
    public static let contractVersions = [1, 2]

    /// The version this transport speaks to its instance now.
    private let speaking = SpokenVersion()

    /// The instance's base URL.
    public var url: URL { server.url }
    let server: PostgRESTServer

    /// - Parameters:
    ///   - url: the server (a Supabase project's URL, or PostgREST's).
    ///   - apiKey: sent as `apikey` (Supabase's anon or publishable key); never as a bearer token.
    ///   - schema: the schema the instance's functions are in, when not the server's default.
    ///   - pathPrefix: prepended to every path (`/rest/v1` for Supabase).
    ///   - timeout: how long one request may take before it counts as an outcome unknown.
    ///   - headers: sent with every request (never put a token here).
    ///   - allowInsecureHTTP: plain `http://` is refused for any host but the loopback unless true.
    ///   - client: the HTTP client; a `URLSessionHTTPClient` of its own by default.
    public init(
        url: URL, apiKey: String? = nil, schema: String? = nil, pathPrefix: String = "", timeout: TimeInterval = 30,
        headers: [String: String] = [:], allowInsecureHTTP: Bool = false, client: (any HTTPClient)? = nil
    ) throws {
        server = try PostgRESTServer(
            url: url, apiKey: apiKey, schema: schema, pathPrefix: pathPrefix, timeout: timeout, headers: headers,
            allowInsecureHTTP: allowInsecureHTTP, client: client)
    }

    // MARK: - OutboxTransport

    public var prunesByWatermark: Bool { true }

    public func unmadeReason(for write: OutgoingWrite) -> String? {
        guard write.keyIsObject else { return "the key is not an object" }
        guard write.bodyIsObject else { return "the body is not an object" }
        return nil
    }

    public func send(_ batch: OutgoingBatch, accessToken: String?) async -> RequestAnswer {
        let version = speaking.value.load(ordering: .relaxed)
        let request: HTTPRequest
        do {
            request = HTTPRequest(
                method: "POST", url: try server.endpoint("rpc", "outbox_push"),
                headers: server.headers(token: accessToken, writes: batch.writes), body: Self.body(of: batch, version: version))
        } catch {
            return .contractBroken("the request could not be made: \(error)")
        }
        let response: HTTPResponse
        do {
            response = try await server.perform(request)
        } catch {
            return PostgRESTServer.answer(to: error)
        }
        guard (200..<300).contains(response.status) else { return .failed(PostgRESTAnswer(response).failure) }
        // An instance of version 1 applied nothing: the same request goes again in its version.
        if version == 2, Self.speaksOnlyVersion1(response.body) {
            speaking.value.store(1, ordering: .relaxed)
            return await send(batch, accessToken: accessToken)
        }
        return Self.answers(response.body, to: batch, version: version)
    }

    /// Whether the answer is `version_unsupported` from an instance that speaks version 1 and not 2.
    static func speaksOnlyVersion1(_ body: Data) -> Bool {
        guard case .object(let answer)? = try? JSONText.parse(String(decoding: body, as: UTF8.self)),
            answer["error"] == .string("version_unsupported"), case .array(let versions)? = answer["versions"]
        else { return false }
        return versions.contains(.int(1)) && !versions.contains(.int(2))
    }

    public func readRow(table: String, key: JSONValue, accessToken: String?) async throws -> JSONValue? {
        let body = "{\"key\":" + JSONText.render(key) + ",\"table\":" + JSONText.render(.string(table)) + "}"
        let response = try await server.perform(
            HTTPRequest(
                method: "POST", url: try server.endpoint("rpc", "outbox_row"), headers: server.headers(token: accessToken),
                body: Data(body.utf8)))
        guard (200..<300).contains(response.status), case .object(let answer)? = try? JSONText.parse(response.text),
            case .bool(let exists)? = answer["exists"]
        else {
            throw PostgRESTError(status: response.status, code: PostgRESTAnswer(response).code)
        }
        return exists ? answer["row"] : nil
    }

    // MARK: - The wire

    /// `{"batch": {"atomic", "origin", "version", "watermark", "writes": [...]}}`, each write's key and
    /// body the bytes it was queued with; the watermark in version 2, when the batch has one.
    static func body(of batch: OutgoingBatch, version: Int = contractVersion) -> Data {
        var out = Data()
        func text(_ string: String) { out.append(contentsOf: Array(string.utf8)) }
        let origin = batch.writes.first?.origin.description ?? ""
        text("{\"batch\":{\"atomic\":\(batch.isAtomic),\"origin\":\(JSONText.render(.string(origin)))")
        text(",\"version\":\(version)")
        if version >= 2, let watermark = batch.acknowledgedWatermark { text(",\"watermark\":\(watermark.rawValue)") }
        text(",\"writes\":[")
        for (index, write) in batch.writes.enumerated() {
            if index > 0 { text(",") }
            text("{")
            if let base = write.baseVersion { text("\"baseVersion\":\(base),") }
            if !write.dependsOn.isEmpty {
                text("\"dependsOn\":[\(write.dependsOn.map { "\($0.rawValue)" }.joined(separator: ","))],")
            }
            text("\"body\":")
            out.append(contentsOf: write.bodyJSON)
            text(",\"id\":\(write.id.rawValue),\"idempotencyKey\":\"\(write.idempotencyKey)\",\"key\":")
            out.append(contentsOf: write.keyJSON)
            switch write.operation {
            case .custom(let name): text(",\"name\":\(JSONText.render(.string(name))),\"op\":\"custom\"")
            case let operation: text(",\"op\":\"\(operation)\"")
            }
            text(",\"table\":\(JSONText.render(.string(write.table))),\"user\":\(JSONText.render(.string(write.user)))}")
        }
        text("]}}")
        return out
    }

    /// One answer per write, in order, each naming its write; anything else breaks the contract.
    static func answers(_ body: Data, to batch: OutgoingBatch, version: Int = contractVersion) -> RequestAnswer {
        guard case .object(let answer)? = try? JSONText.parse(String(decoding: body, as: UTF8.self)) else {
            return .contractBroken("the answer is not a JSON object")
        }
        guard answer["version"] == .int(Int64(version)) else {
            return .contractBroken("the answer is not of contract version \(version)")
        }
        if answer["error"] == .string("below_watermark") {
            return .contractBroken("the instance refused a write sent again at or below the acknowledged watermark")
        }
        if case .string(let error)? = answer["error"] {
            return .contractBroken("the instance refused the request as a whole: \(Refusal.cut(error))")
        }
        guard case .array(let verdicts)? = answer["verdicts"], verdicts.count == batch.writes.count else {
            return .contractBroken("the answer does not hold one verdict per write")
        }
        var answers: [WriteAnswer] = []
        for (write, verdict) in zip(batch.writes, verdicts) {
            guard case .object(let fields) = verdict, fields["id"] == .int(Int64(write.id.rawValue)) else {
                return .contractBroken("a verdict does not name the write it answers")
            }
            guard let mapped = Self.verdict(fields) else {
                return .contractBroken("a verdict the contract does not have")
            }
            answers.append(WriteAnswer(mapped, replayed: fields["replayed"] == .bool(true)))
        }
        // A group the instance aborted for a write that may pass (a permission not granted yet) was
        // not refused: the whole request failed that way.
        if batch.isAtomic, let failed = answers.lazy.compactMap(\.verdict.failure).first { return .failed(failed) }
        return .answered(answers)
    }

    /// A verdict of the contract as the boundary's; nil for one the contract does not have.
    static func verdict(_ fields: [String: JSONValue]) -> WriteVerdict? {
        func strings(_ name: String) -> [String] {
            guard case .array(let values)? = fields[name] else { return [] }
            return values.compactMap { value in
                if case .string(let text) = value { return text }
                return nil
            }
        }
        func string(_ name: String) -> String? {
            if case .string(let text)? = fields[name] { return text }
            return nil
        }
        switch string("verdict") {
        case "accepted": return .accepted
        case "skipped": return .skipped
        case "merged": return .merged(fields: strings("fields"))
        case "conflicted":
            guard let sibling = string("siblingId") else { return nil }
            return .conflicted(siblingId: sibling, fields: strings("fields"))
        case "refused":
            guard case .int(let status)? = fields["status"] else { return nil }
            let refusal = Refusal(
                status: Int(clamping: status), code: string("code"), message: string("reason"), fields: strings("fields"))
            // The instance's codes are PostgreSQL's, passed on as PostgREST does: a refusal whose code
            // may pass is this write's failure, not a refusal.
            switch RequestFailure.Meaning.postgREST(status: refusal.status, code: refusal.code) {
            case .refused, .schemaCache: return .refused(refusal)
            case .mayPass, .tokenRefused: return .failed(status: refusal.status, code: refusal.code, text: refusal.message)
            }
        case "blocked":
            let reasons: [String: BlockedReason] = [
                "key_spent": .keySpent, "version_conflict": .conflictUnresolved, "ancestor_unavailable": .ancestorUnavailable,
            ]
            guard let word = string("reason"), let reason = reasons[word] else { return nil }
            let changed = strings("fields")
            return .blocked(reason, refusal: changed.isEmpty ? nil : Refusal(code: word, fields: changed))
        default: return nil
        }
    }
}

extension WriteVerdict {
    /// A `failed` verdict as the failure of a request that may pass, for a group that failed with it.
    fileprivate var failure: RequestFailure? {
        guard case .failed(let status, let code, let text) = self else { return nil }
        return RequestFailure(kind: .http, status: status, code: code, text: text, meaning: .mayPass)
    }
}

/// The contract version a transport speaks to its instance, shared by its copies.
private final class SpokenVersion: Sendable {
    let value = Atomic<Int>(ContractTransport.contractVersion)
}
