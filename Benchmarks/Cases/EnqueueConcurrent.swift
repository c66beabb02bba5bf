import COutboxLMDB
import Foundation
import Outbox
import OutboxHTTP
import OutboxLMDB
import OutboxProcess
import OutboxTesting
import Synchronization

/// The SQLite peer on a fresh file, and its clean-up.
func peerSide(
    _ body: @escaping (SQLiteOutbox) -> Void, filled rows: [(table: String, op: String, key: String, body: String)] = []
)
    -> MeasuredSide
{
    MeasuredSide(
        { () -> (String, SQLiteOutbox) in
            let path = temporaryPath()
            let peer = SQLiteOutbox(path: path)
            var index = 0
            while index < rows.count {
                peer.enqueue(Array(rows[index..<min(index + 1000, rows.count)]))
                index += 1000
            }
            return (path, peer)
        }, { body($0.1) },
        tearDown: {
            removing($0.0)
            removing($0.0 + "-wal")
            removing($0.0 + "-shm")
        })
}

/// 2. Durable enqueue from 16 concurrent tasks (group commit) against the peer under the same load,
/// and against the peer grouping 16 writes a transaction itself.
enum EnqueueConcurrentCase: BenchmarkCase {
    static func isSelected() -> Bool { selected("enqueue-concurrent") }

    static func run() throws {
        let size = options.quick ? 320 : 10_000
        let all = writes(size)
        let rows = peerRows(all)
        let engine = MeasuredSide(
            { temporaryPath() },
            { path in
                withClient(path) { client in try await enqueueConcurrently(all, client: client) }
            }, tearDown: removing)
        let peer = peerSide { peer in
            DispatchQueue.concurrentPerform(iterations: 16) { task in
                for index in stride(from: task, to: rows.count, by: 16) { peer.enqueue([rows[index]]) }
            }
        }
        // The peer as an app that batches its own writes would use it: 16 rows a transaction, one thread.
        let grouped = peerBulk(rows, perTransaction: 16)
        let measured = try interleaved([engine, peer, grouped])
        report(
            "2. durable enqueue, 16 concurrent tasks", size: size, measured,
            baselines: ["SQLite peer, same load", "SQLite peer grouping 16 a transaction"])
    }
}

/// Enqueues `all` from 16 tasks at once, each its share (every 16th write) one at a time, durably.
func enqueueConcurrently(_ all: [Write], client: OutboxClient) async throws {
    try await withThrowingTaskGroup(of: Void.self) { group in
        for task in 0..<16 {
            group.addTask {
                for write in stride(from: task, to: all.count, by: 16).map({ all[$0] }) {
                    try await client.enqueue(write)
                }
            }
        }
        try await group.waitForAll()
    }
}
