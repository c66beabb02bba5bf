internal import Dispatch
public import Foundation
internal import Synchronization

#if canImport(FoundationNetworking)
    internal import FoundationNetworking
#endif

/// `HTTPClient` over Foundation's `URLSession` (FoundationNetworking on Linux): HTTP/1.1 keep-alive,
/// a timeout per request, cancellation with the calling task, and redirects never followed.
public final class URLSessionHTTPClient: HTTPClient, Sendable {
    private let session: URLSession

    /// A client with its own URLSession (no cache, no cookies, no redirects).
    public init() {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpCookieStorage = nil
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        session = URLSession(configuration: configuration, delegate: RefusingRedirects(), delegateQueue: nil)
    }

    deinit { session.invalidateAndCancel() }

    public func send(_ request: HTTPRequest, timeout: TimeInterval) async throws(HTTPFailure) -> HTTPResponse {
        var urlRequest = URLRequest(url: request.url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout)
        urlRequest.httpMethod = request.method
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        urlRequest.httpBody = request.body
        let task = Mutex<URLSessionDataTask?>(nil)
        // Answered once: by the response, by the timeout (FoundationNetworking's own request timeout
        // is an idle timeout, and not always honoured), or by cancellation.
        let settled = Atomic<Bool>(false)
        let outcome: Result<HTTPResponse, HTTPFailure> = await withTaskCancellationHandler {
            await withCheckedContinuation { (done: CheckedContinuation<Result<HTTPResponse, HTTPFailure>, Never>) in
                @Sendable func finish(_ result: Result<HTTPResponse, HTTPFailure>) {
                    if !settled.exchange(true, ordering: .sequentiallyConsistent) { done.resume(returning: result) }
                }
                let dataTask = session.dataTask(with: urlRequest) { data, response, error in
                    if let error {
                        finish(.failure(Self.failure(error)))
                    } else if let response = response as? HTTPURLResponse {
                        if (300..<400).contains(response.statusCode) {
                            finish(.failure(.redirected))
                            return
                        }
                        var headers: [String: String] = [:]
                        for (name, value) in response.allHeaderFields {
                            if let name = name as? String, let value = value as? String { headers[name] = value }
                        }
                        finish(.success(HTTPResponse(status: response.statusCode, headers: headers, body: data ?? Data())))
                    } else {
                        finish(.failure(.network))
                    }
                }
                task.withLock { $0 = dataTask }
                dataTask.resume()
                DispatchQueue.global().asyncAfter(deadline: .now() + timeout) {
                    finish(.failure(.timeout))
                    dataTask.cancel()
                }
            }
        } onCancel: {
            task.withLock { $0 }?.cancel()
        }
        return try outcome.get()
    }

    private static func failure(_ error: any Error) -> HTTPFailure {
        let code = (error as? URLError)?.code ?? URLError.Code(rawValue: (error as NSError).code)
        switch code {
        case .timedOut: return HTTPFailure(.timeout, error.localizedDescription, cause: error)
        case .cancelled: return HTTPFailure(.cancelled, error.localizedDescription, cause: error)
        default: return HTTPFailure(.network, error.localizedDescription, cause: error)
        }
    }
}

/// Stops every redirect: a token is never sent to a place the app did not name.
private final class RefusingRedirects: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}
