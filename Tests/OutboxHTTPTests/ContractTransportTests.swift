import Foundation
import Outbox
import OutboxHTTP
import OutboxTesting
import Testing

/// The contract transport through real HTTP into the reference instance (Specs/reference-instance.sql)
/// in real PostgreSQL, behind the PostgREST stand-in (R9.5 with R3–R4): every verdict made by real SQL.
@Suite("Contract transport, through the stand-in into the reference instance")
struct ContractTransportTests {
    /// A client of a fresh log at `path`, signed in as `user` with a real token.
    static func client(
        _ path: String, _ instance: Instance, user: String = "alice", batchSize: Int = 50, timeout: TimeInterval = 20
    ) async throws -> OutboxClient {
        let transport = try ContractTransport(url: instance.url, apiKey: instance.apiKey, timeout: timeout)
        var configuration = OutboxConfiguration(autoSync: false, batchSize: batchSize)
        configuration.clock = ManualClock()
        let client = try OutboxClient.open(path: path, transport: transport, configuration: configuration)
        try await client.settleSession(user: user, accessToken: try await instance.token(user))
        return client
    }

    static func kinds(_ report: SyncReport) -> [String] {
        report.verdicts.map { $0.kind.rawValue + ($0.replayed ? " replayed" : "") }
    }

    // R3–R4 through R9.5: accepted, refused with PostgreSQL's own codes, custom mutations, merged field
    // by field across two devices, conflicted with a sibling the app can read, blocked
    // ancestorUnavailable, a lost acknowledgement replayed, atomic groups across tables, the row read.
    @Test func everyVerdictComesFromRealSQL() async throws {
        try await Instance.with { instance in
            try await TemporaryFolder.with { first in
                try await TemporaryFolder.with { second in
                    let phone = try await Self.client(first, instance)
                    let laptop = try await Self.client(second, instance)
                    try await phone.enqueue(.insert(into: "lists", key: ["id": 7], body: ["name": "Groceries"]))
                    try await phone.enqueue(.insert(into: "todos", key: ["id": 1], body: ["title": "Milk", "list_id": 7]))
                    try await phone.enqueue(.insert(into: "todos", key: ["id": 2], body: ["title": ""]))
                    try await phone.enqueue(.custom("bump", table: "counters", key: ["id": 3], body: [:]))
                    try await phone.enqueue(.custom("bump", table: "counters", key: ["id": 3], body: [:]))
                    try await phone.enqueue(.insert(into: "todos", key: ["id": 3], body: ["title": "Eggs", "list_id": 999]))
                    try await phone.enqueue(.update("todos", key: ["id": 1], set: ["done": "maybe"]))
                    try await phone.enqueue(.insert(into: "todos", key: ["id": 6], body: ["title": "Tea", "colour": "red"]))
                    // It follows the refused insert of todo 2 in the same batch: not applied, skipped (R4.5).
                    try await phone.enqueue(.update("todos", key: ["id": 2], set: ["done": true]))
                    let first = try await phone.sync()
                    #expect(
                        Self.kinds(first) == [
                            "accepted", "accepted", "refused", "accepted", "accepted", "refused", "refused", "refused",
                            "skipped",
                        ])
                    let refusals = try await phone.queue.all().compactMap { $0.state.refusal }
                    #expect(refusals.map { $0.code ?? "-" } == ["23514", "23503", "22P02", "42703"])
                    #expect(refusals.map(\.fields) == [["title"], ["list_id"], [], ["colour"]])
                    #expect(try await instance.sql("select n, version from counters") == ["2|2"], "each bump once")
                    #expect(try await instance.sql("select version from todos where id = 1") == ["1"])
                    // Refused writes go again on every pass (R3.1): out of the way of what follows, with
                    // the write skipped behind one.
                    for write in try await phone.queue.all() where write.state.refusal != nil {
                        _ = try await phone.queue.discard(write.id, withDependents: true)
                    }
                    #expect(try await phone.queue.all().allSatisfy { $0.state.refusal?.isFinal ?? true }, "nothing to resend")

                    // Two devices from base version 1: disjoint fields merge, the same field conflicts.
                    try await laptop.enqueue(.update("todos", key: ["id": 1], set: ["done": true], baseVersion: 1))
                    #expect(Self.kinds(try await laptop.sync()) == ["accepted"])
                    try await phone.enqueue(.update("todos", key: ["id": 1], set: ["title": "Oat milk"], baseVersion: 1))
                    try await laptop.enqueue(.update("todos", key: ["id": 1], set: ["title": "Rye"], baseVersion: 2))
                    try await laptop.enqueue(.update("todos", key: ["id": 1], set: ["title": "x"], baseVersion: 99))
                    let merged = try await phone.sync()
                    #expect(Self.kinds(merged) == ["merged"], "\(merged)")
                    #expect(Self.kinds(try await laptop.sync()) == ["conflicted", "blocked"])
                    let laptopWrites = try await laptop.queue.all()
                    guard case .conflicted(let sibling, let fields) = laptopWrites[1].state else {
                        Issue.record("not conflicted: \(laptopWrites[1].state)")
                        return
                    }
                    #expect(fields == ["title"])
                    #expect(laptopWrites[2].state == .blocked(.ancestorUnavailable, refusal: nil))
                    #expect(try await instance.sql("select title, done, version from todos where id = 1") == ["Oat milk|t|3"])
                    #expect(
                        try await instance.sql(
                            "select body ->> 'title', server_version from outbox.siblings where id = '\(sibling)'")
                            == ["Rye|3"])
                    // The app reads its sibling through the API; another user reads nothing.
                    func readSibling(as user: String) async throws -> JSONValue? {
                        let response = try await URLSessionHTTPClient().send(
                            HTTPRequest(
                                method: "POST", url: instance.url.appendingPathComponent("rpc/outbox_sibling"),
                                headers: [
                                    "Authorization": "Bearer " + (try await instance.token(user)), "apikey": instance.apiKey,
                                    "Content-Type": "application/json",
                                ], body: Data(#"{"id":"\#(sibling)"}"#.utf8)), timeout: 10)
                        return try JSONText.parse(String(decoding: response.body, as: UTF8.self))
                    }
                    guard case .object(let held)? = try await readSibling(as: "alice") else {
                        Issue.record("no sibling")
                        return
                    }
                    #expect(held["body"] == ["title": "Rye"] && held["baseVersion"] == 2 && held["fields"] == ["title"])
                    #expect(try await readSibling(as: "bob") == .null)
                    // The same through the transport, as a typed value.
                    struct Title: Decodable { var title: String }
                    let contract = try ContractTransport(url: instance.url, apiKey: instance.apiKey)
                    let typed = try #require(try await contract.sibling(sibling, accessToken: try await instance.token("alice")))
                    #expect(typed.id == sibling && typed.table == "todos" && typed.key == ["id": 1] && typed.operation == .update)
                    #expect(try typed.body(as: Title.self).title == "Rye")
                    #expect(typed.baseVersion == 2 && typed.serverVersion == 3 && typed.fields == ["title"] && !typed.deleted)
                    #expect(typed.writeId == laptopWrites[1].id && typed.createdAt != nil)
                    #expect(try await contract.sibling(sibling, accessToken: try await instance.token("bob")) == nil)

                    // A lost acknowledgement: applied once, answered again as replayed.
                    try await phone.enqueue(.insert(into: "todos", key: ["id": 4], body: ["title": "Bread"]))
                    try await instance.fault([["drop": true]])
                    #expect(try await phone.sync().stoppedBy?.kind == .network)
                    let again = try await phone.sync()
                    #expect(Self.kinds(again) == ["accepted replayed"] && again.alreadyOnServerCount == 1, "\(again)")
                    #expect(try await instance.sql("select count(*) from applied where tbl = 'todos' and row_id = 4") == ["1"])

                    // Atomic groups across tables: all, or (a stale overlapping edit inside) none.
                    try await phone.enqueue(
                        contentsOf: [
                            .insert(into: "lists", key: ["id": 8], body: ["name": "Hardware"]),
                            .insert(into: "todos", key: ["id": 5], body: ["title": "Nails", "list_id": 8]),
                        ], atomic: true)
                    #expect(Self.kinds(try await phone.sync()) == ["accepted", "accepted"])
                    try await phone.enqueue(
                        contentsOf: [
                            .insert(into: "lists", key: ["id": 9], body: ["name": "Garden"]),
                            .update("todos", key: ["id": 1], set: ["title": "Soy milk"], baseVersion: 2),
                        ], atomic: true)
                    let aborted = try await phone.sync()
                    #expect(aborted.rejectedCount == 2, "\(Self.kinds(aborted))")
                    #expect(try await instance.sql("select count(*) from lists where id = 9") == ["0"], "none of it")

                    // The row a withdraw reads.
                    let transport = try ContractTransport(url: instance.url, apiKey: instance.apiKey)
                    let token = try await instance.token("alice")
                    let row = try await transport.readRow(table: "todos", key: ["id": 1], accessToken: token)
                    guard case .object(let held)? = row else {
                        Issue.record("no row: \(String(describing: row))")
                        return
                    }
                    #expect(held["title"] == "Oat milk" && held["version"] == 3)
                    #expect(try await transport.readRow(table: "todos", key: ["id": 99], accessToken: token) == nil)
                    let bob = try await instance.token("bob")
                    #expect(try await transport.readRow(table: "todos", key: ["id": 1], accessToken: bob) == nil, "not bob's")
                    phone.close()
                    laptop.close()
                }
            }
        }
    }

    // R3.2, R4.7: a key sent again with another write is spent; one sent with the same write replays.
    // (The library never reuses a key; a restored or copied log could.)
    @Test func aKeyReusedForAnotherWriteIsSpent() async throws {
        try await Instance.with { instance in
            let transport = try ContractTransport(url: instance.url, apiKey: instance.apiKey)
            let token = try await instance.token("alice")
            let origin = Origin(high: 7, low: 7)
            let key = IdempotencyKey(high: 1, low: 2)
            func write(_ id: UInt64, _ title: String) -> OutgoingWrite {
                OutgoingWrite(
                    id: WriteID(id), origin: origin, idempotencyKey: key, table: "todos", operation: .insert, key: ["id": 1],
                    body: ["title": .string(title)], user: "alice")
            }
            let first = await transport.send(OutgoingBatch(writes: [write(1, "Milk")]), accessToken: token)
            #expect(first == .answered([WriteAnswer(.accepted)]))
            let same = await transport.send(OutgoingBatch(writes: [write(1, "Milk")]), accessToken: token)
            #expect(same == .answered([WriteAnswer(.accepted, replayed: true)]))
            let other = await transport.send(OutgoingBatch(writes: [write(1, "Bread")]), accessToken: token)
            #expect(other == .answered([WriteAnswer(.blocked(.keySpent, refusal: nil))]))
            let another = await transport.send(OutgoingBatch(writes: [write(2, "Milk")]), accessToken: token)
            #expect(another == .answered([WriteAnswer(.blocked(.keySpent, refusal: nil))]))
            // Another user's token: the write is not the caller's, a permission that may pass (R4.3), so
            // the transport maps the instance's refusal to this write's failure.
            let bob = await transport.send(
                OutgoingBatch(writes: [write(1, "Milk")]), accessToken: try await instance.token("bob"))
            guard case .answered(let answers) = bob, case .failed(let status, let code, _)? = answers.first?.verdict else {
                Issue.record("\(bob)")
                return
            }
            #expect(status == 403 && code == "42501")
            // An atomic group the instance aborted for that write was not refused: the whole request
            // failed in a way that may pass (R4.3, R4.5), and nothing of it is charged.
            let group = [UInt64(3), 4].map { id in
                OutgoingWrite(
                    id: WriteID(id), origin: origin, idempotencyKey: IdempotencyKey(high: 9, low: id), table: "todos",
                    operation: .insert, key: ["id": .int(Int64(10 + id))], body: ["title": "Jam"], user: "alice")
            }
            let aborted = await transport.send(
                OutgoingBatch(writes: group, isAtomic: true), accessToken: try await instance.token("bob"))
            guard case .failed(let failure) = aborted else {
                Issue.record("\(aborted)")
                return
            }
            #expect(failure.meaning == .mayPass && failure.status == 403 && failure.code == "42501")
            #expect(try await instance.sql("select title, owner from todos") == ["Milk|alice"])
        }
    }
}

extension ContractTransportTests {
    // R9.5: two devices of one user editing the same rows at once, from the same base version, each
    // in another row order: disjoint fields merge, the same field conflicts with a sibling, no update
    // is lost, no request deadlocks, every write is answered.
    @Test func twoDevicesAtOnceMergeOrConflictAndNeverDeadlock() async throws {
        try await Instance.with { instance in
            try await TemporaryFolder.with { first in
                try await TemporaryFolder.with { second in
                    let rows = 60
                    let phone = try await Self.client(first, instance, batchSize: 20)
                    let laptop = try await Self.client(second, instance, batchSize: 20)
                    _ = try await phone.enqueue(
                        contentsOf: (1...rows).map {
                            .insert(into: "todos", key: ["id": .int(Int64($0))], body: ["title": .string("t\($0)")])
                        })
                    #expect(try await phone.sync().syncedCount == rows)
                    let deadlocks = "select deadlocks from pg_stat_database where datname = current_database()"
                    let before = try await instance.sql(deadlocks)

                    // Disjoint fields, both from version 1, in opposite row orders.
                    _ = try await phone.enqueue(
                        contentsOf: (1...rows).map {
                            .update("todos", key: ["id": .int(Int64($0))], set: ["title": .string("phone \($0)")], baseVersion: 1)
                        })
                    _ = try await laptop.enqueue(
                        contentsOf: (1...rows).reversed().map {
                            .update("todos", key: ["id": .int(Int64($0))], set: ["done": true], baseVersion: 1)
                        })
                    async let phoneReport = phone.sync()
                    async let laptopReport = laptop.sync()
                    let (a, b) = try await (phoneReport, laptopReport)
                    #expect(
                        a.stoppedBy == nil && b.stoppedBy == nil,
                        "\(String(describing: a.stoppedBy)) \(String(describing: b.stoppedBy))")
                    #expect(a.syncedCount == rows && b.syncedCount == rows, "every write answered")
                    let kinds = Set((a.verdicts + b.verdicts).map(\.kind))
                    #expect(kinds.isSubset(of: [.accepted, .merged]) && kinds.contains(.merged))
                    #expect(
                        try await instance.sql("select count(*) from todos where title = 'phone ' || id and done and version = 3")
                            == ["\(rows)"], "no update lost")

                    // The same field, both from version 3: one wins, the other is a sibling.
                    _ = try await phone.enqueue(
                        contentsOf: (1...rows).map {
                            .update("todos", key: ["id": .int(Int64($0))], set: ["title": "from the phone"], baseVersion: 3)
                        })
                    _ = try await laptop.enqueue(
                        contentsOf: (1...rows).reversed().map {
                            .update("todos", key: ["id": .int(Int64($0))], set: ["title": "from the laptop"], baseVersion: 3)
                        })
                    async let phoneAgain = phone.sync()
                    async let laptopAgain = laptop.sync()
                    let (c, d) = try await (phoneAgain, laptopAgain)
                    #expect(c.stoppedBy == nil && d.stoppedBy == nil)
                    let verdicts = c.verdicts + d.verdicts
                    #expect(verdicts.count == 2 * rows && verdicts.allSatisfy { [.accepted, .conflicted].contains($0.kind) })
                    #expect(verdicts.filter { $0.kind == .conflicted }.count == rows, "one of each pair conflicted")
                    #expect(try await instance.sql("select count(*) from outbox.siblings") == ["\(rows)"])
                    #expect(try await instance.sql("select count(*) from todos where version = 4") == ["\(rows)"])
                    #expect(try await instance.sql(deadlocks) == before, "no deadlock")
                    phone.close()
                    laptop.close()
                }
            }
        }
    }

    // R3.2, R4.6: custom mutations that increment counters, through lost acknowledgements: each
    // counter equals the number of its increments, exactly.
    @Test func incrementsCountOnceThroughLostAcknowledgements() async throws {
        try await Instance.with { instance in
            try await TemporaryFolder.with { path in
                let phone = try await Self.client(path, instance, batchSize: 7, timeout: 3)
                var expected: [Int: Int] = [:]
                var writes: [Write] = []
                for n in 0..<90 {
                    let counter = (n * 7) % 5 + 1
                    expected[counter, default: 0] += 1
                    writes.append(.custom("bump", table: "counters", key: ["id": .int(Int64(counter))], body: [:]))
                }
                _ = try await phone.enqueue(contentsOf: writes)
                // Every other request is applied and its acknowledgement lost.
                try await instance.fault((0..<20).map { $0 % 2 == 0 ? ["drop": true] : [:] })
                var passes = 0
                while try await phone.sync().remainingCount > 0 && passes < 60 { passes += 1 }
                #expect(try await phone.queue.all().allSatisfy { $0.state == .accepted })
                let counts = try await instance.sql("select id, n from counters order by id")
                #expect(counts == expected.keys.sorted().map { "\($0)|\(expected[$0]!)" }, "\(counts)")
                phone.close()
            }
        }
    }
}

extension ContractTransportTests {
    // R9.5: a write made outside the outbox (a server job) keeps the versions up, so a stale edit of
    // the field it changed conflicts and one of another field merges; a table registered strict blocks
    // a stale edit (conflictUnresolved) instead of merging; a batch over the instance's cap of 64 is
    // refused as a whole (413) and split by the library until it fits (R4.5), and every write lands.
    @Test func serverWritesStrictTablesAndTheBatchCap() async throws {
        try await Instance.with { instance in
            try await TemporaryFolder.with { path in
                let phone = try await Self.client(path, instance, batchSize: 100)
                _ = try await phone.enqueue(
                    contentsOf: (1...70).map {
                        .insert(into: "todos", key: ["id": .int(Int64($0))], body: ["title": .string("t\($0)")])
                    })
                let capped = try await phone.sync()
                #expect(capped.syncedCount == 70 && capped.rejectedCount == 0, "\(Self.kinds(capped))")
                #expect(try await instance.sql("select count(*) from todos") == ["70"])

                try await instance.sql("update todos set title = 'from a server job' where id = 1")
                #expect(try await instance.sql("select version, field_versions ->> 'title' from todos where id = 1") == ["2|2"])
                try await phone.enqueue(.update("todos", key: ["id": 1], set: ["title": "mine"], baseVersion: 1))
                try await phone.enqueue(.update("todos", key: ["id": 1], set: ["done": true], baseVersion: 1))
                #expect(Self.kinds(try await phone.sync()) == ["conflicted", "merged"])
                #expect(try await instance.sql("select title, done from todos where id = 1") == ["from a server job|t"])

                try await instance.sql("select outbox.register('public.lists', mode => 'strict')")
                try await phone.enqueue(.insert(into: "lists", key: ["id": 7], body: ["name": "Groceries"]))
                try await phone.enqueue(.update("lists", key: ["id": 7], set: ["name": "Food"], baseVersion: 1))
                try await phone.enqueue(.update("lists", key: ["id": 7], set: ["name": "Stale"], baseVersion: 1))
                #expect(Self.kinds(try await phone.sync()) == ["accepted", "accepted", "blocked"])
                let stale = try await phone.queue.all().last
                #expect(
                    stale?.state == .blocked(.conflictUnresolved, refusal: Refusal(code: "version_conflict", fields: ["name"])))
                #expect(try await instance.sql("select name from lists") == ["Food"])
                phone.close()
            }
        }
    }
}

extension ContractTransportTests {
    // Item 9 of the PostgREST review: a plain PATCH that sets `version` and `field_versions` itself
    // cannot rewind a row; the instance recomputes both as for any write from outside the outbox.
    @Test func aPlainWriteCannotSetTheVersionColumns() async throws {
        try await Instance.with { instance in
            try await TemporaryFolder.with { path in
                let client = try await Self.client(path, instance)
                try await client.enqueue(.insert(into: "lists", key: ["id": 7], body: ["name": "Groceries"]))
                try await client.enqueue(.update("lists", key: ["id": 7], set: ["name": "Food"]))
                #expect(try await client.sync().syncedCount == 2)
                #expect(try await instance.sql("select version, field_versions from lists") == [#"2|{"*": 1, "name": 2}"#])
                let response = try await CurlHTTPClient().send(
                    HTTPRequest(
                        method: "PATCH", url: URL(string: instance.url.absoluteString + "/lists?id=eq.7")!,
                        headers: [
                            "apikey": instance.apiKey, "Authorization": "Bearer " + (try await instance.token("alice")),
                            "Content-Type": "application/json", "Prefer": "return=minimal",
                        ],
                        body: Data(#"{"version":1,"field_versions":{"*":0},"name":"Rewound"}"#.utf8)), timeout: 10)
                #expect(response.status == 204)
                #expect(
                    try await instance.sql("select version, field_versions, name from lists") == [
                        #"3|{"*": 1, "name": 3}|Rewound"#
                    ])
                client.close()
            }
        }
    }
}
