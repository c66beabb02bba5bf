import OutboxLMDB
import OutboxTesting
import Testing

@testable import Outbox

/// The attempt awaiting its answer is kept aside in `meta`, and its writes' histories note it with its
/// answer (in the entry, with the answer: no index key a drained write): every reader still sees it,
/// whether it is answered, answered in part, never answered, or its writes leave the queue meanwhile
/// (R8.3, R8.2, R9.3).
@Suite struct UnansweredAttemptTests {
    private static func attempt(_ ids: [WriteID]) -> Event {
        .attemptStarted(
            AttemptStarted(
                passId: 1, writes: ids.map { .init(id: $0, idempotencyKey: IdempotencyKey(high: 1, low: $0.rawValue)) }))
    }

    private static func answer(_ ids: [WriteID]) -> [Event] {
        [
            .answerReceived(AnswerReceived(passId: 1, writes: ids, answer: .answered(ids.map { _ in WriteAnswer(.accepted) }))),
            .verdictsRecorded(
                VerdictsRecorded(
                    passId: 1, verdicts: ids.map { VerdictRecorded(writeId: $0, passId: 1, state: .accepted, refusals: 0) })),
        ]
    }

    /// Appends `events` in one commit; their sequences.
    @discardableResult
    private static func append(_ log: EventLog, _ events: [Event]) async throws -> [UInt64] {
        try await log.append { appender in try events.map { try appender.append($0) } }
    }

    /// The index's entries of write `id`: each key's sequence and its offsets' bytes.
    private static func indexEntries(_ log: EventLog, _ id: WriteID) throws -> [UInt64: [UInt8]] {
        try log.environment.read { txn in
            var entries: [UInt64: [UInt8]] = [:]
            try txn.forEach(log.environment.database("history"), prefix: StoreKey.bytes(id: id.rawValue)) { key, value in
                entries[try StoreKey.readBigEndian(key, at: 8)] = value.copiedBytes
                return true
            }
            return entries
        }
    }

    /// The sequences of every event in the log that names `id`: what its history must list.
    private static func eventsNaming(_ id: WriteID, in log: EventLog) throws -> [UInt64] {
        var sequences: [UInt64] = []
        try log.forEachEvent { recorded in
            if recorded.event.writeIDs.contains(id) { sequences.append(recorded.sequence) }
            return true
        }
        return sequences
    }

    private static func expectSameAfterRebuild(_ log: EventLog) throws {
        let report = try log.verify()
        #expect(report.isOK, "\(report)")
        let incremental = try ProjectionTests.projectionBytes(log)
        try log.rebuild()
        #expect(try ProjectionTests.projectionBytes(log) == incremental)
    }

    /// The recent events write `id`'s entry notes (none when the queue does not hold it).
    private static func recent(_ log: EventLog, _ id: WriteID) throws -> [UInt64] {
        try log.read { reader in try reader.entry(id).map { $0.recent.sequences(after: $0.queuedSequence) } } ?? []
    }

    // R8.3: an attempt in flight is noted nowhere but aside and is in its writes' history; its answer
    // notes it and itself in the entry of each write it names, so the index holds nothing for them; a
    // write the queue no longer holds (withdrawn meanwhile) gets index keys of its own, and an event
    // between the two stays in order.
    @Test func theAttemptIsNotedWithItsAnswer() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let ids = try await client.enqueue(contentsOf: [todo(1), todo(2), todo(3)])
            let sent = try await Self.append(client.log, [Self.attempt(ids)])[0]
            #expect(try Self.indexEntries(client.log, ids[1]).isEmpty)
            #expect(try Self.recent(client.log, ids[1]).isEmpty)
            #expect(try client.log.read { try $0.unansweredAttempt() } == UnansweredAttempt(sequence: sent, writes: ids))
            #expect(try client.log.read { try $0.hasEventsSinceQueued(ids[1]) }, "R9.3: a delete sent then is a resend")
            #expect(try client.log.history(of: ids[1]).map(\.sequence) == Self.eventsNaming(ids[1], in: client.log))
            try Self.expectSameAfterRebuild(client.log)

            // Withdrawn while the request is out; the answer names the other two.
            let withdrawn = try await Self.append(client.log, [.writeWithdrawn(WriteWithdrawn(writeId: ids[1], row: ["id": 2]))])[
                0]
            let answered = try await Self.append(client.log, Self.answer([ids[0], ids[2]]))[0]
            #expect(try client.log.read { try $0.unansweredAttempt() } == nil)
            #expect(try Self.indexEntries(client.log, ids[0]).isEmpty)
            #expect(try Self.recent(client.log, ids[0]) == [sent, answered, answered + 1])
            #expect(try client.log.read { try $0.hasEventsSinceQueued(ids[0]) })
            let queued = try Self.eventsNaming(ids[1], in: client.log)[0]
            #expect(try Self.indexEntries(client.log, ids[1]) == [queued: [UInt8(withdrawn - queued)], sent: []])
            for id in ids {
                let history = try client.log.history(of: id).map(\.sequence)
                #expect(try history == Self.eventsNaming(id, in: client.log), "write \(id)")
            }
            #expect(
                try client.log.history(of: ids[0]).map(\.event.type) == [
                    .writeQueued, .attemptStarted, .answerReceived, .verdictsRecorded,
                ])
            try Self.expectSameAfterRebuild(client.log)

            // Taken: the write's history goes to the index under its queued event's key, in one value.
            let taken = try await client.queue.takeAnswered().map(\.id)
            #expect(taken == [ids[0], ids[2]])
            let first = try Self.eventsNaming(ids[0], in: client.log)
            #expect(try Self.indexEntries(client.log, ids[0]) == [first[0]: first.dropFirst().map { UInt8($0 - first[0]) }])
            #expect(try client.log.history(of: ids[0]).map(\.sequence) == first)
            try Self.expectSameAfterRebuild(client.log)
        }
    }

    // R8.3: an attempt never answered (the process died with its request out) is noted in its writes'
    // entries when the next attempt starts, which is then the one kept aside.
    @Test func anAttemptNeverAnsweredIsNotedWhenTheNextStarts() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let ids = try await client.enqueue(contentsOf: [todo(1), todo(2)])
            let first = try await Self.append(client.log, [Self.attempt(ids)])[0]
            let second = try await Self.append(client.log, [Self.attempt([ids[1]])])[0]
            #expect(try Self.recent(client.log, ids[0]) == [first])
            #expect(try Self.recent(client.log, ids[1]) == [first])
            #expect(try Self.indexEntries(client.log, ids[1]).isEmpty)
            #expect(try client.log.read { try $0.unansweredAttempt() } == UnansweredAttempt(sequence: second, writes: [ids[1]]))
            let queued = try Self.eventsNaming(ids[1], in: client.log)[0]
            #expect(try client.log.history(of: ids[1]).map(\.sequence) == [queued, first, second])
            try Self.expectSameAfterRebuild(client.log)

            // Reopened, the pass sends the write again and drains it.
            client.close()
            let reopened = try await openClient(path, transport: SimulatedInstance())
            #expect(try await reopened.sync().syncedCount == 2)
            for id in ids {
                #expect(try reopened.log.history(of: id).map(\.sequence) == Self.eventsNaming(id, in: reopened.log))
            }
            try Self.expectSameAfterRebuild(reopened.log)
            reopened.close()
        }
    }

    // R8.5, R8.3: a compaction keeps whole in the log the writes of the attempt awaiting its answer,
    // even those the queue no longer holds, so their history is complete before and after the answer.
    @Test func aCompactionKeepsTheWritesOfTheAttemptAwaitingItsAnswer() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let ids = try await client.enqueue(contentsOf: [todo(1), todo(2)])
            try await Self.append(client.log, [Self.attempt(ids)])
            try await Self.append(client.log, [.writeWithdrawn(WriteWithdrawn(writeId: ids[0], row: ["id": 1]))])
            let before = try client.log.history(of: ids[0])
            let report = try await client.compact()
            #expect(report.archivedWrites == 0, "\(report)")
            #expect(try client.log.history(of: ids[0]) == before)
            try await Self.append(client.log, Self.answer([ids[1]]))
            for id in ids {
                #expect(try client.log.history(of: id).map(\.sequence) == Self.eventsNaming(id, in: client.log))
            }
            try Self.expectSameAfterRebuild(client.log)
            client.close()
        }
    }

    // R8.5: a snapshot of layout 13 (a log compacted by the build before this layout) is read as it
    // is: its tables are this layout's and it has no attempt aside. Read as the layouts before it are,
    // its late answer would be taken for every answered write and its marks put around that one.
    @Test func aSnapshotOfLayout13IsReadAsItIs() throws {
        let counters = Counters(
            pending: 1, rejected: 0, blocked: 0, answered: 3, behind: 0, sendFrom: 9, answeredBehind: 1, answeredFrom: 5,
            answeredTo: 8)
        let entries = [
            ProjectionState.Entry(table: .meta, key: MetaKey.counters("alice"), value: counters.encode()),
            ProjectionState.Entry(table: .answered, key: StoreKey.bytes(user: "alice", 3), value: []),
            ProjectionState.Entry(table: .history, key: StoreKey.bytes(pair: 3, 7), value: [1]),
        ]
        let read = try ProjectionState(layout: 13, entries: entries).current()
        #expect(read.map(\.table) == [.meta, .answered, .history])
        #expect(read.map(\.key) == entries.map(\.key))
        #expect(read.map(\.value) == entries.map(\.value))
        #expect(try Counters.decode(read[0].value) == counters)
    }

    // R8.3, R8.2: random attempts (answered, in part, out of order, never), answers and the events that
    // come between; every write's history is every event naming it, and a rebuild stores the same bytes.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func everyEventNamingAWriteIsInItsHistory(seed: UInt64) async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path, configuration: testConfiguration(seed: seed))
            let random = SeededRandomSource(seed: seed)
            var ids = try await client.enqueue(contentsOf: (1...6).map { todo($0) })
            func some() -> [WriteID] {
                let picked = ids.filter { _ in random.next(below: 3) == 0 }
                return picked.isEmpty ? [ids[Int(random.next(below: UInt64(ids.count)))]] : picked
            }
            var lastAttempt: [WriteID] = []
            for step in 0..<300 {
                var events: [Event] = []
                switch random.next(below: 8) {
                case 0, 1:
                    lastAttempt = random.next(below: 5) == 0 ? some().reversed() + [ids[0]] : some()
                    events = [Self.attempt(lastAttempt)]
                case 2, 3:
                    let answered = random.next(below: 2) == 0 && !lastAttempt.isEmpty ? lastAttempt : some()
                    events = Self.answer(answered)
                    if random.next(below: 3) == 0 { events.removeLast() }
                case 4: events = [.writeWithdrawn(WriteWithdrawn(writeId: some()[0], row: ["id": 1]))]
                case 5: events = [.batchAborted(BatchAborted(passId: 1, writes: some()))]
                case 6: ids += try await client.enqueue(contentsOf: [todo(Int64(step))])
                default: _ = try await client.queue.takeAnswered()
                }
                if !events.isEmpty { try await Self.append(client.log, events) }
                if step % 50 == 49 {
                    for id in ids {
                        #expect(try client.log.history(of: id).map(\.sequence) == Self.eventsNaming(id, in: client.log))
                    }
                    try Self.expectSameAfterRebuild(client.log)
                }
            }
            client.close()
        }
    }
}
