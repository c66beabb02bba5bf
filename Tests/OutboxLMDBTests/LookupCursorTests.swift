import OutboxLMDB
import Testing

@Suite struct LookupCursorTests {
    private typealias Names = Table<BigEndianKey, TaggedString>

    /// Keys with gaps of every width a lookup meets: next to each other, one missing, more missing than a
    /// lookup steps over, and the ends.
    private static let stored: [UInt64] = [2, 3, 4, 6, 7, 9, 10, 11, 12, 20, 21, 22, 23, 24, 25, 40, 41, 60]

    private func withNames<R>(_ body: (Environment, Names) throws -> R) throws -> R {
        try withTemporaryDirectory { path in
            let env = try Environment(path: path, databases: ["names"])
            let names = Names(env.database("names"))
            try env.write { txn in
                for key in Self.stored { try txn.put(names, key, "name \(key)") }
            }
            return try body(env, names)
        }
    }

    /// What `mdb_get` finds for each of `keys`, and what the cursor finds, looked up in that order in
    /// one transaction (the codec throws if a value comes from under another key).
    private func lookups(_ keys: [UInt64], _ env: Environment, _ names: Names) throws -> (cursor: [String?], get: [String?]) {
        try env.read { txn in
            let expected = try keys.map { try txn.get(names, $0) }
            let found = try txn.withLookupCursor(names) { cursor in try keys.map { try cursor.get($0) } }
            return (found, expected)
        }
    }

    @Test func findsWhatAPointReadFindsWhenKeysComeInOrder() throws {
        try withNames { env, names in
            let (found, expected) = try lookups(Array(0...65), env, names)
            #expect(found == expected)
            #expect(found.compactMap { $0 }.count == Self.stored.count)
        }
    }

    @Test func findsWhatAPointReadFindsWhenKeysComeBackwardOrTwice() throws {
        try withNames { env, names in
            let keys: [UInt64] = [60, 41, 41, 3, 2, 2, 70, 9, 8, 7, 12, 0, 25, 24, 20, 61, 59, 60, 4]
            let (found, expected) = try lookups(keys, env, names)
            #expect(found == expected)
        }
    }

    @Test func aLookupPastTheLastKeyLeavesTheCursorUsable() throws {
        try withNames { env, names in
            // 61 runs off the end by a step, 100 by a search; each lookup after them still finds its key.
            let (found, expected) = try lookups([59, 61, 60, 100, 2, 3, 61, 62], env, names)
            #expect(found == expected)
            #expect(found == [nil, nil, "name 60", nil, "name 2", "name 3", nil, nil])
        }
    }

    @Test func findsWhatAPointReadFindsForSeededRandomWalks() throws {
        try withNames { env, names in
            for seed in 1...20 as ClosedRange<UInt64> {
                var random = SplitMix(seed: seed)
                var key: UInt64 = 0
                var keys: [UInt64] = []
                for _ in 0..<300 {
                    // Mostly small steps forward, sometimes a jump either way.
                    switch random.next() % 10 {
                    case 0: key = random.next() % 70
                    case 1: key = key > 3 ? key - random.next() % 4 : key
                    default: key += random.next() % 3
                    }
                    if key > 70 { key = random.next() % 10 }
                    keys.append(key)
                }
                let (found, expected) = try lookups(keys, env, names)
                #expect(found == expected, "seed \(seed)")
            }
        }
    }

    @Test func findsWhatAPointReadFindsBetweenPutsAndDeletesOfItsTransaction() throws {
        try withNames { env, names in
            for seed in 1...10 as ClosedRange<UInt64> {
                var random = SplitMix(seed: seed)
                var found: [String?] = []
                var expected: [String?] = []
                #expect(throws: Discard.self) {
                    try env.write { txn in
                        try txn.withLookupCursor(names) { cursor in
                            var key: UInt64 = 0
                            for _ in 0..<400 {
                                key = random.next() % 8 == 0 ? random.next() % 70 : key + random.next() % 3
                                if key > 70 { key = 0 }
                                switch random.next() % 6 {
                                // The entry under the cursor and its neighbours change as it walks.
                                case 0: try txn.put(names, key, "new \(key)")
                                case 1: _ = try txn.delete(names, key)
                                default:
                                    found.append(try cursor.get(key))
                                    expected.append(try txn.get(names, key))
                                }
                            }
                        }
                        throw Discard()
                    }
                }
                #expect(found == expected, "seed \(seed)")
            }
        }
    }

    @Test func putsAndDeletesThroughItLeaveWhatPointPutsAndDeletesLeave() throws {
        try withTemporaryDirectory { path in
            let env = try Environment(path: path, databases: ["cursor", "points"])
            let viaCursor = Names(env.database("cursor"))
            let viaPoints = Names(env.database("points"))
            for seed in 1...10 as ClosedRange<UInt64> {
                var random = SplitMix(seed: seed)
                var found: [String?] = []
                var expected: [String?] = []
                // Several transactions a seed: each starts from what the one before committed.
                for _ in 0..<4 {
                    try env.write { txn in
                        try txn.withLookupCursor(viaCursor) { cursor in
                            // The greatest key stored: a put past it may append.
                            var greatest = try txn.withCursor(viaPoints.database) { c in
                                try c.last { key, _ in key.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self).bigEndian } }
                            }
                            var key: UInt64 = random.next() % 40
                            for _ in 0..<300 {
                                key = random.next() % 8 == 0 ? random.next() % 90 : key + random.next() % 3
                                if key > 90 { key = 0 }
                                switch random.next() % 8 {
                                case 0, 1:
                                    // Same size as "name N" for N < 100 ("same" + 2 digits), or longer.
                                    let value = random.next() % 2 == 0 ? "same \(key % 10)\(key % 7)" : "longer value \(key)"
                                    let past = greatest.map { key > $0 } ?? true
                                    try cursor.put(key, value, appending: past && random.next() % 2 == 0)
                                    try txn.put(viaPoints, key, value)
                                    greatest = max(greatest ?? key, key)
                                case 2:
                                    #expect(try cursor.delete(key) == (try txn.delete(viaPoints, key)), "seed \(seed) key \(key)")
                                default:
                                    found.append(try cursor.get(key))
                                    expected.append(try txn.get(viaPoints, key))
                                }
                            }
                        }
                    }
                }
                #expect(found == expected, "seed \(seed)")
                let (written, pointWritten) = try env.read { txn in
                    (try Self.contents(txn, viaCursor), try Self.contents(txn, viaPoints))
                }
                #expect(written == pointWritten, "seed \(seed)")
            }
        }
    }

    /// Every key of `table` followed by its value, in order.
    private static func contents(_ txn: borrowing ReadTransaction, _ table: Names) throws -> [[UInt8]] {
        var entries: [[UInt8]] = []
        try txn.forEach(table.database, prefix: []) { key, value in
            entries.append(key.copiedBytes + value.copiedBytes)
            return true
        }
        return entries
    }

    /// Aborts a write transaction, leaving the table as it was for the next seed.
    private struct Discard: Error {}

    @Test func anEmptyTableFindsNothing() throws {
        try withTemporaryDirectory { path in
            let env = try Environment(path: path, databases: ["names"])
            let names = Names(env.database("names"))
            let found = try env.read { txn in try txn.withLookupCursor(names) { c in try [1, 2, 0].map { try c.get($0) } } }
            #expect(found == [nil, nil, nil])
        }
    }

    @Test func aLookupAfterItsClosureReturnedThrows() throws {
        try withNames { env, names in
            var kept: LookupCursor<BigEndianKey, TaggedString>?
            let found = try env.read { txn in
                try txn.withLookupCursor(names) { cursor in
                    kept = cursor
                    return try cursor.get(2)
                }
            }
            #expect(found == "name 2")
            #expect(throws: LMDBError.self) { try kept?.get(3) }
        }
    }
}

/// A seeded generator (SplitMix64), so each walk is the same on every run.
private struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
