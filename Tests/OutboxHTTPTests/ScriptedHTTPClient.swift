import Foundation
import OutboxHTTP
import Synchronization

/// An `HTTPClient` that answers from a script and records every request (unit tests of the
/// transports' request shapes and classification, with no server).
final class ScriptedHTTPClient: HTTPClient {
    enum Answer {
        case response(HTTPResponse)
        case failure(HTTPFailure)
    }

    private let state = Mutex<(script: [Answer], sent: [HTTPRequest])>(([], []))

    init(_ script: [Answer] = []) { state.withLock { $0.script = script } }

    func answer(_ answers: Answer...) { state.withLock { $0.script += answers } }

    var sent: [HTTPRequest] { state.withLock { $0.sent } }

    func send(_ request: HTTPRequest, timeout: TimeInterval) async throws(HTTPFailure) -> HTTPResponse {
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
    static func error(_ status: Int, _ code: String?, _ message: String = "server text", headers: [String: String] = [:])
        -> Self
    {
        var body: [String: Any] = ["message": message, "details": NSNull(), "hint": NSNull()]
        if let code { body["code"] = code }
        return .response(
            HTTPResponse(status: status, headers: headers, body: (try? JSONSerialization.data(withJSONObject: body)) ?? Data()))
    }

    static func status(_ status: Int, headers: [String: String] = [:], body: String = "") -> Self {
        .response(HTTPResponse(status: status, headers: headers, body: Data(body.utf8)))
    }
}
