// The LMDB baselines: the least LMDB work a case needs (raw), and the engine's own tables and puts per
// write with no engine code (the layout floor), through the C API. Each figure then shows what is
// LMDB's and what is the engine's own.
import COutboxLMDB
import Foundation
import OutboxTesting

/// An LMDB environment through the C API, as the baselines use it: data flushed at every commit, as
/// the engine's `.full` durability does.
final class RawEnvironment {
    private var env: OpaquePointer?
    /// By `RawTable.rawValue`, so a put finds its database by index, not by hashing a name.
    private var dbis = Array(repeating: MDB_dbi(), count: RawTable.allCases.count)

    /// With `oneTree`, every table's keys go in one database, each after its table's byte (the
    /// tables' ranges in one B-tree), and the floor only puts.
    private let oneTree: Bool
    /// The journal in front of it, when its commits flush nothing (`Journal.swift`).
    var journal: FloorJournal?
    /// A read transaction on the last checkpoint's snapshot (`pinSnapshot`).
    private var pinned: OpaquePointer?

    /// With `noSync`, commits write LMDB's pages and flush nothing (`MDB_NOSYNC`): `flush()` does.
    init(path: String, tables: [RawTable], oneTree: Bool = false, noSync: Bool = false) {
        self.oneTree = oneTree
        mdb_env_create(&env)
        mdb_env_set_mapsize(env, 8 << 30)
        mdb_env_set_maxdbs(env, MDB_dbi(tables.count))
        mkdir(path, 0o700)
        let flags = UInt32(MDB_NOTLS) | (noSync ? UInt32(MDB_NOSYNC) : 0)
        guard mdb_env_open(env, path, flags, 0o600) == 0 else { fatalError("raw open") }
        var opened = dbis
        write { txn in
            for table in oneTree ? [.log] : tables {
                var dbi = MDB_dbi()
                precondition(mdb_dbi_open(txn.handle, oneTree ? "tables" : "\(table)", UInt32(MDB_CREATE), &dbi) == 0)
                opened[table.rawValue] = dbi
            }
        }
        dbis = oneTree ? Array(repeating: opened[RawTable.log.rawValue], count: opened.count) : opened
    }

    deinit {
        if let pinned { mdb_txn_abort(pinned) }
        mdb_env_close(env)
    }

    /// Flushes every commit so far, data and meta pages (`mdb_env_sync`, forced).
    func flush() { precondition(mdb_env_sync(env, 1) == 0, "mdb_env_sync") }

    /// Commits made in `body` flush nothing (`MDB_NOSYNC`); `flush()` after them does.
    func withoutFlushes(_ body: () -> Void) {
        mdb_env_set_flags(env, UInt32(MDB_NOSYNC), 1)
        body()
        mdb_env_set_flags(env, UInt32(MDB_NOSYNC), 0)
    }

    /// Holds a read transaction on the last commit (moved here from the one held before), so that
    /// LMDB reuses none of that snapshot's pages while it is held.
    func pinSnapshot() {
        if let pinned {
            mdb_txn_reset(pinned)
            precondition(mdb_txn_renew(pinned) == 0, "mdb_txn_renew")
        } else {
            precondition(mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &pinned) == 0, "pin")
        }
    }

    /// The bytes of the pages each of `tables` uses (branch, leaf and overflow), as `mdb_stat` counts them.
    func usedBytes(_ tables: [RawTable]) -> [(table: RawTable, bytes: Int)] {
        var txn: OpaquePointer?
        precondition(mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn) == 0)
        defer { mdb_txn_abort(txn) }
        return tables.map { table in
            var stat = MDB_stat()
            precondition(mdb_stat(txn, dbis[table.rawValue], &stat) == 0, "mdb_stat")
            return (table, (stat.ms_branch_pages + stat.ms_leaf_pages + stat.ms_overflow_pages) * Int(stat.ms_psize))
        }
    }

    /// One write transaction; with `withoutMetaSync`, committed as the engine commits a pass.
    func write(withoutMetaSync: Bool = false, _ body: (RawTransaction) -> Void) {
        var txn: OpaquePointer?
        precondition(mdb_txn_begin(env, nil, 0, &txn) == 0)
        body(RawTransaction(handle: txn!, dbis: dbis, oneTree: oneTree))
        if withoutMetaSync { mdb_env_set_flags(env, UInt32(MDB_NOMETASYNC), 1) }
        precondition(mdb_txn_commit(txn) == 0)
        if withoutMetaSync { mdb_env_set_flags(env, UInt32(MDB_NOMETASYNC), 0) }
    }
}

/// The databases the baselines use: the engine's tables, named as the engine names them.
enum RawTable: Int, CaseIterable {
    case log, meta, writes, pending, history, rows, counters, answered, runs
}

struct RawTransaction {
    let handle: OpaquePointer
    let dbis: [MDB_dbi]
    /// Every table in one database, its keys after the table's byte (`RawEnvironment(oneTree:)`).
    var oneTree = false

    func put(_ db: RawTable, _ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, append: Bool) {
        // In one tree, a table's keys go after its byte, and its range is not the tree's last: no appending.
        guard !oneTree else { return ([UInt8(db.rawValue)] + key).withUnsafeBytes { put(db, $0, value, flags: 0) } }
        put(db, key, value, flags: append ? UInt32(MDB_APPEND) : 0)
    }

    private func put(_ db: RawTable, _ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, flags: UInt32) {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val(mv_size: value.count, mv_data: UnsafeMutableRawPointer(mutating: value.baseAddress))
        precondition(mdb_put(handle, dbis[db.rawValue], &k, &v, flags) == 0, "put \(db)")
    }

    func put(_ db: RawTable, id: UInt64, _ value: [UInt8], append: Bool = true) {
        withUnsafeBytes(of: id.bigEndian) { key in value.withUnsafeBytes { put(db, key, $0, append: append) } }
    }

    func put(_ db: RawTable, _ key: [UInt8], _ value: [UInt8], append: Bool) {
        key.withUnsafeBytes { k in value.withUnsafeBytes { put(db, k, $0, append: append) } }
    }

    /// The size of the value under `key`, read (0 when there is none).
    func get(_ db: RawTable, _ key: [UInt8]) -> Int {
        precondition(!oneTree, "the one-tree floor only puts")
        return key.withUnsafeBytes { raw in
            var k = MDB_val(mv_size: raw.count, mv_data: UnsafeMutableRawPointer(mutating: raw.baseAddress))
            var v = MDB_val()
            guard mdb_get(handle, dbis[db.rawValue], &k, &v) == 0 else { return 0 }
            return v.mv_size
        }
    }

    func get(_ db: RawTable, id: UInt64) -> Int { get(db, withUnsafeBytes(of: id.bigEndian) { Array($0) }) }

    func delete(_ db: RawTable, _ key: [UInt8]) {
        precondition(!oneTree, "the one-tree floor only puts")
        key.withUnsafeBytes { raw in
            var k = MDB_val(mv_size: raw.count, mv_data: UnsafeMutableRawPointer(mutating: raw.baseAddress))
            precondition(mdb_del(handle, dbis[db.rawValue], &k, nil) == 0, "del \(db)")
        }
    }

    /// Reads up to `count` entries from `start` by cursor (each value's bytes touched); their keys.
    func read(_ db: RawTable, from start: [UInt8], count: Int) -> [[UInt8]] {
        precondition(!oneTree, "the one-tree floor only puts")
        var cursor: OpaquePointer?
        precondition(mdb_cursor_open(handle, dbis[db.rawValue], &cursor) == 0)
        defer { mdb_cursor_close(cursor) }
        var keys: [[UInt8]] = []
        var touched = 0
        start.withUnsafeBytes { raw in
            var k = MDB_val(mv_size: raw.count, mv_data: UnsafeMutableRawPointer(mutating: raw.baseAddress))
            var v = MDB_val()
            var rc = mdb_cursor_get(cursor, &k, &v, MDB_SET_RANGE)
            while rc == 0, keys.count < count {
                keys.append(Array(UnsafeRawBufferPointer(start: k.mv_data, count: k.mv_size)))
                touched &+= Int(UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size).last ?? 0)
                rc = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)
            }
        }
        precondition(touched >= 0)
        return keys
    }
}

func bigEndian(_ value: UInt64) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }

extension RawEnvironment {
    /// Writes `count` items `perTransaction` a transaction (each commit flushed as an enqueue's is):
    /// `body` puts the items of `range`.
    func write(
        _ count: Int, perTransaction: Int, _ body: (RawTransaction, Range<Int>) -> Void,
        afterCommit: (Range<Int>) -> Void = { _ in }
    ) {
        var index = 0
        while index < count {
            let range = index..<min(index + perTransaction, count)
            write { txn in body(txn, range) }
            afterCommit(range)
            index = range.upperBound
        }
    }
}

extension RawTransaction {
    /// The `rows` slot of the write at `offset`, keyed as the engine keys `{"id": n}`: a hash, the
    /// tag 1, the integer with its sign bit flipped.
    func putRowSlot(_ offset: Int) {
        put(.rows, bigEndian(0xF9EC_8866_2056_F13F) + [1] + bigEndian(UInt64(offset) ^ (1 << 63)), [1, 1], append: true)
    }

    /// The meta values an enqueue of writes through `end` sets: the applied sequence and the next id.
    func putEnqueueMeta(_ end: Int) {
        put(.meta, Array("applied".utf8), bigEndian(UInt64(end)), append: false)
        put(.meta, Array("nextWriteId".utf8), bigEndian(UInt64(end + 1)), append: false)
    }
}

/// The raw baseline of an enqueue: one `MDB_APPEND` put of each record, `perTransaction` a transaction.
@discardableResult
func rawAppend(path: String, records: [[UInt8]], perTransaction: Int) -> RawEnvironment {
    let env = RawEnvironment(path: path, tables: [.log])
    env.write(records.count, perTransaction: perTransaction) { txn, range in
        for offset in range { txn.put(.log, id: UInt64(offset + 1), records[offset]) }
    }
    return env
}

/// The raw drain, over a log of `records` (appended 1000 a transaction before the clock starts): reads
/// them 100 at a time by cursor and appends one outcome record each, one commit per batch, its data
/// pages flushed (`MDB_NOMETASYNC`, as the engine's pass commits were before its journal); with
/// `flushingOnce`, the commits flush nothing and one flush ends the drain (as the engine's pass
/// commits go to its journal now).
func rawDrain(_ env: RawEnvironment, count: Int, batch: Int, flushingOnce: Bool = false) {
    if flushingOnce {
        env.withoutFlushes { rawDrain(env, count: count, batch: batch) }
        env.flush()
        return
    }
    let outcome = [UInt8](repeating: 7, count: 12)
    var next: UInt64 = 1
    var sequence = UInt64(count)
    while next <= UInt64(count) {
        env.write(withoutMetaSync: true) { txn in
            let read = txn.read(.log, from: bigEndian(next), count: min(batch, count - Int(next) + 1))
            for _ in read {
                sequence += 1
                txn.put(.log, id: sequence, outcome)
            }
            next += UInt64(read.count)
        }
    }
}

/// The layout floor of a bulk enqueue: per write, what the engine puts (its `writeQueued` record, its
/// verdict-table entry, its pending key and its row's slot), and per transaction the user's counters
/// and two meta values; sizes as the engine's. No engine code runs. `perTransaction` writes a commit,
/// each commit flushed (`fsync`) as an enqueue's is.
func floorEnqueue(path: String, records: [[UInt8]], perTransaction: Int = 1000) -> RawEnvironment {
    let env = RawEnvironment(path: path, tables: RawTable.allCases)
    let entry = [UInt8](repeating: 3, count: 44)
    let user = Array("alice".utf8) + [0]
    env.write(records.count, perTransaction: perTransaction) { txn, range in
        for offset in range {
            let id = UInt64(offset + 1)
            txn.put(.log, id: id, records[offset])
            txn.put(.writes, id: id, entry)
            txn.put(.pending, user + bigEndian(id), [], append: true)
            txn.putRowSlot(offset)
        }
        let end = range.upperBound
        txn.put(.counters, user, [UInt8(end % 128), 0, 0, 0], append: false)
        txn.putEnqueueMeta(end)
    }
    return env
}

/// The layout floor of a drain in batches of `batch`, over a log `floorEnqueue` made, one commit a
/// request as the engine's (the commit that records a request's answer plans the next request and
/// appends its attempt, so each attempt is committed before its request goes). Per request: the reads
/// the engine makes (the pending keys by cursor, each write's entry and its `writeQueued` record); the
/// attempt record, and per write its attempt's history key; the answer record and one record of the
/// request's verdicts, and per write its answer's history key holding the verdict's offset (put in
/// place: the attempt's keys of later writes are past it), its entry rewritten, its pending key
/// removed and its answered key added; per commit the counters and the applied sequence.
func floorDrain(_ env: RawEnvironment, count: Int, batch: Int) {
    let user = Array("alice".utf8) + [0]
    let entry = [UInt8](repeating: 4, count: 44)
    var sequence = UInt64(count)
    var next: UInt64 = 1
    while next <= UInt64(count) {
        env.write(withoutMetaSync: true) { txn in
            let keys = txn.read(.pending, from: user + bigEndian(next), count: batch)
            let ids = keys.map { key in key.suffix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
            for id in ids {
                _ = txn.get(.writes, id: id)
                _ = txn.get(.log, id: id)
            }
            let attempt = sequence + 1
            let answer = sequence + 2
            sequence += 3
            txn.put(.log, id: attempt, [UInt8](repeating: 6, count: 4 + 18 * ids.count))
            for id in ids { txn.put(.history, bigEndian(id) + bigEndian(attempt), [], append: true) }
            txn.put(.log, id: answer, [UInt8](repeating: 7, count: 6 + 2 * ids.count))
            txn.put(.log, id: sequence, [UInt8](repeating: 8, count: 4 + 6 * ids.count))
            for id in ids {
                txn.put(.history, bigEndian(id) + bigEndian(answer), [1], append: false)
                txn.put(.writes, id: id, entry, append: false)
                txn.delete(.pending, user + bigEndian(id))
                txn.put(.answered, user + bigEndian(id), [], append: true)
            }
            txn.put(.counters, user, [0, 0, 0, UInt8(ids.count)], append: false)
            txn.put(.meta, Array("applied".utf8), bigEndian(sequence), append: false)
            next += UInt64(ids.count)
        }
    }
}

// MARK: - The chained layout (decision 012): its floors

/// The keys of the chained layout's `writes` table: the user's ordinal (two bytes), then the id, so a
/// user's writes lie in id order and a cursor reads them from the user's low-water mark.
func chainedKey(user: UInt16 = 0, _ id: UInt64) -> [UInt8] {
    withUnsafeBytes(of: user.bigEndian) { Array($0) } + bigEndian(id)
}

/// The chained layout's entry: what today's holds (44 bytes) and the sequence of the write's last
/// event, the head of its history chain.
let chainedEntrySize = 52

/// The floor of a bulk enqueue on the chained layout: per write its `writeQueued` record, its entry
/// (list membership is the entry's state: no pending key) and its row's slot; per transaction the
/// user's counters (with the low-water mark) and two meta values. `perTransaction` writes a commit,
/// each flushed as an enqueue's is. With `oneTree`, the same puts in one B-tree (each table's keys
/// after its byte): one database's record a commit, not four (decision 012: measured no faster).
/// With `randomRows`, each write's row key is a random UUID string's (a UUIDv4 key's), as the engine
/// keys `{"id": "…"}`. With `journaled`, LMDB's commits flush nothing and each commit's records go
/// to a journal in front of it (`Journal`, decision 016), flushed there (after LMDB's commit rather
/// than before it, as the engine would: the same work); the floor then ends with a checkpoint, so its
/// time includes flushing LMDB's pages once.
func chainedFloorEnqueue(
    path: String, records: [[UInt8]], perTransaction: Int = 1000, oneTree: Bool = false, randomRows: Bool = false,
    journaled: Bool = false
) -> RawEnvironment {
    let env = RawEnvironment(path: path, tables: RawTable.allCases, oneTree: oneTree, noSync: journaled)
    let journal = journaled ? FloorJournal(path: path + "/journal", environment: env, dataPath: path + "/data.mdb") : nil
    env.journal = journal
    journal?.checkpoint()
    let entry = [UInt8](repeating: 3, count: chainedEntrySize)
    let user = Array("alice".utf8) + [0]
    var random = SplitMix64(seed: 25)
    env.write(records.count, perTransaction: perTransaction) { txn, range in
        for offset in range {
            let id = UInt64(offset + 1)
            txn.put(.log, id: id, records[offset])
            txn.put(.writes, chainedKey(id), entry, append: true)
            if randomRows {
                txn.put(.rows, bigEndian(0xF9EC_8866_2056_F13F) + [3] + randomUUIDString(&random), [1, 1], append: false)
            } else {
                txn.putRowSlot(offset)
            }
        }
        let end = range.upperBound
        txn.put(.meta, Array("counters:".utf8) + user, [UInt8(end % 128), 0, 0, 0, 0, 0, 0, 0, 1], append: false)
        txn.putEnqueueMeta(end)
    } afterCommit: { range in
        journal?.append(records[range], first: UInt64(range.lowerBound + 1))
    }
    journal?.checkpoint()
    return env
}

/// The 36 bytes of a random UUID's string (a UUIDv4 key's), lower case.
func randomUUIDString(_ random: inout SplitMix64) -> [UInt8] {
    var bytes = (random.next(), random.next())
    return Array(withUnsafeBytes(of: &bytes) { UUID(uuid: $0.load(as: uuid_t.self)) }.uuidString.lowercased().utf8)
}

/// The floor of a drain on the chained layout, in batches of `batch`, over a log
/// `chainedFloorEnqueue` made, one commit a request as the engine's. Per request: the user's entries
/// read by cursor from the low-water mark (the planner's next batch), each write's `writeQueued`
/// record read by a cursor that moves on when the records lie in order (they do after a bulk
/// enqueue) and seeks when not; the attempt record (each write's id and previous event, its chain
/// link, as two varint deltas; the key it goes under is the one its chain last set) and one answer
/// record holding the verdicts (every write's previous event is the attempt: one link for all)
/// appended; each entry rewritten in place by a cursor walking the batch (its state, counts and chain
/// head); per commit the counters with the new low-water mark, and the applied sequence. No history,
/// pending or answered key: the chain, the entry's state and the user's marks answer those queries.
///
/// With `acceptedAsRuns` (decision 012, move 23), no entry is rewritten: the verdicts go in a record
/// of their own, and one key in `runs` (the user's ordinal and the run's first id; the value its last
/// id and the sequences of the attempt, the answer and the verdicts) says the request's writes were
/// accepted, which a reader of an entry still pending, with no event noted, puts back on it.
func chainedFloorDrain(_ env: RawEnvironment, count: Int, batch: Int, acceptedAsRuns: Bool = false) {
    let user = Array("alice".utf8) + [0]
    let entry = [UInt8](repeating: 4, count: chainedEntrySize)
    var sequence = UInt64(count)
    var next: UInt64 = 1
    while next <= UInt64(count) {
        var appended: [[UInt8]] = []
        let first = sequence + 1
        env.write(withoutMetaSync: true) { txn in
            let keys = txn.read(.writes, from: chainedKey(next), count: batch)
            let ids = keys.map { key in key.suffix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
            // The records of the batch's writes: in order after a bulk enqueue, so one cursor reads them.
            txn.readInOrder(.log, ids.map { bigEndian($0) })
            let attempt = sequence + 1
            sequence += acceptedAsRuns ? 3 : 2
            appended = [[UInt8](repeating: 6, count: 4 + 4 * ids.count), [UInt8](repeating: 7, count: 14 + 2 * ids.count)]
            if acceptedAsRuns { appended.append([UInt8](repeating: 8, count: 8)) }
            for (offset, record) in appended.enumerated() { txn.put(.log, id: attempt + UInt64(offset), record) }
            if acceptedAsRuns {
                txn.put(.runs, chainedKey(ids[0]), bigEndian(ids[ids.count - 1]) + bigEndian(attempt) + [1, 2], append: true)
            } else {
                txn.rewrite(.writes, from: chainedKey(next), count: ids.count, entry)
            }
            txn.put(.meta, Array("counters:".utf8) + user, [0, 0, 0, UInt8(ids.count), 0, 0, 0, 0, 1], append: false)
            txn.put(.meta, Array("applied".utf8), bigEndian(sequence), append: false)
            next += UInt64(ids.count)
        }
        env.journal?.append(appended, first: first)
    }
    env.journal?.checkpoint()
}

extension RawTransaction {
    /// Reads the values under `keys` (ascending) with one cursor: the next entry when it is the one
    /// wanted, a seek when not. Each value's last byte is touched.
    func readInOrder(_ db: RawTable, _ keys: [[UInt8]]) {
        var cursor: OpaquePointer?
        precondition(mdb_cursor_open(handle, dbis[db.rawValue], &cursor) == 0)
        defer { mdb_cursor_close(cursor) }
        var touched = 0
        var positioned = false
        for key in keys {
            key.withUnsafeBytes { raw in
                var k = MDB_val()
                var v = MDB_val()
                var found = false
                if positioned, mdb_cursor_get(cursor, &k, &v, MDB_NEXT) == 0, k.mv_size == raw.count,
                    memcmp(k.mv_data, raw.baseAddress!, raw.count) == 0
                {
                    found = true
                }
                if !found {
                    k = MDB_val(mv_size: raw.count, mv_data: UnsafeMutableRawPointer(mutating: raw.baseAddress))
                    precondition(mdb_cursor_get(cursor, &k, &v, MDB_SET_KEY) == 0, "read \(db)")
                }
                positioned = true
                touched &+= Int(UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size).last ?? 0)
            }
        }
        precondition(touched >= 0)
    }

    /// Rewrites `count` entries from `start` in place with `value` (of their size), by one cursor.
    func rewrite(_ db: RawTable, from start: [UInt8], count: Int, _ value: [UInt8]) {
        var cursor: OpaquePointer?
        precondition(mdb_cursor_open(handle, dbis[db.rawValue], &cursor) == 0)
        defer { mdb_cursor_close(cursor) }
        start.withUnsafeBytes { raw in
            value.withUnsafeBytes { bytes in
                var k = MDB_val(mv_size: raw.count, mv_data: UnsafeMutableRawPointer(mutating: raw.baseAddress))
                var v = MDB_val()
                var rc = mdb_cursor_get(cursor, &k, &v, MDB_SET_RANGE)
                var done = 0
                while rc == 0, done < count {
                    var new = MDB_val(mv_size: bytes.count, mv_data: UnsafeMutableRawPointer(mutating: bytes.baseAddress))
                    precondition(mdb_cursor_put(cursor, &k, &new, UInt32(MDB_CURRENT)) == 0, "rewrite \(db)")
                    done += 1
                    rc = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)
                }
                precondition(done == count, "rewrote \(done) of \(count)")
            }
        }
    }
}
