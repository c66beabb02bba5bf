public import Foundation
public import OutboxHTTP
internal import Synchronization

/// An `HTTPClient` that answers from a script and records every request: tests of a transport's
/// requests and of how it reads answers, with no server.
///
/// ```swift
/// let http = ScriptedHTTPClient([.status(201), .error(409, "23505")])
/// let transport = try PostgRESTTransport(url: url, apiKey: key, tables: ["todos": ["id"]], client: http)
/// ```
public final class ScriptedHTTPClient: HTTPClient {
    /// What the client answers a request with.
    public enum Answer: Sendable {
        /// This response.
        case response(HTTPResponse)
        /// No response: this failure.
        case failure(HTTPFailure)
    }

    private let state = Mutex<(script: [Answer], sent: [HTTPRequest])>(([], []))

    /// A client that gives `script`'s answers in order, then 201 with no body to every request.
    public init(_ script: [Answer] = []) { state.withLock { $0.script = script } }

    /// Adds answers at the end of the script.
    public func answer(_ answers: Answer...) { state.withLock { $0.script += answers } }

    /// Every request sent so far, in order.
    public var sent: [HTTPRequest] { state.withLock { $0.sent } }

    public func send(_ request: HTTPRequest, timeout: TimeInterval) async throws(HTTPFailure) -> HTTPResponse {
        let next = state.withLock { state -> Answer in
            state.sent.append(request)
            return state.script.isEmpty ? .response(HTTPResponse(status: 201)) : state.script.removeFirst()
        }
        switch next {
        case .response(let response): return response
        case .failure(let failure): throw failure
        }
    }
}

extension ScriptedHTTPClient.Answer {
    /// A PostgREST error answer: `{"code", "message", "details", "hint"}`.
    public static func error(
        _ status: Int, _ code: String?, _ message: String = "server text", headers: [String: String] = [:]
    ) -> Self {
        var body: [String: Any] = ["message": message, "details": NSNull(), "hint": NSNull()]
        if let code { body["code"] = code }
        return .response(
            HTTPResponse(status: status, headers: headers, body: (try? JSONSerialization.data(withJSONObject: body)) ?? Data()))
    }

    /// An answer of `status` with `headers` and `body`.
    public static func status(_ status: Int, headers: [String: String] = [:], body: String = "") -> Self {
        .response(HTTPResponse(status: status, headers: headers, body: Data(body.utf8)))
    }
}
