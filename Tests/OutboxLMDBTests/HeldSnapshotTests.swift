import COutboxLMDB
import Foundation
import Testing

/// The premise of a journal in front of LMDB (Specs/decisions/016): LMDB may commit without flushing
/// while a journal keeps each commit durable, because the last flushed snapshot survives a power loss
/// whatever the disk kept of the commits after it, so long as a read transaction holds that snapshot
/// (LMDB then reuses none of its pages) and its two meta pages are kept aside to be written back.
///
/// A power loss is modelled as LMDB's crash tests reason about it: after the flush, each page of the
/// file may hold what the flush left or what a later commit wrote, independently, the meta pages
/// included. Here every page takes one or the other at random; the meta pages kept aside are then
/// written back, and LMDB must open the flushed snapshot whole.
@Suite struct HeldSnapshotTests {
    @Test(arguments: 1...12 as ClosedRange<UInt64>)
    func aHeldSnapshotSurvivesAnyMixOfThePagesWrittenAfterIt(seed: UInt64) throws {
        try withTemporaryDirectory { path in
            var random = seed &* 0x9E37_79B9_7F4A_7C15
            func next(_ bound: Int) -> Int {
                random &+= 0x9E37_79B9_7F4A_7C15
                var z = (random ^ (random >> 30)) &* 0xBF58_476D_1CE4_E5B9
                z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
                return Int((z ^ (z >> 31)) % UInt64(bound))
            }
            var model: [UInt64: [UInt8]] = [:]
            func change(_ store: UnflushedStore, commits: Int) {
                for _ in 0..<commits {
                    store.commit { put, delete in
                        for _ in 0..<20 {
                            let key = UInt64(next(2000))
                            if next(4) == 0 {
                                delete(key)
                                model[key] = nil
                            } else {
                                let value = (0..<(40 + next(300))).map { _ in UInt8(next(256)) }
                                put(key, value)
                                model[key] = value
                            }
                        }
                    }
                }
            }
            let store = UnflushedStore(path: path)
            change(store, commits: 60)
            store.flush()
            let flushed = try store.fileBytes()
            let snapshot = model
            store.holdSnapshot()
            change(store, commits: 60)
            let later = try store.fileBytes()
            let pageSize = store.pageSize
            store.close()

            // The disk after the loss: each page as flushed or as written later (zeros past a file's end).
            func page(_ file: [UInt8], _ start: Int) -> ArraySlice<UInt8> {
                start + pageSize <= file.count ? file[start..<(start + pageSize)] : ArraySlice(repeating: 0, count: pageSize)
            }
            var disk: [UInt8] = []
            var mixed = 0
            for start in stride(from: 0, to: max(flushed.count, later.count), by: pageSize) {
                let takesLater = next(2) == 0
                if takesLater, page(later, start) != page(flushed, start) { mixed += 1 }
                disk += takesLater ? page(later, start) : page(flushed, start)
            }
            // Not vacuous: later commits rewrote pages, and named themselves in the meta pages.
            #expect(mixed > 0)
            #expect(Self.newestTransaction(later, pageSize: pageSize) > Self.newestTransaction(flushed, pageSize: pageSize))
            // The meta pages kept aside at the flush, written back.
            disk.replaceSubrange(0..<(2 * pageSize), with: flushed[0..<(2 * pageSize)])
            let recovered = path + "/recovered"
            try FileManager.default.createDirectory(atPath: recovered, withIntermediateDirectories: true)
            #expect(FileManager.default.createFile(atPath: recovered + "/data.mdb", contents: Data(disk)))
            let contents = UnflushedStore(path: recovered).contents()
            let whole = contents == snapshot
            #expect(whole, "recovered \(contents.count) keys; the flushed snapshot held \(snapshot.count)")
        }
    }

    /// The newer of the two meta pages' transaction ids (LMDB 0.9: a 16-byte page header, then
    /// `MDB_meta`, whose transaction id is at 128).
    private static func newestTransaction(_ file: [UInt8], pageSize: Int) -> UInt64 {
        func transaction(onPage page: Int) -> UInt64 {
            var id: UInt64 = 0
            for byte in 0..<8 { id |= UInt64(file[page * pageSize + 16 + 128 + byte]) << (8 * byte) }
            return id
        }
        return max(transaction(onPage: 0), transaction(onPage: 1))
    }
}

/// One LMDB database through the C API, committed without flushes (`MDB_NOSYNC`).
private final class UnflushedStore {
    private var env: OpaquePointer?
    private var dbi = MDB_dbi()
    private var held: OpaquePointer?
    private let path: String

    init(path: String) {
        self.path = path
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        mdb_env_create(&env)
        mdb_env_set_mapsize(env, 64 << 20)
        precondition(mdb_env_open(env, path, UInt32(MDB_NOSYNC | MDB_NOTLS), 0o600) == 0, "open")
        var txn: OpaquePointer?
        precondition(mdb_txn_begin(env, nil, 0, &txn) == 0)
        precondition(mdb_dbi_open(txn, nil, 0, &dbi) == 0)
        precondition(mdb_txn_commit(txn) == 0)
    }

    var pageSize: Int {
        var stat = MDB_stat()
        mdb_env_stat(env, &stat)
        return Int(stat.ms_psize)
    }

    func commit(_ body: (_ put: (UInt64, [UInt8]) -> Void, _ delete: (UInt64) -> Void) -> Void) {
        var txn: OpaquePointer?
        precondition(mdb_txn_begin(env, nil, 0, &txn) == 0)
        body(
            { key, value in
                var k = key.bigEndian
                withUnsafeMutableBytes(of: &k) { keyBytes in
                    var mk = MDB_val(mv_size: 8, mv_data: keyBytes.baseAddress)
                    var v = value
                    v.withUnsafeMutableBytes { valueBytes in
                        var mv = MDB_val(mv_size: valueBytes.count, mv_data: valueBytes.baseAddress)
                        precondition(mdb_put(txn, dbi, &mk, &mv, 0) == 0, "put")
                    }
                }
            },
            { key in
                var k = key.bigEndian
                withUnsafeMutableBytes(of: &k) { keyBytes in
                    var mk = MDB_val(mv_size: 8, mv_data: keyBytes.baseAddress)
                    let rc = mdb_del(txn, dbi, &mk, nil)
                    precondition(rc == 0 || rc == MDB_NOTFOUND, "delete")
                }
            })
        precondition(mdb_txn_commit(txn) == 0, "commit")
    }

    func flush() { precondition(mdb_env_sync(env, 1) == 0) }

    /// Holds a read transaction on the last commit until `close`.
    func holdSnapshot() { precondition(mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &held) == 0) }

    /// The data file as the OS holds it now (its cache: every commit, flushed or not).
    func fileBytes() throws -> [UInt8] {
        let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: path + "/data.mdb"))
        defer { try? handle.close() }
        return [UInt8](try handle.readToEnd() ?? Data())
    }

    /// Every key and value of the last commit.
    func contents() -> [UInt64: [UInt8]] {
        var txn: OpaquePointer?
        var cursor: OpaquePointer?
        precondition(mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn) == 0)
        defer { mdb_txn_abort(txn) }
        precondition(mdb_cursor_open(txn, dbi, &cursor) == 0)
        defer { mdb_cursor_close(cursor) }
        var found: [UInt64: [UInt8]] = [:]
        var key = MDB_val()
        var value = MDB_val()
        var op = MDB_FIRST
        while mdb_cursor_get(cursor, &key, &value, op) == 0 {
            let id = UnsafeRawBufferPointer(start: key.mv_data, count: key.mv_size).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            found[id] = Array(UnsafeRawBufferPointer(start: value.mv_data, count: value.mv_size))
            op = MDB_NEXT
        }
        return found
    }

    func close() {
        if let held { mdb_txn_abort(held) }
        held = nil
        mdb_env_close(env)
        env = nil
    }

    deinit { if env != nil { close() } }
}
