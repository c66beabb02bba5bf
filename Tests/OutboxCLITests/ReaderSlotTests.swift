import Foundation
import Outbox
import OutboxProcess
import OutboxTesting
import Testing

@Suite struct ReaderSlotTests {
    // Readers killed inside a read leave their LMDB slots taken while another process
    // holds the log; after ~126 of them nothing could read, enqueue included. Stale slots are freed on
    // open and whenever a read finds none free.
    @Test func readersKilledInsideAReadDoNotUseUpTheSlots() throws {
        try TemporaryFolder.with(created: true) { folder in
            let log = folder + "/log"
            try makeLog(log, count: 2)
            let holder = try LogInspector(path: log)
            let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(
                "outbox")
            for _ in 0..<140 {
                // Its input stays open: the reader stays inside its read until it is killed.
                let input = Pipe()
                let out = Pipe()
                let reader = try ChildProcess(
                    binary, ["hold-reader", log], input: .pipe(input), output: .handle(out.fileHandleForWriting))
                let line = out.fileHandleForReading.availableData
                #expect(String(decoding: line, as: UTF8.self).hasPrefix("READING"))
                reader.send(SIGKILL)
                #expect(reader.wait()?.signalled == true, "killed inside its read")
                withExtendedLifetime(input) {}
            }
            #expect(try holder.all(user: nil).count == 2)
            let enqueue = try outbox(
                "enqueue", log, "--user", "alice", "--table", "todos", "--op", "insert", "--key", #"{"id":9}"#)
            #expect(enqueue.status == 0, "\(enqueue.stderr)")
            #expect(try outbox("verify", log).status == 0)
            #expect(try holder.all(user: nil).count == 3)
        }
    }
}
