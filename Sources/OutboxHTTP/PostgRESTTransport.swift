public import Foundation
public import Outbox

#if canImport(FoundationNetworking)
    internal import FoundationNetworking
#endif

/// Writes queued writes into an app's own tables through PostgREST (Supabase's Data API, or any
/// PostgREST v12+), with no server-side change.
///
/// ```swift
/// let transport = try PostgRESTTransport(
///     url: URL(string: "https://abcd.supabase.co")!, apiKey: anonKey, pathPrefix: "/rest/v1",
///     tables: ["todos": ["id"], "lists": ["id"]])
/// ```
///
/// A write's row is its key merged with its body. Each write is a request of its own, bar a run of
/// consecutive inserts into one table with the same columns, which goes as one multi-row request; the
/// library records each request's answer before it sends the next. Inserts go as `POST /table`,
/// upserts as `POST /table?on_conflict=…` merging duplicates, updates and deletes as `PATCH` and
/// `DELETE` filtered by every key column, custom mutations as `POST /rpc/name`. An insert answered
/// "duplicate key" is read back: when the stored row holds what the write sent, the write was
/// already applied (a lost acknowledgement) and is accepted as replayed. Every request carries the
/// token only in `Authorization`, the apikey, `X-Idempotency-Key`, `X-Outbox-Origin` and
/// `X-Outbox-Write`, so SQL can see which write it applies.
///
/// The transport maps answers; the library decides what they mean, as for every transport.
public struct PostgRESTTransport: OutboxTransport {
    /// Why a transport could not be made.
    public typealias ConfigurationError = TransportConfigurationError

    /// The server's base URL.
    public var url: URL { server.url }
    /// Prepended to every path (`/rest/v1` for Supabase).
    public var pathPrefix: String { server.pathPrefix }
    /// The schema written to (`Content-Profile`); nil for the server's default.
    public var schema: String? { server.schema }
    /// The tables it may write and their key columns; nil: any table, keyed by its writes' keys.
    public let tables: [String: [String]]?

    /// The key columns `tables` gives `table`: a write made from a model without a key takes them from it.
    public func keyColumns(of table: String) -> [String]? { tables?[table] }
    /// How long one request may take.
    public var timeout: TimeInterval { server.timeout }
    private let server: PostgRESTServer

    /// - Parameters:
    ///   - url: the server (a Supabase project's URL, or PostgREST's).
    ///   - apiKey: sent as `apikey` (Supabase's anon or publishable key); never as a bearer token.
    ///   - schema: the schema written to, when not the server's default.
    ///   - tables: the tables the transport may write, each with its key columns; a write to any other
    ///     table is refused as one the transport cannot make. Nil: any table, keyed by its writes' keys.
    ///   - pathPrefix: prepended to every path (`/rest/v1` for Supabase).
    ///   - timeout: how long one request may take before it counts as an outcome unknown.
    ///   - headers: sent with every request (never put a token here).
    ///   - allowInsecureHTTP: plain `http://` is refused for any host but the loopback unless true.
    ///   - client: the HTTP client; a `URLSessionHTTPClient` of its own by default.
    public init(
        url: URL, apiKey: String? = nil, schema: String? = nil, tables: [String: [String]]? = nil, pathPrefix: String = "",
        timeout: TimeInterval = 30, headers: [String: String] = [:], allowInsecureHTTP: Bool = false,
        client: (any HTTPClient)? = nil
    ) throws {
        for (table, keys) in tables ?? [:] where table.isEmpty || keys.isEmpty {
            throw ConfigurationError(description: "table '\(table)' needs a name and at least one key column")
        }
        self.tables = tables
        server = try PostgRESTServer(
            url: url, apiKey: apiKey, schema: schema, pathPrefix: pathPrefix, timeout: timeout, headers: headers,
            allowInsecureHTTP: allowInsecureHTTP, client: client)
    }

    // MARK: - OutboxTransport

    public func unmadeReason(for write: OutgoingWrite) -> String? {
        if let tables, tables[write.table] == nil { return "the transport has no mapping for table \(write.table)" }
        if let problem = PostgRESTServer.nameProblem(write.table, "table") { return problem }
        if case .custom(let name) = write.operation, let problem = PostgRESTServer.nameProblem(name, "mutation") {
            return problem
        }
        guard case .object(let key) = write.key else { return "the key is not an object" }
        if let columns = tables?[write.table], Set(columns) != Set(key.keys) {
            return "the key's members are not the key columns of \(write.table) (\(columns.joined(separator: ", ")))"
        }
        for value in key.values {
            switch value {
            case .string, .int, .double, .bool: continue
            default: return "a key column whose value is not a string, number or boolean cannot be filtered on"
            }
        }
        return nil
    }

    /// A group goes as one request (one transaction) only when it is inserts into one table with the
    /// same columns; any other needs the contract transport.
    public func unmadeReason(forGroup group: OutgoingBatch) -> String? {
        group.writes.count < 2 || combinedInserts(group.writes) == group.writes.count
            ? nil : "an atomic group across tables, or of other operations than inserts, needs the contract transport"
    }

    /// A run of inserts into one table with the same columns goes as one request; any other write as a
    /// request of its own.
    public func requestSize(for batch: OutgoingBatch) -> Int {
        max(combinedInserts(batch.writes), 1)
    }

    public func send(_ batch: OutgoingBatch, accessToken: String?) async -> RequestAnswer {
        guard let first = batch.writes.first else { return .answered([]) }
        let size = requestSize(for: batch)
        guard size == 1 else {
            let combined = Array(batch.writes.prefix(size))
            let answer = await sendCombined(combined, token: accessToken)
            return Self.notSent(after: answer, sent: size, unsent: batch.writes.count - size)
        }
        let answer: RequestAnswer
        switch await sendOne(first, token: accessToken) {
        case .answer(let one): answer = .answered([one])
        case .failed(let failure): answer = .failed(failure)
        case .broken(let description): answer = .contractBroken(description)
        }
        return Self.notSent(after: answer, sent: 1, unsent: batch.writes.count - 1)
    }

    /// The answer to one request, for a caller that handed more writes than one request carries
    /// (`requestSize(for:)`): the writes past it are not sent.
    private static func notSent(after answer: RequestAnswer, sent: Int, unsent: Int) -> RequestAnswer {
        guard unsent > 0 else { return answer }
        let rest = Array(repeating: WriteAnswer(.notSent(nil)), count: unsent)
        switch answer {
        case .answered(let answers): return .answered(answers + rest)
        case .failed(let failure): return .answered(Array(repeating: WriteAnswer(.notSent(failure)), count: sent) + rest)
        case .contractBroken: return answer
        }
    }

    public func readRow(table: String, key: JSONValue, accessToken: String?) async throws -> JSONValue? {
        let response = try await server.perform(
            HTTPRequest(method: "GET", url: try server.endpoint(table, filters: key), headers: server.headers(token: accessToken))
        )
        guard response.status == 200, case .array(let rows)? = try? JSONText.parse(response.text) else {
            throw PostgRESTError(status: response.status, code: PostgRESTAnswer(response).code)
        }
        return rows.first
    }

    // MARK: - One write

    private enum Outcome {
        case answer(WriteAnswer)
        /// The request failed: the library judges the failure as this write's.
        case failed(RequestFailure)
        /// A 2xx answer that breaks the wire contract (R9.4): nothing of it is judged.
        case broken(String)

        /// A request-level answer (no response, or one past the limit) as this write's outcome.
        init(_ answer: RequestAnswer) {
            switch answer {
            case .failed(let failure): self = .failed(failure)
            case .contractBroken(let description): self = .broken(description)
            case .answered(let answers): self = answers.first.map { .answer($0) } ?? .broken("no answer")
            }
        }
    }

    private func sendOne(_ write: OutgoingWrite, token: String?) async -> Outcome {
        let request: HTTPRequest
        do {
            request = try self.request(for: write, token: token)
        } catch {
            return .answer(WriteAnswer(.refused(Refusal(reason: "the request could not be made: \(error)"))))
        }
        let response: HTTPResponse
        do {
            response = try await server.perform(request)
        } catch {
            return Outcome(PostgRESTServer.answer(to: error))
        }
        if (200..<300).contains(response.status) {
            if let broken = Self.shapeProblem(of: response, to: write.operation) { return .broken(broken) }
            if write.operation == .update || write.operation == .delete {
                // Asked with count=exact: `*/N` (or a range), and N is how many rows it changed.
                guard let range = response.header("content-range"), let count = Self.exactCount(range) else {
                    return .broken("a \(response.status) answer to a \(write.operation) without an exact Content-Range")
                }
                // An update that matched no row: the row is not there to update.
                if write.operation == .update, count == 0 {
                    return .answer(
                        WriteAnswer(.refused(Refusal(status: 404, code: "row_not_found", reason: "no row has this key"))))
                }
                // A delete sent before that finds no row: the earlier one removed it (R9.3).
                if write.operation == .delete, count == 0, write.isResend {
                    return .answer(WriteAnswer(.accepted, replayed: true))
                }
            }
            return .answer(WriteAnswer(.accepted))
        }
        let answer = PostgRESTAnswer(response)
        if write.operation == .insert, response.status == 409, answer.code == "23505" {
            return await readBack(write, token: token, refused: answer)
        }
        // Row-level security refused this row (R9.4): this write's own failure, which may pass; the
        // batch's other writes go on.
        if response.status == 401 || response.status == 403, answer.code == "42501" {
            return .answer(WriteAnswer(.failed(status: response.status, code: answer.code, text: answer.message)))
        }
        // The request carried this write alone: its failure is the write's, as PostgREST's code means.
        return .failed(answer.failure)
    }

    /// What is wrong with a success answer that is not PostgREST's for this request (R9.4), or nil:
    /// every write goes with `return=minimal`, so PostgREST answers 201 (insert), 200 or 201 (upsert)
    /// or 204 (update, delete) with no body, and a function 204, or 200 with a JSON body.
    static func shapeProblem(of response: HTTPResponse, to operation: WriteOperation) -> String? {
        let statuses: Set<Int>
        switch operation {
        case .insert: statuses = [201]
        case .upsert: statuses = [200, 201]
        case .update, .delete: statuses = [204]
        case .custom: statuses = [200, 204]
        }
        guard statuses.contains(response.status) else {
            return "a \(response.status) answer, which PostgREST does not give to a \(operation) with return=minimal"
        }
        if case .custom = operation, response.status == 200 {
            guard (try? JSONText.parse(response.text)) != nil else { return "a 200 answer to a function whose body is not JSON" }
            return nil
        }
        return response.body.isEmpty ? nil : "a \(response.status) answer to a \(operation) with a body where none belongs"
    }

    /// An insert refused as a duplicate key is read back: the row it made earlier (an acknowledgement
    /// that was lost) holds every column the write sent with the same value.
    private func readBack(_ write: OutgoingWrite, token: String?, refused: PostgRESTAnswer) async -> Outcome {
        do {
            let stored = try await readRow(table: write.table, key: write.key, accessToken: token)
            if case .object(let fields)? = stored, case .object(let sent) = Self.row(of: write),
                sent.allSatisfy({ fields[$0.key] == $0.value })
            {
                return .answer(WriteAnswer(.accepted, replayed: true))
            }
            return .answer(WriteAnswer(.refused(refused.refusal)))
        } catch let failure as HTTPFailure {
            return Outcome(PostgRESTServer.answer(to: failure))
        } catch {
            return .failed(RequestFailure(kind: .network))
        }
    }

    // MARK: - Combined inserts

    /// How many of the leading writes are inserts into one table with the same columns, when at least
    /// two are (one multi-row statement: all or none); 0 otherwise.
    private func combinedInserts(_ writes: [OutgoingWrite]) -> Int {
        guard writes.count > 1, let first = writes.first else { return 0 }
        var columns: Set<String>?
        var count = 0
        for write in writes {
            guard write.operation == .insert, write.table == first.table, case .object(let key) = write.key,
                case .object(let fields) = write.body
            else { break }
            let names = Set(key.keys).union(fields.keys)
            if let columns, columns != names { break }
            columns = names
            count += 1
        }
        return count > 1 ? count : 0
    }

    /// Inserts as one request: a JSON array of the rows' bytes.
    private func sendCombined(_ writes: [OutgoingWrite], token: String?) async -> RequestAnswer {
        var body = Data("[".utf8)
        for (index, write) in writes.enumerated() {
            if index > 0 { body.append(UInt8(ascii: ",")) }
            body.append(contentsOf: Self.rowJSON(of: write))
        }
        body.append(UInt8(ascii: "]"))
        let url: URL
        do {
            url = try server.endpoint(writes[0].table)
        } catch {
            return .contractBroken("the request could not be made: \(error)")
        }
        var request = HTTPRequest(method: "POST", url: url, headers: server.headers(token: token, writes: writes), body: body)
        request.headers["Prefer"] = "return=minimal"
        let response: HTTPResponse
        do {
            response = try await server.perform(request)
        } catch {
            return PostgRESTServer.answer(to: error)
        }
        if (200..<300).contains(response.status) {
            if let broken = Self.shapeProblem(of: response, to: .insert) { return .contractBroken(broken) }
            return .answered(writes.map { _ in WriteAnswer(.accepted) })
        }
        // Refused as a whole (which row, PostgREST does not say): a request-level answer, which the
        // library splits until the refused write is alone.
        return .failed(PostgRESTAnswer(response).failure)
    }

    // MARK: - Requests

    /// The row a write makes as JSON bytes: the key's members and the body's, as queued. Only when the
    /// body names a key column too (the key wins) is the merged row rendered anew.
    static func rowJSON(of write: OutgoingWrite) -> [UInt8] {
        guard case .object(let body) = write.body, case .object(let key) = write.key else { return write.bodyJSON }
        if key.keys.contains(where: { body[$0] != nil }) { return Array(JSONText.render(row(of: write)).utf8) }
        // `{k…}` and `{b…}` make `{k…,b…}`: both are canonical objects with no member in common.
        if body.isEmpty { return write.keyJSON }
        if key.isEmpty { return write.bodyJSON }
        var bytes = write.keyJSON
        bytes[bytes.count - 1] = UInt8(ascii: ",")
        bytes += write.bodyJSON.dropFirst()
        return bytes
    }

    /// The row a write makes: its key merged with its body.
    static func row(of write: OutgoingWrite) -> JSONValue {
        guard case .object(var row) = write.body else { return write.body }
        if case .object(let key) = write.key { row.merge(key) { _, key in key } }
        return .object(row)
    }

    func request(for write: OutgoingWrite, token: String?) throws -> HTTPRequest {
        var headers = server.headers(token: token, writes: [write])
        let body = Data(Self.rowJSON(of: write))
        switch write.operation {
        case .insert:
            headers["Prefer"] = "return=minimal"
            return HTTPRequest(method: "POST", url: try server.endpoint(write.table), headers: headers, body: body)
        case .upsert:
            headers["Prefer"] = "resolution=merge-duplicates,return=minimal"
            let keys = keyColumns(of: write).joined(separator: ",")
            return HTTPRequest(
                method: "POST", url: try server.endpoint(write.table, query: [URLQueryItem(name: "on_conflict", value: keys)]),
                headers: headers, body: body)
        case .update:
            headers["Prefer"] = "count=exact,return=minimal"
            return HTTPRequest(
                method: "PATCH", url: try server.endpoint(write.table, filters: write.key), headers: headers,
                body: Data(write.bodyJSON))
        case .delete:
            headers["Prefer"] = "count=exact,return=minimal"
            return HTTPRequest(method: "DELETE", url: try server.endpoint(write.table, filters: write.key), headers: headers)
        case .custom(let name):
            // The function's arguments are the body alone (its key names the row for ordering).
            return HTTPRequest(
                method: "POST", url: try server.endpoint("rpc", name), headers: headers, body: Data(write.bodyJSON))
        }
    }

    private func keyColumns(of write: OutgoingWrite) -> [String] {
        if let columns = tables?[write.table] { return columns }
        guard case .object(let key) = write.key else { return [] }
        return key.keys.sorted()
    }

    /// The total of a `Content-Range` answered to `count=exact`: `*/3`, `0-2/3`; nil for anything else.
    static func exactCount(_ range: String) -> Int? {
        let parts = range.trimmingCharacters(in: .whitespaces).split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let total = Int(parts[1]), total >= 0 else { return nil }
        let span = parts[0]
        guard span == "*" || span.split(separator: "-").count == 2 && span.split(separator: "-").allSatisfy({ Int($0) != nil })
        else { return nil }
        return total
    }

}

/// A failed row read (`withdraw`): its status and code, never the server's text.
public struct PostgRESTError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The HTTP status of the answer.
    public let status: Int
    /// PostgREST's error code, if the answer had one.
    public let code: String?
    public var description: String { "the server answered \(status)\(code.map { " \($0)" } ?? "")" }
}

/// A PostgREST answer, read: its error body's code and texts (audits only), and Retry-After.
struct PostgRESTAnswer {
    let status: Int
    let code: String?
    let message: String?
    let retryAfter: String?
    let fields: [String]

    init(_ response: HTTPResponse) {
        status = response.status
        retryAfter = response.header("retry-after")
        var code: String?
        var texts: [String] = []
        if case .object(let body)? = try? JSONText.parse(response.text) {
            if case .string(let found)? = body["code"] { code = found }
            for name in ["message", "details", "hint"] {
                if case .string(let text)? = body[name] { texts.append(text) }
            }
        } else if !response.body.isEmpty {
            texts.append(response.text)
        }
        self.code = code
        message = texts.isEmpty ? nil : texts.joined(separator: " | ")
        fields = Self.column(in: texts.first ?? "").map { [$0] } ?? []
    }

    /// The column an error names: `column "title"` (PostgreSQL) or `the 'title' column` (PostgREST).
    static func column(in message: String) -> String? {
        for (open, close) in [("column \"", "\""), ("the '", "' column")] {
            guard let start = message.range(of: open) else { continue }
            let rest = message[start.upperBound...]
            if let end = rest.range(of: close) { return String(rest[..<end.lowerBound]) }
        }
        return nil
    }

    var refusal: Refusal { Refusal(status: status, code: code, message: message, fields: fields) }

    var failure: RequestFailure {
        RequestFailure(
            kind: .http, status: status, code: code, retryAfter: retryAfter, text: message, fields: fields,
            meaning: .postgREST(status: status, code: code))
    }
}

extension RequestFailure.Meaning {
    /// What a PostgREST error means for the writes of its request, from its status and its code
    /// (PostgREST's own, or the SQLSTATE it passes on).
    ///
    /// - The token classes (`PGRST301` to `PGRST303`, with 401): the token was refused.
    /// - `PGRST202`, `PGRST204`, `PGRST205`: the schema cache does not know the function, column or
    ///   table yet.
    /// - `42501` (a permission) and `25006` (a read-only database): they may pass.
    /// - Otherwise the status decides (`of(_:status:)`); with no status, the SQLSTATE classes 22, 23
    ///   and 42, `P0001` and `0A000` are refusals.
    public static func postgREST(status: Int?, code: String?) -> Self {
        if status == 401, let code, ["PGRST301", "PGRST302", "PGRST303"].contains(code) { return .tokenRefused }
        if let code {
            if ["PGRST202", "PGRST204", "PGRST205"].contains(code) { return .schemaCache }
            if code == "42501" || code == "25006" { return .mayPass }
        }
        if let status { return of(.http, status: status) }
        if let code, ["22", "23", "42"].contains(code.prefix(2)) || code == "P0001" || code == "0A000" { return .refused }
        return code == nil ? .refused : .mayPass
    }
}

extension HTTPResponse {
    var text: String { String(decoding: body, as: UTF8.self) }
}
