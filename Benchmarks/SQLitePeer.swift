import COutboxSQLite
import Foundation

/// The peer: an outbox as an app developer would write it on SQLite today. One table with an INTEGER
/// PRIMARY KEY id, user, table, op, key, body and state; an index on (user, state, id); WAL with
/// `synchronous=FULL`; one connection. Enqueue inserts; drain reads pending rows in id order and
/// updates each row's state from the answer.
final class SQLiteOutbox: @unchecked Sendable {
    // @unchecked: one connection, used under `lock` (as an app with one connection serializes it).
    private var db: OpaquePointer?
    private var insert: OpaquePointer?
    private let lock = NSLock()

    init(path: String) {
        precondition(sqlite3_open(path, &db) == SQLITE_OK, "sqlite open")
        exec("PRAGMA journal_mode=WAL")
        exec("PRAGMA synchronous=FULL")
        exec(
            "CREATE TABLE outbox (id INTEGER PRIMARY KEY, user TEXT NOT NULL, tbl TEXT NOT NULL, op TEXT NOT NULL, key TEXT NOT NULL, body TEXT NOT NULL, state INTEGER NOT NULL DEFAULT 0)"
        )
        exec("CREATE INDEX outbox_user_state ON outbox (user, state, id)")
        sqlite3_prepare_v2(db, "INSERT INTO outbox (user, tbl, op, key, body) VALUES (?, ?, ?, ?, ?)", -1, &insert, nil)
    }

    deinit {
        sqlite3_finalize(insert)
        sqlite3_close(db)
    }

    private func exec(_ sql: String) {
        precondition(sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK, "sqlite: \(sql): \(String(cString: sqlite3_errmsg(db)))")
    }

    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    /// Inserts the rows in one transaction.
    func enqueue(_ rows: [(table: String, op: String, key: String, body: String)], user: String = "alice") {
        lock.lock()
        defer { lock.unlock() }
        exec("BEGIN")
        for row in rows {
            sqlite3_reset(insert)
            sqlite3_bind_text(insert, 1, user, -1, Self.transient)
            sqlite3_bind_text(insert, 2, row.table, -1, Self.transient)
            sqlite3_bind_text(insert, 3, row.op, -1, Self.transient)
            sqlite3_bind_text(insert, 4, row.key, -1, Self.transient)
            sqlite3_bind_text(insert, 5, row.body, -1, Self.transient)
            precondition(sqlite3_step(insert) == SQLITE_DONE)
        }
        exec("COMMIT")
    }

    /// Sends every pending row in batches of `batch` in id order: reads a batch, "sends" it (the lean
    /// instance: every row accepted), and updates each row's state in one transaction. Returns how many.
    /// With `flushingOnce`, the transactions are made with `synchronous=NORMAL` (in WAL mode a power
    /// loss may take the last of them back, never the file's integrity) and a checkpoint of the WAL
    /// flushes them at the end, as the engine flushes a pass's commits once, when it ends.
    func drain(batch: Int, user: String = "alice", flushingOnce: Bool = false) -> Int {
        if flushingOnce {
            exec("PRAGMA synchronous=NORMAL")
            defer {
                exec("PRAGMA wal_checkpoint(FULL)")
                exec("PRAGMA synchronous=FULL")
            }
            return drain(batch: batch, user: user)
        }
        var select: OpaquePointer?
        var update: OpaquePointer?
        sqlite3_prepare_v2(
            db, "SELECT id, tbl, op, key, body FROM outbox WHERE user = ? AND state = 0 ORDER BY id LIMIT ?", -1, &select, nil)
        sqlite3_prepare_v2(db, "UPDATE outbox SET state = ? WHERE id = ?", -1, &update, nil)
        defer {
            sqlite3_finalize(select)
            sqlite3_finalize(update)
        }
        var sent = 0
        while true {
            sqlite3_reset(select)
            sqlite3_bind_text(select, 1, user, -1, Self.transient)
            sqlite3_bind_int(select, 2, Int32(batch))
            var ids: [Int64] = []
            var payload = 0
            while sqlite3_step(select) == SQLITE_ROW {
                ids.append(sqlite3_column_int64(select, 0))
                for column in 1...4 { payload &+= Int(sqlite3_column_bytes(select, Int32(column))) }
            }
            if ids.isEmpty { return sent }
            exec("BEGIN")
            for id in ids {
                sqlite3_reset(update)
                sqlite3_bind_int(update, 1, 1)
                sqlite3_bind_int64(update, 2, id)
                precondition(sqlite3_step(update) == SQLITE_DONE)
            }
            exec("COMMIT")
            sent += ids.count
        }
    }
}
