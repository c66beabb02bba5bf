import Foundation
import OutboxLMDB
import OutboxTesting
import Testing

@testable import Outbox

/// The journal in front of LMDB (decision 016): its file, and a power loss recovered through it.
@Suite struct JournalTests {
    private static let metas = (0..<8192).map { UInt8($0 % 251) }

    private func journal(_ folder: TemporaryFolder, capacity: Int = 64 << 10) throws -> Journal {
        try Journal(path: folder.path + "/journal", metaPagesSize: Self.metas.count, capacity: capacity)
    }

    private func records(_ count: Int, from first: Int) -> [[UInt8]] {
        (first..<(first + count)).map { Array("record \($0)".utf8) }
    }

    @Test func commitsAfterACheckpointReadBackInOrderAfterAReopen() throws {
        let folder = TemporaryFolder(created: true)
        defer { folder.remove() }
        let written = try journal(folder)
        #expect(written.head == nil)
        #expect(try written.committed().isEmpty)
        try written.checkpoint(sequence: 10, metaPages: Self.metas)
        try written.append(records(3, from: 11), first: 11)
        try written.append(records(2, from: 14), first: 14)
        let end = written.end
        let reopened = try journal(folder)
        #expect(reopened.head == Journal.Head(generation: 1, sequence: 10, metaPages: Self.metas))
        #expect(reopened.end == end)
        let read = try reopened.committed()
        #expect(read.map(\.sequence) == Array(11...15))
        #expect(read.map(\.record) == records(5, from: 11))
    }

    @Test func aCheckpointStartsTheCommitsAgainAndLeavesTheOlderOnesUnread() throws {
        let folder = TemporaryFolder(created: true)
        defer { folder.remove() }
        let journal = try journal(folder)
        try journal.checkpoint(sequence: 0, metaPages: Self.metas)
        try journal.append(records(4, from: 1), first: 1)
        try journal.checkpoint(sequence: 2, metaPages: Self.metas)
        // The commit of 1...4 is still in the file, where the next commit goes; it is of generation 1.
        #expect(try journal.committed().isEmpty)
        try journal.append(records(1, from: 3), first: 3)
        #expect(try self.journal(folder).committed().map(\.sequence) == [3])
        // Even a commit whose sequences would follow the head is not read when it is of an earlier generation.
        try journal.checkpoint(sequence: 2, metaPages: Self.metas)
        #expect(try self.journal(folder).committed().isEmpty)
    }

    @Test func aTornOrStaleCommitEndsTheCommits() throws {
        let folder = TemporaryFolder(created: true)
        defer { folder.remove() }
        let journal = try journal(folder)
        try journal.checkpoint(sequence: 0, metaPages: Self.metas)
        try journal.append(records(2, from: 1), first: 1)
        let second = journal.end
        try journal.append(records(2, from: 3), first: 3)
        try journal.append(records(2, from: 5), first: 5)
        // One byte of the second commit's records changed: its CRC fails, and the third is not read either.
        let handle = try #require(FileHandle(forUpdatingAtPath: folder.path + "/journal"))
        try handle.seek(toOffset: UInt64(second + 40))
        try handle.write(contentsOf: [0xFF])
        try handle.close()
        let reopened = try self.journal(folder)
        #expect(try reopened.committed().map(\.sequence) == [1, 2])
        #expect(reopened.end == second)
        // A commit written over the torn one, shorter than what lies there: the stale bytes after it stay unread.
        try reopened.append([[1]], first: 3)
        #expect(try self.journal(folder).committed().map(\.sequence) == [1, 2, 3])
    }

    @Test func aTornHeadLeavesTheOneBeforeIt() throws {
        let folder = TemporaryFolder(created: true)
        defer { folder.remove() }
        let journal = try journal(folder)
        try journal.checkpoint(sequence: 5, metaPages: Self.metas)
        try journal.checkpoint(sequence: 9, metaPages: Self.metas)
        #expect(journal.head?.generation == 2)
        // The first head went into slot 0, the second into slot 1: damage the second.
        let handle = try #require(FileHandle(forUpdatingAtPath: folder.path + "/journal"))
        try handle.seek(toOffset: UInt64(journal.slotSize + 100))
        try handle.write(contentsOf: [0xFF, 0xFF])
        try handle.close()
        #expect(try self.journal(folder).head == Journal.Head(generation: 1, sequence: 5, metaPages: Self.metas))
    }

    @Test func aWholeHeadOfAnotherVersionIsRefusedByName() throws {
        let folder = TemporaryFolder(created: true)
        defer { folder.remove() }
        try journal(folder).checkpoint(sequence: 0, metaPages: Self.metas)
        // Slot 0 rewritten as version 2, its CRC made to hold.
        let handle = try #require(FileHandle(forUpdatingAtPath: folder.path + "/journal"))
        var head = [UInt8](try handle.read(upToCount: 28 + Self.metas.count) ?? Data())
        head[4] = 2
        let crc = head.withUnsafeBytes { CRC32C.update(0, $0) }
        try handle.seek(toOffset: 0)
        try handle.write(contentsOf: head + withUnsafeBytes(of: crc.littleEndian) { Array($0) })
        try handle.close()
        #expect(throws: OutboxError.damaged) { try self.journal(folder) }
    }

    /// A commit larger than the room after the heads is written anyway, lengthening the file, and
    /// reads back whole (a bulk enqueue larger than the journal).
    @Test func aCommitLargerThanTheJournalLengthensIt() throws {
        let folder = TemporaryFolder(created: true)
        defer { folder.remove() }
        let journal = try journal(folder, capacity: 32 << 10)
        try journal.checkpoint(sequence: 0, metaPages: Self.metas)
        let big = [[UInt8](repeating: 7, count: 30_000), [UInt8](repeating: 8, count: 10_000)]
        #expect(!journal.fits(big))
        try journal.append(big, first: 1)
        #expect(journal.capacity > 32 << 10)
        let reopened = try self.journal(folder, capacity: 32 << 10)
        #expect(try reopened.committed().map(\.record) == big)
        #expect(reopened.end == journal.end)
    }

    /// A commit written over at the same place (LMDB failed to commit the first, and the work ran
    /// again): the second is the one read back, and a third after it follows it.
    @Test func aCommitWrittenOverAfterARewindIsTheOneReadBack() throws {
        let folder = TemporaryFolder(created: true)
        defer { folder.remove() }
        let journal = try journal(folder)
        try journal.checkpoint(sequence: 0, metaPages: Self.metas)
        try journal.append(records(1, from: 1), first: 1)
        let before = journal.end
        try journal.append(records(3, from: 2), first: 2)
        journal.rewind(to: before)
        try journal.append([[0x42]], first: 2)
        try journal.append(records(1, from: 3), first: 3)
        let read = try self.journal(folder).committed()
        #expect(read.map(\.sequence) == [1, 2, 3])
        #expect(read[1].record == [0x42])
    }

    /// A commit written without a flush is flushed by the next one that is, and reads back.
    @Test func aCommitNotFlushedIsFlushedByTheNext() throws {
        let folder = TemporaryFolder(created: true)
        defer { folder.remove() }
        let journal = try journal(folder)
        try journal.checkpoint(sequence: 0, metaPages: Self.metas)
        journal.startCommit(first: 1)
        [UInt8]([1, 2, 3]).withUnsafeBytes { journal.add($0) }
        try journal.writeCommit(flush: false)
        #expect(journal.hasUnflushedCommits)
        try journal.append(records(1, from: 2), first: 2)
        #expect(!journal.hasUnflushedCommits)
        #expect(try self.journal(folder).committed().map(\.sequence) == [1, 2])
    }

    /// Two opens of one journal (two processes' checkpoints): each checkpoint goes to the slot the
    /// newest head in the file is not in, with the next generation, whoever wrote that head.
    @Test func aCheckpointFollowsTheNewestHeadInTheFileWhoeverWroteIt() throws {
        let folder = TemporaryFolder(created: true)
        defer { folder.remove() }
        let first = try journal(folder)
        let second = try journal(folder)
        try first.checkpoint(sequence: 1, metaPages: Self.metas)
        try second.checkpoint(sequence: 2, metaPages: Self.metas)
        try first.checkpoint(sequence: 3, metaPages: Self.metas)
        #expect(first.head?.generation == 3)
        #expect(try self.journal(folder).head == Journal.Head(generation: 3, sequence: 3, metaPages: Self.metas))
    }

    /// Every writer holds the journal's lock shared; an open that finds none is alone (it may recover).
    @Test func anOpenIsAloneOnlyWhenNoOtherHoldsTheLock() throws {
        let folder = TemporaryFolder(created: true)
        defer { folder.remove() }
        let first = try journal(folder)
        #expect(first.lockAlone())
        try first.lockShared()
        let second = try journal(folder)
        #expect(!second.lockAlone())
        try second.lockShared()
        first.close()
        second.close()
        #expect(try journal(folder).lockAlone())
    }

    /// A journal its writer was still making (killed before the zeros were all written) reads, opened
    /// read-only, as one with no head and no commits; opened for writing it is made whole.
    @Test func aJournalCutShortWhileMadeReadsAsEmpty() throws {
        let folder = TemporaryFolder(created: true)
        defer { folder.remove() }
        #expect(FileManager.default.createFile(atPath: folder.path + "/journal", contents: Data(count: 5000)))
        let read = try Journal(path: folder.path + "/journal", metaPagesSize: Self.metas.count, readOnly: true)
        #expect(read.head == nil)
        #expect(try read.committed().isEmpty)
        read.close()
        let written = try journal(folder)
        #expect(written.capacity == 64 << 10)
        written.close()
    }

    /// Pins the bytes of a commit (a change of the format shows here first).
    /// A head says whether LMDB is whole after it (bit 0 of its sixth byte, after the version), through
    /// a reopen; each checkpoint says it anew.
    @Test func aHeadSaysWhetherLMDBIsWholeAfterIt() throws {
        let folder = TemporaryFolder(created: true)
        defer { folder.remove() }
        let journal = try journal(folder)
        #expect(try journal.newestHeadSaysLMDBIsWhole(), "no head: nothing went through the journal")
        try journal.checkpoint(sequence: 3, metaPages: Self.metas, lmdbIsWhole: true)
        #expect(try journal.newestHeadSaysLMDBIsWhole())
        try journal.checkpoint(sequence: 4, metaPages: Self.metas)
        #expect(try !journal.newestHeadSaysLMDBIsWhole())
        let slotSize = journal.slotSize
        journal.close()
        let reopened = try Journal(path: folder.path + "/journal", metaPagesSize: Self.metas.count, readOnly: true)
        #expect(reopened.head?.sequence == 4)
        #expect(reopened.head?.lmdbIsWhole == false)
        reopened.close()
        let handle = try #require(FileHandle(forReadingAtPath: folder.path + "/journal"))
        defer { try? handle.close() }
        let first = [UInt8](try handle.read(upToCount: 8) ?? Data())
        try handle.seek(toOffset: UInt64(slotSize))
        let second = [UInt8](try handle.read(upToCount: 8) ?? Data())
        #expect(first == Array("OBXJ".utf8) + [1, 1, 0, 0])
        #expect(second == Array("OBXJ".utf8) + [1, 0, 0, 0])
    }

    @Test func aCommitsBytesArePinned() throws {
        let folder = TemporaryFolder(created: true)
        defer { folder.remove() }
        let journal = try journal(folder)
        try journal.checkpoint(sequence: 0, metaPages: Self.metas)
        let start = journal.end
        try journal.append([[0xAA, 0xBB], [0xCC]], first: 1)
        let handle = try #require(FileHandle(forReadingAtPath: folder.path + "/journal"))
        try handle.seek(toOffset: UInt64(start))
        let bytes = [UInt8](try handle.read(upToCount: journal.end - start) ?? Data())
        try handle.close()
        let hex = bytes.map { String(format: "%02x", $0) }.joined()
        #expect(
            hex == "4f425843" + "0100000000000000" + "0100000000000000" + "02000000" + "0b000000"
                + "02000000aabb" + "01000000cc" + hex.suffix(8))
        let crc = bytes.dropLast(4).withUnsafeBytes { CRC32C.update(0, $0) }
        #expect(Array(bytes.suffix(4)) == withUnsafeBytes(of: crc.littleEndian) { Array($0) })
    }

    /// A power loss while LMDB commits without flushes behind the journal: the disk keeps, of each page
    /// of the data file, what the last checkpoint flushed or what a later commit wrote (the meta pages
    /// too), at random; the journal keeps every commit it flushed. LMDB put back to the checkpoint from
    /// the journal's head, then the journal's commits replayed, holds every commit.
    @Test(arguments: 1...6 as ClosedRange<UInt64>)
    func aPowerLossIsRecoveredFromTheCheckpointAndTheCommitsAfterIt(seed: UInt64) throws {
        let folder = TemporaryFolder(created: true)
        defer { folder.remove() }
        var random = SplitMix64(seed: seed)
        let store = folder.path + "/log"
        var options = Environment.Options()
        options.durability = .noSync
        let environment = try Environment(path: store, databases: ["t"], options: options)
        let table = environment.database("t")
        let journal = try Journal(
            path: folder.path + "/journal", metaPagesSize: 2 * environment.pageSize, capacity: 256 << 10)
        var model: [UInt64: [UInt8]] = [:]
        var sequence: UInt64 = 0
        var flushed: (file: [UInt8], model: [UInt64: [UInt8]]) = ([], [:])
        func checkpoint() throws {
            try environment.flush()
            flushed = (try Self.bytes(of: store + "/data.mdb"), model)
            try journal.checkpoint(sequence: sequence, metaPages: try environment.metaPages())
            try environment.holdSnapshot()
        }
        try checkpoint()
        for commit in 0..<120 {
            // Each commit's records (here a key and a value each) go to the journal before LMDB commits.
            let changes = (0..<(1 + Int(random.next() % 8))).map { _ in
                (UInt64(random.next() % 500), (0..<(30 + Int(random.next() % 200))).map { _ in UInt8(random.next() % 256) })
            }
            let records = changes.map { Self.record($0.0, $0.1) }
            if !journal.fits(records) || commit % 45 == 44 { try checkpoint() }
            try environment.write { txn in
                for (key, value) in changes { try txn.put(table, key: Self.key(key), value: value) }
                try journal.append(records, first: sequence + 1)
            }
            sequence += UInt64(records.count)
            for (key, value) in changes { model[key] = value }
        }
        let later = try Self.bytes(of: store + "/data.mdb")
        let pageSize = environment.pageSize
        let head = try #require(journal.head)
        environment.close()

        // The disk after the loss, then the recovery: the head's meta pages written back, LMDB opened,
        // the journal's commits replayed.
        var disk: [UInt8] = []
        for start in stride(from: 0, to: max(flushed.file.count, later.count), by: pageSize) {
            disk += random.next() % 2 == 0 ? Self.page(later, start, pageSize) : Self.page(flushed.file, start, pageSize)
        }
        let recovered = folder.path + "/recovered"
        try FileManager.default.createDirectory(atPath: recovered, withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: recovered + "/data.mdb", contents: Data(disk)))
        try Environment.restoreMetaPages(head.metaPages, path: recovered)
        let reopened = try Environment(path: recovered, databases: ["t"])
        defer { reopened.close() }
        let atCheckpoint = try Self.contents(reopened)
        let checkpointWhole = atCheckpoint == flushed.model
        #expect(checkpointWhole, "\(atCheckpoint.count) keys at the checkpoint, \(flushed.model.count) flushed")
        let replayed = try self.journal(folder, capacity: 256 << 10).committed()
        #expect(replayed.first?.sequence == head.sequence + 1 && replayed.last?.sequence == sequence)
        try reopened.write { txn in
            for (_, record) in replayed {
                try txn.put(reopened.database("t"), key: Array(record[0..<8]), value: Array(record[8...]))
            }
        }
        let recoveredContents = try Self.contents(reopened)
        let whole = recoveredContents == model
        #expect(whole, "\(recoveredContents.count) keys recovered, \(model.count) committed")
    }

    private static func key(_ key: UInt64) -> [UInt8] { withUnsafeBytes(of: key.bigEndian) { Array($0) } }

    private static func record(_ key: UInt64, _ value: [UInt8]) -> [UInt8] { Self.key(key) + value }

    private static func bytes(of file: String) throws -> [UInt8] {
        let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: file))
        defer { try? handle.close() }
        return [UInt8](try handle.readToEnd() ?? Data())
    }

    private static func page(_ file: [UInt8], _ start: Int, _ size: Int) -> [UInt8] {
        start + size <= file.count ? Array(file[start..<(start + size)]) : [UInt8](repeating: 0, count: size)
    }

    private static func contents(_ environment: Environment) throws -> [UInt64: [UInt8]] {
        try environment.read { txn in
            var found: [UInt64: [UInt8]] = [:]
            try txn.forEach(environment.database("t"), prefix: []) { key, value in
                found[key.copiedBytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }] = value.copiedBytes
                return true
            }
            return found
        }
    }
}
