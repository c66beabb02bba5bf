import Foundation
import OutboxLMDB
import Testing

@testable import Outbox

/// The stored format, pinned: one file per event type and payload version under `Golden/`, each record
/// as its sequence, its bytes in hex, and the JSON it reads as. Every run decodes each record, checks
/// what it reads as, and (for the current version) re-encodes it byte for byte; the samples below must
/// encode to exactly the stored bytes. So a reordered enum case, a changed code or a changed field
/// order fails here. `OUTBOX_WRITE_GOLDEN=1 swift test --filter GoldenRecord` writes the current
/// versions' files again, for a deliberate format change (with a new version and an upcaster).
@Suite struct GoldenRecordTests {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Golden")

    struct Golden: Equatable {
        var sequence: UInt64
        var bytes: [UInt8]
        var json: String
    }

    static func fileName(_ type: EventType, version: UInt8) -> String { "\(type.name).v\(version).txt" }

    static func parse(_ text: String) throws -> [Golden] {
        var records: [Golden] = []
        var sequence: UInt64?
        var bytes: [UInt8]?
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            if line.hasPrefix("record ") {
                sequence = UInt64(line.dropFirst(7))
            } else if line.hasPrefix("hex ") {
                let hex = Array(line.dropFirst(4).utf8)
                bytes = stride(from: 0, to: hex.count - 1, by: 2).compactMap {
                    UInt8(String(decoding: hex[$0...$0 + 1], as: UTF8.self), radix: 16)
                }
            } else if line.hasPrefix("json ") {
                let golden = Golden(sequence: try #require(sequence), bytes: try #require(bytes), json: String(line.dropFirst(5)))
                records.append(golden)
                sequence = nil
                bytes = nil
            }
        }
        return records
    }

    static func render(_ records: [RecordedEvent], type: EventType) -> String {
        var text = "# \(type.name) version \(type.currentVersion): golden records (GoldenRecordTests). Do not edit by hand.\n"
        for record in records {
            let bytes = RecordCodec.encode(record.event, at: record.at, sequence: record.sequence)
            text += "record \(record.sequence)\n"
            text += "hex \(bytes.map { String($0, radix: 16).leftPadded(2) }.joined())\n"
            text += "json \(JSONText.render(record.json))\n"
        }
        return text
    }

    // R8.1: every record of every file reads as it always did; a current one re-encodes to its bytes.
    @Test func everyGoldenRecordDecodesAndReencodesByteForByte() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.folder.path).filter { $0.hasSuffix(".txt") }
        #expect(!files.isEmpty)
        for file in files.sorted() {
            let parts = file.dropLast(4).split(separator: ".")
            let type = try #require(EventType.allCases.first { $0.name == parts[0] }, "\(file) names no event type")
            let version = try #require(UInt8(parts[1].dropFirst()))
            let records = try Self.parse(try String(contentsOf: Self.folder.appendingPathComponent(file), encoding: .utf8))
            #expect(!records.isEmpty, "\(file) holds no record")
            for golden in records {
                #expect(golden.bytes.first == version, "\(file): record \(golden.sequence) is not of version \(version)")
                let decoded = try RecordCodec.decode(golden.bytes, sequence: golden.sequence)
                #expect(decoded.event.type == type)
                #expect(JSONText.render(decoded.json) == golden.json, "\(file): record \(golden.sequence) reads otherwise")
                if version == type.currentVersion {
                    #expect(RecordCodec.encode(decoded.event, at: decoded.at, sequence: golden.sequence) == golden.bytes)
                }
            }
        }
    }

    // Every event type has a file for the version this build writes, and the samples (every case of
    // every stored enum) encode to exactly its bytes.
    @Test func theSamplesEncodeToTheGoldenBytes() throws {
        let write = ProcessInfo.processInfo.environment["OUTBOX_WRITE_GOLDEN"] == "1"
        let samples = Dictionary(grouping: Self.samples(), by: \.event.type)
        for type in EventType.allCases {
            let records = try #require(samples[type], "no sample of \(type.name)")
            let url = Self.folder.appendingPathComponent(Self.fileName(type, version: type.currentVersion))
            if write { try Self.render(records, type: type).write(to: url, atomically: true, encoding: .utf8) }
            let stored = try Self.parse(try String(contentsOf: url, encoding: .utf8))
            let encoded = records.map { record in
                Golden(
                    sequence: record.sequence, bytes: RecordCodec.encode(record.event, at: record.at, sequence: record.sequence),
                    json: JSONText.render(record.json))
            }
            #expect(encoded == stored, "\(type.name): the samples no longer encode as the golden records")
        }
    }

    // Records and verdict-table entries are written straight into LMDB's pages (`MDB_RESERVE`): the
    // size reserved and the bytes written there are exactly the array encoding's (the one pinned above
    // and the one a fold in memory stores), and they read back where they lie.
    @Test func thePageEncodingIsTheArrayEncodingByteForByte() throws {
        for record in Self.samples() {
            let bytes = RecordCodec.encode(record.event, at: record.at, sequence: record.sequence)
            let paged = try Self.encodeInPage(RecordCodec.self, record, key: record.sequence)
            #expect(paged.bytes == bytes, "\(record.event.type.name)")
            #expect(paged.decoded == record)
        }
        let plain = DeciderTests.entry(7)
        var full = DeciderTests.entry(300, refusals: 3, group: WriteQueued.AtomicGroup(first: WriteID(299), count: 2))
        full.update { full in
            full.dependencies = [WriteID(1), WriteID(200)]
            full.state = .blocked(
                .failingAlone, refusal: Refusal(status: 409, code: "23505", reason: "duplicate", fields: ["id"]))
            full.replayed = true
            full.schemaRefusals = 2
            full.lastSchemaRefusalAt = Timestamp(milliseconds: -5)
            full.lastFailure = LastFailure(status: 502, text: "bad gateway é")
            full.environmentalStreak = 4
        }
        for (id, entry) in [(UInt64(7), plain), (300, full)] {
            let paged = try Self.encodeInPage(EntryCodec.self, entry, key: id)
            #expect(paged.bytes == entry.encode(id: WriteID(id)))
            #expect(paged.decoded == entry)
        }
        let counters = Counters(pending: 300, rejected: 0, blocked: 2, answered: 1 << 40)
        let paged = try Self.encodeInPage(CountersCodec.self, counters, key: 0)
        #expect(paged.bytes == counters.encode())
        #expect(paged.decoded == counters)
    }

    // The bound an enqueue gives its commit before it makes the records (a commit known to pass the
    // journal's bound keeps none of them) is never more than a record takes, and is exact for the
    // shortest: a bound over it would send a small commit past the journal.
    @Test func aWriteQueuedRecordTakesAtLeastItsLeastSize() throws {
        var queued = 0
        for record in Self.samples() {
            guard case .writeQueued(let write) = record.event else { continue }
            queued += 1
            let stored = RecordCodec.encode(record.event, at: record.at, sequence: record.sequence).count
            #expect(WriteQueued.leastRecordSize(of: write.write, user: write.user) <= stored, "\(write.id)")
        }
        #expect(queued > 1)
        let shortest = WriteQueued(
            id: WriteID(1), user: "", table: "t", operation: .insert, key: ["a": 1], body: [:],
            idempotencyKey: IdempotencyKey(high: 0, low: 0))
        let stored = RecordCodec.encode(.writeQueued(shortest), at: Timestamp(milliseconds: 0), sequence: 1).count
        #expect(WriteQueued.leastRecordSize(of: shortest.write, user: "") == stored)
    }

    // A put encodes a record or an entry once, into a scratch buffer, and copies it to its page: the
    // one pass returns the stored count whatever the scratch's size, and when the value fits leaves
    // exactly the page's bytes in it (a value that does not fit is encoded again into its page).
    @Test func theOnePassEncodingCountsAlwaysAndWritesWhatFits() throws {
        let sample = try #require(Self.samples().first { $0.event.type == .writeQueued })
        guard case .writeQueued(let queued) = sample.event else { return }
        let body = JSONValue.object(["text": .string(String(repeating: "é", count: 900))])
        let large = RecordedEvent(
            sequence: sample.sequence, at: sample.at,
            event: .writeQueued(
                WriteQueued(
                    id: queued.id, user: queued.user, write: Write.insert(into: queued.table, key: queued.key, body: body),
                    follows: queued.follows, idempotencyKey: queued.idempotencyKey, atomicGroup: queued.atomicGroup)))
        for record in Self.samples() + [large] {
            let page = try Self.encodeInPage(RecordCodec.self, record, key: record.sequence).bytes
            for room in Set([0, 1, page.count - 5, page.count - 1, page.count, page.count + 7, 1024]) where room >= 0 {
                let (count, scratch) = Self.encodeOnce(RecordCodec.self, record, key: record.sequence, room: room)
                #expect(count == page.count, "\(record.event.type.name) in \(room) bytes")
                if count <= room { #expect(Array(scratch.prefix(count)) == page, "\(record.event.type.name)") }
            }
        }
        #expect(try Self.encodeInPage(RecordCodec.self, large, key: large.sequence).bytes.count > 1024)
        let entry = DeciderTests.entry(7)
        let page = try Self.encodeInPage(EntryCodec.self, entry, key: 7).bytes
        for room in [0, page.count - 1, page.count, 64] {
            let (count, scratch) = Self.encodeOnce(EntryCodec.self, entry, key: 7, room: room)
            #expect(count == page.count)
            if count <= room { #expect(Array(scratch.prefix(count)) == page) }
        }
    }

    /// `value` encoded in one pass into a scratch buffer of `room` bytes: the count it returns, and the buffer.
    static func encodeOnce<Codec: ValueCodec>(
        _ codec: Codec.Type, _ value: Codec.Value, key: UInt64, room: Int
    ) -> (count: Int, scratch: [UInt8]) {
        withUnsafeBytes(of: key.bigEndian) { key in
            var scratch = [UInt8](repeating: 0xEE, count: room)
            let count = scratch.withUnsafeMutableBytes { Codec.encode(value, key: key, fittingIn: $0) }
            return (count, scratch)
        }
    }

    /// `value` encoded into memory of exactly the size the codec asks LMDB to reserve, and decoded from it.
    static func encodeInPage<Codec: ValueCodec>(
        _ codec: Codec.Type, _ value: Codec.Value, key: UInt64
    ) throws -> (bytes: [UInt8], decoded: Codec.Value) {
        try withUnsafeBytes(of: key.bigEndian) { key in
            var page = [UInt8](repeating: 0xEE, count: Codec.storedCount(of: value, key: key))
            page.withUnsafeMutableBytes { Codec.encode(value, key: key, into: $0) }
            return (page, try Codec.decode(page.span.bytes, key: key))
        }
    }

    // The codes the log stores for the enums whose cases carry no raw value of their own, as
    // Specs/log-format.md lists them.
    @Test func storedEnumCodesAreTheDocumentedOnes() {
        let blocked: [BlockedReason: UInt8] = [
            .credentialRefused: 0, .keySpent: 1, .ancestorUnavailable: 2, .conflictUnresolved: 3, .failingAlone: 4,
            .instanceChanged: 5, .identityChanged: 6,
        ]
        #expect(Dictionary(uniqueKeysWithValues: BlockedReason.allCases.map { ($0, $0.code) }) == blocked)
        let pass: [PassFailure.Kind: UInt8] = [
            .network: 0, .http: 1, .schemaCache: 2, .protocol: 3, .identityChanged: 4, .noToken: 5, .busy: 6,
        ]
        #expect(Dictionary(uniqueKeysWithValues: PassFailure.Kind.allCases.map { ($0, $0.code) }) == pass)
        let request: [RequestFailure.Kind: UInt8] = [.network: 0, .timeout: 1, .device: 2, .http: 3]
        #expect(Dictionary(uniqueKeysWithValues: RequestFailure.Kind.allCases.map { ($0, $0.code) }) == request)
        let meaning: [RequestFailure.Meaning: UInt8] = [.mayPass: 0, .tokenRefused: 1, .schemaCache: 2, .refused: 3]
        #expect(Dictionary(uniqueKeysWithValues: RequestFailure.Meaning.allCases.map { ($0, $0.code) }) == meaning)
        for code in UInt8(7)...UInt8(255) { #expect(BlockedReason(code: code) == nil) }
    }

    /// One or more records of every event type, together holding every case of every stored enum.
    static func samples() -> [RecordedEvent] {
        let key = IdempotencyKey(high: 0x0123_4567_89AB_CDEF, low: 0xFEDC_BA98_7654_3210)
        let refusal = Refusal(
            status: 422, code: "23514", reason: "check_violation", message: "new row violates check", fields: ["title"],
            trashed: true, restorable: false, missingGrant: "insert")
        let final = Refusal.unsent(because: "the insert it waits for was withdrawn")
        var groups: [[Event]] = []
        var events: [Event] = [
            .logCreated(LogCreated(origin: key)),
            .sessionSettled(SessionSettled(user: "alice", identityChanged: false)),
            .sessionSettled(SessionSettled(user: nil, identityChanged: true)),
            .networkSwitched(NetworkSwitched(enabled: false)),
            .passStarted(PassStarted(passId: 3, user: "alice", table: "todos", automatic: true, maxRefusals: 5, batchSize: 50)),
            .passStarted(PassStarted(passId: 4, user: "", table: nil, automatic: false, maxRefusals: 1, batchSize: 1)),
            .attemptStarted(
                AttemptStarted(passId: 3, writes: [.init(id: 1, idempotencyKey: key), .init(id: 300, idempotencyKey: key)])),
            .answerReceived(
                AnswerReceived(
                    passId: 3, writes: [1, 2, 3, 4, 5, 6, 7],
                    answer: .answered([
                        WriteAnswer(.accepted), WriteAnswer(.merged(fields: ["title", "done"]), replayed: true),
                        WriteAnswer(.conflicted(siblingId: "sib-1", fields: ["title"])), WriteAnswer(.refused(refusal)),
                        WriteAnswer(.blocked(.keySpent, refusal: refusal)), WriteAnswer(.failed(status: 503, text: "busy")),
                        WriteAnswer(.skipped),
                    ]))),
            .answerReceived(AnswerReceived(passId: 5, writes: [9], answer: .contractBroken("the response body is not a list"))),
            .schemaRefusalCounted(SchemaRefusalCounted(writeId: 8, passId: 3, count: 2)),
            .writeFailed(WriteFailed(writeId: 8, passId: 3, status: 500, text: "boom", streak: 2)),
            .writeFailed(WriteFailed(writeId: 9, passId: 4, status: nil, text: nil, streak: 0)),
            .passEnded(PassEnded(passId: 3, stoppedBy: nil)),
            .batchAborted(BatchAborted(passId: 3, writes: [4, 5])),
            .writeReleased(WriteReleased(writeId: 4, idempotencyKey: key, reason: nil)),
            .writeWithdrawn(
                WriteWithdrawn(writeId: 4, row: ["id": 4, "title": "milk", "done": false, "tags": ["a", 1.5, nil]])),
            .writeDiscarded(WriteDiscarded(writeId: 5, withDependents: true)),
            .answersTaken(AnswersCleared(writes: [1, 2])),
            .answersForgotten(AnswersCleared(writes: [3])),
            .localDataCleared(LocalDataCleared(user: "bob", writes: [10, 11])),
        ]
        groups.append(events)
        events = []
        let operations: [WriteOperation] = [.insert, .update, .upsert, .delete, .custom("complete_list")]
        for (index, operation) in operations.enumerated() {
            events.append(
                .writeQueued(
                    WriteQueued(
                        id: WriteID(UInt64(20 + index)), user: "alice", table: "todos", operation: operation,
                        key: ["id": .int(Int64(index))], body: index == 3 ? [:] : ["title": "milk", "n": -7, "x": 0.25],
                        baseVersion: index == 1 ? 3 : nil, dependsOn: index == 2 ? [20] : [], follows: index == 2 ? [21] : [],
                        idempotencyKey: key, atomicGroup: index == 4 ? .init(first: 23, count: 2) : nil)))
        }
        groups.append(events)
        events = []
        for reason in BlockedReason.allCases {
            events.append(
                .verdictRecorded(VerdictRecorded(writeId: 30, passId: 3, state: .blocked(reason, refusal: nil), refusals: 1)))
            events.append(.writeReleased(WriteReleased(writeId: 30, idempotencyKey: key, reason: reason)))
        }
        groups.append(events)
        events = []
        let states: [WriteState] = [
            .pending, .accepted, .merged(fields: ["done"]), .conflicted(siblingId: "sib-2", fields: []), .refused(refusal),
            .refused(final), .blocked(.conflictUnresolved, refusal: refusal), .dead(refusal), .dead(nil),
        ]
        for state in states {
            events.append(.verdictRecorded(VerdictRecorded(writeId: 31, passId: nil, state: state, refusals: 5, replayed: true)))
        }
        groups.append(events)
        events = []
        for kind in PassFailure.Kind.allCases {
            events.append(
                .passEnded(
                    PassEnded(passId: 6, stoppedBy: PassFailure(kind: kind, status: 503, code: "PGRST001", retryAfter: 2.5))))
        }
        groups.append(events)
        events = []
        for kind in RequestFailure.Kind.allCases {
            events.append(
                .answerReceived(
                    AnswerReceived(
                        passId: 7, writes: [12],
                        answer: .failed(
                            RequestFailure(
                                kind: kind, status: 429, code: "PGRST", retryAfter: "Wed, 21 Oct 2026 07:28:00 GMT", text: "slow")
                        ))))
        }
        groups.append(events)
        // Writes a transport did not send (verdict 7): with the failure of their own request, and without.
        groups.append([
            .answerReceived(
                AnswerReceived(
                    passId: 8, writes: [13, 14, 15],
                    answer: .answered([
                        WriteAnswer(.accepted),
                        WriteAnswer(.notSent(RequestFailure(kind: .http, status: 503, code: "PGRST001", retryAfter: "0"))),
                        WriteAnswer(.notSent(nil)),
                    ])))
        ])
        // A write cancelled before anything sent it (R6.6).
        groups.append([.writeCancelled(WriteCancelled(writeId: 16))])
        // A batch's verdicts in one event, every state once.
        groups.append([
            .verdictsRecorded(
                VerdictsRecorded(
                    passId: 4,
                    verdicts: states.enumerated().map { index, state in
                        VerdictRecorded(
                            writeId: WriteID(UInt64(40 + index)), passId: 4, state: state, refusals: index, replayed: index == 1)
                    }))
        ])
        // A request that goes on with a batch sent as several requests (R9.3), and a write's own
        // failure with its code (row-level security, R9.4).
        groups.append([
            .answerReceived(
                AnswerReceived(
                    passId: 3, writes: [301],
                    answer: .answered([WriteAnswer(.failed(status: 403, code: "42501", text: "new row violates"))]))),
            .attemptStarted(
                AttemptStarted(passId: 3, writes: [.init(id: 301, idempotencyKey: key)], batchCount: 5, continuesBatch: true)),
        ])
        // What each failure means, as its transport mapped it, with the fields a refusal names (R9.1).
        groups.append(
            RequestFailure.Meaning.allCases.map { meaning in
                .answerReceived(
                    AnswerReceived(
                        passId: 11, writes: [302],
                        answer: .failed(
                            RequestFailure(
                                kind: .http, status: 400, code: "23502", text: "null value", fields: ["title"], meaning: meaning))
                    ))
            })
        // A compaction's snapshot (R8.5): the archive's segments and the projections' state.
        groups.append([.logCompacted(sampleCompaction)])
        // Each group numbered from its own thousand: a case added to one enum adds a record at the end
        // of its group and moves no other record.
        return groups.enumerated().flatMap { group, events in
            events.enumerated().map { index, event in
                let sequence = UInt64(group * 1000 + index + 1)
                return RecordedEvent(
                    sequence: sequence, at: Timestamp(milliseconds: 1_767_225_600_000 + Int64(sequence) * 1000), event: event)
            }
        }
    }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}

/// A `logCompacted` event with two segments and a little state.
let sampleCompaction = LogCompacted(
    horizon: 900,
    segments: [
        ArchiveSegment(
            number: 1, firstSequence: 1, lastSequence: 499, lowestWrite: 1, highestWrite: 200, writeCount: 200,
            digest: Array(repeating: 0xAB, count: 32)),
        ArchiveSegment(
            number: 2, firstSequence: 500, lastSequence: 899, lowestWrite: nil, highestWrite: nil, writeCount: 0,
            digest: Array(0..<32)),
    ],
    state: ProjectionState(
        layout: 10,
        entries: [
            .init(table: .meta, key: Array("origin".utf8), value: [1, 2, 3]),
            .init(table: .history, key: StoreKey.bytes(pair: 7, 12), value: []),
        ]))
