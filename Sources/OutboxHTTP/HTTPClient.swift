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

/// Why a request got no usable response: a code to compare (`failure == .timeout`, or switch on
/// `failure.code`; new codes may be added), what the HTTP client said, and the error underneath.
public struct HTTPFailure: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of failure.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        enum Kind: String, Hashable, Sendable {
            case timeout, network, cancelled, redirected, answerTooLarge
        }
        let kind: Kind
        /// No answer within the request's timeout: it may or may not have been applied.
        public static let timeout = Code(kind: .timeout)
        /// No connection, or the connection broke before an answer (after the request was sent, the
        /// outcome is unknown).
        public static let network = Code(kind: .network)
        /// The request was cancelled (the client closed, the network switched off).
        public static let cancelled = Code(kind: .cancelled)
        /// The server answered with a redirect, which is never followed with a token.
        public static let redirected = Code(kind: .redirected)
        /// The answer's body ran past the client's limit: it was read no further (a broken answer).
        public static let answerTooLarge = Code(kind: .answerTooLarge)
        public var description: String { kind.rawValue }
    }

    /// What kind of failure it is: compare it, `failure.code == .timeout`.
    public let code: Code
    /// What the HTTP client said of it, in its own words (libcurl's or URLSession's); never a body of the server's.
    public let message: String
    /// The error underneath (URLSession's `URLError`), when there is one.
    public let cause: (any Error)?

    /// A failure of `code`; `message` defaults to the code's name.
    public init(_ code: Code, _ message: String? = nil, cause: (any Error)? = nil) {
        self.code = code
        self.message = message ?? code.description
        self.cause = cause
    }

    public var description: String { message }

    /// Failures are equal when their codes are: `failure == .timeout`.
    public static func == (a: HTTPFailure, b: HTTPFailure) -> Bool { a.code == b.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// A failure of code `timeout`, to compare with.
    public static let timeout = HTTPFailure(.timeout)
    /// A failure of code `network`, to compare with.
    public static let network = HTTPFailure(.network)
    /// A failure of code `cancelled`, to compare with.
    public static let cancelled = HTTPFailure(.cancelled)
    /// A failure of code `redirected`, to compare with.
    public static let redirected = HTTPFailure(.redirected)
    /// A failure of code `answerTooLarge`, to compare with.
    public static let answerTooLarge = HTTPFailure(.answerTooLarge)
}

/// The HTTP seam of the transports: `URLSessionHTTPClient` in apps, a scripted one in unit tests.
public protocol HTTPClient: Sendable {
    /// Sends `request` and returns the response, or throws `HTTPFailure`. Cancelling the calling task
    /// cancels the request (`HTTPFailure.cancelled`).
    func send(_ request: HTTPRequest, timeout: TimeInterval) async throws(HTTPFailure) -> HTTPResponse
}
