import OutboxTesting
import Testing

@testable import Outbox

/// One event of every kind, with every optional field filled somewhere.
let everyKindOfEvent: [Event] = {
    let key = IdempotencyKey(high: 0x0123_4567_89AB_CDEF, low: 42)
    let refusal = Refusal(
        status: 422, code: "23514", reason: "check_violation", message: "title too long", fields: ["title"],
        trashed: true, restorable: true, missingGrant: "todos.write")
    return [
        .logCreated(LogCreated(origin: key)),
        .writeQueued(
            WriteQueued(
                id: 1, user: "alice", table: "todos", operation: .custom("complete_list"), key: ["id": 1],
                body: ["title": "ü", "n": 1.5, "tags": ["a", nil, true]], baseVersion: -3, dependsOn: [7],
                follows: [5, 6], idempotencyKey: key, atomicGroup: .init(first: 1, count: 3))),
        .sessionSettled(SessionSettled(user: "alice", identityChanged: true)),
        .sessionSettled(SessionSettled(user: nil, identityChanged: false)),
        .networkSwitched(NetworkSwitched(enabled: false)),
        .passStarted(PassStarted(passId: 9, user: "alice", table: "todos", automatic: true, maxRefusals: 5, batchSize: 50)),
        .attemptStarted(AttemptStarted(passId: 9, writes: [.init(id: 1, idempotencyKey: key)])),
        .answerReceived(
            AnswerReceived(
                passId: 9, writes: [1, 2, 3, 4, 5, 6, 7],
                answer: .answered([
                    WriteAnswer(.accepted, replayed: true), WriteAnswer(.merged(fields: ["a"])),
                    WriteAnswer(.conflicted(siblingId: "s1", fields: ["b"])), WriteAnswer(.refused(refusal)),
                    WriteAnswer(.blocked(.keySpent, refusal: nil)), WriteAnswer(.failed(status: 503, text: "busy")),
                    WriteAnswer(.skipped),
                ]))),
        .answerReceived(
            AnswerReceived(
                passId: 9, writes: [1],
                answer: .failed(
                    RequestFailure(
                        kind: .http, status: 429, code: "PGRST204", retryAfter: "Wed, 21 Oct 2015 07:28:00 GMT", text: "slow down"
                    )))),
        .answerReceived(AnswerReceived(passId: 9, writes: [1], answer: .contractBroken("2 verdicts for 1 write"))),
        .verdictRecorded(VerdictRecorded(writeId: 1, passId: 9, state: .refused(refusal), refusals: 1)),
        .verdictRecorded(
            VerdictRecorded(
                writeId: 1, passId: nil, state: .blocked(.failingAlone, refusal: refusal), refusals: 2, replayed: true)),
        .verdictRecorded(VerdictRecorded(writeId: 1, passId: 9, state: .dead(nil), refusals: 5)),
        .verdictRecorded(VerdictRecorded(writeId: 1, passId: 9, state: .conflicted(siblingId: "x", fields: ["f"]), refusals: 0)),
        .verdictsRecorded(
            VerdictsRecorded(
                passId: 9,
                verdicts: [
                    VerdictRecorded(writeId: 1, passId: 9, state: .accepted, refusals: 0, replayed: true),
                    VerdictRecorded(writeId: 2, passId: 9, state: .refused(refusal), refusals: 2),
                ])),
        .schemaRefusalCounted(SchemaRefusalCounted(writeId: 1, passId: 9, count: 3)),
        .writeFailed(WriteFailed(writeId: 1, passId: 9, status: 502, text: "bad gateway", streak: 2)),
        .passEnded(PassEnded(passId: 9, stoppedBy: PassFailure(kind: .http, status: 503, code: nil, retryAfter: 12.5))),
        .passEnded(PassEnded(passId: 10, stoppedBy: nil)),
        .batchAborted(BatchAborted(passId: 9, writes: [1, 2])),
        .writeReleased(WriteReleased(writeId: 1, idempotencyKey: key, reason: .failingAlone)),
        .writeWithdrawn(WriteWithdrawn(writeId: 1, row: ["id": 1, "title": "old"])),
        .writeDiscarded(WriteDiscarded(writeId: 1, withDependents: true)),
        .writeCancelled(WriteCancelled(writeId: 2)),
        .answersTaken(AnswersCleared(writes: [1, 2])),
        .answersForgotten(AnswersCleared(writes: [3])),
        .localDataCleared(LocalDataCleared(user: "alice", writes: [4, 5])),
        .logCompacted(sampleCompaction),
    ]
}()

@Suite struct CodecTests {
    @Test func crc32cCheckValue() {
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.checksum([]) == 0)
        // Slicing-by-8 agrees with the bit-at-a-time definition on every length around its 8-byte step.
        let bytes = (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        for length in [1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 299] {
            var reference: UInt32 = ~0
            for byte in bytes[0..<length] {
                reference ^= UInt32(byte)
                for _ in 0..<8 { reference = reference & 1 != 0 ? (reference >> 1) ^ 0x82F6_3B78 : reference >> 1 }
            }
            #expect(CRC32C.checksum(bytes[0..<length]) == ~reference, "length \(length)")
            // Continued over two parts, the second starting at any alignment, it is the same checksum
            // (the codecs checksum a key, then the value after it).
            for split in [0, 1, 3, length / 2, length] where split <= length {
                let continued = bytes.withUnsafeBytes { raw in
                    CRC32C.update(
                        CRC32C.update(0, UnsafeRawBufferPointer(rebasing: raw[0..<split])),
                        UnsafeRawBufferPointer(rebasing: raw[split..<length]))
                }
                #expect(continued == ~reference, "length \(length) split at \(split)")
            }
        }
    }

    // The processor's instruction and the slicing tables agree on every length and alignment (a
    // processor without the instruction runs the tables; this one may run either).
    @Test func crc32cByInstructionAndByTableAgree() {
        let random = SeededRandomSource(seed: 32)
        let bytes = (0..<600).map { _ in UInt8(truncatingIfNeeded: random.next(below: 256)) }
        bytes.withUnsafeBytes { raw in
            for _ in 0..<500 {
                let start = Int(random.next(below: 300))
                let length = Int(random.next(below: 300))
                let part = UnsafeRawBufferPointer(rebasing: raw[start..<(start + length)])
                let seed = UInt32(truncatingIfNeeded: random.next(below: 1 << 32))
                #expect(CRC32C.update(seed, part) == CRC32C.tableUpdate(seed, part), "\(start)..<\(start + length)")
            }
        }
        #if arch(x86_64)
            // This project's machines have SSE 4.2: the instruction is the path the figures measure.
            #expect(CRC32C.usesHardware)
        #endif
    }

    @Test func everyEventKindRoundTrips() throws {
        #expect(Set(everyKindOfEvent.map(\.type)) == Set(EventType.allCases))
        for (index, event) in everyKindOfEvent.enumerated() {
            let sequence = UInt64(index + 1)
            let record = RecordCodec.encode(event, at: Timestamp(milliseconds: -5 + Int64(index)), sequence: sequence)
            let decoded = try RecordCodec.decode(record, sequence: sequence)
            #expect(decoded.event == event)
            #expect(decoded.at == Timestamp(milliseconds: -5 + Int64(index)))
        }
    }

    /// R8.1: a record of an older payload version is upcast on read. This one is hand-made in the
    /// version-1 layout of writeQueued, which had no atomic group.
    @Test func upcastsAHandMadeVersionOneWriteQueued() throws {
        var payload = ByteWriter()
        payload.varint(UInt64(12))  // id
        payload.string("alice")
        payload.string("todos")
        payload.byte(0)  // insert
        JSONValue.object(["id": 12]).encode(into: &payload)
        JSONValue.object(["title": "old"]).encode(into: &payload)
        payload.byte(0)  // no baseVersion
        payload.varint(0)  // dependsOn
        payload.varint(0)  // follows
        IdempotencyKey(high: 1, low: 2).encode(into: &payload)
        var body = ByteWriter()
        body.byte(1)  // version 1
        body.byte(EventType.writeQueued.rawValue)
        body.signed(1_000)
        body.raw(payload.bytes)
        let crc = body.bytes.withUnsafeBytes { RecordCodec.checksum(sequence: 4, body: $0) }
        body.littleEndian32(crc)
        let decoded = try RecordCodec.decode(body.bytes, sequence: 4)
        guard case .writeQueued(let queued) = decoded.event else {
            Issue.record("not a writeQueued")
            return
        }
        #expect(queued.id == 12)
        #expect(queued.body == ["title": "old"])
        #expect(queued.atomicGroup == nil)
    }

    @Test func newerVersionIsAClearError() throws {
        var record = RecordCodec.encode(
            .networkSwitched(NetworkSwitched(enabled: true)), at: Timestamp(milliseconds: 0), sequence: 1)
        record[0] = 9
        record = RecordCodec.fixingChecksum(record, sequence: 1)
        #expect(throws: RecordCodec.Failure.newerVersion(type: "networkSwitched", version: 9, known: 1)) {
            try RecordCodec.decode(record, sequence: 1)
        }
    }

    /// Every byte of every record, flipped or zeroed, is caught (the checksum covers all of it).
    @Test func everyDamagedByteIsCaught() {
        for (index, event) in everyKindOfEvent.enumerated() {
            let sequence = UInt64(index + 1)
            let record = RecordCodec.encode(event, at: Timestamp(milliseconds: 77), sequence: sequence)
            for position in record.indices {
                for damage in [record[position] ^ 0x01, record[position] ^ 0x80, 0] where damage != record[position] {
                    var damaged = record
                    damaged[position] = damage
                    #expect(throws: RecordCodec.Failure.self) { try RecordCodec.decode(damaged, sequence: sequence) }
                }
            }
            #expect(throws: RecordCodec.Failure.checksumMismatch) { try RecordCodec.decode(record, sequence: sequence + 1) }
            for cut in 0..<record.count {
                #expect(throws: RecordCodec.Failure.self) { try RecordCodec.decode(Array(record[0..<cut]), sequence: sequence) }
            }
        }
    }

    /// With the checksum fixed up, mutations reach the payload decoder, which must refuse, never crash.
    @Test func hostilePayloadsAreRefusedNotCrashed() {
        let random = SeededRandomSource(seed: 7)
        for (index, event) in everyKindOfEvent.enumerated() {
            let record = RecordCodec.encode(event, at: Timestamp(milliseconds: 1), sequence: UInt64(index + 1))
            for _ in 0..<300 {
                var mutated = record
                let position = Int(random.next(below: UInt64(record.count - 4)))
                mutated[position] = UInt8(truncatingIfNeeded: random.next())
                mutated = RecordCodec.fixingChecksum(mutated, sequence: UInt64(index + 1))
                _ = try? RecordCodec.decode(mutated, sequence: UInt64(index + 1))
            }
        }
    }
}

@Suite struct JSONTests {
    @Test func parsesAndRendersCanonically() throws {
        let value = try JSONText.parse(#" { "b": [1, -2.5e3, true, null], "a": "x\"\u00e9\ud83d\ude00" } "#)
        #expect(JSONText.render(value) == #"{"a":"x\"é😀","b":[1,-2500.0,true,null]}"#)
        #expect(try JSONText.parse(JSONText.render(value)) == value)
        #expect(try JSONText.parse("9223372036854775807") == JSONValue.int(Int64.max))
        #expect(throws: JSONText.ParseError.self, "an integer beyond 64 bits is refused, not rounded") {
            try JSONText.parse("9223372036854775808")
        }
    }

    /// A write's key and body stay canonical bytes from enqueue to the request (decision 010): what is
    /// rendered from the bytes is what `JSONText.render` makes of the value, and the check on reading
    /// them refuses exactly what decoding the value refuses, at every damaged byte.
    @Test func canonicalBytesRenderAndCheckAsTheValueDoes() throws {
        let random = SeededRandomSource(seed: 17)
        func value(_ depth: Int) -> JSONValue {
            let strings = ["", "a", "x\"y", "back\\slash", "tab\tnew\nline\r", "\u{01}\u{1f}", "é😀", "ü"]
            switch random.next() % (depth > 3 ? 5 : 7) {
            case 0: return .null
            case 1: return .bool(random.next() % 2 == 0)
            case 2: return .int(Int64(bitPattern: random.next()) >> (random.next() % 64))
            case 3: return .double([0.5, -2500.0, 1e300, 3.25e-7, 1e15, 123456789012.0][Int(random.next() % 6)])
            case 4: return .string(strings[Int(random.next() % UInt64(strings.count))])
            case 5: return .array((0..<Int(random.next() % 4)).map { _ in value(depth + 1) })
            default:
                return .object(
                    Dictionary(
                        (0..<Int(random.next() % 4)).map { _ in
                            (strings[Int(random.next() % UInt64(strings.count))], value(depth + 1))
                        },
                        uniquingKeysWith: { first, _ in first }))
            }
        }
        for _ in 0..<300 {
            let made = value(0)
            let canonical = CanonicalJSON(made)
            #expect(canonical.text == Array(JSONText.render(made).utf8))
            #expect(canonical.value == made)
            #expect(canonical.isObject == (made.objectValue != nil))
            // Every single-byte change: read and decode agree on whether it is damage, and on the value.
            let bytes = canonical.bytes
            for position in bytes.indices {
                for flip: UInt8 in [0x01, 0x80, 0xFF] {
                    var damaged = bytes
                    damaged[position] ^= flip
                    let decoded = damaged.withUnsafeBytes { raw -> (JSONValue, Int)? in
                        var reader = ByteReader(raw)
                        return (try? JSONValue.decode(from: &reader)).map { ($0, reader.offset) }
                    }
                    let read = damaged.withUnsafeBytes { raw -> (CanonicalJSON, Int)? in
                        var reader = ByteReader(raw)
                        return (try? CanonicalJSON.read(from: &reader)).map { ($0, reader.offset) }
                    }
                    #expect(decoded?.1 == read?.1, "byte \(position) ^ \(flip) of \(bytes)")
                    if let decoded, let read { #expect(read.0.value == decoded.0) }
                }
            }
        }
    }

    @Test func equalObjectsStoreEqualBytes() {
        let a: JSONValue = ["x": 1, "y": ["b": 2, "a": 1]]
        let b: JSONValue = ["y": ["a": 1, "b": 2], "x": 1]
        #expect(a.canonicalBytes == b.canonicalBytes)
        // The stored form itself: tag 7 (object), count, then keys in UTF-8 order with their values.
        #expect(a.canonicalBytes == [7, 2, 1, 0x78, 3, 2, 1, 0x79, 7, 2, 1, 0x61, 3, 2, 1, 0x62, 3, 4])
    }

    /// Object keys sort byte by byte in UTF-8 (prefixes first; "é" after "z"), as the stored form needs.
    @Test func keysSortByUTF8Bytes() {
        let keys = ["", "a", "ab", "b", "z", "é", "Z", "😀", "a\u{0}", "ä"]
        for a in keys {
            for b in keys {
                #expect(JSONValue.precedes(a, b) == a.utf8.lexicographicallyPrecedes(b.utf8), "\(a) vs \(b)")
            }
        }
    }

    /// The system source draws in blocks of 64: numbers across several blocks (and from two sources)
    /// are all different, so idempotency keys and origins never repeat (R2.1).
    @Test func theSystemSourceNeverRepeatsAcrossBlocks() {
        let a = SystemRandomSource()
        let b = SystemRandomSource()
        let drawn = (0..<300).flatMap { _ in [a.next(), b.next()] }
        #expect(Set(drawn).count == drawn.count)
        #expect(Set((0..<100).map { _ in IdempotencyKey(using: a) }).count == 100)
    }

    /// A row's key is stored in `rows`, so it must never change (R2.2); integer and string keys keep
    /// their order (decision 007).
    @Test func theRowKeyIsStableAndKeepsIntegerAndStringOrder() {
        let key: JSONValue = ["id": 1]
        #expect(key.canonicalBytes == [7, 1, 2, 0x69, 0x64, 3, 2])
        #expect(StableHash.of("alice", "todos", "id") == 0xF9EC_8866_2056_F13F)
        #expect(
            RowKey.of(user: "alice", table: "todos", key: key) == StoreKey.bytes(id: 0xF9EC_8866_2056_F13F) + [
                1, 0x80, 0, 0, 0, 0, 0, 0, 1,
            ])
        #expect(
            RowKey.of(user: "alice", table: "todos", key: ["id": "1"]) == StoreKey.bytes(id: 0xF9EC_8866_2056_F13F) + [3, 0x31])
        let long = String(repeating: "x", count: RowKey.maxKeptString + 1)
        let longKey: JSONValue = ["id": .string(long)]
        #expect(
            RowKey.of(user: "alice", table: "todos", key: longKey) == StoreKey.bytes(id: StableHash.of("alice", "todos")) + [4]
                + longKey.canonicalBytes)
        let overlong: JSONValue = ["id": .string(String(repeating: "x", count: RowKey.maxKeptBytes))]
        #expect(
            RowKey.of(user: "alice", table: "todos", key: overlong) == StoreKey.bytes(id: StableHash.of("alice", "todos")) + [2]
                + StoreKey.bytes(id: StableHash.of(overlong.canonicalBytes)))
        let integers = [Int64.min, -5, -1, 0, 1, 2, 10, 255, 256, 1_000_000, .max].map {
            RowKey.of(user: "alice", table: "todos", key: ["id": .int($0)])
        }
        // UUIDv7s made one millisecond apart, and ULIDs: their text order is their time order.
        let strings = [
            "0190b6e2-0000-7000-8000-000000000000", "0190b6e2-0001-7000-8000-000000000000",
            "0190b6e3-0000-7000-8000-000000000000",
            "01HZY3K9Q80000000000000000", "01HZY3K9Q80000000000000001", "01HZY3K9Q90000000000000000",
        ]
        .map { RowKey.of(user: "alice", table: "todos", key: ["id": .string($0)]) }
        for ordered in [integers, strings] {
            for (a, b) in zip(ordered, ordered.dropFirst()) {
                #expect(a.withUnsafeBufferPointer { x in b.withUnsafeBufferPointer { y in StoreKey.precedes(x, y) } })
            }
        }
        let distinct: [JSONValue] = [
            ["id": 2], ["uid": 2], ["id": "2"], ["uid": "2"], ["id": "20"], ["id": ""], ["id": .string(long)], ["id": 2.5],
            ["id": 2, "list": 1], [:],
        ]
        let keys = distinct.map { RowKey.of(user: "alice", table: "todos", key: $0) }
        #expect(Set(keys).count == distinct.count)
        // The fold makes the same bytes on the stack, the longest forms included.
        for key in distinct + [longKey, overlong, ["id": .string(String(repeating: "y", count: RowKey.maxKeptString))]] {
            let canonical = CanonicalJSON(key)
            #expect(
                RowKey.storeKey(user: "alice", table: "todos", key: canonical).bytes
                    == RowKey.of(user: "alice", table: "todos", key: canonical))
        }
        let widest: JSONValue = ["id": .string(String(repeating: "z", count: RowKey.maxKeptBytes - 8))]
        #expect(CanonicalJSON(widest).bytes.count == RowKey.maxKeptBytes)
        #expect(RowKey.storeKey(user: "a", table: "t", key: CanonicalJSON(widest)).bytes.count == 9 + RowKey.maxKeptBytes)
        #expect(
            RowKey.of(user: "alice", table: "todos", key: ["id": 2]) != RowKey.of(user: "bob", table: "todos", key: ["id": 2]))
        #expect(
            RowKey.of(user: "alice", table: "todos", key: ["id": 2]) != RowKey.of(user: "alice", table: "lists", key: ["id": 2]))
    }

    /// The bytes the transaction's store holds (and keys are made of) come back as given, inline or
    /// past the inline room, and compare by length as well as content (a zero byte more is another value).
    @Test func inlineBytesHoldEveryLengthAsGiven() {
        let random = SeededRandomSource(seed: 7)
        for count in 0...(InlineBytes.inlineCapacity * 2 + 3) {
            let bytes = (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            let held = InlineBytes(bytes)
            #expect(held.bytes == bytes)
            #expect(held.count == count)
            #expect(held == InlineBytes(bytes))
            #expect(held != InlineBytes(bytes + [0]))
            #expect(StoreKey(bytes) != StoreKey(bytes + [0]))
            if let last = bytes.last {
                #expect(held != InlineBytes(bytes.dropLast() + [last &+ 1]))
            }
        }
    }

    @Test(arguments: [
        "", "{", "[1,]", "{\"a\":1,\"a\":2}", "01", "1.", "\"\\x\"", "nul", "{} {}", "\"\u{01}\"", "[\"\\ud800\"]",
        String(repeating: "[", count: 65) + String(repeating: "]", count: 65), "1e999",
    ])
    func refusesWhatIsNotJSON(_ text: String) {
        #expect(throws: JSONText.ParseError.self) { try JSONText.parse(text) }
    }
}

@Suite struct LayoutTests {
    @Test func projectionTableIndexIsItsPositionInAllCases() {
        for (position, table) in ProjectionTable.allCases.enumerated() { #expect(table.index == position) }
    }
}
