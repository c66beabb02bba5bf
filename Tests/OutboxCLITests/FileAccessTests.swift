import Foundation
import OutboxTesting
import Testing

/// The read-only commands create nothing, and say what is wrong with a file they
/// cannot read, naming it, instead of "no log here" or a raw LMDB code.
@Suite struct FileAccessTests {
    @Test func aReadOnlyCommandOnAFileThatIsNoLogCreatesNothing() throws {
        try TemporaryFolder.with(created: true) { folder in
            let file = folder + "/passwd"
            try Data("root:x:0:0::/root:/bin/sh\n".utf8).write(to: URL(fileURLWithPath: file))
            for command in ["verify", "queue", "log"] {
                let run = try outbox(command, file)
                #expect(run.status == 2 && run.stderr.contains(file), "\(command): \(run.stderr)")
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["passwd"], "no -lock file beside it")
            // A copied data.mdb alone: read, and no lock file made beside it.
            let log = folder + "/log"
            try makeLog(log, count: 2)
            let copy = folder + "/copy"
            try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: log + "/data.mdb", toPath: copy + "/data.mdb")
            #expect(try outbox("verify", copy).status == 0)
            #expect(try FileManager.default.contentsOfDirectory(atPath: copy) == ["data.mdb"])
        }
    }

    @Test func aDeviceIsNotALog() throws {
        let run = try outbox("verify", "/dev/zero")
        #expect(run.status == 2)
        #expect(run.stderr.contains("/dev/zero is not a regular file"), "\(run.stderr)")
    }

    /// As user `nobody`: what a support engineer without write access sees.
    private func asNobody(_ arguments: [String]) throws -> Run {
        try outboxAs(["runuser", "-u", "nobody", "--"], arguments)
    }

    @Test(.enabled(if: getuid() == 0 && FileManager.default.fileExists(atPath: "/usr/sbin/runuser")))
    func aLogThisUserMayReadButNotWriteIsRead() throws {
        try TemporaryFolder.with(created: true) { folder in
            let log = folder + "/log"
            try makeLog(log, count: 2)
            for path in [folder, log] { chmod(path, 0o755) }
            for file in ["data.mdb", "lock.mdb"] { chmod(log + "/" + file, 0o644) }
            let queue = try asNobody(["queue", log])
            #expect(queue.status == 0, "\(queue.stderr)")
            #expect(queue.stdout.split(separator: "\n").count == 2)
            chmod(log, 0o700)
            let denied = try asNobody(["verify", log])
            #expect(denied.status == 2)
            #expect(denied.stderr.contains("Permission denied") && !denied.stderr.contains("no log here"), "\(denied.stderr)")
        }
    }
}

/// Runs the `outbox` binary under `wrapper` (runuser, …).
func outboxAs(_ wrapper: [String], _ arguments: [String]) throws -> Run {
    let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("outbox")
    return try run(URL(fileURLWithPath: "/usr/bin/env"), wrapper + [binary.path] + arguments)
}

extension FileAccessTests {
    // An argument that is not UTF-8 is refused, not read with U+FFFD in it.
    @Test func anArgumentThatIsNotUTF8IsRefused() throws {
        try TemporaryFolder.with(created: true) { folder in
            let run = try outboxAs(
                ["bash", "-c", #"exec "$0" enqueue "$1$(printf '\377')" --user a --table t --op insert --key '{"id":1}'"#],
                [folder + "/log"])
            #expect(run.status == 2)
            #expect(run.stderr.contains("argument 2 is not valid UTF-8"), "\(run.stderr)")
            #expect(!FileManager.default.fileExists(atPath: folder + "/log\u{FFFD}"), "nothing was made under the repaired name")
        }
    }
}
