import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// One connection to `port` on 127.0.0.1 as a hostile client makes it: sends `bytes` (leaving the
/// connection open) and reads until the server closes it or `seconds` pass; what came back.
func rawExchange(port: Int, _ bytes: [UInt8], seconds: Int = 30, headOnly: Bool = false) -> String {
    let connection = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(connection) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = UInt16(port).bigEndian
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(connection, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard connected == 0 else { return "" }
    var limit = timeval(tv_sec: seconds, tv_usec: 0)
    setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
    _ = bytes.withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    var received: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65_536)
    while true {
        let count = recv(connection, &chunk, chunk.count, 0)
        guard count > 0 else { break }
        received += chunk[..<count]
        // One answer is enough when the server keeps the connection: stop at the end of its body.
        if let text = String(bytes: received, encoding: .utf8), let end = text.range(of: "\r\n\r\n") {
            let head = text[..<end.lowerBound].lowercased()
            if let line = head.split(separator: "\r\n").first(where: { $0.hasPrefix("content-length:") }),
                let length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)),
                headOnly || text[end.upperBound...].utf8.count >= length
            {
                break
            }
        }
    }
    return String(decoding: received, as: UTF8.self)
}

/// The PostgREST stand-in as a server (a test fixture, not PostgREST): every malformed request gets
/// an answer in PostgREST's shape, a slow client never holds it, and idle clients hold no database
/// connection.
@Suite("The PostgREST stand-in as a server")
struct StandinServerTests {
    static func request(_ head: String, body: String = "") -> [UInt8] {
        let (apiKey, token) = credentials.withLock { $0 }
        return Array((head + "\r\napikey: \(apiKey)\r\nAuthorization: Bearer \(token)\r\n\r\n" + body).utf8)
    }
    static let credentials = Mutex(("", ""))

    @Test func malformedRequestsGetAnAnswerAndIdleClientsHoldNoDatabaseConnection() async throws {
        try await Instance.with { instance in
            let port = try #require(instance.url.port)
            let token = try await instance.token("alice")
            Self.credentials.withLock { $0 = (instance.apiKey, token) }
            for length in ["abc", "-5"] {
                let answer = rawExchange(
                    port: port, Self.request("POST /lists HTTP/1.1\r\nHost: x\r\nContent-Length: \(length)", body: "{}"))
                #expect(answer.hasPrefix("HTTP/1.1 400") && answer.contains("application/json"), "\(length): \(answer)")
            }
            let huge = rawExchange(port: port, Self.request("POST /lists HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000000"))
            #expect(huge.hasPrefix("HTTP/1.1 413"), "\(huge)")
            let nested = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
            let deep = rawExchange(
                port: port,
                Self.request(
                    "POST /rpc/complete_list HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: \(nested.utf8.count)",
                    body: nested))
            #expect(deep.hasPrefix("HTTP/1.1 400") && deep.contains("PGRST102"), "\(deep.prefix(300))")
            let options = rawExchange(port: port, Self.request("OPTIONS /lists HTTP/1.1\r\nHost: x"))
            #expect(options.hasPrefix("HTTP/1.1 200") && options.contains("Allow:"), "\(options)")
            let head = rawExchange(port: port, Self.request("HEAD /lists HTTP/1.1\r\nHost: x"), headOnly: true)
            #expect(head.hasPrefix("HTTP/1.1 200"), "\(head)")
            let unknown = rawExchange(port: port, Self.request("BREW /lists HTTP/1.1\r\nHost: x"))
            #expect(!unknown.contains("<html") && !unknown.contains("<!DOCTYPE"), "\(unknown)")

            // 60 idle keep-alive clients, each after one answered request: the database (50
            // connections) still serves everyone else.
            var idle: [Int32] = []
            defer { for socket in idle { close(socket) } }
            for _ in 0..<60 {
                let socket = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                var address = sockaddr_in()
                address.sin_family = sa_family_t(AF_INET)
                address.sin_addr.s_addr = inet_addr("127.0.0.1")
                address.sin_port = UInt16(port).bigEndian
                _ = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
                let probe = Self.request("GET /lists HTTP/1.1\r\nHost: x")
                _ = probe.withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                var chunk = [UInt8](repeating: 0, count: 4096)
                _ = recv(socket, &chunk, chunk.count, 0)
                idle.append(socket)
            }
            let served = rawExchange(port: port, Self.request("GET /lists HTTP/1.1\r\nHost: x"))
            #expect(served.hasPrefix("HTTP/1.1 200"), "\(served)")
            #expect(
                try await instance.sql("select count(*) <= 20 from pg_stat_activity where backend_type = 'client backend'") == [
                    "t"
                ])

            // A body that never comes: the stand-in closes the connection (its read timeout) rather
            // than hold a thread for ever.
            let started = Date()
            let stalled = rawExchange(
                port: port, Self.request("POST /lists HTTP/1.1\r\nHost: x\r\nContent-Length: 10"), seconds: 40)
            #expect(Date().timeIntervalSince(started) < 40, "closed by the server, not by the test's limit: \(stalled)")
        }
    }
}
