public import Foundation

/// A write the queue holds, with the instance's answer so far: the write the app made (`table`,
/// `operation`, `key`, `body`, `baseVersion`, `dependsOn`, read through it), and its state.
@dynamicMemberLookup
public struct QueuedWrite: Hashable, Sendable {
    /// The write's id.
    public let id: WriteID
    /// The user it belongs to.
    public let user: String
    /// The write as the app made it.
    public let write: Write
    /// Earlier writes to the same row it follows.
    public let follows: [WriteID]
    /// The key it is sent under now (renewed by every release).
    public let idempotencyKey: IdempotencyKey
    /// When it was queued.
    public let createdAt: Timestamp
    /// Its atomic group, if it was enqueued in one.
    public let atomicGroup: WriteQueued.AtomicGroup?
    /// Its state in the verdict table. A pending write of a user whose session latched `identityChanged`
    /// reads `blocked(.identityChanged)`.
    public let state: WriteState
    /// How often the instance refused it.
    public let refusals: Int
    /// Whether its last answer was a replay of an earlier one.
    public let replayed: Bool
    /// Pending, but held until a write it depends on is settled.
    public let waiting: Bool
    /// What it met the last time it failed alone, and the streak of such passes.
    public let lastFailure: LastFailure?
    /// How many passes in a row it failed alone.
    public let environmentalStreak: Int
    /// Schema-cache failures (the server did not know the table or a column yet) counted against it.
    public let schemaRefusals: Int

    /// One of the write's fields.
    @inlinable public subscript<Value>(dynamicMember field: KeyPath<Write, Value>) -> Value { write[keyPath: field] }
}

extension QueuedWrite {
    /// The write as `all()` shows it: the entry's state, its queued event's content.
    static func render(
        _ id: WriteID, _ entry: WriteEntry, reader: StoreReader, identityLatchedFor user: String?, groups: GroupWaiting? = nil
    ) throws -> QueuedWrite {
        guard let recorded = try reader.record(entry.queuedSequence), case .writeQueued(let queued) = recorded.event,
            queued.id == id, queued.user == entry.user, queued.table == entry.table
        else {
            throw OutboxError(
                .damaged,
                "write \(id): its writeQueued event at sequence \(entry.queuedSequence) is missing or is another write's",
                writeID: id)
        }
        var state = entry.state
        var waiting = false
        if state == .pending {
            if user == entry.user {
                state = .blocked(.identityChanged, refusal: nil)
            } else {
                waiting = try reader.isWaiting(entry, groups: groups)
            }
        }
        return QueuedWrite(
            id: id, user: queued.user, write: queued.write, follows: queued.follows,
            idempotencyKey: entry.renewedKey ?? queued.idempotencyKey, createdAt: recorded.at, atomicGroup: queued.atomicGroup,
            state: state,
            refusals: entry.refusals, replayed: entry.replayed, waiting: waiting, lastFailure: entry.lastFailure,
            environmentalStreak: entry.environmentalStreak, schemaRefusals: entry.schemaRefusals)
    }

    /// Every write the queue holds, in id order; only `user`'s when given.
    static func all(user: String?, reader: StoreReader) throws -> [QueuedWrite] {
        var writes: [QueuedWrite] = []
        try forEach(user: user, reader: reader) { write in
            writes.append(write)
            return true
        }
        return writes
    }

    /// Calls `body` with every write the queue holds, in id order (only `user`'s when given), one at a
    /// time, until it returns false: a tool prints each as it comes instead of holding them all.
    static func forEach(user: String?, reader: StoreReader, _ body: (QueuedWrite) throws -> Bool) throws {
        let session = try reader.session()
        let latched = session?.identityChanged == true ? session?.user : nil
        var failure: (any Error)?
        let groups = GroupWaiting()
        try reader.scan(.writes, [], nil) { key, value in
            do {
                let id = WriteID(try StoreKey.readBigEndian(key))
                let entry = try WriteEntry.decode(value, id: id)
                if let user, entry.user != user { return true }
                return try body(try render(id, entry, reader: reader, identityLatchedFor: latched, groups: groups))
            } catch {
                failure = error
                return false
            }
        }
        if let failure { throw failure }
    }
}

/// The queue and verdict table as they stood just after one event: time travel for debugging.
public struct QueueSnapshot: Hashable, Sendable {
    /// The last event folded.
    public let sequence: UInt64
    /// The session's user then, if one was settled.
    public let user: String?
    /// Every write the queue held then, every user's, in id order.
    public let writes: [QueuedWrite]
}
