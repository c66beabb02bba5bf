/// A write was queued: everything needed to send it, and the dependencies it was given.
public struct WriteQueued: EventPayload {
    static let type = EventType.writeQueued
    /// The write's id.
    public var id: WriteID
    /// The user it belongs to.
    public var user: String
    /// The table it writes.
    public var table: String
    /// What it does to its row.
    public var operation: WriteOperation
    /// The row's primary key.
    public var key: JSONValue {
        get { canonicalKey.value }
        set { canonicalKey = CanonicalJSON(newValue) }
    }
    /// The fields it writes.
    public var body: JSONValue {
        get { canonicalBody.value }
        set { canonicalBody = CanonicalJSON(newValue) }
    }
    /// The key as stored: canonical, made once when the write was queued.
    package var canonicalKey: CanonicalJSON
    /// The body as stored.
    package var canonicalBody: CanonicalJSON
    /// The row version the edit was made on.
    public var baseVersion: Int64?
    /// The writes the app said it depends on.
    public var dependsOn: [WriteID]
    /// Earlier unsettled writes of the same user to the same row, found at enqueue.
    public var follows: [WriteID]
    /// The key it is first sent under.
    public var idempotencyKey: IdempotencyKey
    /// The atomic group: its first write's id and how many writes it has; nil when not in one.
    public var atomicGroup: AtomicGroup?

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
            id: id, user: user, table: table, operation: operation, key: CanonicalJSON(key), body: CanonicalJSON(body),
            baseVersion: baseVersion, dependsOn: dependsOn, follows: follows, idempotencyKey: idempotencyKey,
            atomicGroup: atomicGroup)
    }

    package init(
        id: WriteID, user: String, table: String, operation: WriteOperation, key: CanonicalJSON, body: CanonicalJSON,
        baseVersion: Int64? = nil, dependsOn: [WriteID] = [], follows: [WriteID] = [], idempotencyKey: IdempotencyKey,
        atomicGroup: AtomicGroup? = nil
    ) {
        self.id = id
        self.user = user
        self.table = table
        self.operation = operation
        canonicalKey = key
        canonicalBody = body
        self.baseVersion = baseVersion
        self.dependsOn = dependsOn
        self.follows = follows
        self.idempotencyKey = idempotencyKey
        self.atomicGroup = atomicGroup
    }

    /// Every write this one must follow: `dependsOn` and `follows`, ascending, without repeats.
    public var dependencies: [WriteID] {
        if follows.isEmpty && dependsOn.count < 2 { return dependsOn }
        let all = (dependsOn + follows).sorted()
        return all.indices.filter { $0 == 0 || all[$0] != all[$0 - 1] }.map { all[$0] }
    }

    func encode(into writer: inout some ByteSink) {
        writer.varint(id.rawValue)
        writer.string(user)
        writer.string(table)
        operation.encode(into: &writer)
        writer.raw(canonicalKey.bytes)
        writer.raw(canonicalBody.bytes)
        writer.optional(baseVersion) { $0.signed($1) }
        writer.ids(dependsOn)
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

    static func decode(from reader: inout ByteReader) throws -> WriteQueued {
        let queued = WriteQueued(
            id: try reader.id(), user: try reader.string(), table: try reader.string(),
            operation: try WriteOperation.decode(from: &reader), key: try CanonicalJSON.read(from: &reader),
            body: try CanonicalJSON.read(from: &reader), baseVersion: try reader.optional { try $0.signed() },
            dependsOn: try reader.ids(), follows: try reader.ids(), idempotencyKey: try IdempotencyKey.decode(from: &reader),
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
            "writeId": .id(id), "user": .string(user), "table": .string(table), "op": .string(operation.description),
            "key": key, "body": body, "baseVersion": .optional(baseVersion) { .int($0) }, "dependsOn": .ids(dependsOn),
            "follows": .ids(follows), "idempotencyKey": .string(idempotencyKey.description),
            "atomicGroup": .optional(atomicGroup) { .object(["first": .id($0.first), "count": .int($0.count)]) },
        ]
    }
}
