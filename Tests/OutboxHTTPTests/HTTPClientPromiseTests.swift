import Foundation
import Outbox
import OutboxHTTP
import Testing

/// R9.6: the HTTP client the transports use on Linux (libcurl) cannot betray the log. Each promise
/// against a socket server of the test's own that misbehaves exactly so.
@Suite("The HTTP client's promises, against a misbehaving server")
struct HTTPClientPromiseTests {
    static let ok = MisbehavingServer.response(201)

    static func post(_ server: MisbehavingServer, _ body: String = #"{"id":1}"#) -> HTTPRequest {
        HTTPRequest(
            method: "POST", url: server.url.appendingPathComponent("lists"),
            headers: ["Content-Type": "application/json", "Prefer": "return=minimal"], body: Data(body.utf8))
    }

    // A lost acknowledgement on a connection used before: the request was sent once, with its body,
    // and the answer is a network failure; nothing sends it again (the library's resend is the one).
    @Test func aLostAcknowledgementIsNeverResentByTheHTTPLayer() async throws {
        let server = try MisbehavingServer([.answer(Self.ok), .close])
        defer { server.stop() }
        let client = CurlHTTPClient()
        #expect(try await client.send(Self.post(server), timeout: 10).status == 201)
        await #expect(throws: HTTPFailure.network) {
            try await client.send(Self.post(server, #"{"id":2}"#), timeout: 10)
        }
        let received = server.received
        #expect(received.count == 2, "sent once each: \(received.map(\.head))")
        #expect(received.map { String(decoding: $0.body, as: UTF8.self) } == [#"{"id":1}"#, #"{"id":2}"#])
        #expect(server.connections == 2, "each request on a connection of its own")
    }

    // No compression is asked for, and an answer is read no further than the limit, compressed or
    // not, success or error: the request ends as an answer too large.
    @Test func answersAreReadWithinTheLimit() async throws {
        let big = [UInt8](repeating: 0x41, count: 3 << 20)
        let server = try MisbehavingServer([
            .answer(MisbehavingServer.response(200, headers: ["Content-Encoding": "gzip"], body: big)),
            .answer(MisbehavingServer.response(500, headers: ["Content-Type": "text/plain"], body: big)),
            .answer(MisbehavingServer.response(200, body: Array(#"[{"id":1}]"#.utf8))),
        ])
        defer { server.stop() }
        let client = CurlHTTPClient()
        for _ in 0..<2 {
            await #expect(throws: HTTPFailure.answerTooLarge) { try await client.send(Self.post(server), timeout: 10) }
        }
        let small: HTTPResponse
        do {
            small = try await client.send(Self.post(server), timeout: 10)
        } catch {
            Issue.record("\(error) after \(server.received.count) requests on \(server.connections) connections")
            return
        }
        #expect(small.status == 200 && small.body == Data(#"[{"id":1}]"#.utf8))
        #expect(server.received.allSatisfy { !$0.head.lowercased().contains("accept-encoding") })
        #expect(CurlHTTPClient(maxAnswerBytes: 4).maxAnswerBytes == 4)
    }

    // A server that never answers, or sends its headers and never the body: the time limit ends the
    // request as a timeout; cancelling the calling task ends it as cancelled.
    @Test func aTimeLimitEndsTheRequest() async throws {
        let server = try MisbehavingServer([
            .stall, .answer(Array("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{".utf8)), .stall,
        ])
        defer { server.stop() }
        let client = CurlHTTPClient()
        await #expect(throws: HTTPFailure.timeout) { try await client.send(Self.post(server), timeout: 0.5) }
        await #expect(throws: HTTPFailure.timeout) { try await client.send(Self.post(server), timeout: 0.5) }
        let request = Self.post(server)
        let task = Task { try await client.send(request, timeout: 60) }
        while server.received.count < 3 { await Task.yield() }
        task.cancel()
        await #expect(throws: HTTPFailure.cancelled) { try await task.value }
    }

    // A redirect is never followed (the token would go where the app did not name).
    @Test func aRedirectIsNotFollowed() async throws {
        let elsewhere = try MisbehavingServer([.answer(Self.ok)])
        defer { elsewhere.stop() }
        let server = try MisbehavingServer([
            .answer(MisbehavingServer.response(307, headers: ["Location": elsewhere.url.absoluteString + "/lists"]))
        ])
        defer { server.stop() }
        var request = Self.post(server)
        request.headers["Authorization"] = "Bearer TOKEN"
        await #expect(throws: HTTPFailure.redirected) { try await CurlHTTPClient().send(request, timeout: 10) }
        #expect(elsewhere.received.isEmpty)
    }

    // A failure is a code to compare and libcurl's own words, never the server's text.
    @Test func aFailureSaysWhatLibcurlSaid() async throws {
        let server = try MisbehavingServer([.answer(Self.ok), .close])
        defer { server.stop() }
        let client = CurlHTTPClient()
        _ = try await client.send(Self.post(server), timeout: 10)
        let failure = try await #require(throws: HTTPFailure.self) { try await client.send(Self.post(server), timeout: 10) }
        #expect(failure.code == .network && failure == .network && failure != .timeout)
        #expect(failure.message.hasPrefix("libcurl: ") && failure.message.contains("CURLcode"), "\(failure.message)")
    }

    // Through the transport: an answer past the limit is a broken answer, the write stays pending.
    @Test func anAnswerPastTheLimitIsABrokenAnswer() async throws {
        let server = try MisbehavingServer([
            .answer(MisbehavingServer.response(201, body: [UInt8](repeating: 0x20, count: 2 << 20)))
        ])
        defer { server.stop() }
        let transport = try PostgRESTTransport(url: server.url, timeout: 10)
        let write = OutgoingWrite(
            id: 1, origin: Origin(high: 1, low: 2), idempotencyKey: IdempotencyKey(high: 1, low: 1), table: "lists",
            operation: .insert, key: ["id": 1], body: ["name": "a"])
        let answer = await transport.send(OutgoingBatch(writes: [write]), accessToken: "TOKEN")
        guard case .contractBroken = answer else {
            Issue.record("an answer past the limit is broken, not \(answer)")
            return
        }
    }
}
