/// A write was queued: everything needed to send it, and the dependencies it was given. The write's
/// own fields (`table`, `operation`, `key`, `body`, `baseVersion`, `dependsOn`) are its `write`'s,
/// read and set through it: `queued.table` is `queued.write.table`.
@dynamicMemberLookup
public struct WriteQueued: EventPayload {
    static let type = EventType.writeQueued
    /// The write's id.
    public var id: WriteID
    /// The user it belongs to.
    public var user: String
    /// The write as the app made it.
    public var write: Write
    /// Earlier unsettled writes of the same user to the same row, found at enqueue.
    public var follows: [WriteID]
    /// The key it is first sent under.
    public var idempotencyKey: IdempotencyKey
    /// The atomic group: its first write's id and how many writes it has; nil when not in one.
    public var atomicGroup: AtomicGroup?

    /// One of the write's fields.
    @inlinable public subscript<Value>(dynamicMember field: WritableKeyPath<Write, Value>) -> Value {
        get { write[keyPath: field] }
        set { write[keyPath: field] = newValue }
    }

    /// One of the write's read-only fields (`keyJSON`, `bodyIsObject`, …).
    @inlinable public subscript<Value>(dynamicMember field: KeyPath<Write, Value>) -> Value { write[keyPath: field] }

    /// Writes enqueued together with `atomic: true`: consecutive ids from `first`, `count` of them.
    public struct AtomicGroup: Hashable, Sendable {
        /// The group's first write.
        public var first: WriteID
        /// How many writes the group holds.
        public var count: Int
        package init(first: WriteID, count: Int) {
            self.first = first
            self.count = count
        }
    }

    package init(
        id: WriteID, user: String, table: String, operation: WriteOperation, key: JSONValue, body: JSONValue,
        baseVersion: Int64? = nil, dependsOn: [WriteID] = [], follows: [WriteID] = [], idempotencyKey: IdempotencyKey,
        atomicGroup: AtomicGroup? = nil
    ) {
        self.init(
            id: id, user: user,
            write: Write(
                table: table, operation: operation, key: key, body: body, baseVersion: baseVersion, dependsOn: dependsOn),
            follows: follows, idempotencyKey: idempotencyKey, atomicGroup: atomicGroup)
    }

    package init(
        id: WriteID, user: String, write: Write, follows: [WriteID] = [], idempotencyKey: IdempotencyKey,
        atomicGroup: AtomicGroup? = nil
    ) {
        self.id = id
        self.user = user
        self.write = write
        self.follows = follows
        self.idempotencyKey = idempotencyKey
        self.atomicGroup = atomicGroup
    }

    /// Every write this one must follow: `dependsOn` and `follows`, ascending, without repeats.
    public var dependencies: [WriteID] {
        if follows.isEmpty && write.dependsOn.count < 2 { return write.dependsOn }
        let all = (write.dependsOn + follows).sorted()
        return all.indices.filter { $0 == 0 || all[$0] != all[$0 - 1] }.map { all[$0] }
    }

    func encode(into writer: inout some ByteSink) {
        writer.varint(id.rawValue)
        writer.string(user)
        writer.string(write.table)
        write.operation.encode(into: &writer)
        writer.raw(write.canonicalKey.bytes)
        writer.raw(write.canonicalBody.bytes)
        writer.optional(write.baseVersion) { $0.signed($1) }
        writer.ids(write.dependsOn)
        writer.ids(follows)
        idempotencyKey.encode(into: &writer)
        // Version 2 added the atomic group (a version-1 record is upcast with "none").
        writer.optional(atomicGroup) { w, group in
            w.varint(group.first.rawValue)
            w.varint(group.count)
        }
    }

    /// The most writes one atomic group may hold.
    public static let maxGroupSize = 10_000

    /// At least how many bytes the stored record of `write`, queued by `user`, takes, known before it is
    /// made: the key's and body's canonical bytes and the names, each other field at its shortest (the
    /// version, type and time 3, the id, the names' lengths, the operation, the base version, the two
    /// lists of ids and the group 1 each, the idempotency key 16), and the checksum 4.
    static func leastRecordSize(of write: Write, user: String) -> Int {
        31 + user.utf8.count + write.table.utf8.count + write.canonicalKey.bytes.count + write.canonicalBody.bytes.count
    }

    static func decode(from reader: inout ByteReader) throws -> WriteQueued {
        let id = try reader.id()
        let user = try reader.string()
        let write = Write(
            table: try reader.string(), operation: try WriteOperation.decode(from: &reader),
            key: try CanonicalJSON.read(from: &reader), body: try CanonicalJSON.read(from: &reader),
            baseVersion: try reader.optional { try $0.signed() }, dependsOn: try reader.ids())
        let queued = WriteQueued(
            id: id, user: user, write: write, follows: try reader.ids(), idempotencyKey: try IdempotencyKey.decode(from: &reader),
            atomicGroup: try reader.optional { AtomicGroup(first: try $0.id(), count: try $0.int()) })
        // A group is the consecutive ids from `first`, this write among them (a damaged or hostile record
        // must not make a reader walk billions of ids).
        if let group = queued.atomicGroup {
            guard (2...maxGroupSize).contains(group.count), group.first <= queued.id,
                queued.id.rawValue - group.first.rawValue < UInt64(group.count)
            else { throw DecodeFailure("an atomic group that does not hold its write") }
        }
        return queued
    }

    var writeIDs: [WriteID] { [id] }

    var jsonFields: [String: JSONValue] {
        [
            "writeId": .id(id), "user": .string(user), "table": .string(write.table), "op": .string(write.operation.description),
            "key": write.key, "body": write.body, "baseVersion": .optional(write.baseVersion) { .int($0) },
            "dependsOn": .ids(write.dependsOn),
            "follows": .ids(follows), "idempotencyKey": .string(idempotencyKey.description),
            "atomicGroup": .optional(atomicGroup) { .object(["first": .id($0.first), "count": .int($0.count)]) },
        ]
    }
}
