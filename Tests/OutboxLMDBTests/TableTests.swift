import OutboxLMDB
import Testing

/// A value codec for the tests (this file's and the lookup cursor's): a string, then one byte that is
/// the sum of the key's bytes and the string's, so a value stored under another key does not decode.
enum TaggedString: ValueCodec {
    struct WrongKey: Error {}

    static func storedCount(of value: String, key: UnsafeRawBufferPointer) -> Int { value.utf8.count + 1 }

    static func encode(_ value: String, key: UnsafeRawBufferPointer, into buffer: UnsafeMutableRawBufferPointer) {
        var written = 0
        for byte in value.utf8 {
            buffer[written] = byte
            written += 1
        }
        buffer[written] = tag(key, value.utf8)
    }

    static func decode(_ stored: RawSpan, key: UnsafeRawBufferPointer) throws -> String {
        let bytes = stored.copiedBytes
        let text = bytes.dropLast()
        guard bytes.last == tag(key, text) else { throw WrongKey() }
        return String(decoding: text, as: UTF8.self)
    }

    static func tag(_ key: UnsafeRawBufferPointer, _ text: some Sequence<UInt8>) -> UInt8 {
        var sum: UInt8 = 0
        for byte in key { sum &+= byte }
        for byte in text { sum &+= byte }
        return sum
    }

    static func tag(id: UInt64, _ text: String) -> UInt8 {
        withUnsafeBytes(of: id.bigEndian) { tag($0, text.utf8) }
    }
}

@Suite struct TableTests {
    private typealias Names = Table<BigEndianKey, TaggedString>

    @Test func aTypedTableEncodesIntoTheReservedPageAndDecodesFromIt() throws {
        try withTemporaryDirectory { path in
            let env = try Environment(path: path, databases: ["names"])
            let names = Names(env.database("names"))
            try env.write { txn in
                try txn.put(names, 2, "two")
                try txn.put(names, 1, "one")
                try txn.put(names, 3, "three", options: .append)
            }
            let found: [String?] = try env.read { txn in try (1...4).map { try txn.get(names, UInt64($0)) } }
            #expect(found == ["one", "two", "three", nil])
            // The stored bytes are the codec's, under the key's eight big-endian bytes.
            let stored: [UInt8]? = try env.read { txn in
                try withUnsafeBytes(of: UInt64(2).bigEndian) { key in
                    try txn.withValue(names.database, key: key) { $0.copiedBytes }
                }
            }
            let expected: [UInt8] = Array("two".utf8) + [TaggedString.tag(id: 2, "two")]
            #expect(stored == expected)
            let removed: [Bool] = try env.write { txn in [try txn.delete(names, 2), try txn.delete(names, 2)] }
            #expect(removed == [true, false])
            let gone: String? = try env.read { txn in try txn.get(names, 2) }
            #expect(gone == nil)
        }
    }

    // A put encodes a value into a buffer on the stack and copies it to its page; one larger than that
    // buffer is encoded into its page instead. Both read back as they were put.
    @Test func valuesSmallerAndLargerThanThePutsScratchBufferRoundTrip() throws {
        try withTemporaryDirectory { path in
            let env = try Environment(path: path, databases: ["names"])
            let names = Names(env.database("names"))
            let values = [0, 1, 1023, 1024, 1025, 5000].map { String(repeating: "x", count: $0) }
            try env.write { txn in
                for (id, value) in values.enumerated() { try txn.put(names, UInt64(id), value) }
            }
            try env.write { txn in
                try txn.withLookupCursor(names) { cursor in
                    for (id, value) in values.enumerated() { try cursor.put(UInt64(id + 10), value + "y", appending: true) }
                }
            }
            let found: [String?] = try env.read { txn in try (0..<values.count).map { try txn.get(names, UInt64($0)) } }
            #expect(found == values)
            let appended: [String?] = try env.read { txn in
                try (0..<values.count).map { try txn.get(names, UInt64($0 + 10)) }
            }
            #expect(appended == values.map { $0 + "y" })
        }
    }

    @Test func aValueUnderAnotherKeyIsCaughtByItsCodec() throws {
        try withTemporaryDirectory { path in
            let env = try Environment(path: path, databases: ["names"])
            let names = Names(env.database("names"))
            let moved: [UInt8] = Array("one".utf8) + [TaggedString.tag(id: 1, "one")]
            try env.write { txn in
                _ = try withUnsafeBytes(of: UInt64(5).bigEndian) { key in
                    try moved.withUnsafeBytes { try txn.put(names.database, key: key, value: $0) }
                }
            }
            #expect(throws: TaggedString.WrongKey.self) {
                let _: String? = try env.read { txn in try txn.get(names, 5) }
            }
        }
    }

    @Test func aReservedPutThatMayNotOverwriteLeavesTheValueAndNeverFills() throws {
        try withTemporaryDirectory { path in
            let env = try Environment(path: path, databases: ["a"])
            let db = env.database("a")
            let key: [UInt8] = [7]
            let outcome: [Bool] = try env.write { txn in
                let first = try key.withUnsafeBytes { key in
                    try txn.put(db, key: key, reserving: 3) { $0.copyBytes(from: [1, 2, 3] as [UInt8]) }
                }
                var filled = false
                let second = try key.withUnsafeBytes { key in
                    try txn.put(db, key: key, reserving: 2, options: .noOverwrite) { _ in filled = true }
                }
                return [first, second, filled]
            }
            #expect(outcome == [true, false, false])
            let stored: [UInt8]? = try env.read { txn in try txn.get(db, key: key) }
            #expect(stored == [1, 2, 3])
        }
    }

    @Test func aDatabaseTheEnvironmentNoLongerNamesCanBeDeleted() throws {
        try withTemporaryDirectory { path in
            do {
                let env = try Environment(path: path, databases: ["a", "old", "older"])
                try env.write { txn in
                    try txn.put(env.database("old"), key: [1], value: [2])
                    try txn.put(env.database("older"), key: [3], value: [4])
                }
                env.close()
            }
            let env = try Environment(path: path, databases: ["a"])
            // Two retired databases deleted in one write (a log two layouts old has both).
            #expect(try env.write { txn in try txn.deleteDatabase(named: "old") && txn.deleteDatabase(named: "older") })
            #expect(try !env.write { txn in try txn.deleteDatabase(named: "older") })
            #expect(try !env.write { txn in try txn.deleteDatabase(named: "old") }, "gone, its entries with it")
            #expect(try !env.write { txn in try txn.deleteDatabase(named: "never") })
            env.close()
        }
    }

    @Test func cursorMovesHandTheirEntryToAClosure() throws {
        try withTemporaryDirectory { path in
            let env = try Environment(path: path, databases: ["a"])
            let db = env.database("a")
            try env.write { txn in
                for byte: UInt8 in [1, 3, 5] { try txn.put(db, key: [byte], value: [byte, byte]) }
            }
            let seen: [[UInt8]?] = try env.read { txn in
                try txn.withCursor(db) { cursor in
                    var seen: [[UInt8]?] = []
                    seen.append(try cursor.last { key, value in key.copiedBytes + value.copiedBytes })
                    seen.append(try cursor.seek(atLeast: [4]) { key, _ in key.copiedBytes })
                    seen.append(try cursor.next { key, _ in key.copiedBytes })
                    seen.append(try cursor.first { key, _ in key.copiedBytes })
                    seen.append(try cursor.seek(atLeast: [9]) { key, _ in key.copiedBytes })
                    return seen
                }
            }
            let expected: [[UInt8]?] = [[5, 5, 5], [5], nil, [1], nil]
            #expect(seen == expected)
        }
    }
}
