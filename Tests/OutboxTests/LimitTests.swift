import OutboxTesting
import Synchronization
import Testing

@testable import Outbox

/// Whatever `enqueue` accepts reads back (R2.4): every length-prefixed field has one
/// limit, checked at enqueue as a typed invalid-write error that names it (R2.4), tested at the limit
/// and one past it.
@Suite struct LimitTests {
    /// A write whose key and body are exactly `bytes` of canonical JSON: `{"id":1}` and `{"t":"…"}`.
    static func write(ofJSONBytes bytes: Int) -> Write {
        .insert(into: "todos", key: ["id": 1], body: ["t": .string(String(repeating: "x", count: bytes - 16))])
    }

    @Test func keyAndBodyUpToTheLimitReadBackAndOnePastIsRefused() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let atLimit = Self.write(ofJSONBytes: Write.maxJSONBytes)
            #expect(JSONText.render(atLimit.key).utf8.count + JSONText.render(atLimit.body).utf8.count == Write.maxJSONBytes)
            let id = try await client.enqueue(atLimit)
            #expect(try await client.queue.all().first { $0.id == id }?.body == atLimit.body)
            #expect(try await client.history(of: id).count == 1)
            #expect(try await client.verify().isOK)
            let before = try client.eventCount()
            let error = await #expect(throws: OutboxError.self) {
                try await client.enqueue(Self.write(ofJSONBytes: Write.maxJSONBytes + 1))
            }
            #expect(error?.code == .invalidWrite)
            #expect(error?.message.contains("at most \(Write.maxJSONBytes)") == true)
            #expect(try client.eventCount() == before, "a refused write changes nothing")
        }
    }

    @Test func namesUpToTheLimitAreTakenAndOnePastIsRefused() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let name = String(repeating: "n", count: Write.maxNameBytes)
            let long = name + "n"
            try await client.enqueue(.insert(into: name, key: ["id": 1], body: [:]))
            try await client.enqueue(.custom(name, table: "todos", key: ["id": 2], body: [:]))
            try await client.settleSession(user: name, accessToken: nil)
            try await client.enqueue(todo(3))
            #expect(try client.everyWrite().count == 3)
            let before = try client.eventCount()
            await #expect(throws: OutboxError.invalidWrite) {
                try await client.enqueue(.insert(into: long, key: ["id": 1], body: [:]))
            }
            await #expect(throws: OutboxError.invalidWrite) {
                try await client.enqueue(.custom(long, table: "todos", key: ["id": 1], body: [:]))
            }
            await #expect(throws: OutboxError.invalidWrite) { try await client.settleSession(user: long, accessToken: nil) }
            #expect(try client.eventCount() == before)
            #expect(try await client.verify().isOK)
        }
    }

    @Test func dependsOnUpToTheLimitIsTakenAndOnePastIsRefused() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let ids = try await client.enqueue(contentsOf: (1...Write.maxDependencies + 1).map { todo(Int64($0)) })
            var write = todo(0)
            write.dependsOn = Array(ids.prefix(Write.maxDependencies))
            let id = try await client.enqueue(write)
            #expect(try await client.write(id)?.dependsOn.count == Write.maxDependencies)
            write.dependsOn = ids
            await #expect(throws: OutboxError.invalidWrite) { try await client.enqueue(write) }
            #expect(try await client.verify().isOK)
        }
    }

    // Integers beyond 64 bits are not rounded into doubles (two keys would be one).
    @Test func integersBeyondSixtyFourBitsAreRefusedNotRounded() throws {
        #expect(try JSONText.parse("9223372036854775807") == .int(Int64.max))
        #expect(try JSONText.parse("-9223372036854775808") == .int(Int64.min))
        for text in ["9223372036854775808", "9223372036854775809", "-9223372036854775809", #"{"id":18446744073709551616}"#] {
            #expect(throws: JSONText.ParseError.self) { try JSONText.parse(text) }
        }
        #expect(try JSONText.parse("9223372036854775808.0") == .double(9_223_372_036_854_775_808.0), "a double stays a double")
    }
}

/// Codes are short identifiers; anything else a server puts there is its text,
/// which never reaches the status, an event or a report, and the log keeps it cut.
@Suite struct ServerCodeTests {
    static let long = String(repeating: "support@example.com ", count: 4_800)  // 96,000 characters

    @Test func aCodeThatIsNoIdentifierNeverReachesTheStatus() async throws {
        try await TemporaryFolder.with { path in
            let instance = SimulatedInstance()
            var configuration = testConfiguration()
            configuration.batchSize = 1
            let client = try await openClient(path, configuration: configuration, transport: instance)
            let events = client.events
            try await client.enqueue(todo(1))
            try await client.enqueue(todo(2))
            instance.script([.verdict(.refused(Refusal(status: 422, code: Self.long))), .status(503, code: Self.long)])
            let report = try await client.sync()
            #expect(report.stoppedBy == PassFailure(kind: .http, status: 503, code: nil))
            #expect(client.syncStatus.value.lastSyncError?.code == nil)
            let refused = try #require(try await client.write(1)?.state.refusal)
            #expect(refused.code == nil)
            #expect(refused.message?.unicodeScalars.count == Refusal.maxTextScalars, "the log keeps the text, cut, for audits")
            client.close()
            var seen: [OutboxEvent] = []
            for await event in events { seen.append(event) }
            #expect(!"\(seen)\(report)\(client.syncStatus.value)".contains("support@example.com"))
        }
    }

    @Test func codesAreKeptWhenTheyAreCodes() throws {
        for code in ["23505", "PGRST204", "P0001", "42501", "key_spent", "a.b-c"] { #expect(Refusal.identifier(code) == code) }
        for code in ["", String(repeating: "A", count: 33), "23 505", "x@y", "é", "PGRST\u{1B}"] {
            #expect(Refusal.identifier(code) == nil)
        }
        #expect(PassFailure(kind: .http, status: 500, code: "a b").code == nil)
        #expect(RequestFailure(kind: .http, status: 500, code: "a b").text == "a b")
        // A status no HTTP answer has (negative, huge) is no status, and never
        // reaches the record encoder, whose varints take no negative number.
        for status in [-1, 0, 99, 1000, Int.max, Int.min] {
            #expect(Refusal(status: status).status == nil && RequestFailure(kind: .http, status: status).status == nil)
            #expect(PassFailure(kind: .http, status: status).status == nil)
        }
        let event = Event.verdictRecorded(
            VerdictRecorded(writeId: 1, passId: 1, state: .refused(Refusal(status: -7)), refusals: 1))
        #expect(
            try RecordCodec.decode(RecordCodec.encode(event, at: Timestamp(milliseconds: 0), sequence: 1), sequence: 1).event
                == event)
    }

    @Test func theLogKeepsAnswersItCanReadBack() {
        let sibling = String(repeating: "s", count: 100_000)
        let answer = RequestAnswer.answered([
            WriteAnswer(.conflicted(siblingId: sibling, fields: (0..<1000).map { "f\($0)" }))
        ]).bounded(writes: 1)
        guard case .answered(let answers) = answer, case .conflicted(let kept, let fields) = answers[0].verdict else {
            Issue.record("\(answer)")
            return
        }
        #expect(kept.count == Refusal.maxTextScalars && fields.count == Refusal.maxFields)
        let tooMany = RequestAnswer.answered(Array(repeating: WriteAnswer(.accepted), count: 3)).bounded(writes: 2)
        #expect(tooMany == .contractBroken("3 answers for a request of 2 writes"))
    }
}

/// An atomic group's waiting state and readiness are the group's, read once a
/// snapshot, not once a member (once a member, listing a group of 10,000 is quadratic).
@Suite struct AtomicGroupCostTests {
    final class Count: Sendable {
        let value = Mutex(0)
    }

    /// `reader`, counting in `reads` every read of a verdict-table entry by id.
    static func counting(_ reader: StoreReader, _ reads: Count) -> StoreReader {
        StoreReader(
            value: { table, key in
                if table == .writes { reads.value.withLock { $0 += 1 } }
                return try reader.value(table, key)
            }, scan: reader.scan, record: reader.record)
    }

    @Test func listingAGroupReadsEachMemberAConstantNumberOfTimes() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let size = 2_000
            _ = try await client.enqueue(contentsOf: (1...size).map { todo(Int64($0)) }, atomic: true)
            let reads = Count()
            let listed = try client.log.read { reader in
                let counting = Self.counting(reader, reads)
                return try QueuedWrite.all(user: nil, reader: counting)
            }
            #expect(listed.count == size && listed.allSatisfy { !$0.waiting })
            #expect(reads.value.withLock { $0 } <= 2 * size, "\(reads.value.withLock { $0 }) entry reads for \(size) members")
        }
    }
}

extension AtomicGroupCostTests {
    @Test func planningAroundAGroupThatCannotGoReadsItOnce() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let refused = try await client.enqueue(todo(0))
            try await client.record(refused, .refused(Refusal(status: 422, code: "23514")), refusals: 1)
            let size = 2_000
            var members = (1..<size).map { todo(Int64($0)) }
            var last = todo(Int64(size))
            last.dependsOn = [refused]
            members.append(last)
            _ = try await client.enqueue(contentsOf: members, atomic: true)
            let reads = Count()
            let batch = try client.log.read { reader in
                let counting = Self.counting(reader, reads)
                return try Planner(user: "alice", table: nil, batchSize: 50, done: [refused]).nextBatch(counting)
            }
            #expect(batch == nil, "the group waits behind the refused write, and nothing else is sendable")
            #expect(reads.value.withLock { $0 } <= 4 * size, "\(reads.value.withLock { $0 }) entry reads for a group of \(size)")
        }
    }
}

/// A `rows` slot keyed by a hash is checked against the write's user and table,
/// so a collision (accidental or built) never makes one user's write follow another's.
@Suite struct RowSlotTests {
    @Test func aSlotHoldingAnotherUsersWriteLinksNothing() throws {
        var projector = Projector(store: MemoryProjections())
        let bob = WriteQueued(
            id: 1, user: "bob", table: "todos", operation: .insert, key: ["id": 1], body: [:],
            idempotencyKey: IdempotencyKey(high: 1, low: 1))
        try projector.apply(RecordedEvent(sequence: 1, at: Timestamp(milliseconds: 0), event: .writeQueued(bob)))
        // The collision, made by hand: alice's row's slot names bob's write.
        var ids = ByteWriter(capacity: 4)
        ids.ids([1])
        for key in [["id": 2], ["a": 1, "b": "x"]] as [JSONValue] {
            projector.store.set(.rows, RowKey.of(user: "alice", table: "todos", key: key), ids.bytes)
            #expect(try projector.rowSlot(user: "alice", table: "todos", key: CanonicalJSON(key)).unsettled == [])
            projector.store.set(.rows, RowKey.of(user: "bob", table: "lists", key: key), ids.bytes)
            #expect(try projector.rowSlot(user: "bob", table: "lists", key: CanonicalJSON(key)).unsettled == [], "another table")
        }
        #expect(try projector.rowSlot(user: "bob", table: "todos", key: CanonicalJSON(["id": 1])).unsettled == [1])
    }

    @Test func compositeKeysAreKeptWholeInTheirSlotWhenTheyFit() {
        let short: JSONValue = ["list": 7, "item": "milk"]
        #expect(RowKey.of(user: "a", table: "t", key: short).count == 9 + short.canonicalBytes.count)
        let long: JSONValue = ["list": 7, "item": .string(String(repeating: "m", count: 500))]
        #expect(RowKey.of(user: "a", table: "t", key: long).count == 17, "hashed")
    }
}

extension LimitTests {
    // The size enqueue checks is the rendered text's, counted without rendering it.
    @Test func theRenderedLengthIsTheRenderedTextsLength() {
        let values: [JSONValue] = [
            .null, true, false, 0, -1, 9, 10, -10, .int(Int64.max), .int(Int64.min), 0.5, -2500.0, 1e300, 1e-7, .double(.nan), "",
            "a\"b\\c\nd\re\tf\u{1}g\u{1F}é😀", [], [1, "x", [nil, ["k": 2]]], [:], ["b": [1, 2], "a": "x", "é": ["": nil]],
        ]
        for value in values { #expect(JSONText.renderedLength(value) == JSONText.render(value).utf8.count, "\(value)") }
    }
}

extension LimitTests {
    // Enqueue measures a write's JSON text (R2.4) only when the lengths of its canonical bytes do not
    // bound it: no byte of the canonical form renders as more than six bytes of text. And the encoder's
    // note of whether a log can hold a value is the check a reader of the log makes.
    @Test func theCanonicalBytesBoundTheTextAndTheEncoderKnowsWhatALogHolds() throws {
        var random = SplitMix64(seed: 25)
        let widest: [JSONValue] = [
            .array(Array(repeating: false, count: 50)), .string(String(repeating: "\u{1}", count: 50)), .null, false, "",
            .string("\u{1}"), [[], [:], [""], ["": false]], ["": .array(Array(repeating: nil, count: 9))], .int(Int64.min), -64,
            .double(-1.2345678901234567e-300),
        ]
        for value in widest + (0..<3000).map({ _ in Self.randomJSON(&random, depth: 0) }) {
            let canonical = CanonicalJSON(value)
            let measured = try? canonical.checkedTextLength()
            #expect(canonical.isHoldable == (measured != nil), "\(value)")
            if let measured {
                #expect(measured == JSONText.render(value).utf8.count, "\(value)")
                #expect(measured <= canonical.textLengthBound, "\(value)")
            }
        }
        let deep = (1..<JSONText.maxDepth).reduce(JSONValue.int(1)) { inner, _ in .array([inner]) }
        #expect(CanonicalJSON(deep).isHoldable)
        #expect(!CanonicalJSON(.array([deep])).isHoldable)
        #expect(!CanonicalJSON(["a": [1, ["b": .double(.infinity)]]]).isHoldable)
        // What a log holds reads back holdable; enqueue still refuses the others with their reason.
        #expect(
            try CanonicalJSON(deep).bytes.withUnsafeBytes { raw in
                var reader = ByteReader(raw)
                return try CanonicalJSON.read(from: &reader).isHoldable
            })
        let refused = Write(table: "todos", operation: .insert, key: ["id": 1], body: ["x": .array([deep])])
        #expect(throws: OutboxError.self) { try refused.validate() }
        let error = #expect(throws: OutboxError.self) {
            try Write(table: "todos", operation: .insert, key: ["id": 1], body: ["x": .double(.nan)]).validate()
        }
        #expect(error?.message.contains("not finite") == true)
    }

    /// A JSON value drawn from `random`: every kind, the strings' widest characters, numbers at their
    /// extremes, and now and then one a log cannot hold.
    static func randomJSON(_ random: inout SplitMix64, depth: Int) -> JSONValue {
        let pick = random.next() % (depth > 3 ? 6 : 8)
        switch pick {
        case 0: return .null
        case 1: return .bool(random.next() & 1 == 0)
        case 2: return .int([0, -1, 63, -64, 64, Int64.max, Int64.min, Int64(bitPattern: random.next())][Int(random.next() % 8)])
        case 3:
            let doubles: [Double] = [0.5, -1e-300, 1e300, .infinity, .nan, Double(bitPattern: random.next() >> 2)]
            return .double(doubles[Int(random.next() % UInt64(doubles.count))])
        case 4, 5:
            let characters: [Character] = ["a", "\"", "\\", "\n", "\u{1}", "\u{1F}", "é", "😀", "\t"]
            return .string(String((0..<random.next() % 6).map { _ in characters[Int(random.next() % 9)] }))
        case 6: return .array((0..<random.next() % 5).map { _ in randomJSON(&random, depth: depth + 1) })
        default:
            var members: [String: JSONValue] = [:]
            for _ in 0..<random.next() % 5 {
                members[["", "a", "b", "\u{1}k", "é"][Int(random.next() % 5)]] = randomJSON(&random, depth: depth + 1)
            }
            return .object(members)
        }
    }
}
