import Foundation
import OutboxTesting
import Testing

/// `outbox compact` (R8.5) and the read-only commands over a compacted log and its archive.
@Suite struct CompactCommandTests {
    @Test func compactArchivesThePrefixAndTheToolsReadTheArchive() throws {
        try TemporaryFolder.with(created: true) { folder in
            let log = folder + "/log"
            #expect(try outbox("demo", "--keep", log).status == 0)
            let before = try outbox("history", log, "1")
            #expect(before.status == 0)

            let compact = try outbox("compact", log)
            #expect(compact.status == 0, "\(compact.stderr)")
            #expect(compact.stdout.contains("into segment 1 (sequences 1–"))
            #expect(compact.stdout.contains("the log starts at snapshot"))
            let verify = try outbox("verify", log)
            #expect(verify.status == 0)
            #expect(verify.stdout.contains("ok; archive: 1 segment checked"))
            #expect(try outbox("history", log, "1").stdout == before.stdout, "write 1's history, read from the archive")
            #expect(try outbox("log", log, "--from", "1", "--to", "2").stdout.contains("logCreated"))
            #expect(try outbox("replay", log, "--until", "5").status == 0)

            // Shipped elsewhere: the tools say where the history went, and read it given the folder.
            try FileManager.default.moveItem(atPath: log + "/archive", toPath: folder + "/shipped")
            let gone = try outbox("history", log, "1")
            #expect(gone.status == 2)
            #expect(gone.stderr.contains("is in archive segment 1"))
            #expect(gone.stderr.contains("deleted or shipped elsewhere"))
            #expect(try outbox("history", log, "1", "--archive", folder + "/shipped").stdout == before.stdout)
            let partial = try outbox("verify", log)
            #expect(partial.status == 0)
            #expect(partial.stdout.contains("not present (archived elsewhere or deleted)"))

            let again = try outbox("compact", log, "--json", "--archive", folder + "/shipped")
            #expect(again.status == 0)
            #expect(again.stdout.contains(#""snapshot":null"#), "nothing new to archive")
        }
    }

    @Test func compactRefusesWhatItCannotDo() throws {
        try TemporaryFolder.with(created: true) { folder in
            #expect(try outbox("compact", folder + "/missing").status == 2)
            let log = folder + "/log"
            #expect(try outbox("demo", "--keep", log).status == 0)
            #expect(try outbox("compact", log, "--before", "0").status == 2)
            #expect(try outbox("compact", log, "--before", "3", "--keep-days", "1").status == 2)
            #expect(try outbox("compact", log, "--keep-days", "x").status == 2)
            let kept = try outbox("compact", log, "--keep-days", "100000")
            #expect(kept.status == 0)
            #expect(kept.stdout.contains("nothing before sequence 1 to archive"), "\(kept.stdout)")
        }
    }
}
