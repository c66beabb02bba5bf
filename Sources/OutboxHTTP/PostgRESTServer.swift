internal import Foundation
internal import Outbox

#if canImport(FoundationNetworking)
    internal import FoundationNetworking
#endif

/// Why a transport could not be made: a URL it will not send to, a table with no key columns.
public struct TransportConfigurationError: Error, Hashable, Sendable, CustomStringConvertible {
    public let description: String
}

/// A PostgREST server as both HTTP transports reach it: its URL and path prefix, the schema, the
/// apikey and extra headers, the timeout, and the HTTP client. Builds URLs and headers; sends.
struct PostgRESTServer: Sendable {
    let url: URL
    let pathPrefix: String
    let schema: String?
    let timeout: TimeInterval
    private let apiKey: String?
    private let extraHeaders: [String: String]
    private let client: any HTTPClient

    init(
        url: URL, apiKey: String?, schema: String?, pathPrefix: String, timeout: TimeInterval, headers: [String: String],
        allowInsecureHTTP: Bool, client: (any HTTPClient)?
    ) throws {
        guard let scheme = url.scheme?.lowercased(), scheme == "https" || scheme == "http", url.host != nil else {
            throw TransportConfigurationError(description: "\(url) is not an http(s) URL")
        }
        let loopback = ["127.0.0.1", "localhost", "::1", "[::1]"].contains(url.host?.lowercased() ?? "")
        if scheme == "http" && !loopback && !allowInsecureHTTP {
            throw TransportConfigurationError(
                description:
                    "\(url) is plain http to a host other than the loopback: tokens would travel unencrypted (pass allowInsecureHTTP to insist)"
            )
        }
        if let schema, let problem = Self.nameProblem(schema, "schema") {
            throw TransportConfigurationError(description: problem)
        }
        self.url = url
        self.apiKey = apiKey
        self.schema = schema
        self.pathPrefix = pathPrefix
        self.timeout = timeout
        self.extraHeaders = headers
        self.client = client ?? Self.defaultClient()
    }

    /// The headers of every request: the token in `Authorization` only, the apikey, the profile, and the
    /// outbox's own (`X-Idempotency-Key`, `X-Outbox-Origin`, `X-Outbox-Write`) for `writes`.
    func headers(token: String?, writes: [OutgoingWrite] = []) -> [String: String] {
        var headers = extraHeaders
        headers["Accept"] = "application/json"
        headers["Content-Type"] = "application/json"
        if let token { headers["Authorization"] = "Bearer " + token }
        if let apiKey { headers["apikey"] = apiKey }
        if let schema {
            headers["Content-Profile"] = schema
            headers["Accept-Profile"] = schema
        }
        if !writes.isEmpty {
            headers["X-Idempotency-Key"] = writes.map(\.idempotencyKey.description).joined(separator: ",")
            headers["X-Outbox-Origin"] = writes[0].origin.description
            headers["X-Outbox-Write"] = writes.map { String($0.id.rawValue) }.joined(separator: ",")
        }
        return headers
    }

    /// Why `name` (a table, schema, function or column) cannot be one path segment or one query name
    /// as it is, or nil when it can: never a request to another endpoint than the one it names (R9.6).
    static func nameProblem(_ name: String, _ what: String) -> String? {
        if name.isEmpty { return "the \(what) name is empty" }
        if name == "." || name == ".." || name.contains("..") { return "the \(what) name \(quoted(name)) holds '..'" }
        for scalar in name.unicodeScalars {
            if "/?#%\\".unicodeScalars.contains(scalar) {
                return "the \(what) name \(quoted(name)) holds '\(scalar)', which would leave its path segment"
            }
            if scalar.properties.generalCategory == .control {
                return "the \(what) name \(quoted(name)) holds a control character"
            }
        }
        return nil
    }

    /// A name as a message shows it: cut, with control characters escaped.
    private static func quoted(_ name: String) -> String {
        JSONText.render(.string(String(name.unicodeScalars.prefix(64).map(Character.init))))
    }

    /// `url` + prefix + `/segment/…`, with `filters` as `column=eq.value` for each key column. Each
    /// segment is one name, checked by `nameProblem` before (a name that fails it is never sent).
    func endpoint(_ path: String..., filters: JSONValue? = nil, query: [URLQueryItem] = []) throws -> URL {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else {
            throw TransportConfigurationError(description: "\(url) cannot take a path")
        }
        let base =
            components.percentEncodedPath.hasSuffix("/")
            ? String(components.percentEncodedPath.dropLast()) : components.percentEncodedPath
        var segmentAllowed = CharacterSet.urlPathAllowed
        segmentAllowed.remove(charactersIn: "/;")
        let segments = try path.map { segment in
            if let problem = Self.nameProblem(segment, "path") { throw TransportConfigurationError(description: problem) }
            return segment.addingPercentEncoding(withAllowedCharacters: segmentAllowed) ?? ""
        }
        components.percentEncodedPath = base + pathPrefix + "/" + segments.joined(separator: "/")
        var items = query
        if case .object(let key)? = filters {
            for name in key.keys.sorted() {
                let value: String
                switch key[name]! {
                case .string(let text): value = text
                case .int(let number): value = String(number)
                case .double(let number): value = JSONText.render(.double(number))
                case .bool(let flag): value = flag ? "true" : "false"
                default:
                    throw TransportConfigurationError(description: "key column \(name) is not a string, number or boolean")
                }
                items.append(URLQueryItem(name: name, value: "eq." + value))
            }
        }
        if !items.isEmpty {
            // Every reserved character of a filter value encoded, `+` and `&` included.
            var allowed = CharacterSet.urlQueryAllowed
            allowed.remove(charactersIn: "&+=,;")
            components.percentEncodedQuery = items.map { item in
                (item.name.addingPercentEncoding(withAllowedCharacters: allowed) ?? "") + "="
                    + (item.value?.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")
            }.joined(separator: "&")
        }
        guard let url = components.url else { throw TransportConfigurationError(description: "no URL for \(path)") }
        return url
    }

    /// libcurl on Linux (R9.6: one send a request, bounded answers), URLSession elsewhere.
    static func defaultClient() -> any HTTPClient {
        #if canImport(COutboxCurl)
            CurlHTTPClient()
        #else
            URLSessionHTTPClient()
        #endif
    }

    func perform(_ request: HTTPRequest) async throws(HTTPFailure) -> HTTPResponse {
        try await client.send(request, timeout: timeout)
    }

    /// A request that got no usable response, as the boundary says it: a failure of the request, or
    /// a broken answer for one past the client's limit (R9.6), read no further.
    static func answer(to failure: HTTPFailure) -> RequestAnswer {
        switch failure.code {
        case .timeout: return .failed(RequestFailure(kind: .timeout))
        case .redirected: return .failed(RequestFailure(kind: .http, status: 502, code: "redirect_refused"))
        case .answerTooLarge: return .contractBroken("an answer longer than the client reads (its limit)")
        default: return .failed(RequestFailure(kind: .network))
        }
    }
}
