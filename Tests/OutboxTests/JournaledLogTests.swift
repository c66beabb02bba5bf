import Foundation
import OutboxLMDB
import OutboxTesting
import Synchronization
import Testing

@testable import Outbox

/// The engine's commits through its journal (decision 016): LMDB commits without flushing, each
/// commit is flushed in the journal, and a power loss is recovered on the next open (R2.3: an enqueue
/// that returned survives a power loss).
@Suite struct JournaledLogTests {
    /// What a power loss leaves of a log's folder: each page of the data file either what the last
    /// checkpoint flushed or what the commits after it wrote (the meta pages too), at random; the
    /// journal with every commit it flushed; the commit mark as written.
    private static func powerLoss(
        of log: String, checkpointed: [UInt8], into target: String, random: inout SplitMix64
    ) throws {
        let later = try bytes(of: log + "/data.mdb")
        let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
        var disk: [UInt8] = []
        for start in stride(from: 0, to: max(checkpointed.count, later.count), by: pageSize) {
            disk += random.next() % 2 == 0 ? page(later, start, pageSize) : page(checkpointed, start, pageSize)
        }
        try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: target + "/data.mdb", contents: Data(disk)))
        for file in ["journal", "last-commit"] {
            try FileManager.default.copyItem(atPath: log + "/" + file, toPath: target + "/" + file)
        }
    }

    @Test(arguments: 1...6 as ClosedRange<UInt64>)
    func aPowerLossLosesNoEnqueueThatReturned(seed: UInt64) async throws {
        try await TemporaryFolder.with(created: true) { folder in
            var random = SplitMix64(seed: seed)
            let log = folder + "/log"
            let client = try await openClient(log, configuration: testConfiguration(seed: seed))
            var checkpointed = try Self.bytes(of: log + "/data.mdb")
            var enqueued: [WriteID] = []
            for index in 0..<(60 + Int(random.next() % 60)) {
                enqueued.append(try await client.enqueue(todo(Int64(random.next() % 20), "write \(index)")))
                if random.next() % 25 == 0 {
                    _ = try await client.queue.cancel(enqueued[Int(random.next() % UInt64(enqueued.count))])
                }
                if random.next() % 30 == 0 {
                    try client.log.checkpoint()
                    checkpointed = try Self.bytes(of: log + "/data.mdb")
                }
            }
            let recovered = folder + "/recovered"
            try Self.powerLoss(of: log, checkpointed: checkpointed, into: recovered, random: &random)
            client.close()
            #expect(try !Self.journaled(recovered).isEmpty, "commits past the checkpoint to recover")

            let reopened = try await openClient(recovered, configuration: testConfiguration(seed: seed))
            let kept = try await reopened.queue.all().map(\.id)
            #expect(Set(enqueued).isSubset(of: Set(kept).union(try cancelledIDs(reopened))))
            #expect(try reopened.log.storedRecords().map(\.bytes) == (try original(log).map(\.bytes)))
            reopened.close()
            try Self.expectVerifies(recovered)
        }
    }

    /// A bulk enqueue larger than the journal takes is made durable by LMDB itself, after a checkpoint
    /// whose head says LMDB is whole after it (the next open then leaves LMDB as it is); the commits
    /// after it checkpoint first. A power loss then loses none of them.
    @Test(arguments: 1...4 as ClosedRange<UInt64>)
    func aLargeCommitIsMadeDurableByLMDBAndSurvivesAPowerLoss(seed: UInt64) async throws {
        try await TemporaryFolder.with(created: true) { folder in
            var random = SplitMix64(seed: seed)
            let log = folder + "/log"
            let client = try await openClient(log, configuration: testConfiguration(seed: seed))
            let journal = try #require(client.log.journal)
            var checkpointed = try Self.bytes(of: log + "/data.mdb")
            var seen = journal.checkpoints
            func enqueue(_ writes: [Write]) async throws -> [WriteID] {
                let ids = try await client.enqueue(contentsOf: writes)
                if journal.checkpoints != seen {
                    seen = journal.checkpoints
                    checkpointed = try Self.bytes(of: log + "/data.mdb")
                }
                return ids
            }
            var enqueued: [WriteID] = []
            for index in Int64(0)..<8 { enqueued += try await enqueue([todo(index)]) }
            let bulk = try await enqueue((Int64(100)..<1600).map { todo($0, "a write of the bulk enqueue") })
            enqueued += bulk
            // Even seeds lose the power right after the bulk enqueue, odd ones after a few more writes.
            let after = seed % 2 == 0 ? 0 : 3 + Int64(random.next() % 6)
            for index in Int64(0)..<after { enqueued += try await enqueue([todo(index)]) }
            #expect(try Self.journaled(log).count == Int(after), "only the commits after the bulk enqueue are in the journal")

            let recovered = folder + "/recovered"
            try Self.powerLoss(of: log, checkpointed: checkpointed, into: recovered, random: &random)
            client.close()
            let reopened = try await openClient(recovered, configuration: testConfiguration(seed: seed))
            #expect(Set(try await reopened.queue.all().map(\.id)) == Set(enqueued))
            reopened.close()
            try Self.expectVerifies(recovered)
        }
    }

    /// A commit whose work says from the start that its records pass the journal's bound (a bulk
    /// enqueue's keys and bodies alone do) keeps none of them for the journal: LMDB makes it durable,
    /// after a head saying so, even were it small after all; and it survives a power loss (R2.3).
    @Test func aCommitKnownToBeLargeFromTheStartIsMadeDurableByLMDB() async throws {
        try await TemporaryFolder.with(created: true) { folder in
            let log = folder + "/log"
            let client = try await openClient(log)
            try await client.enqueue(todo(1))
            let lastBefore = try client.log.lastSequence()
            let random = SeededRandomSource(seed: 5)
            let ids = try await client.log.append(isEnqueue: true, recordBytes: CommitJournal.largeCommit + 1) { appender in
                try QueueOperations.enqueue(
                    [todo(2), todo(3)], user: "alice", atomic: false, random: random, appender: &appender)
            }
            #expect(try client.log.lastSequence() > lastBefore)
            #expect(try Self.journaled(log).allSatisfy { $0 <= lastBefore }, "no record of it in the journal")
            // What LMDB made durable; the next commit, through the journal, checkpoints there first.
            let checkpointed = try Self.bytes(of: log + "/data.mdb")
            try await client.enqueue(todo(4))
            let recovered = folder + "/recovered"
            var random64 = SplitMix64(seed: 5)
            try Self.powerLoss(of: log, checkpointed: checkpointed, into: recovered, random: &random64)
            client.close()
            let reopened = try await openClient(recovered)
            #expect(Set(try await reopened.queue.all().map(\.id)).isSuperset(of: ids))
            #expect(try await reopened.queue.all().count == 4)
            reopened.close()
            try Self.expectVerifies(recovered)
        }
    }

    /// A journal whose head names pages past the end of the data file (the file was replaced since: a
    /// compaction killed between its copy and the checkpoint after it, before the compaction's own
    /// checkpoint first was made) is refused by name when it would be recovered, never written over
    /// a file it was not taken from.
    @Test func aJournalCheckpointedOnALargerDataFileIsRefusedByName() async throws {
        try await TemporaryFolder.with(created: true) { folder in
            let log = folder + "/log"
            let client = try await openClient(log)
            for index in Int64(0)..<400 { try await client.enqueue(todo(index)) }
            try client.log.checkpoint()
            try await client.enqueue(todo(1000))
            let copy = folder + "/copy"
            try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: true)
            let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
            let data = try Self.bytes(of: log + "/data.mdb")
            #expect(FileManager.default.createFile(atPath: copy + "/data.mdb", contents: Data(data[..<(8 * pageSize)])))
            try FileManager.default.copyItem(atPath: log + "/journal", toPath: copy + "/journal")
            client.close()
            let refused = #expect(throws: OutboxError.self) {
                try OutboxClient.open(path: copy, configuration: testConfiguration())
            }
            #expect(refused?.code == .damaged)
            #expect(
                refused?.message.contains("checkpointed on a data file larger than this one") == true, "\(refused?.message ?? "")"
            )
        }
    }

    /// What follows the journal's newest head when it is damaged.
    enum AfterTheHead: CaseIterable, Sendable {
        /// A commit through the journal.
        case aCommit
        /// A commit LMDB made durable itself (a bulk enqueue's, after a head that says LMDB is whole).
        case aCommitByLMDB
        /// Nothing: the head was torn as its checkpoint wrote it (a power loss then), the commits
        /// before it as they were.
        case nothingTornAsWritten
    }

    /// The journal's newest head damaged after it was written (its checkpoint's empty commit follows
    /// it, and whatever was committed since): the head before it may name pages LMDB has reused since,
    /// so an open refuses the log by name (R8.6), its data file untouched, rather than put it back there. A
    /// newest head torn as its checkpoint wrote it (a power loss then, before the empty commit) leaves
    /// the head before it whole, and the open recovers from that one, every enqueue there.
    @Test(arguments: AfterTheHead.allCases)
    func aDamagedNewestHeadIsRefusedUnlessItWasTornAsWritten(after: AfterTheHead) async throws {
        try await TemporaryFolder.with(created: true) { folder in
            let log = folder + "/log"
            let client = try await openClient(log)
            for index in Int64(1)...3 { try await client.enqueue(todo(index)) }
            try client.log.checkpoint()
            for index in Int64(4)...6 { try await client.enqueue(todo(index)) }
            let before = try Self.bytes(of: log + "/journal")
            try client.log.checkpoint()
            switch after {
            case .aCommit: try await client.enqueue(todo(7))
            case .aCommitByLMDB: _ = try await client.enqueue(contentsOf: (Int64(7)...1000).map { todo($0) })
            case .nothingTornAsWritten: break
            }
            let target = folder + "/copy"
            try Self.copy(log, to: target, losingFromTheJournal: 0..<0)
            let last = try client.eventCount()
            client.close()
            let head = try Self.damageNewestHead(of: target)
            if after == .nothingTornAsWritten {
                // The commits as the checkpoint found them: it had not written its empty commit yet.
                let handle = try #require(FileHandle(forUpdatingAtPath: target + "/journal"))
                try handle.seek(toOffset: UInt64(head.framesStart))
                try handle.write(contentsOf: Data(before[head.framesStart...]))
                try handle.close()
            }

            let dataFile = try Self.bytes(of: target + "/data.mdb")
            if after == .nothingTornAsWritten {
                let reopened = try EventLog(path: target)
                #expect(try reopened.lastSequence() == last)
                reopened.close()
                try Self.expectVerifies(target)
            } else {
                let refused = #expect(throws: OutboxError.self) { try EventLog(path: target) }
                #expect(refused?.code == .damaged)
                #expect(refused?.message.contains("newest head of its journal") == true, "\(refused?.message ?? "")")
                #expect(try Self.bytes(of: target + "/data.mdb") == dataFile, "the data file untouched")
            }
        }
    }

    /// A closed log whose journal's newest head (the one its close wrote, saying LMDB is whole) is
    /// damaged since: a read-only open (as `outbox verify` makes) says what an open for writing says,
    /// and both refuse it by name (R8.6), rather than one read it and the other refuse it.
    @Test(arguments: [false, true])
    func aClosedLogWithADamagedNewestHeadIsRefusedByEveryOpen(committedSinceTheHeadBefore: Bool) async throws {
        try await TemporaryFolder.with(created: true) { folder in
            let log = folder + "/log"
            let client = try await openClient(log)
            for index in Int64(1)...3 { try await client.enqueue(todo(index)) }
            try client.log.checkpoint()
            if committedSinceTheHeadBefore { try await client.enqueue(todo(4)) }
            client.close()
            #expect(try Self.damageNewestHead(of: log).lmdbIsWhole)
            let dataFile = try Self.bytes(of: log + "/data.mdb")

            let readOnly = #expect(throws: OutboxError.self) { try LogInspector(path: log) }
            #expect(readOnly?.code == .damaged, "\(readOnly?.message ?? "")")
            #expect(readOnly?.message.contains("newest head of its journal") == true, "\(readOnly?.message ?? "")")
            let writable = #expect(throws: OutboxError.self) { try EventLog(path: log) }
            #expect(writable?.code == .damaged)
            #expect(writable?.message.contains("newest head of its journal") == true, "\(writable?.message ?? "")")
            #expect(try Self.bytes(of: log + "/data.mdb") == dataFile, "the data file untouched")
        }
    }

    /// A recovery stopped after LMDB was put back to the journal's head (an I/O error in its replay):
    /// a read-only open refuses the log by name rather than read it without its last commits; an open
    /// for writing recovers them.
    @Test func aLogWhoseCommitsAreOnlyInItsJournalIsRefusedReadOnlyAndRecoveredForWriting() async throws {
        try await TemporaryFolder.with(created: true) { folder in
            let log = folder + "/log"
            let client = try await openClient(log)
            try await client.enqueue(todo(1))
            try client.log.checkpoint()
            let checkpointed = try Self.bytes(of: log + "/data.mdb")
            for index in Int64(2)...6 { try await client.enqueue(todo(index)) }
            let target = folder + "/stopped"
            try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
            #expect(FileManager.default.createFile(atPath: target + "/data.mdb", contents: Data(checkpointed)))
            try FileManager.default.copyItem(atPath: log + "/journal", toPath: target + "/journal")
            let last = try client.eventCount()
            client.close()

            let refused = #expect(throws: OutboxError.self) { try LogInspector(path: target) }
            #expect(refused?.code == .needsRecovery)
            #expect(refused?.message.contains("through sequence \(last)") == true, "\(refused?.message ?? "")")
            try EventLog(path: target).close()
            let inspector = try LogInspector(path: target)
            #expect(try inspector.lastSequence() == last)
            #expect(try inspector.verify().isOK)
            inspector.log.close()
        }
    }

    /// A pass's commits (`.withoutMetaSync`, R2.3) are appended to the journal without a flush, each
    /// request's going out without waiting for one; the pass flushes them when it ends, so a `sync()`
    /// that returned has its answers on the disk.
    @Test func aPassCommitsWithoutAFlushAndFlushesWhenItEnds() async throws {
        try await TemporaryFolder.with(created: true) { folder in
            let log = folder + "/log"
            let seen = Mutex<[Bool]>([])
            let opened = Mutex<EventLog?>(nil)
            let transport = ObservedTransport(prunesByWatermark: false) { _ in
                seen.withLock { $0.append(opened.withLock { $0!.lastCommitMayBeUndoneByPowerLoss }) }
            }
            var configuration = testConfiguration()
            configuration.batchSize = 2
            let client = try await openClient(log, configuration: configuration, transport: transport)
            opened.withLock { $0 = client.log }
            _ = try client.log.transaction(sync: .withoutMetaSync) {
                try $0.append(.networkSwitched(NetworkSwitched(enabled: true)))
            }
            #expect(client.log.lastCommitMayBeUndoneByPowerLoss, "appended, not flushed")
            #expect(try Self.journaled(log).last == (try client.eventCount()))
            for index in Int64(1)...8 { try await client.enqueue(todo(index)) }
            #expect(!client.log.lastCommitMayBeUndoneByPowerLoss, "an enqueue flushes the journal")
            let report = try await client.sync()
            #expect(report.syncedCount == 8)
            // Its planning commit (the first request's attempts, R4.6), then each answer's.
            #expect(seen.withLock { $0 } == [true, true, true, true], "no request waits for a flush")
            #expect(!client.log.lastCommitMayBeUndoneByPowerLoss, "the pass flushed its answers when it ended")
            client.close()
        }
    }

    /// A transport that prunes by the acknowledged watermark gets none that covers an answer a power
    /// loss could take back: the instance forgets the answers under it (R8.9). At each request that
    /// carries one, the disk as a power loss would leave it (the journal without what was not
    /// flushed) is kept; each, recovered, holds the answer of every write under that request's mark.
    @Test func aWatermarkGoesOutOnlyOverAnswersOnTheDisk() async throws {
        try await TemporaryFolder.with(created: true) { folder in
            let log = folder + "/log"
            let copies = Mutex<[(watermark: WriteID, folder: String)]>([])
            let opened = Mutex<EventLog?>(nil)
            let transport = ObservedTransport(prunesByWatermark: true) { batch in
                guard let watermark = batch.acknowledgedWatermark else { return }
                let unflushed = try #require(opened.withLock { $0?.unflushedJournalCommits })
                let target = folder + "/at-\(watermark.rawValue)"
                try Self.copy(log, to: target, losingFromTheJournal: unflushed)
                copies.withLock { $0.append((watermark, target)) }
            }
            var configuration = testConfiguration()
            configuration.batchSize = 2
            let client = try await openClient(log, configuration: configuration, transport: transport)
            opened.withLock { $0 = client.log }
            for index in Int64(1)...8 { try await client.enqueue(todo(index)) }
            #expect(try await client.sync().syncedCount == 8)
            client.close()
            let kept = copies.withLock { $0 }
            #expect(kept.map(\.watermark.rawValue) == [2, 4], "the requests after the second carry one")
            for (watermark, copy) in kept {
                let reopened = try await openClient(copy)
                for id in 1...watermark.rawValue {
                    #expect(try await reopened.queue.write(WriteID(id))?.state == .accepted, "write \(id) under \(watermark)")
                }
                reopened.close()
            }
        }
    }

    /// A power loss while a pass runs: its answers after the last flush may be lost, any part of them,
    /// and LMDB's data file may hold a meta page of theirs without its pages (each page of the file
    /// is the checkpoint's or the latest, at random). The next open puts LMDB back to the journal's
    /// head, which does not say LMDB is whole after it, and replays what the journal kept: every
    /// enqueue that returned is there, the log is a prefix of the one before the power loss, and it
    /// verifies.
    @Test(arguments: 1...6 as ClosedRange<UInt64>)
    func aPowerLossInAPassLosesOnlyAnswersNotFlushed(seed: UInt64) async throws {
        try await TemporaryFolder.with(created: true) { folder in
            let log = folder + "/log"
            let recovered = folder + "/recovered"
            let random = Mutex(SplitMix64(seed: seed))
            let lossAt = 2 + Int(random.withLock { $0.next() } % 4)
            let state = Mutex<(log: EventLog?, checkpointed: [UInt8], checkpoints: Int, sends: Int)>((nil, [], 0, 0))
            let transport = ObservedTransport(prunesByWatermark: false) { _ in
                try state.withLock { state in
                    state.sends += 1
                    guard state.sends == lossAt, let opened = state.log, let journal = opened.journal else { return }
                    #expect(journal.checkpoints == state.checkpoints, "the pass made no checkpoint")
                    let unflushed = try #require(opened.unflushedJournalCommits)
                    #expect(!unflushed.isEmpty, "answers not flushed")
                    try random.withLock { random in
                        try Self.powerLoss(of: log, checkpointed: state.checkpointed, into: recovered, random: &random)
                        // Even seeds lose every answer not flushed, odd ones any part of them.
                        let cut = unflushed.lowerBound + (seed % 2 == 0 ? 0 : Int(random.next() % UInt64(unflushed.count + 1)))
                        try Self.lose(cut..<unflushed.upperBound, fromTheJournalOf: recovered)
                    }
                }
            }
            var configuration = testConfiguration(seed: seed)
            configuration.batchSize = 3
            let client = try await openClient(log, configuration: configuration, transport: transport)
            var enqueued: [WriteID] = []
            for index in 0..<(20 + Int(random.withLock { $0.next() } % 10)) {
                enqueued.append(try await client.enqueue(todo(Int64(index % 7), "write \(index)")))
            }
            try client.log.checkpoint()
            let checkpointed = try Self.bytes(of: log + "/data.mdb")
            state.withLock { $0 = (client.log, checkpointed, client.log.journal!.checkpoints, 0) }
            _ = try await client.sync()
            #expect(state.withLock { $0.sends } >= lossAt)
            let before = try client.log.storedRecords()
            client.close()

            let reopened = try await openClient(recovered, configuration: testConfiguration(seed: seed))
            #expect(Set(enqueued).isSubset(of: Set(try await reopened.queue.all().map(\.id))))
            let kept = try reopened.log.storedRecords()
            #expect(kept.count >= enqueued.count + 2, "the enqueues and what came before them")
            #expect(kept.map(\.bytes) == before.prefix(kept.count).map(\.bytes))
            reopened.close()
            try Self.expectVerifies(recovered)
        }
    }

    /// A log its writer did not close, whose data file holds a commit its journal lost (an answer not
    /// flushed after a checkpoint, the data file as LMDB left it): a read-only open refuses it by name,
    /// since the disk may hold its meta page without its pages; an open for writing puts it back to
    /// the journal's head and the commits the journal kept. A log closed is read as it is: its head
    /// says LMDB is whole after it.
    @Test func aLogNotClosedIsRefusedReadOnlyWhenItsDataFileIsAheadOfItsJournal() async throws {
        try await TemporaryFolder.with(created: true) { folder in
            let log = folder + "/log"
            let client = try await openClient(log)
            for index in Int64(1)...4 { try await client.enqueue(todo(index)) }
            try client.log.checkpoint()
            let flushed = try client.eventCount()
            let unflushed = try #require(client.log.unflushedJournalCommits)
            _ = try client.log.transaction(sync: .withoutMetaSync) {
                try $0.append(.networkSwitched(NetworkSwitched(enabled: false)))
            }
            let target = folder + "/copy"
            try Self.copy(log, to: target, losingFromTheJournal: unflushed.lowerBound..<(unflushed.lowerBound + 4096))
            client.close()
            let journal = try Journal(
                path: log + "/journal", metaPagesSize: 2 * Int(sysconf(Int32(_SC_PAGESIZE))), readOnly: true)
            #expect(journal.head?.lmdbIsWhole == true, "closed")
            journal.close()

            let refused = #expect(throws: OutboxError.self) { try LogInspector(path: target) }
            #expect(refused?.code == .needsRecovery)
            #expect(refused?.message.contains("was not closed") == true, "\(refused?.message ?? "")")
            let reopened = try EventLog(path: target)
            #expect(try reopened.lastSequence() == flushed)
            reopened.close()
            let inspector = try LogInspector(path: target)
            #expect(try inspector.lastSequence() == flushed)
            #expect(try inspector.verify().isOK)
            inspector.log.close()
        }
    }

    /// A transaction LMDB could not commit (the map full) runs again, and its records are written over
    /// the failed attempt's in the journal; the map grown, the journal's head is checkpointed again.
    /// The journal then holds exactly the log's records past its head.
    @Test func aTransactionRunAgainAfterTheMapGrewIsJournaledOnce() throws {
        try TemporaryFolder.with(created: true) { folder in
            var options = EventLog.Options()
            options.mapSize = 256 << 10
            let log = try EventLog(path: folder + "/log", options: options)
            let before = log.environment.mapSize
            for round in 0..<40 {
                try log.transaction(sync: .standard) { appender in
                    for _ in 0..<20 { try appender.append(.networkSwitched(NetworkSwitched(enabled: round % 2 == 0))) }
                }
            }
            #expect(log.environment.mapSize > before, "the map grew")
            let journal = try Journal(path: folder + "/log/journal", metaPagesSize: 2 * log.environment.pageSize, readOnly: true)
            let head = try #require(journal.head)
            let journaled = try journal.committed()
            let stored = try log.storedRecords().filter { $0.sequence > head.sequence }
            #expect(journaled.map(\.sequence) == stored.map(\.sequence))
            #expect(journaled.map(\.record) == stored.map(\.bytes))
            #expect(!journaled.isEmpty)
            journal.close()
            log.close()
        }
    }

    /// A log closed is checkpointed: its journal holds nothing past its head, and the next open has
    /// nothing to recover.
    @Test func aClosedLogLeavesNothingToRecover() async throws {
        try await TemporaryFolder.with(created: true) { folder in
            let client = try await openClient(folder + "/log")
            for index in Int64(1)...5 { try await client.enqueue(todo(index)) }
            client.close()
            let journal = try Journal(path: folder + "/log/journal", metaPagesSize: 2 * Int(sysconf(Int32(_SC_PAGESIZE))))
            #expect(try journal.committed().isEmpty)
            #expect(journal.head != nil)
            journal.close()
        }
    }

    /// Another process's checkpoint made without a commit after it (its close, or its recovery) is a
    /// newer head in the file: this process checkpoints again before its next commit, so that the
    /// commit follows the newest head (recovery reads only the newest head's commits).
    @Test func aHeadWrittenByAnotherProcessIsFollowedByACheckpoint() async throws {
        try await TemporaryFolder.with(created: true) { folder in
            let log = folder + "/log"
            let client = try await openClient(log)
            try await client.enqueue(todo(1))
            let journal = try #require(client.log.journal)
            let before = journal.checkpoints
            let other = try Journal(path: log + "/journal", metaPagesSize: 2 * Int(sysconf(Int32(_SC_PAGESIZE))))
            try other.checkpoint(sequence: try client.eventCount(), metaPages: try client.log.environment.metaPages())
            other.close()
            try await client.enqueue(todo(2))
            #expect(journal.checkpoints == before + 1)
            #expect(try Self.journaled(log).last == (try client.eventCount()))
            client.close()
        }
    }

    /// A log that has a journal, opened `.noSync`, commits through the journal too (without
    /// flushing, a pass's end included): a later recovery from the journal's head would otherwise
    /// write over its commits.
    @Test func aNoSyncOpenOfAJournaledLogAppendsToTheJournal() async throws {
        try await TemporaryFolder.with(created: true) { folder in
            let log = folder + "/log"
            try await openClient(log).close()
            var configuration = testConfiguration()
            configuration.durability = .noSync
            let client = try await openClient(
                log, configuration: configuration, transport: ObservedTransport(prunesByWatermark: false) { _ in })
            try await client.enqueue(todo(1))
            #expect(client.log.lastCommitMayBeUndoneByPowerLoss, "appended, not flushed")
            #expect(try Self.journaled(log).last == (try client.eventCount()))
            #expect(try await client.sync().syncedCount == 1)
            #expect(client.log.lastCommitMayBeUndoneByPowerLoss, "nor when a pass ends")
            client.close()
        }
    }

    /// The sequences of the records the log's journal holds past its head.
    private static func journaled(_ log: String) throws -> [UInt64] {
        let journal = try Journal(
            path: log + "/journal", metaPagesSize: 2 * Int(sysconf(Int32(_SC_PAGESIZE))), readOnly: true)
        defer { journal.close() }
        return try journal.committed().map(\.sequence)
    }

    private func original(_ log: String) throws -> [(sequence: UInt64, bytes: [UInt8])] {
        let inspector = try LogInspector(path: log)
        defer { inspector.log.close() }
        return try inspector.log.storedRecords()
    }

    private func cancelledIDs(_ client: OutboxClient) throws -> [WriteID] {
        var ids: [WriteID] = []
        try client.log.forEachEvent { event in
            if case .writeCancelled(let cancelled) = event.event { ids.append(cancelled.writeId) }
            return true
        }
        return ids
    }

    /// Forwards each request to a `SimulatedInstance` that accepts every write, calling `observe` first.
    private struct ObservedTransport: OutboxTransport {
        let prunesByWatermark: Bool
        let observe: @Sendable (OutgoingBatch) throws -> Void
        let instance = SimulatedInstance()

        func send(_ batch: OutgoingBatch, accessToken: String?) async -> RequestAnswer {
            #expect(throws: Never.self) { try observe(batch) }
            return await instance.send(batch, accessToken: accessToken)
        }

        func readRow(table: String, key: JSONValue, accessToken: String?) async throws -> JSONValue? {
            try await instance.readRow(table: table, key: key, accessToken: accessToken)
        }
    }

    /// Copies the data file and the journal of `log` into `target`, the journal without the bytes in
    /// `lost` (zeros: a power loss before they were flushed).
    private static func copy(_ log: String, to target: String, losingFromTheJournal lost: Range<Int>) throws {
        try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
        for file in ["data.mdb", "journal"] {
            try FileManager.default.copyItem(atPath: log + "/" + file, toPath: target + "/" + file)
        }
        try lose(lost, fromTheJournalOf: target)
    }

    /// Writes zeros over the bytes in `lost` of the journal of the log at `log`.
    private static func lose(_ lost: Range<Int>, fromTheJournalOf log: String) throws {
        let handle = try #require(FileHandle(forUpdatingAtPath: log + "/journal"))
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64(lost.lowerBound))
        try handle.write(contentsOf: Data(count: lost.count))
    }

    /// Opens the log at `path` read-only and expects it to verify.
    private static func expectVerifies(_ path: String) throws {
        let inspector = try LogInspector(path: path)
        defer { inspector.log.close() }
        #expect(try inspector.verify().isOK)
    }

    /// Flips a byte of the meta pages in the newest head of the journal of the log at `log` (heads
    /// alternate between the two slots, the first in slot 0); returns what that head said and where the
    /// journal's commits start.
    private static func damageNewestHead(of log: String) throws -> (lmdbIsWhole: Bool, framesStart: Int) {
        let journal = try Journal(
            path: log + "/journal", metaPagesSize: 2 * Int(sysconf(Int32(_SC_PAGESIZE))), readOnly: true)
        let head = try #require(journal.head)
        let slot = UInt64(Int(head.generation - 1) % 2 * journal.slotSize)
        let framesStart = journal.framesStart
        journal.close()
        let handle = try #require(FileHandle(forUpdatingAtPath: log + "/journal"))
        defer { try? handle.close() }
        try handle.seek(toOffset: slot + 64)
        let byte = try #require(try handle.read(upToCount: 1)?.first)
        try handle.seek(toOffset: slot + 64)
        try handle.write(contentsOf: Data([~byte]))
        return (head.lmdbIsWhole, framesStart)
    }

    private static func bytes(of file: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
    }

    private static func page(_ file: [UInt8], _ start: Int, _ size: Int) -> [UInt8] {
        start + size <= file.count ? Array(file[start..<(start + size)]) : [UInt8](repeating: 0, count: size)
    }
}
