import OutboxLMDB
import OutboxTesting
import Testing

@testable import Outbox

@Suite struct EnqueueTests {
    // R2.1
    @Test func idsStrictlyIncreaseAcrossTablesAndUsers() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let a = try await client.enqueue(todo(1))
            try await client.settleSession(user: "bob", accessToken: nil)
            let b = try await client.enqueue(.insert(into: "lists", key: ["id": 1], body: [:]))
            let c = try await client.enqueue(contentsOf: [todo(2), todo(3)])
            #expect(a < b && b < c[0] && c[0] < c[1])
            let keys = try await client.queue.all().map(\.idempotencyKey)
            #expect(Set(keys).count == keys.count)
        }
    }

    // R2.2
    @Test func aWriteFollowsUnsettledWritesToTheSameRow() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let insert = try await client.enqueue(todo(1))
            let other = try await client.enqueue(todo(2))
            let update = try await client.enqueue(.update("todos", key: ["id": 1], set: ["done": true]))
            let delete = try await client.enqueue(.delete(from: "todos", key: ["id": 1]))
            #expect(try await client.write(update)?.follows == [insert])
            #expect(try await client.write(delete)?.follows == [insert, update])
            #expect(try await client.write(update)?.waiting == true)
            #expect(try await client.write(other)?.waiting == false)
            // Another user's write to the same row is not followed.
            try await client.settleSession(user: "bob", accessToken: nil)
            let bobs = try await client.enqueue(todo(1))
            #expect(try await client.write(bobs)?.follows == [])
            // Once the insert is answered, a new write to the row follows only what is still unsettled.
            try await client.settleSession(user: "alice", accessToken: nil)
            try await client.record(insert, .accepted)
            #expect(try await client.write(update)?.waiting == false)
            let again = try await client.enqueue(.update("todos", key: ["id": 1], set: ["done": false]))
            #expect(try await client.write(again)?.follows == [update, delete])
            // A refused write is unsettled and still followed; answered ones, taken or not, are not.
            try await client.record(update, .accepted)
            try await client.record(delete, .refused(Refusal(reason: "no", isFinal: false)))
            _ = try await client.queue.takeAnswered()
            let last = try await client.enqueue(.update("todos", key: ["id": 1], set: ["done": true]))
            #expect(try await client.write(last)?.follows == [delete, again])
            #expect(try await client.verify().isOK)
        }
    }

    // R2.2, R4.2: explicit dependencies wait until settled.
    @Test func explicitDependenciesWait() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let list = try await client.enqueue(.insert(into: "lists", key: ["id": 7], body: [:]))
            let item = try await client.enqueue(.insert(into: "todos", key: ["id": 1], body: ["list": 7], dependsOn: [list]))
            #expect(try await client.write(item)?.waiting == true)
            try await client.record(list, .refused(Refusal(status: 400)), refusals: 1)
            #expect(try await client.write(item)?.waiting == true, "a write waits behind a refused one")
            try await client.record(list, .merged(fields: ["name"]))
            #expect(try await client.write(item)?.waiting == false)
        }
    }

    // R2.4: every kind of bad input is a typed error and writes nothing.
    @Test func badInputIsRefusedAndWritesNothing() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let first = try await client.enqueue(todo(1))
            try await client.settleSession(user: "bob", accessToken: nil)
            let bobs = try await client.enqueue(todo(9))
            try await client.settleSession(user: "alice", accessToken: nil)
            let before = try client.eventCount()
            let bad: [Write] = [
                Write(table: "todos", operation: .insert, key: ["id": 1], body: "not an object"),
                Write(table: "todos", operation: .insert, key: ["id": 1], body: [1, 2]),
                Write(table: "", operation: .insert, key: ["id": 1], body: [:]),
                Write(table: "to\u{0}dos", operation: .insert, key: ["id": 1], body: [:]),
                Write(table: String(repeating: "t", count: 300), operation: .insert, key: ["id": 1], body: [:]),
                Write(table: "todos", operation: .insert, key: [:], body: [:]),
                Write(table: "todos", operation: .insert, key: 5, body: [:]),
                Write(table: "todos", operation: .delete, key: ["id": 1], body: ["x": 1]),
                Write(table: "todos", operation: .custom(""), key: ["id": 1], body: [:]),
                Write(table: "todos", operation: .insert, key: ["id": 1], body: ["x": .double(.nan)]),
                Write(table: "todos", operation: .insert, key: ["id": 1], body: ["x": Self.nested(JSONText.maxDepth - 1)]),
                Write(table: "todos", operation: .insert, key: ["id": Self.nested(JSONText.maxDepth)], body: [:]),
                todo(2).dependingOn([0]),
                todo(2).dependingOn([999]),
                todo(2).dependingOn([bobs]),
            ]
            for write in bad {
                await #expect(throws: OutboxError.invalidWrite) { try await client.enqueue(write) }
                // In a batch, one bad write refuses them all.
                await #expect(throws: OutboxError.invalidWrite) { try await client.enqueue(contentsOf: [todo(3), write]) }
            }
            #expect(try client.eventCount() == before)
            #expect(try await client.queue.all().map(\.id) == [first])
        }
    }

    // R2.4: whatever enqueue accepts reads back; the deepest nesting accepted is the deepest the log reads.
    @Test func theDeepestAcceptedBodyReadsBack() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let deepest: JSONValue = ["x": Self.nested(JSONText.maxDepth - 2)]
            let id = try await client.enqueue(Write(table: "todos", operation: .insert, key: ["id": 1], body: deepest))
            #expect(try await client.queue.all().map(\.body) == [deepest])
            #expect(try await client.history(of: id).count == 1)
        }
    }

    // A write enqueue refuses still reads back as it was made: its value is the app's until then.
    @Test func aWriteTheLogCannotKeepReadsBackAsMade() {
        let deep = Self.nested(JSONText.maxDepth + 5)
        let write = Write(table: "todos", operation: .insert, key: ["id": 1], body: ["x": .double(.infinity), "y": deep])
        #expect(write.body == ["x": .double(.infinity), "y": deep])
        #expect(throws: OutboxError.invalidWrite) { try write.validate() }
    }

    // R2.4: a column the key and the body both give must have one value (1 and 1.0 are one), found
    // among any number of columns on either side.
    @Test func aColumnTheKeyAndBodyGiveTwoValuesIsNamed() throws {
        let cases: [(key: JSONValue, body: JSONValue, column: String?)] = [
            (["a": 1, "c": 2], ["b": 0, "c": 2, "d": 3], nil),
            (["a": 1, "c": 2], ["a": 1, "b": 0, "c": 3], "c"),
            (["b": 1, "z": 1], ["a": 0, "c": 0, "z": 1.0], nil),
            (["m": 1], ["a": 1, "z": 2], nil),
            (["a": 1, "b": 2], ["b": "2"], "b"),
            (["a": 1, "b": 2], ["a": 2, "b": 3], "a"),
            (["é": 1, "f": 1], ["e": 2, "é": 2], "é"),
            (["id": ["x": 1]], ["id": ["x": 2], "t": 1], "id"),
            (["id": ["x": 1]], ["id": ["x": 1], "t": 1], nil),
        ]
        for (key, body, column) in cases {
            let write = Write(table: "todos", operation: .upsert, key: key, body: body)
            do {
                try write.validate()
                #expect(column == nil, "\(key) \(body) passed")
            } catch let error as OutboxError {
                #expect(error.code == .invalidWrite)
                #expect(column.map { error.message.contains("column \($0) different values") } == true, "\(error.message)")
            }
        }
    }

    /// An array nested `depth` levels deep.
    private static func nested(_ depth: Int) -> JSONValue {
        (0..<depth).reduce(JSONValue.int(1)) { inner, _ in .array([inner]) }
    }

    @Test func aWriteNeedsAUserUnlessConfiguredOtherwise() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path, user: nil)
            await #expect(throws: OutboxError.noUser) { try await client.enqueue(todo(1)) }
            #expect(try client.eventCount() == 1)
        }
        try await TemporaryFolder.with { path in
            var configuration = testConfiguration()
            configuration.requiresUser = false
            let client = try await openClient(path, user: nil, configuration: configuration)
            let id = try await client.enqueue(todo(1))
            #expect(try await client.write(id)?.user == OutboxConfiguration.anonymousUser)
        }
    }

    // R4.5: an atomic group is recorded as such.
    @Test func atomicGroupIsRecorded() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let ids = try await client.enqueue(contentsOf: [todo(1), todo(2), todo(3)], atomic: true)
            let loose = try await client.enqueue(contentsOf: [todo(4), todo(5)])
            for id in ids { #expect(try await client.write(id)?.atomicGroup == .init(first: ids[0], count: 3)) }
            for id in loose { #expect(try await client.write(id)?.atomicGroup == nil) }
        }
    }

    // R2.3: 16 concurrent enqueuers share commits. The writer is held until all 16 wait, so the
    // count is exact, not a timing.
    @Test func concurrentEnqueuesShareOneCommit() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let commitsBefore = client.log.environment.commitCount
            client.log.suspendWriter()
            let ids = try await withThrowingTaskGroup(of: WriteID.self) { group in
                for index in 0..<16 { group.addTask { try await client.enqueue(todo(Int64(index))) } }
                while client.log.committer.waitingCount < 16 { await Task.yield() }
                client.log.resumeWriter()
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(Set(ids).count == 16)
            #expect(client.log.environment.commitCount - commitsBefore == 1)
            #expect(try await client.queue.all().count == 16)
        }
    }

    // R2.3: concurrent enqueuers resumed by one commit come back with their next writes one by one;
    // the next commit waits for them (within `callersWaitMicroseconds` of the last), so each flush
    // carries all of them, not the few that came first. The wait is lengthened and the callers come
    // back one at a time, each seen waiting before the next: without the wait each would commit alone.
    @Test func enqueuersResumedByOneCommitShareTheNext() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let committer = client.log.committer
            committer.callersWaitMicroseconds = 60_000_000
            client.log.suspendWriter()
            let first = (0..<4).map { index in Task { try await client.enqueue(todo(Int64(index))) } }
            while committer.waitingCount < 4 { await Task.yield() }
            let before = client.log.environment.commitCount
            client.log.resumeWriter()
            for task in first { _ = try await task.value }
            #expect(client.log.environment.commitCount - before == 1)

            var again: [Task<WriteID, any Error>] = []
            for index in 4..<8 {
                // The commit of these four is not to make the next wait as long.
                if index == 7 { committer.callersWaitMicroseconds = 0 }
                again.append(Task { try await client.enqueue(todo(Int64(index))) })
                // Seen waiting: the writer holds the ones that came for the others it expects.
                while committer.waitingCount < again.count && client.log.environment.commitCount == before + 1 {
                    await Task.yield()
                }
            }
            for task in again { _ = try await task.value }
            #expect(client.log.environment.commitCount - before == 2, "the four came back to one commit")
            #expect(try await client.queue.all().count == 8)
        }
    }

    // R2.3 under the wait for resumed callers, as the writer meets it: eight tasks enqueueing in a loop,
    // callers coming back or not (the loops end one by one); every write is committed once, in its
    // task's order, and the projections equal a rebuild.
    @Test func enqueuersInLoopsLoseNothingWhileTheWriterWaitsForThem() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let ids = try await withThrowingTaskGroup(of: [WriteID].self) { group in
                for task in 0..<8 {
                    group.addTask {
                        var ids: [WriteID] = []
                        for index in 0..<(20 + 10 * task) {
                            ids.append(try await client.enqueue(todo(Int64(task * 1000 + index))))
                        }
                        return ids
                    }
                }
                return try await group.reduce(into: [[WriteID]]()) { $0.append($1) }
            }
            for taskIDs in ids { #expect(taskIDs == taskIDs.sorted(), "a task's writes take ids in its order") }
            #expect(Set(ids.joined()).count == 20 * 8 + 10 * 28)
            #expect(try await client.queue.all().count == 20 * 8 + 10 * 28)
            #expect(client.log.environment.commitCount < 20 * 8 + 10 * 28, "they shared commits")
            #expect(try await client.verify().isOK)
        }
    }

    // One job of a group that fails validation fails alone.
    @Test func aRefusedEnqueueDoesNotFailItsGroup() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            client.log.suspendWriter()
            let good = Task { try await client.enqueue(todo(1)) }
            let bad = Task { try await client.enqueue(todo(2).dependingOn([77])) }
            while client.log.committer.waitingCount < 2 { await Task.yield() }
            client.log.resumeWriter()
            _ = try await good.value
            await #expect(throws: OutboxError.invalidWrite) { try await bad.value }
            #expect(try await client.queue.all().count == 1)
        }
    }

    // A job may be told which transaction committed it and whether it ran alone there: jobs gathered
    // into one transaction are told the same one, neither alone (R2.3).
    @Test func aJobIsToldItsCommitAndWhetherItRanAlone() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let log = client.log
            let enqueue = { @Sendable (n: Int64) in
                try await log.appendReportingCommit(sync: .withoutMetaSync) { appender in
                    try QueueOperations.enqueue(
                        [todo(n)], user: "alice", atomic: false, random: SeededRandomSource(seed: UInt64(n)),
                        appender: &appender)
                }.1
            }
            let alone = try await enqueue(1)
            #expect(alone.isAlone)
            #expect(alone.transaction == (try log.readAhead { _ in }.snapshot))
            log.suspendWriter()
            let first = Task { try await enqueue(2) }
            while log.committer.waitingCount < 1 { await Task.yield() }
            let second = Task { try await enqueue(3) }
            while log.committer.waitingCount < 2 { await Task.yield() }
            log.resumeWriter()
            let (one, other) = (try await first.value, try await second.value)
            #expect(one == other)
            #expect(!one.isAlone)
            #expect(one.transaction == alone.transaction + 1)
            #expect(try log.read { try $0.counters(user: "alice").pending } == 3)
        }
    }

    // R8.2: a transaction's counters, rows and meta are held in memory and written once; one that
    // holds more than the store keeps (4096 entries) writes them out part way, and the projections
    // still equal the fold of the log.
    @Test func aLargeTransactionKeepsProjectionsEqualToTheFold() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let ids = try await client.enqueue(contentsOf: (0..<5000).map { todo(Int64($0)) })
            #expect(Set(ids).count == 5000)
            let next = try await client.enqueue(todo(0))
            #expect(next.rawValue == ids.last!.rawValue + 1)
            #expect(try await client.write(next)?.follows == [ids[0]], "follows the unsettled write to its row (R2.2)")
            #expect(try await client.verify().isOK)
            #expect(try client.log.read { try $0.counters(user: "alice").pending } == 5001)
        }
    }

    // STYLE.md: the map grows inside the engine (a tiny initial map).
    @Test func growsATinyMap() async throws {
        try await TemporaryFolder.with { path in
            var configuration = testConfiguration()
            configuration.initialMapSize = 32 << 10
            let client = try await openClient(path, configuration: configuration)
            let before = client.log.environment.mapSize
            let body: JSONValue = ["text": .string(String(repeating: "x", count: 500))]
            for batch in 0..<10 {
                _ = try await client.enqueue(
                    contentsOf: (0..<100).map {
                        Write.insert(into: "notes", key: ["id": .int(Int64(batch * 100 + $0))], body: body)
                    })
            }
            #expect(client.log.environment.mapSize > before)
            #expect(try await client.queue.all().count == 1000)
            #expect(try await client.verify().isOK)
        }
    }

    @Test func aSecondOpenOfOneLogIsATypedError() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            #expect(throws: OutboxError(.alreadyOpen, "")) { try OutboxClient.open(path: path) }
            _ = client
        }
    }

    @Test func aClosedClientRefusesCalls() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            client.close()
            await #expect(throws: OutboxError.closed) { try await client.enqueue(todo(1)) }
            await #expect(throws: OutboxError.closed) { try await client.queue.all() }
        }
    }
}

extension Write {
    func dependingOn(_ ids: [WriteID]) -> Write {
        var copy = self
        copy.dependsOn = ids
        return copy
    }
}
