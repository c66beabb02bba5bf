public import Foundation

/// One HTTP request, as a transport makes it.
public struct HTTPRequest: Hashable, Sendable {
    /// The HTTP method: GET, POST, PATCH, DELETE.
    public var method: String
    /// The whole URL, query included.
    public var url: URL
    /// Header names as sent; a transport never puts a token anywhere but `Authorization`.
    public var headers: [String: String]
    /// The body, if any.
    public var body: Data?

    /// A request.
    public init(method: String, url: URL, headers: [String: String] = [:], body: Data? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }
}

/// One HTTP response: status, headers (names lowercased), body.
public struct HTTPResponse: Hashable, Sendable {
    /// The HTTP status.
    public var status: Int
    /// The headers, names in lower case.
    public var headers: [String: String]
    /// The body, possibly empty.
    public var body: Data

    /// A response (a scripted HTTP client makes its own).
    public init(status: Int, headers: [String: String] = [:], body: Data = Data()) {
        self.status = status
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { first, _ in first })
        self.body = body
    }

    /// The value of header `name` (any case).
    public func header(_ name: String) -> String? { headers[name.lowercased()] }
}

/// Why a request got no response.
public enum HTTPFailure: Error, Hashable, Sendable {
    /// No answer within the request's timeout: it may or may not have been applied.
    case timeout
    /// No connection, or the connection broke before an answer (after the request was sent, the
    /// outcome is unknown).
    case network
    /// The request was cancelled (the client closed, the network switched off).
    case cancelled
    /// The server answered with a redirect, which is never followed with a token.
    case redirected
    /// The answer's body ran past the client's limit: it was read no further (a broken answer).
    case answerTooLarge
}

/// The HTTP seam of the transports: `URLSessionHTTPClient` in apps, a scripted one in unit tests.
public protocol HTTPClient: Sendable {
    /// Sends `request` and returns the response, or throws `HTTPFailure`. Cancelling the calling task
    /// cancels the request (`HTTPFailure.cancelled`).
    func send(_ request: HTTPRequest, timeout: TimeInterval) async throws(HTTPFailure) -> HTTPResponse
}
