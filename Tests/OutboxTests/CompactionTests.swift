import Foundation
import OutboxLMDB
import OutboxTesting
import Testing

@testable import Outbox

#if canImport(Glibc)
    import Glibc
#endif

/// Compaction with an archive (R8.5): the log's prefix moves into a segment, the log starts at a
/// snapshot, every write still held keeps its whole history, archived histories read from the
/// segment or say they are archived, the file shrinks, the feed resumes from the snapshot.
@Suite struct CompactionTests {
    /// A client whose first 200 writes were sent and taken, 10 answered and not taken, 3 pending.
    private func settledLog(_ path: String) async throws -> OutboxClient {
        let client = try await openClient(path, transport: SimulatedInstance())
        try await client.enqueue(contentsOf: (1...200).map { todo(Int64($0), String(repeating: "x", count: 200)) })
        #expect(try await client.sync().syncedCount == 200)
        #expect(try await client.queue.takeAnswered().count == 200)
        try await client.enqueue(contentsOf: (201...210).map { todo(Int64($0)) })
        #expect(try await client.sync().syncedCount == 10)
        try await client.enqueue(contentsOf: (211...213).map { todo(Int64($0)) })
        return client
    }

    @Test func theLogMovesItsPrefixIntoASegmentAndKeepsEveryHistory() async throws {
        try await TemporaryFolder.with { path in
            let client = try await settledLog(path)
            let taken = try await client.history(of: WriteID(7))
            let answered = try await client.history(of: WriteID(205))
            let pending = try await client.history(of: WriteID(212))
            let last = try client.eventCount()
            let early = try await client.state(asOf: 40)

            let report = try await client.compact()
            #expect(report.snapshot == last + 1)
            #expect(report.horizon == last + 1)
            #expect(report.archivedWrites == 200)
            #expect(report.segment?.number == 1 && report.segment?.firstSequence == 1 && report.segment?.lastSequence == last)
            #expect(report.fileShrunk)
            #expect(report.bytesAfter < report.bytesBefore, "\(report)")
            #expect(FileManager.default.fileExists(atPath: path + "/archive/segment-000001.mdb"))

            let verified = try await client.verify()
            #expect(verified.isOK, "\(verified)")
            #expect(verified.segmentsChecked == 1)
            #expect(try await client.history(of: WriteID(7)) == taken, "read from the archive")
            #expect(try await client.history(of: WriteID(205)) == answered, "answered and not taken: kept in the log")
            #expect(try await client.history(of: WriteID(212)) == pending)
            #expect(try client.log.read { try $0.historySequences(of: WriteID(7)) }.isEmpty, "no longer indexed in the log")
            #expect(try await client.state(asOf: 40) == early, "time travel reads the archive")
            #expect(try await client.queue.all().count == 13)

            // The queue goes on: the pending writes are sent; a rebuild starts from the snapshot.
            #expect(try await client.sync().syncedCount == 3)
            try await client.rebuild()
            #expect(try await client.verify().isOK)
            client.close()

            let reopened = try await openClient(path, transport: SimulatedInstance())
            #expect(try await reopened.queue.all().count == 13)
            #expect(try await reopened.history(of: WriteID(7)) == taken)
            reopened.close()
        }
    }

    @Test func theChangeFeedResumesFromTheSnapshotAndSaysSoBeforeIt() async throws {
        try await TemporaryFolder.with { path in
            let client = try await settledLog(path)
            let report = try await client.compact()
            let snapshot = try #require(report.snapshot)
            var feed = client.changes(after: snapshot - 1).makeAsyncIterator()
            let first = try await feed.next()
            guard case .logCompacted(let compacted)? = first?.event else {
                Issue.record("the feed did not start at the snapshot")
                return
            }
            #expect(compacted.horizon == report.horizon)
            var early = client.changes(after: 10).makeAsyncIterator()
            await #expect(throws: OutboxError.compacted) { _ = try await early.next() }
            var fromTheStart = client.changes().makeAsyncIterator()
            await #expect(throws: OutboxError.compacted) { _ = try await fromTheStart.next() }
            client.close()
        }
    }

    @Test func segmentsAreChainedAndAMissingOneIsNamedNeverASilentGap() async throws {
        try await TemporaryFolder.with { path in
            let client = try await settledLog(path)
            let taken = try await client.history(of: WriteID(7))
            try await client.compact()
            #expect(try await client.sync().syncedCount == 3)
            #expect(try await client.queue.takeAnswered().count == 13)
            let later = try await client.history(of: WriteID(205))
            let second = try await client.compact()
            #expect(second.segment?.number == 2)
            #expect(second.archivedWrites == 13)
            #expect(try await client.verify().segmentsChecked == 2)
            #expect(try await client.history(of: WriteID(7)) == taken)
            #expect(try await client.history(of: WriteID(205)) == later, "carried from before the first segment's end")
            await #expect(throws: OutboxError.notFound) { _ = try await client.history(of: WriteID(9999)) }

            // The app deletes the oldest segment: the history says where it went.
            try FileManager.default.removeItem(atPath: path + "/archive/segment-000001.mdb")
            await #expect(throws: OutboxError.archived) { _ = try await client.history(of: WriteID(7)) }
            #expect(try await client.history(of: WriteID(205)) == later, "in the second segment")
            let verified = try await client.verify()
            #expect(verified.isOK)
            #expect(verified.segmentsMissing.map(\.number) == [1])
            #expect(verified.description.contains("segment 1 (sequences 1–"))
            await #expect(throws: OutboxError.archived) { _ = try await client.state(asOf: 5) }

            // A segment put in another's place is named.
            let second2 = path + "/archive/segment-000002.mdb"
            try FileManager.default.moveItem(atPath: second2, toPath: path + "/archive/segment-000001.mdb")
            try FileManager.default.copyItem(atPath: path + "/archive/segment-000001.mdb", toPath: second2)
            let swapped = try await client.verify()
            #expect(!swapped.isOK)
            #expect(swapped.problem?.contains("segment-000001.mdb: the file holds segment 2") == true, "\(swapped)")
            client.close()
        }
    }

    @Test func aDamagedSegmentIsNamedByVerify() async throws {
        try await TemporaryFolder.with { path in
            let client = try await settledLog(path)
            let report = try await client.compact()
            let file = path + "/archive/" + (report.segment?.fileName ?? "")
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
            // A byte of a record's payload: the title's "x"s are in no other structure of the file.
            let at = try #require(
                bytes.indices.first { index in
                    index + 8 < bytes.count && bytes[index..<index + 8].allSatisfy { $0 == UInt8(ascii: "x") }
                })
            bytes[at + 3] = UInt8(ascii: "y")
            try Data(bytes).write(to: URL(fileURLWithPath: file))
            let verified = try await client.verify()
            #expect(!verified.isOK)
            #expect(verified.problem?.contains("segment-000001.mdb") == true, "\(verified)")
            client.close()
        }
    }

    @Test func theFileIsNotReplacedWhileAnotherOpenHoldsIt() async throws {
        try await TemporaryFolder.with { path in
            let client = try await settledLog(path)
            // What another process with the log open holds: the holders' lock, shared.
            let other = open(path + "/holders-lock", O_RDWR)
            #expect(other >= 0)
            #expect(flock(other, LOCK_SH) == 0)
            let report = try await client.compact()
            #expect(report.archivedWrites == 200)
            #expect(!report.fileShrunk)
            #expect(report.description.contains("not shrunk: another process has the log open"))
            close(other)
            #expect(try await client.verify().isOK)
            let again = try await client.compact()
            #expect(again.snapshot == nil, "nothing new before the horizon")
            #expect(again.fileShrunk, "shrunk once it is alone")
            #expect(again.bytesAfter < report.bytesAfter)
            #expect(try await client.verify().isOK)
            client.close()
        }
    }

    @Test func sha256CheckValues() {
        func hex(_ text: String) -> String { hexDigits(SHA256.digest(Array(text.utf8))) }
        #expect(hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(
            hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(
            hex(String(repeating: "a", count: 1_000_000)) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test func nothingBeforeTheHorizonChangesNothing() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path, transport: SimulatedInstance())
            let report = try await client.compact(before: 1)
            #expect(report.snapshot == nil && report.segment == nil)
            #expect(try await client.verify().isOK)
            try await client.enqueue(todo(1))
            let events = try client.eventCount()
            let all = try await client.compact()
            #expect(all.archivedWrites == 0, "the queue holds the write: its history stays")
            #expect(all.keptEvents == 1)
            #expect(try await client.history(of: WriteID(1)).first?.sequence == events)
            #expect(try await client.verify().isOK)
            client.close()
        }
    }

    @Test func aHorizonInThePastKeepsTheWritesThatGoOnAfterIt() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path, transport: SimulatedInstance())
            try await client.enqueue(contentsOf: (1...20).map { todo(Int64($0)) })
            #expect(try await client.sync().syncedCount == 20)
            let horizon = try client.eventCount() + 1
            #expect(try await client.queue.takeAnswered().count == 20)
            // Taken after the horizon: each keeps its history in the log.
            let report = try await client.compact(before: horizon)
            #expect(report.archivedWrites == 0)
            let indexed = try client.log.read { try $0.historySequences(of: WriteID(3)) }
            #expect(try await client.history(of: WriteID(3)).map(\.sequence) == indexed)
            #expect(indexed.count >= 4, "queued, attempt, answer, taken")
            #expect(try await client.verify().isOK)
            client.close()
        }
    }

    /// A policy by size counts the bytes of the data file's pages in use, not the file's size, which
    /// runs ahead of them (written in advance on Linux): a small log is not compacted again and again
    /// for the zeros past its last page.
    @Test func aPolicyBySizeCountsThePagesInUseNotTheFileWrittenAhead() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path, configuration: testConfiguration(), transport: SimulatedInstance())
            try await client.enqueue(contentsOf: (1...40).map { todo(Int64($0)) })
            let used = try client.log.environment.usedBytes()
            let file = try client.log.environment.fileSize()
            #if os(Linux)
                #expect(file > used, "written ahead")
            #endif
            #expect(try client.log.compactionIsDue(.when(logExceeds: used + 1)) == false)
            #expect(try client.log.compactionIsDue(.when(logExceeds: used - 1)))
            client.close()
        }
    }

    @Test func theClientCompactsByItselfBetweenPassesWhenThePolicySaysSo() async throws {
        try await TemporaryFolder.with { path in
            var configuration = testConfiguration()
            configuration.compaction = .when(settledWritesExceed: 50)
            let client = try await openClient(path, configuration: configuration, transport: SimulatedInstance())
            let events = client.events
            try await client.enqueue(contentsOf: (1...40).map { todo(Int64($0)) })
            _ = try await client.sync()
            _ = try await client.queue.takeAnswered()
            #expect(try client.log.read { try $0.compaction() } == nil, "40 settled: not yet")
            try await client.enqueue(contentsOf: (41...60).map { todo(Int64($0)) })
            _ = try await client.sync()
            _ = try await client.queue.takeAnswered()
            _ = try await client.sync()
            let compaction = try #require(try client.log.read { try $0.compaction() })
            #expect(compaction.segments.first?.writeCount == 60)
            var seen: CompactionReport?
            for await event in events {
                if case .automaticCompaction(let report) = event {
                    seen = report
                    break
                }
            }
            #expect(seen?.archivedWrites == 60)
            #expect(try await client.verify().isOK)
            client.close()
        }
    }
}
