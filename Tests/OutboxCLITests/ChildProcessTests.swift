import Foundation
import OutboxProcess
import Testing

/// The child processes the harnesses and the tests run: waited for from the concurrency pool by the
/// hundred, with both streams full, killed, or out of time, each wait ends.
@Suite struct ChildProcessTests {
    static let shell = URL(fileURLWithPath: "/bin/sh")

    // Two streams of 256 KiB each, read apart: neither fills its pipe while the other is read.
    @Test func bothStreamsAreReadWhateverTheirSize() async throws {
        let script = "head -c 262144 /dev/zero | tr '\\0' o; head -c 262144 /dev/zero | tr '\\0' e >&2; exit 3"
        let ended = try await ChildProcess.run(Self.shell, ["-c", script], errors: .apart(.capture))
        #expect(ended.status == 3 && !ended.signalled)
        #expect(ended.output.count == 262_144 && ended.output.allSatisfy { $0 == UInt8(ascii: "o") })
        #expect(ended.errors.count == 262_144 && ended.errors.allSatisfy { $0 == UInt8(ascii: "e") })
    }

    // Hundreds of children waited for from tasks of the pool at once: every wait returns.
    @Test func manyChildrenWaitedForAtOnceAllEnd() async throws {
        let statuses = try await withThrowingTaskGroup(of: Int32.self) { group in
            for index in 0..<300 {
                group.addTask { try await ChildProcess.run(Self.shell, ["-c", "exit \(index % 7)"]).status }
            }
            return try await group.reduce(into: [Int32]()) { $0.append($1) }
        }
        #expect(statuses.sorted() == (0..<300).map { Int32($0 % 7) }.sorted())
    }

    // A child that runs too long: the wait gives up at its limit, a kill ends it, and a signal says so.
    @Test func aChildPastItsLimitIsKilled() async throws {
        let child = try ChildProcess(Self.shell, ["-c", "exec sleep 600"], output: .discard)
        #expect(child.wait(timeout: 0.2) == nil)
        #expect(child.isRunning)
        child.kill(after: 0)
        let ended = await child.ended()
        #expect(ended.signalled && ended.status == SIGKILL)
        #expect(!child.isRunning)
    }

    @Test func inputIsWrittenAndClosed() async throws {
        let ended = try await ChildProcess.run(Self.shell, ["-c", "tr a-z A-Z"], input: .data(Data("milk\n".utf8)))
        #expect(ended.text == "MILK\n" && ended.succeeded)
    }
}
