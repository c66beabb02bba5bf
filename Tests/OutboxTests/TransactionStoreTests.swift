import OutboxLMDB
import OutboxTesting
import Testing

@testable import Outbox

/// The verdict table's entries one commit hands the next (R8.2: the projections are what the log's
/// commits made them): kept only while no other writer has committed since.
extension TransactionStoreTests {
    @Test func entriesKeptFromACommitNeverHideAnotherWritersChange() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let id = try await client.enqueue(todo(1))
            let log = client.log
            let read = { try await log.append { appender in try appender.reader.entry(id) } }
            let queued = try #require(try await read())
            #expect(queued.state == .pending)
            // Another writer (a second process, say) changes the entry in a commit of its own.
            var changed = queued
            changed.update { $0.refusals = 7 }
            try log.environment.write { txn in _ = try txn.put(log.tables.entries, id, changed) }
            #expect(try await read()?.refusals == 7, "the next transaction reads what that commit made")
            // A commit of the log's own, then one right after it: the kept entry is the committed one.
            _ = try await log.append { appender in
                _ = try appender.reader.entry(id)
                try appender.append(.verdictRecorded(VerdictRecorded(writeId: id, passId: 1, state: .pending, refusals: 8)))
            }
            #expect(try await read()?.refusals == 8)
            client.close()
        }
    }

    @Test func entriesReadAheadAreKeptOnlyWhenNothingWasCommittedSince() async throws {
        try await Self.withTwoWrites { log, ids, read in
            let second = try #require(try await read(ids[1]))
            try log.readAhead { reader in
                #expect(try reader.entry(ids[1])?.refusals == 0)
                // Meanwhile another writer changes it, and the log commits something else after.
                var changed = second
                changed.update { $0.refusals = 7 }
                try log.environment.write { txn in _ = try txn.put(log.tables.entries, ids[1], changed) }
                try log.transaction(sync: .standard) { appender in
                    _ = try appender.reader.entry(ids[0])
                    try appender.setRefusals(1, of: ids[0])
                }
            }
            #expect(try await read(ids[1])?.refusals == 7, "what this snapshot read is not handed on")
            #expect(try await read(ids[0])?.refusals == 1)
        }
    }

    // An entry read ahead on the snapshot just before the log's own last commit is kept when that
    // commit held every entry it changed, and never over one it changed (R8.2).
    @Test func entriesReadAheadJustBeforeTheLogsOwnCommitNeverHideWhatItChanged() async throws {
        try await Self.withTwoWrites { log, ids, read in
            try log.readAhead { reader in
                #expect(try reader.entry(ids[0])?.refusals == 0)
                #expect(try reader.entry(ids[1])?.refusals == 0)
                // Meanwhile the log commits a change to the first.
                try log.transaction(sync: .standard) { appender in try appender.setRefusals(3, of: ids[0]) }
            }
            #expect(try await read(ids[0])?.refusals == 3, "what the commit changed stands")
            #expect(try await read(ids[1])?.refusals == 0)
        }
    }

    @Test func entriesReadAheadAreNotKeptAfterACommitThatForgotSomeItChanged() async throws {
        try await Self.withTwoWrites { log, ids, read in
            try log.readAhead { reader in
                #expect(try reader.entry(ids[1])?.refusals == 0)
                // The log's next commit changes it, then holds more than the store keeps: the change
                // is written out and forgotten before the commit ends.
                try log.transaction(sync: .standard) { appender in
                    try appender.setRefusals(5, of: ids[1])
                    _ = try QueueOperations.enqueue(
                        (0..<5000).map { todo(Int64(10 + $0)) }, user: "alice", atomic: false,
                        random: SeededRandomSource(seed: 3), appender: &appender)
                }
            }
            #expect(try await read(ids[1])?.refusals == 5, "the entry read before that commit is not handed on")
        }
    }

    /// A log holding two queued writes, and a read of a write's entry as the next write transaction
    /// finds it.
    static func withTwoWrites(
        _ body: (EventLog, [WriteID], (WriteID) async throws -> WriteEntry?) async throws -> Void
    ) async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let ids = try await client.enqueue(contentsOf: [todo(1), todo(2)])
            let log = client.log
            try await body(log, ids) { id in try await log.append { appender in try appender.reader.entry(id) } }
            client.close()
        }
    }
}

extension Appender {
    /// Records a verdict that leaves write `id` pending with `refusals`.
    fileprivate mutating func setRefusals(_ refusals: Int, of id: WriteID) throws {
        try append(.verdictRecorded(VerdictRecorded(writeId: id, passId: 1, state: .pending, refusals: refusals)))
    }
}
