import Foundation
import OutboxLMDB
import Testing

/// A fresh folder under the system's temporary directory, removed when the test ends.
func withTemporaryDirectory<R>(_ body: (String) throws -> R) rethrows -> R {
    let path = NSTemporaryDirectory() + "outbox-lmdb-" + UUID().uuidString
    defer { try? FileManager.default.removeItem(atPath: path) }
    return try body(path)
}

@Suite struct EnvironmentTests {
    @Test func createsOwnerOnlyFiles() throws {
        try withTemporaryDirectory { path in
            let env = try Environment(path: path, databases: ["a"])
            _ = try env.write { txn in try txn.put(env.database("a"), key: [1], value: [2]) }
            for file in ["data.mdb", "lock.mdb"] {
                let mode = try FileManager.default.attributesOfItem(atPath: path + "/" + file)[.posixPermissions] as! Int
                #expect(mode == 0o600, "\(file) is \(String(mode, radix: 8))")
            }
        }
    }

    @Test func secondOpenOfOnePathIsTypedError() throws {
        try withTemporaryDirectory { path in
            let env = try Environment(path: path, databases: ["a"])
            #expect(throws: LMDBError.self) { try Environment(path: path, databases: ["a"]) }
            do {
                _ = try Environment(path: path + "/data.mdb", databases: ["a"])
                Issue.record("opened twice")
            } catch let error as LMDBError {
                #expect(error.isAlreadyOpen)
            }
            _ = env
        }
    }

    @Test func reopensAfterTheFirstIsReleased() throws {
        try withTemporaryDirectory { path in
            do {
                let env = try Environment(path: path, databases: ["a"])
                _ = try env.write { txn in try txn.put(env.database("a"), key: [1], value: [9]) }
            }
            let env = try Environment(path: path, databases: ["a"])
            #expect(try env.read { try $0.get(env.database("a"), key: [1]) } == [9])
        }
    }

    @Test func readOnlyOpenOfMissingPathCreatesNothing() throws {
        try withTemporaryDirectory { path in
            var options = Environment.Options()
            options.readOnly = true
            do {
                _ = try Environment(path: path, databases: ["a"], options: options)
                Issue.record("opened a missing log")
            } catch let error as LMDBError {
                #expect(error.isDoesNotExist)
            }
            #expect(!FileManager.default.fileExists(atPath: path))
        }
    }

    /// A creation that failed before LMDB wrote its first page leaves an empty data file. A read-only
    /// open says so (LMDB itself would try to write the new file's first pages and fail with EBADF),
    /// and writes nothing; a read-write open then creates the environment.
    @Test func readOnlyOpenOfAnEmptyDataFileSaysItIsEmpty() throws {
        try withTemporaryDirectory { path in
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            _ = FileManager.default.createFile(atPath: path + "/data.mdb", contents: Data())
            var options = Environment.Options()
            options.readOnly = true
            do {
                _ = try Environment(path: path, databases: ["a"], options: options)
                Issue.record("opened an empty data file")
            } catch let error as LMDBError {
                #expect(error.isEmptyFile)
                #expect(error.description.contains(path) && error.description.contains("empty"))
            }
            #expect(try FileManager.default.attributesOfItem(atPath: path + "/data.mdb")[.size] as? Int == 0)
            let env = try Environment(path: path, databases: ["a"])
            _ = try env.write { txn in try txn.put(env.database("a"), key: [1], value: [2]) }
            #expect(try env.read { try $0.get(env.database("a"), key: [1]) } == [2])
        }
    }

    /// The power-loss model of the simulation reads this: only a commit without the meta sync may be
    /// undone, and a commit that wrote nothing (no meta page) leaves the answer as it was.
    @Test func lastCommitSkippedMetaSyncFollowsTheLastCommitThatWrote() throws {
        try withTemporaryDirectory { path in
            let env = try Environment(path: path, databases: ["a"])
            #expect(!env.lastCommitSkippedMetaSync)
            _ = try env.write(sync: .withoutMetaSync) { txn in try txn.put(env.database("a"), key: [1], value: [1]) }
            #expect(env.lastCommitSkippedMetaSync)
            try env.write { _ in }
            #expect(env.lastCommitSkippedMetaSync, "an empty commit writes no meta page")
            _ = try env.write { txn in try txn.put(env.database("a"), key: [2], value: [2]) }
            #expect(!env.lastCommitSkippedMetaSync)
            try env.write(sync: .withoutMetaSync) { _ in }
            #expect(!env.lastCommitSkippedMetaSync, "an empty commit writes no meta page")
        }
    }

    @Test func writeAbortsWhenItsClosureThrows() throws {
        struct Stop: Error {}
        try withTemporaryDirectory { path in
            let env = try Environment(path: path, databases: ["a"])
            #expect(throws: Stop.self) {
                try env.write { txn in
                    try txn.put(env.database("a"), key: [1], value: [1])
                    throw Stop()
                }
            }
            #expect(try env.read { try $0.get(env.database("a"), key: [1]) } == nil)
            #expect(env.commitCount == 0)
        }
    }

    /// On Linux the data file is written ahead of LMDB's pages with zeros, a step at a time, so a commit
    /// writes into blocks already allocated: the file reaches past the pages in use, never past the
    /// map, and what LMDB wrote reads back whole after a reopen.
    @Test func theDataFileRunsAheadOfItsPagesInUse() throws {
        #if os(Linux)
            try withTemporaryDirectory { path in
                func fileSize() throws -> Int {
                    try FileManager.default.attributesOfItem(atPath: path + "/data.mdb")[.size] as! Int
                }
                let value = [UInt8](repeating: 7, count: 1000)
                let keys = (0..<6000).map { withUnsafeBytes(of: UInt32($0).bigEndian, Array.init) }
                do {
                    let env = try Environment(path: path, databases: ["a"])
                    _ = try env.write { txn in try txn.put(env.database("a"), key: keys[0], value: value) }
                    _ = try env.write { txn in try txn.put(env.database("a"), key: keys[1], value: value) }
                    // A step is an eighth of the pages in use, at least 16 pages.
                    #expect(try fileSize() >= env.usedBytes() + 8 * 4096)
                    let data = try Data(contentsOf: URL(fileURLWithPath: path + "/data.mdb"))
                    #expect(data[try env.usedBytes()...].allSatisfy { $0 == 0 })
                    // Each write begins with at least half a step (of 16 pages at least) past the pages in use.
                    for batch in stride(from: 2, to: keys.count, by: 100) {
                        _ = try env.write { txn in
                            for key in keys[batch..<min(batch + 100, keys.count)] {
                                try txn.put(env.database("a"), key: key, value: value)
                            }
                        }
                        let (file, used) = try env.write { _ in (try fileSize(), try env.usedBytes()) }
                        #expect(file >= used + 8 * 4096, "the file ends at \(file), its pages in use at \(used)")
                    }
                    #expect(try env.usedBytes() > 6_000_000)
                    #expect(try fileSize() <= env.mapSize)
                }
                let env = try Environment(path: path, databases: ["a"])
                #expect(try env.read { try $0.count(env.database("a")) } == keys.count)
                #expect(try env.read { txn in try keys.allSatisfy { try txn.get(env.database("a"), key: $0) == value } })
            }
        #endif
    }

    @Test func mapGrowsFromATinyMapInsideWrite() throws {
        try withTemporaryDirectory { path in
            var options = Environment.Options()
            options.mapSize = 64 << 10
            let env = try Environment(path: path, databases: ["a"], options: options)
            let before = env.mapSize
            var runs = 0
            let value = [UInt8](repeating: 7, count: 1000)
            try env.write { txn in
                runs += 1
                for index in 0..<4000 {
                    try txn.put(env.database("a"), key: withUnsafeBytes(of: UInt32(index).bigEndian, Array.init), value: value)
                }
            }
            #expect(env.mapSize > before)
            #expect(runs > 1, "the closure ran again after MDB_MAP_FULL")
            #expect(try env.read { try $0.count(env.database("a")) } == 4000)
        }
    }

    @Test func cursorSeeksAndScansByPrefix() throws {
        try withTemporaryDirectory { path in
            let env = try Environment(path: path, databases: ["a"])
            let db = env.database("a")
            try env.write { txn in
                for key: [UInt8] in [[1, 1], [1, 2], [2, 1], [0, 9]] { try txn.put(db, key: key, value: key) }
            }
            var seen: [[UInt8]] = []
            try env.read { txn in
                try txn.forEach(db, prefix: [1]) { key, _ in
                    seen.append(key.copiedBytes)
                    return true
                }
            }
            #expect(seen == [[1, 1], [1, 2]])
        }
    }
}
