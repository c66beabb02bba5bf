import Foundation
import OutboxFuzzing
import Synchronization
import Testing

/// Every input a fuzzer once crashed on (Fuzz/crashers/<target>/) runs through the same target body,
/// and now returns normally. One at a time: the CLI target's cases read one log, and a log open in a
/// process cannot be opened again in it until it is closed (LMDB's rule: the open fails with `alreadyOpen`).
@Suite("Fuzz crashers", .serialized)
struct FuzzCrasherTests {
    static let folder = URL(filePath: #filePath).deletingLastPathComponent().appending(path: "../../Fuzz/crashers").standardized

    static var crashers: [String] {
        let targets = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return targets.sorted().flatMap { target in
            ((try? FileManager.default.contentsOfDirectory(atPath: folder.appending(path: target).path)) ?? []).sorted().map {
                "\(target)/\($0)"
            }
        }
    }

    @Test("every crasher is replayed", arguments: crashers)
    func replay(_ crasher: String) async throws {
        let target = String(crasher.split(separator: "/")[0])
        let body = try #require(FuzzTargets.all[target], "no fuzz target \(target)")
        let bytes = [UInt8](try Data(contentsOf: Self.folder.appending(path: crasher)))
        // On a thread of its own, as libFuzzer calls it: a body may wait for async work (the CLI
        // target does), which must not hold one of the concurrency pool's few threads meanwhile. A
        // crasher that hangs fails its case after the limit instead of hanging the suite.
        let returned = await Self.returnsWithin(seconds: Self.limit) { body(bytes) }
        #expect(returned, "\(crasher) did not return within \(Int(Self.limit)) s: a hang")
    }

    /// How long one crasher may run (each returns in milliseconds; the machine may be loaded).
    static let limit = 60.0

    /// Runs `body` on a thread of its own; true when it returned within `seconds`, false once they
    /// ran out (the thread is then left to itself).
    static func returnsWithin(seconds: Double, _ body: @escaping @Sendable () -> Void) async -> Bool {
        let settled = Atomic<Bool>(false)
        return await withCheckedContinuation { (done: CheckedContinuation<Bool, Never>) in
            Thread {
                body()
                if !settled.exchange(true, ordering: .sequentiallyConsistent) { done.resume(returning: true) }
            }.start()
            DispatchQueue.global().asyncAfter(deadline: .now() + seconds) {
                if !settled.exchange(true, ordering: .sequentiallyConsistent) { done.resume(returning: false) }
            }
        }
    }

    @Test("a body that hangs is reported, not waited for")
    func hangsAreCaught() async {
        let release = DispatchSemaphore(value: 0)
        #expect(await Self.returnsWithin(seconds: 0.05) { release.wait() } == false)
        release.signal()
        #expect(await Self.returnsWithin(seconds: 60) {} == true)
    }

    @Test("the crashers folder is read") func found() { #expect(!Self.crashers.isEmpty) }

    /// The CLI target runs real command lines on its log: the exit statuses the tool documents (P5).
    @Test(
        "the CLI target runs the read-only commands",
        arguments: [
            ("verify", [], 0), ("queue", ["--json"], 0), ("queue", ["--user", "nobody"], 0), ("history", ["1"], 0),
            ("history", ["999"], 1), ("history", ["-1"], 2), ("history", ["1", "2"], 2),
            ("log", ["--from", "2", "--to", "3"], 0),
            ("log", ["--from", "5", "--to", "1"], 2), ("log", ["--from=18446744073709551615"], 0),
            ("log", ["--from", "18446744073709551616"], 2),
            ("replay", ["--until", "0"], 2), ("replay", ["--check-decisions"], 0),
            ("replay", ["--check-decisions", "--json"], 2),
            ("verify", ["--no-such-option"], 2), ("help", [], 0), ("no-such-command", [], 2),
        ] as [(String, [String], Int32)])
    func cli(_ command: String, _ words: [String], _ status: Int32) async throws {
        let first = try #require(FuzzTargets.cliCommands.firstIndex(of: command))
        let bytes = [UInt8(first)] + Array(words.joined(separator: "\u{0}").utf8)
        let exit = await FuzzTargets.cliExitStatus(bytes)
        #expect(exit == status)
    }
}
