import OutboxLMDB
import OutboxTesting
import Testing

@testable import Outbox

/// Random events of every kind against a real log: the projections folded as events were appended
/// must equal a fresh rebuild, byte for byte (R8.2, P4).
@Suite struct ProjectionTests {
    /// Draws one event, mostly about writes the log holds, sometimes about ones it does not.
    static func randomEvent(_ random: SeededRandomSource, ids: [WriteID], users: [String], nextId: inout UInt64) -> [Event] {
        func pick<T>(_ values: [T]) -> T { values[Int(random.next(below: UInt64(values.count)))] }
        let id = ids.isEmpty || random.next(below: 20) == 0 ? WriteID(random.next(below: nextId + 3)) : pick(ids)
        let key = IdempotencyKey(high: random.next(), low: random.next())
        let refusal = Refusal(
            status: pick([400, 409, 422, nil]), code: pick(["23505", nil]), message: pick(["boom", nil]),
            isFinal: random.next(below: 4) == 0)
        let state: WriteState = pick([
            .pending, .accepted, .merged(fields: ["a"]), .conflicted(siblingId: "s", fields: []), .refused(refusal),
            .blocked(pick(BlockedReason.allCases), refusal: pick([refusal, nil])), .dead(refusal),
        ])
        switch random.next(below: 19) {
        case 0, 1, 2, 3:
            let count = Int(random.next(below: 3)) + 1
            var events: [Event] = []
            let first = nextId
            for offset in 0..<count {
                let user = pick(users)
                let rowKey: JSONValue = ["id": .int(Int64(random.next(below: 6)))]
                events.append(
                    .writeQueued(
                        WriteQueued(
                            id: WriteID(first + UInt64(offset)), user: user, table: pick(["todos", "lists"]),
                            operation: pick([.insert, .update, .delete, .custom("x")]),
                            key: rowKey, body: ["n": .int(Int64(random.next(below: 100)))], baseVersion: nil,
                            dependsOn: ids.isEmpty ? [] : [pick(ids)], follows: [], idempotencyKey: key,
                            atomicGroup: count > 1 ? .init(first: WriteID(first), count: count) : nil)))
            }
            nextId += UInt64(count)
            return events
        case 4, 5, 6, 7:
            return [
                .verdictRecorded(
                    VerdictRecorded(
                        writeId: id, passId: 1, state: state, refusals: Int(random.next(below: 6)),
                        replayed: random.next(below: 2) == 0))
            ]
        case 8:
            return [
                .sessionSettled(
                    SessionSettled(
                        user: pick(users + [nil as String?].compactMap { $0 }), identityChanged: random.next(below: 3) == 0))
            ]
        case 9: return [.networkSwitched(NetworkSwitched(enabled: random.next(below: 2) == 0))]
        case 10:
            return [
                .passStarted(
                    PassStarted(passId: 1, user: pick(users), table: nil, automatic: true, maxRefusals: 5, batchSize: 50)),
                .attemptStarted(AttemptStarted(passId: 1, writes: [.init(id: id, idempotencyKey: key)])),
                .answerReceived(AnswerReceived(passId: 1, writes: [id], answer: .answered([WriteAnswer(.skipped)]))),
                .passEnded(PassEnded(passId: 1, stoppedBy: nil)),
            ]
        case 11: return [.schemaRefusalCounted(SchemaRefusalCounted(writeId: id, passId: 1, count: Int(random.next(below: 10))))]
        case 12:
            return [.writeFailed(WriteFailed(writeId: id, passId: 1, status: 503, text: "x", streak: Int(random.next(below: 3))))]
        case 13: return [.batchAborted(BatchAborted(passId: 1, writes: [id]))]
        case 14: return [.writeReleased(WriteReleased(writeId: id, idempotencyKey: key, reason: nil))]
        case 15: return [.writeWithdrawn(WriteWithdrawn(writeId: id, row: ["id": 1]))]
        case 16: return [.writeDiscarded(WriteDiscarded(writeId: id, withDependents: false))]
        case 17: return [pick([.answersTaken(AnswersCleared(writes: [id])), .answersForgotten(AnswersCleared(writes: [id]))])]
        default:
            return [
                .localDataCleared(LocalDataCleared(user: pick(users), writes: ids.filter { _ in random.next(below: 4) == 0 }))
            ]
        }
    }

    /// Every projection database's bytes.
    static func projectionBytes(_ log: EventLog) throws -> [String: [[UInt8]]] {
        try log.environment.read { txn in
            var all: [String: [[UInt8]]] = [:]
            for table in ProjectionTable.allCases {
                try txn.forEach(log.environment.database(table.rawValue), prefix: []) { key, value in
                    all[table.rawValue, default: []].append(key.copiedBytes + [0xFF] + value.copiedBytes)
                    return true
                }
            }
            return all
        }
    }

    @Test(arguments: [1, 2, 3] as [UInt64])
    func rebuildEqualsIncrementalProjections(seed: UInt64) async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path, configuration: testConfiguration(seed: seed))
            let random = SeededRandomSource(seed: seed)
            var nextId: UInt64 = 1
            var ids: [WriteID] = []
            let users = ["alice", "bob", ""]
            for step in 0..<1500 {
                let events = Self.randomEvent(random, ids: ids, users: users, nextId: &nextId)
                for case .writeQueued(let queued) in events { ids.append(queued.id) }
                // Sometimes through the real queue calls too.
                switch random.next(below: 10) {
                case 0:
                    _ = try await client.enqueue(todo(Int64(random.next(below: 5))))
                    ids.append(WriteID(try client.log.read { try $0.nextWriteID() } - 1))
                    nextId = ids.last!.rawValue + 1
                case 1: _ = try? await client.queue.takeAnswered()
                case 2:
                    if !ids.isEmpty {
                        _ = try? await client.queue.discard(ids[Int(random.next(below: UInt64(ids.count)))], withDependents: true)
                    }
                default: break
                }
                try await client.log.append { appender in for event in events { try appender.append(event) } }
                if step % 250 == 0 { #expect(try client.log.verify().isOK) }
            }
            let report = try client.log.verify()
            #expect(report.isOK, "\(report)")
            let incremental = try Self.projectionBytes(client.log)
            try client.log.rebuild()
            #expect(try Self.projectionBytes(client.log) == incremental)
        }
    }

    /// The history index's entries of write `id`: each key's sequence and its offsets' bytes.
    static func indexEntries(_ log: EventLog, _ id: WriteID) throws -> [(sequence: UInt64, offsets: [UInt8])] {
        try log.environment.read { txn in
            var entries: [(sequence: UInt64, offsets: [UInt8])] = []
            try txn.forEach(log.environment.database("history"), prefix: StoreKey.bytes(id: id.rawValue)) { key, value in
                entries.append((try StoreKey.readBigEndian(key, at: 8), value.copiedBytes))
                return true
            }
            return entries
        }
    }

    // R8.3: a drained write's attempt, answer and verdict are noted in its entry, which the verdict
    // rewrites at its size: the history index holds nothing for it. Taken, its whole history goes to
    // the index under one key, its `writeQueued`'s, with the others as offsets. The history lists every
    // event throughout, and a rebuild stores the same bytes (R8.2).
    @Test func aDrainedWriteCostsTheIndexNothingUntilItLeaves() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path, transport: SimulatedInstance())
            let ids = try await client.enqueue(contentsOf: [todo(1), todo(2), todo(3)])
            let pending = try #require(try client.log.read { try $0.entry(ids[1]) })
            try await client.sync()
            let entry = try #require(try client.log.read { try $0.entry(ids[1]) })
            #expect(entry.encode(id: ids[1]).count == pending.encode(id: ids[1]).count, "rewritten in place")
            #expect(try Self.indexEntries(client.log, ids[1]).isEmpty)
            let events = try await client.history(of: ids[1])
            #expect(events.map(\.event.type) == [.writeQueued, .attemptStarted, .answerReceived, .verdictsRecorded])
            #expect(entry.recent.sequences(after: entry.queuedSequence) == events.dropFirst().map(\.sequence))
            let incremental = try Self.projectionBytes(client.log)
            try client.log.rebuild()
            #expect(try Self.projectionBytes(client.log) == incremental)

            #expect(try await client.queue.takeAnswered().count == 3)
            let taken = try await client.history(of: ids[1]).map(\.sequence)
            let index = try Self.indexEntries(client.log, ids[1])
            #expect(index.map(\.sequence) == [taken[0]])
            #expect(index.first?.offsets == taken.dropFirst().map { UInt8($0 - taken[0]) })
            #expect(try client.log.verify().isOK)
        }
    }

    // R8.3: events that do not fit in an entry's width, and an attempt noted at its answer after an
    // event that came meanwhile, move the events noted so far to the index: nothing is lost or listed
    // twice, and a rebuild stores the same bytes (R8.2).
    @Test func eventsBeyondTheEntrysWidthGoToTheIndex() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let id = try await client.enqueue(todo(1))
            var expected = try client.log.history(of: id).map(\.sequence)
            for _ in 0..<12 {
                expected += try await client.log.append { appender in
                    [try appender.append(.batchAborted(BatchAborted(passId: 1, writes: [id])))]
                }
            }
            // An attempt, then an event naming the write before the attempt's answer notes the attempt.
            expected += try await client.log.append { appender in
                [
                    try appender.append(
                        .attemptStarted(
                            AttemptStarted(passId: 1, writes: [.init(id: id, idempotencyKey: IdempotencyKey(high: 1, low: 1))]))
                    ),
                    try appender.append(.batchAborted(BatchAborted(passId: 1, writes: [id]))),
                ]
            }
            let answered = try await client.log.append { appender in
                try appender.append(
                    .answerReceived(AnswerReceived(passId: 1, writes: [id], answer: .answered([WriteAnswer(.accepted)])))
                )
            }
            expected.append(answered)
            #expect(try client.log.history(of: id).map(\.sequence) == expected)
            #expect(try Self.indexEntries(client.log, id).count >= 2, "twelve events and more do not fit in six bytes")
            let entry = try #require(try client.log.read { try $0.entry(id) })
            #expect(entry.recent.sequences(after: entry.queuedSequence).last == answered)
            let incremental = try Self.projectionBytes(client.log)
            try client.log.rebuild()
            #expect(try Self.projectionBytes(client.log) == incremental)
            #expect(try client.log.verify().isOK)
        }
    }

    // R8.6: a list key too short to end with an id (a damaged file) is a typed `.damaged` error for the
    // pass and the queue's reads, never a crash or a read past the key.
    @Test func aListKeyTooShortForItsIdIsDamage() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path, transport: SimulatedInstance())
            _ = try await client.enqueue(todo(1))
            let environment = client.log.environment
            try environment.write { txn in
                _ = try txn.put(environment.database("behind"), key: StoreKey.bytes(userPrefix: "alice") + [7], value: [])
                _ = try txn.put(environment.database("answered"), key: StoreKey.bytes(userPrefix: "alice") + [7], value: [])
            }
            await #expect(throws: OutboxError.damaged) { try await client.sync() }
            await #expect(throws: OutboxError.damaged) { try await client.queue.takeAnswered() }
        }
    }

    // R8.2: verify finds a projection that disagrees with the log.
    @Test func verifyFindsATamperedProjection() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let id = try await client.enqueue(todo(1))
            _ = try client.log.environment.write { txn in
                try txn.put(
                    client.log.environment.database("behind"), key: Array("mallory".utf8) + [0, 0, 0, 0, 0, 0, 0, 0, 9],
                    value: [])
            }
            let report = try await client.verify()
            #expect(!report.isOK)
            #expect(report.description.contains("behind"))
            try await client.rebuild()
            #expect(try await client.verify().isOK)
            #expect(try await client.queue.all().map(\.id) == [id])
        }
    }

    // R8.2: a rebuild reads and decodes the log on a thread of its own while it folds; the fold gets
    // the same steps in the same order, and a fold that throws part way stops the reader, whose read
    // transaction then ends (a write after it goes through, and the log closes).
    @Test(.timeLimit(.minutes(1))) func aRebuildReadsAheadTheSameStepsAndStopsItsReader() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            for start in stride(from: 0, to: 3000, by: 500) {
                _ = try await client.enqueue(contentsOf: (start..<(start + 500)).map { todo(Int64($0)) })
            }
            let log = client.log
            let (plain, ahead) = try log.environment.write { txn in
                var plain: [UInt64] = []
                var ahead: [UInt64] = []
                let lastPlain = try log.foldWhole(txn.unsafeAccess, compacted: false) { plain.append($0.event.sequence) }
                let lastAhead = try log.foldWholeReadAhead(compacted: false) { ahead.append($0.event.sequence) }
                #expect(lastPlain == lastAhead)
                return (plain, ahead)
            }
            #expect(plain.count > 3000)
            #expect(ahead == plain)
            struct Stop: Error {}
            var folded = 0
            #expect(throws: Stop.self) {
                try log.environment.write { _ in
                    _ = try log.foldWholeReadAhead(compacted: false) { _ in
                        folded += 1
                        if folded == 1500 { throw Stop() }
                    }
                }
            }
            #expect(folded == 1500)
            _ = try await client.enqueue(todo(5000))
            try client.log.rebuild()
            #expect(try await client.verify().isOK)
            client.close()
        }
    }

    // R8.3 and R8.4: a write's history from the index; the state as of any sequence.
    @Test func historyAndTimeTravel() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let a = try await client.enqueue(todo(1))
            let b = try await client.enqueue(todo(2))
            let afterEnqueue = try client.eventCount()
            try await client.record(a, .refused(Refusal(status: 422, message: "nope")), refusals: 1)
            let afterRefusal = try client.eventCount()
            _ = try await client.queue.release(a)
            try await client.record(a, .accepted)
            _ = try await client.queue.takeAnswered()
            #expect(
                try await client.history(of: a).map(\.event.type) == [
                    .writeQueued, .verdictRecorded, .writeReleased, .verdictRecorded, .answersTaken,
                ])
            #expect(try await client.history(of: b).map(\.event.type) == [.writeQueued])
            await #expect(throws: OutboxError.notFound) { try await client.history(of: 42) }

            let then = try await client.state(asOf: afterEnqueue)
            #expect(then.writes.map(\.state) == [.pending, .pending])
            let refused = try await client.state(asOf: afterRefusal)
            #expect(refused.writes.first?.state.name == "refused")
            #expect(refused.writes.first?.refusals == 1)
            #expect(try await client.state(asOf: client.eventCount()).writes.map(\.id) == [b])
        }
    }

    // Opening a log does not scan it: the projections are read as stored.
    @Test func reopenKeepsProjectionsWithoutRebuilding() async throws {
        try await TemporaryFolder.with { path in
            do {
                let client = try await openClient(path)
                _ = try await client.enqueue(contentsOf: (1...50).map { todo(Int64($0)) })
            }
            let client = try OutboxClient.open(path: path, configuration: testConfiguration())
            let commits = client.log.environment.commitCount
            #expect(commits == 0, "open wrote nothing")
            #expect(try await client.queue.all().count == 50)
        }
    }

    // R8.2, decision 007: projections of an older layout are rebuilt on open. Layout 6 hashed string
    // keys in `rows`; layout 7 keeps them whole. Without the rebuild a new write to the row would look
    // for the new key, find no earlier write, and overtake it (R2.2).
    @Test func anOlderLayoutIsRebuiltOnOpen() async throws {
        try await TemporaryFolder.with { path in
            let row: JSONValue = ["id": "0190b6e2-0000-7000-8000-000000000000"]
            let first: WriteID
            do {
                let client = try await openClient(path)
                first = try await client.enqueue(.insert(into: "todos", key: row, body: ["title": "milk"]))
                let environment = client.log.environment
                try environment.write { txn in
                    let rows = environment.database("rows")
                    let meta = environment.database("meta")
                    let kept = RowKey.of(user: "alice", table: "todos", key: row)
                    let ids = try #require(try txn.get(rows, key: kept))
                    _ = try txn.delete(rows, key: kept)
                    _ = try txn.put(
                        rows,
                        key: StoreKey.bytes(id: StableHash.of("alice", "todos")) + [2]
                            + StoreKey.bytes(id: StableHash.of(row.canonicalBytes)),
                        value: ids)
                    _ = try txn.put(meta, key: MetaKey.layout, value: StoreKey.bytes(id: 6))
                }
            }
            let client = try await openClient(path)
            let layout = try client.log.environment.read { txn in
                try txn.get(client.log.environment.database("meta"), key: MetaKey.layout)
            }
            #expect(layout == StoreKey.bytes(id: projectionLayoutVersion))
            #expect(try await client.verify().isOK)
            let second = try await client.enqueue(.update("todos", key: row, set: ["done": true]))
            #expect(try await client.write(second)?.follows == [first])
        }
    }
}

/// A meta value of the wrong length is damage, named with the file, never read as 0 (a next write id
/// of 0 would give ids again, R2.1); at open, a damaged layout or applied mark rebuilds the projections.
@Suite struct DamagedMetaTests {
    @Test func aNextWriteIdOfTheWrongLengthIsDamageAndChangesNothing() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            try await client.enqueue(todo(1))
            let environment = client.log.environment
            try environment.write { txn in
                _ = try txn.put(environment.database("meta"), key: MetaKey.nextWriteId, value: [0, 0, 2])
            }
            let before = try client.eventCount()
            await #expect {
                try await client.enqueue(todo(2))
            } throws: { error in
                guard let error = error as? OutboxError, error.code == .damaged else { return false }
                return error.message.contains("nextWriteId is 3 bytes") && error.message.contains(path)
            }
            #expect(try client.eventCount() == before)
            client.close()
            // Opened again: the layout and applied marks hold, so nothing is rebuilt and the damage stays.
            let again = try await openClient(path)
            await #expect(throws: OutboxError.self) { try await again.enqueue(todo(2)) }
            again.close()
        }
    }

    @Test func aLayoutOfTheWrongLengthRebuildsOnOpen() async throws {
        try await TemporaryFolder.with { path in
            do {
                let client = try await openClient(path)
                try await client.enqueue(todo(1))
                let environment = client.log.environment
                try environment.write { txn in
                    let meta = environment.database("meta")
                    _ = try txn.put(meta, key: MetaKey.layout, value: [10])
                    _ = try txn.put(meta, key: MetaKey.nextWriteId, value: [0])
                }
                client.close()
            }
            let client = try await openClient(path)
            let layout = try client.log.environment.read { txn in
                try txn.get(client.log.environment.database("meta"), key: MetaKey.layout)
            }
            #expect(layout == StoreKey.bytes(id: projectionLayoutVersion))
            #expect(try await client.enqueue(todo(2)) == WriteID(2), "the rebuild gave the next id from the log")
            #expect(try await client.verify().isOK)
            client.close()
        }
    }
}

/// The write-back store of a write transaction (Specs/decisions/006): what the fold changed is seen by
/// the transaction's own reads and scans before anything is written, and everything is in LMDB after
/// the commit (R8.2).
@Suite struct TransactionStoreTests {
    @Test func readsAndScansInATransactionSeeItsOwnChanges() async throws {
        try await TemporaryFolder.with { path in
            let log = try EventLog(path: path)
            let key = IdempotencyKey(high: 1, low: 2)
            func queued(_ id: UInt64, row: Int64) -> Event {
                .writeQueued(
                    WriteQueued(
                        id: WriteID(id), user: "alice", table: "todos", operation: .insert, key: ["id": .int(row)],
                        body: [:], baseVersion: nil, dependsOn: [], follows: [], idempotencyKey: key, atomicGroup: nil))
            }
            try log.transaction(sync: .standard) { appender in
                try appender.append(queued(1, row: 1))
                try appender.append(queued(2, row: 2))
                // A point read and a scan, before the commit: both see the two new writes, and the next
                // write id they set (R2.1; held apart from meta's other bytes until written out).
                #expect(try appender.reader.nextWriteID() == 3)
                var scannedNext: [UInt8]?
                try appender.reader.scan(.meta, MetaKey.nextWriteId, nil) { _, value in
                    scannedNext = value.copiedBytes
                    return false
                }
                #expect(scannedNext == StoreKey.bytes(id: 3))
                var queued: [UInt64] = []
                try appender.reader.scan(.writes, [], nil) { key, _ in
                    queued.append(try StoreKey.readBigEndian(key))
                    return true
                }
                #expect(queued == [1, 2])
                // A change after the scan is seen too, and the row's slot reads through memory.
                try appender.append(.verdictRecorded(VerdictRecorded(writeId: 1, passId: nil, state: .accepted, refusals: 0)))
                #expect(try appender.reader.entry(1)?.state == .accepted)
                #expect(try appender.rowSlot(user: "alice", table: "todos", key: CanonicalJSON(["id": 1])).unsettled == [])
                #expect(try appender.rowSlot(user: "alice", table: "todos", key: CanonicalJSON(["id": 2])).unsettled == [2])
            }
            // After the commit, LMDB holds it all: the counters, the lists, and a fold of the log agrees.
            // The mark moved past write 1 as it was answered (R4.2).
            #expect(
                try log.read { try $0.counters(user: "alice") }
                    == Counters(
                        pending: 1, rejected: 0, blocked: 0, answered: 1, behind: 0, sendFrom: 2, answeredBehind: 0,
                        answeredFrom: 1, answeredTo: 2))
            #expect(try log.verify().isOK)
            #expect(try log.read { try $0.nextWriteID() } == 3)
            log.close()
        }
    }

    /// Past the store's limit of held entries (a transaction of 5,000 writes), with changes made out of
    /// key order and a write removed and queued over in the same transaction, LMDB ends up holding what
    /// a fold of the log makes (R8.2), and a later transaction reads it back.
    @Test func aLargeTransactionWithChangesOutOfOrderFoldsAsTheLogSays() async throws {
        try await TemporaryFolder.with { path in
            let log = try EventLog(path: path)
            let key = IdempotencyKey(high: 1, low: 2)
            try log.transaction(sync: .standard) { appender in
                for id in UInt64(1)...5_000 {
                    try appender.append(
                        .writeQueued(
                            WriteQueued(
                                id: WriteID(id), user: id % 2 == 0 ? "alice" : "bob", table: "todos", operation: .insert,
                                key: ["id": .int(Int64(id % 700))], body: [:], idempotencyKey: key)))
                }
                // Verdicts from the top down, so every table's changes arrive against key order.
                for id in stride(from: UInt64(4_999), through: 1, by: -7) {
                    try appender.append(
                        .verdictRecorded(VerdictRecorded(writeId: WriteID(id), passId: nil, state: .accepted, refusals: 0)))
                }
                try appender.append(.writeDiscarded(WriteDiscarded(writeId: 2, withDependents: false)))
                #expect(try appender.reader.entry(2) == nil)
                #expect(try appender.reader.entry(4_999)?.state == .accepted)
            }
            let accepted = Array(stride(from: 4_999, through: 1, by: -7)).count
            let alice = try log.read { try $0.counters(user: "alice") }
            let bob = try log.read { try $0.counters(user: "bob") }
            #expect(alice.pending + alice.answered + bob.pending + bob.answered == 4_999)
            #expect(alice.answered + bob.answered == accepted)
            #expect(try log.read { try $0.entry(4_998)?.state } == .pending)
            #expect(try log.verify().isOK)
            log.close()
        }
    }
}
