#if canImport(COutboxCurl)
    internal import COutboxCurl
    internal import Dispatch
    public import Foundation
    internal import Synchronization

    /// `HTTPClient` over libcurl, the default on Linux. It keeps the promises a log depends on, which
    /// FoundationNetworking's URLSession cannot:
    ///
    /// - a request is sent once: every request goes on a connection of its own, so libcurl never
    ///   resends it on a reused connection that turned out dead (a resend is always the library's, with
    ///   its body and keys);
    /// - no compression is asked for, and the answer's bytes are read as they come, at most
    ///   `maxAnswerBytes` of them: past that, the request ends with `HTTPFailure.answerTooLarge`;
    /// - the timeout ends the whole request, waiting in `poll`, never spinning a core;
    /// - redirects are never followed; cancelling the calling task ends the request.
    ///
    /// Each request runs on a thread of its own dispatch queue, never on Swift's cooperative pool.
    public final class CurlHTTPClient: HTTPClient, Sendable {
        /// The most bytes of one answer's body read (1 MiB by default).
        public let maxAnswerBytes: Int
        private static let initialized: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

        /// A client that reads at most `maxAnswerBytes` of an answer.
        public init(maxAnswerBytes: Int = 1 << 20) {
            self.maxAnswerBytes = max(maxAnswerBytes, 0)
            _ = Self.initialized
        }

        public func send(_ request: HTTPRequest, timeout: TimeInterval) async throws(HTTPFailure) -> HTTPResponse {
            let transfer = Transfer(limit: maxAnswerBytes)
            let result: Result<HTTPResponse, HTTPFailure> = await withTaskCancellationHandler {
                await withCheckedContinuation { done in
                    DispatchQueue.global().async { done.resume(returning: transfer.perform(request, timeout: timeout)) }
                }
            } onCancel: {
                transfer.cancel()
            }
            return try result.get()
        }
    }

    /// One request's state, shared with libcurl's callbacks through an unmanaged pointer while it runs.
    private final class Transfer: @unchecked Sendable {
        let limit: Int
        // Touched only by the thread that performs the request (libcurl calls back on it).
        var body = Data()
        var headers: [String: String] = [:]
        var tooLarge = false
        private let cancelled = Atomic<Bool>(false)

        init(limit: Int) { self.limit = limit }

        func cancel() { cancelled.store(true, ordering: .sequentiallyConsistent) }
        var isCancelled: Bool { cancelled.load(ordering: .sequentiallyConsistent) }

        func perform(_ request: HTTPRequest, timeout: TimeInterval) -> Result<HTTPResponse, HTTPFailure> {
            guard !isCancelled else { return .failure(.cancelled) }
            guard let curl = curl_easy_init() else { return .failure(.network) }
            defer { curl_easy_cleanup(curl) }
            var list: UnsafeMutablePointer<curl_slist>?
            defer { curl_slist_free_all(list) }
            // No `Expect: 100-continue` (a second round trip), and none of libcurl's own Accept-Encoding.
            for line in request.headers.map({ "\($0.key): \($0.value)" }) + ["Expect:"] {
                list = curl_slist_append(list, line)
            }
            let milliseconds = max(1, Int(min(timeout, 86_400) * 1000))
            var ok = outbox_curl_set_string(curl, CURLOPT_URL, request.url.absoluteString) == CURLE_OK
            ok = ok && outbox_curl_set_string(curl, CURLOPT_CUSTOMREQUEST, request.method) == CURLE_OK
            ok = ok && outbox_curl_set_pointer(curl, CURLOPT_HTTPHEADER, list) == CURLE_OK
            let settings: [(CURLoption, Int)] = [
                (CURLOPT_NOSIGNAL, 1), (CURLOPT_FOLLOWLOCATION, 0), (CURLOPT_FORBID_REUSE, 1), (CURLOPT_FRESH_CONNECT, 1),
                (CURLOPT_HTTP_CONTENT_DECODING, 0), (CURLOPT_HTTP_TRANSFER_DECODING, 1),
                (CURLOPT_TIMEOUT_MS, milliseconds), (CURLOPT_CONNECTTIMEOUT_MS, min(milliseconds, 10_000)),
                (CURLOPT_NOPROGRESS, 0), (CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_1_1)),
            ]
            for (option, value) in settings { ok = ok && outbox_curl_set_long(curl, option, value) == CURLE_OK }
            if let data = request.body {
                ok = ok && outbox_curl_set_size(curl, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(data.count)) == CURLE_OK
                ok =
                    ok
                    && data.withUnsafeBytes { bytes in
                        // COPYPOSTFIELDS copies the bytes; an empty body still needs a valid pointer.
                        let pointer = bytes.baseAddress.map { UnsafeMutableRawPointer(mutating: $0) }
                        return outbox_curl_set_pointer(curl, CURLOPT_COPYPOSTFIELDS, pointer ?? UnsafeMutableRawPointer(list))
                            == CURLE_OK
                    }
            } else if request.method == "GET" {
                ok = ok && outbox_curl_set_long(curl, CURLOPT_HTTPGET, 1) == CURLE_OK
            }
            let context = Unmanaged.passUnretained(self).toOpaque()
            ok = ok && outbox_curl_set_data_callback(curl, CURLOPT_WRITEFUNCTION, onBody) == CURLE_OK
            ok = ok && outbox_curl_set_pointer(curl, CURLOPT_WRITEDATA, context) == CURLE_OK
            ok = ok && outbox_curl_set_data_callback(curl, CURLOPT_HEADERFUNCTION, onHeader) == CURLE_OK
            ok = ok && outbox_curl_set_pointer(curl, CURLOPT_HEADERDATA, context) == CURLE_OK
            ok = ok && outbox_curl_set_progress_callback(curl, onProgress) == CURLE_OK
            ok = ok && outbox_curl_set_pointer(curl, CURLOPT_XFERINFODATA, context) == CURLE_OK
            guard ok else { return .failure(.network) }
            let code = curl_easy_perform(curl)
            if tooLarge { return .failure(.answerTooLarge) }
            switch code {
            case CURLE_OK: break
            case CURLE_OPERATION_TIMEDOUT: return .failure(HTTPFailure(.timeout, Self.words(code)))
            case CURLE_ABORTED_BY_CALLBACK: return .failure(.cancelled)
            default: return .failure(HTTPFailure(.network, Self.words(code)))
            }
            var status = 0
            _ = outbox_curl_response_code(curl, &status)
            if (300..<400).contains(status) { return .failure(.redirected) }
            return .success(HTTPResponse(status: status, headers: headers, body: body))
        }

        /// libcurl's words for `code` (they never hold the server's text).
        static func words(_ code: CURLcode) -> String {
            "libcurl: \(String(cString: curl_easy_strerror(code))) (CURLcode \(code.rawValue))"
        }

        /// A header line of the answer; a status line starts the headers again (after a 100 Continue).
        func header(_ line: String) {
            if line.hasPrefix("HTTP/") {
                headers = [:]
                return
            }
            guard let colon = line.firstIndex(of: ":") else { return }
            let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespacesAndNewlines)
            headers[name] = value
        }
    }

    private func transfer(_ context: UnsafeMutableRawPointer?) -> Transfer? {
        context.map { Unmanaged<Transfer>.fromOpaque($0).takeUnretainedValue() }
    }

    /// Appends the body's bytes, up to the limit; past it, returns 0, which ends the request.
    private let onBody: outbox_curl_data_callback = { data, size, count, context in
        guard let transfer = transfer(context), let data else { return 0 }
        let length = size * count
        guard transfer.body.count + length <= transfer.limit else {
            transfer.tooLarge = true
            return 0
        }
        data.withMemoryRebound(to: UInt8.self, capacity: length) { transfer.body.append($0, count: length) }
        return length
    }

    private let onHeader: outbox_curl_data_callback = { data, size, count, context in
        guard let transfer = transfer(context), let data else { return 0 }
        let length = size * count
        guard length <= 65_536 else { return 0 }
        let bytes = UnsafeRawBufferPointer(start: data, count: length)
        transfer.header(String(decoding: bytes, as: UTF8.self))
        return length
    }

    /// Ends the request when the calling task was cancelled (libcurl calls it at least once a second).
    private let onProgress: outbox_curl_progress_callback = { context, _, _, _, _ in
        transfer(context)?.isCancelled == true ? 1 : 0
    }
#endif
