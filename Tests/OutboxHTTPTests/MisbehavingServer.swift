import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A socket server of the tests' own on 127.0.0.1 that misbehaves exactly as a test scripts it: each
/// request it reads (head and `Content-Length` body) takes the next behaviour. Every connection and
/// request is recorded. It stops, and closes every connection, when `stop()` is called.
final class MisbehavingServer: @unchecked Sendable {
    enum Behaviour: Sendable {
        /// Writes these bytes (a whole response, or as much of one as the test wants), and reads the
        /// connection's next request.
        case answer([UInt8])
        /// Closes the connection without an answer (a lost acknowledgement).
        case close
        /// Answers nothing and holds the connection open until the server stops.
        case stall
    }

    struct Received: Sendable {
        var connection: Int
        var head: String
        var body: [UInt8]
    }

    let port: UInt16
    private let listener: Int32
    private let state = Mutex<(script: [Behaviour], received: [Received], connections: Int, open: [Int32])>(([], [], 0, []))
    private let stopped = Atomic<Bool>(false)

    init(_ script: [Behaviour] = []) throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) }
        }
        guard bound == 0, listen(listener, 16) == 0 else { throw CancellationError() }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        port = UInt16(bigEndian: address.sin_port)
        state.withLock { $0.script = script }
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    var url: URL { URL(string: "http://127.0.0.1:\(port)")! }
    var received: [Received] { state.withLock { $0.received } }
    var connections: Int { state.withLock { $0.connections } }

    func stop() {
        guard !stopped.exchange(true, ordering: .sequentiallyConsistent) else { return }
        // The accept loop wakes on the shutdown and closes the listener itself, so no accept ever
        // runs on a number closed and reused meanwhile.
        shutdown(listener, Int32(SHUT_RDWR))
        state.withLock { state in for socket in state.open { shutdown(socket, Int32(SHUT_RDWR)) } }
    }

    private func acceptLoop() {
        defer { close(listener) }
        while !stopped.load(ordering: .sequentiallyConsistent) {
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { return }
            let number = state.withLock { state -> Int in
                state.connections += 1
                state.open.append(connection)
                return state.connections
            }
            Thread { [self] in serve(connection, number) }.start()
        }
    }

    private func serve(_ connection: Int32, _ number: Int) {
        defer {
            // Forgotten before it is closed: a stop must never shut down a number reused by another socket.
            state.withLock { state in state.open.removeAll { $0 == connection } }
            close(connection)
        }
        var buffer: [UInt8] = []
        while let (head, body) = readRequest(connection, &buffer) {
            let behaviour = state.withLock { state -> Behaviour in
                state.received.append(Received(connection: number, head: head, body: body))
                return state.script.isEmpty ? .close : state.script.removeFirst()
            }
            switch behaviour {
            case .answer(let bytes):
                var sent = 0
                while sent < bytes.count {
                    let written = bytes[sent...].withUnsafeBytes {
                        send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
                    }
                    if written <= 0 { return }
                    sent += written
                }
            case .close: return
            case .stall:
                var one: UInt8 = 0
                // Blocks until the client goes or the server stops (its shutdown wakes it).
                while recv(connection, &one, 1, 0) > 0 {}
                return
            }
        }
    }

    /// One request: its head (up to the blank line) and its body (`Content-Length` bytes).
    private func readRequest(_ connection: Int32, _ buffer: inout [UInt8]) -> (String, [UInt8])? {
        let end: [UInt8] = Array("\r\n\r\n".utf8)
        var chunk = [UInt8](repeating: 0, count: 65_536)
        func more() -> Bool {
            let count = recv(connection, &chunk, chunk.count, 0)
            guard count > 0 else { return false }
            buffer += chunk[..<count]
            return true
        }
        var headEnd: Int?
        while headEnd == nil {
            if let found = buffer.indices.dropLast(3).first(where: { Array(buffer[$0..<$0 + 4]) == end }) {
                headEnd = found
            } else if !more() {
                return nil
            }
        }
        let head = String(decoding: buffer[..<headEnd!], as: UTF8.self)
        buffer.removeFirst(headEnd! + 4)
        let length =
            head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
            .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
        while buffer.count < length { if !more() { return nil } }
        let body = Array(buffer[..<length])
        buffer.removeFirst(length)
        return (head, body)
    }

    /// A response: status line, headers and body, with its exact `Content-Length` unless one is given.
    static func response(_ status: Int, headers: [String: String] = [:], body: [UInt8] = []) -> [UInt8] {
        var text = "HTTP/1.1 \(status) Status\r\n"
        var headers = headers
        if headers["Content-Length"] == nil { headers["Content-Length"] = String(body.count) }
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) { text += "\(name): \(value)\r\n" }
        return Array((text + "\r\n").utf8) + body
    }
}
