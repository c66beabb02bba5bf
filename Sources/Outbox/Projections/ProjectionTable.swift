/// The databases the projections live in. Each is a fold of the log (R8.2); `log` itself is not one.
package enum ProjectionTable: String, CaseIterable, Sendable {
    /// Log-wide facts: origin, next write id, the settled session, the layout version, the applied
    /// sequence, the latest Retry-After deadline; and each user's counts for the status (R7.1) under
    /// `MetaKey.counters`, so a commit touches one database fewer.
    case meta
    /// The verdict table: write id → `WriteEntry`, for every write the queue holds (R3.1, R6.1).
    case writes
    /// Per user, the pending writes below the user's mark, `Counters.sendFrom` (R2.2, R4.2): user NUL
    /// id → empty. A pending write is a state of its entry, not a key: the planner reads the user's
    /// entries from the mark, which moves past a write as it leaves the queue and past a pending write
    /// that waits on one not going (listed here then, so the mark never stays at it while the writes
    /// after it drain); a write released below the mark is listed here too.
    case behind
    /// Per user, refused and dead writes (the rejected list, R3.5).
    case rejected
    /// Per user, blocked writes → the reason code.
    case blocked
    /// Per user, the answered writes (not yet taken or forgotten, R6.1) below the user's answered mark,
    /// `Counters.answeredFrom`: user NUL id → empty. The others are read from the entries, from the
    /// mark to `Counters.answeredTo`; a write answered below the mark (a late answer) is listed here,
    /// so the mark never moves back over the writes taken since.
    case answered
    /// Write id, sequence → the offsets (varints) of the later events indexed with it: the per-write
    /// history index (R8.3). While the queue holds a write, its entry in `writes` keeps its
    /// `writeQueued`'s sequence and its latest events (`RecentEvents`); when it leaves, they go here
    /// under one key, the `writeQueued`'s. The events of a write that do not fit in its entry, and those
    /// naming a write the queue does not hold, have keys of their own.
    case history
    /// `RowKey` → the ids of one user's writes to one (table, key), as of the last write queued to
    /// it: readers skip the settled ones, and the next write to the row drops them (R2.2).
    case rows
    /// Dependency id, dependent id → empty: who waits on whom.
    case dependents
}

extension ProjectionTable {
    /// The table's position in `allCases`.
    var index: Int {
        switch self {
        case .meta: return 0
        case .writes: return 1
        case .behind: return 2
        case .rejected: return 3
        case .blocked: return 4
        case .answered: return 5
        case .history: return 6
        case .rows: return 7
        case .dependents: return 8
        }
    }
}

/// Keys of `meta`.
enum MetaKey {
    static let origin = Array("origin".utf8)
    static let nextWriteId = Array("nextWriteId".utf8)
    static let session = Array("session".utf8)
    static let layout = Array("layout".utf8)
    static let applied = Array("applied".utf8)
    static let retryAfterUntil = Array("retryAfterUntil".utf8)
    /// The last compaction (`Compaction`), when the log has been compacted.
    static let compaction = Array("compaction".utf8)
    /// What every user's counters key starts with.
    static let countersPrefix = Array("counters:".utf8)

    /// The key of `user`'s counters: `counters:`, then the user's name.
    static func counters(_ user: String) -> [UInt8] { countersPrefix + Array(user.utf8) }

    /// The user whose counters `key` holds; nil when it is not a counters key.
    static func user(ofCounters key: UnsafeRawBufferPointer) -> String? {
        guard key.starts(with: countersPrefix) else { return nil }
        return String(validating: key.dropFirst(countersPrefix.count), as: UTF8.self)
    }
}

/// The databases earlier layouts had and this one has not: a rebuild deletes them.
let retiredProjectionDatabases = ["counters", "pending"]

/// The version of the projections' layout. A build with a newer layout rebuilds them on open.
let projectionLayoutVersion: UInt64 = 16
