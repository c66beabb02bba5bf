import Foundation
import Outbox
import OutboxHTTP
import OutboxTesting
import Synchronization
import Testing

/// A transport that forwards to another and, at its `killAt`-th request, closes the client once the
/// request has gone: the answer reaches nobody, as when the process is killed mid-batch.
final class KillingTransport: OutboxTransport {
    let inner: any OutboxTransport
    let killAt: Int
    private let state = Mutex<(requests: Int, client: OutboxClient?)>((0, nil))

    init(_ inner: any OutboxTransport, killAt: Int) {
        self.inner = inner
        self.killAt = killAt
    }

    func attach(_ client: OutboxClient) { state.withLock { $0.client = client } }

    func send(_ batch: OutgoingBatch, accessToken: String?) async -> RequestAnswer {
        let answer = await inner.send(batch, accessToken: accessToken)
        let kill = state.withLock { state -> OutboxClient? in
            state.requests += 1
            return state.requests == killAt ? state.client : nil
        }
        kill?.close()
        return answer
    }

    func requestSize(for batch: OutgoingBatch) -> Int { inner.requestSize(for: batch) }
    func unmadeReason(for write: OutgoingWrite) -> String? { inner.unmadeReason(for: write) }
    func unmadeReason(forGroup group: OutgoingBatch) -> String? { inner.unmadeReason(forGroup: group) }
    func readRow(table: String, key: JSONValue, accessToken: String?) async throws -> JSONValue? {
        try await inner.readRow(table: table, key: key, accessToken: accessToken)
    }
}

/// The findings of the PostgREST path's integrity review, each as the repro it was reported with,
/// through real HTTP into PostgreSQL behind the stand-in (R9.3, R9.4, R9.6).
@Suite("PostgREST integrity: kills mid-batch, broken answers, row-level security, names, answers")
struct PostgRESTIntegrityTests {
    static func transport(_ instance: Instance, tables: [String: [String]]? = ["lists": ["id"], "todos": ["id"]]) throws
        -> PostgRESTTransport
    {
        try PostgRESTTransport(url: instance.url, apiKey: instance.apiKey, tables: tables, timeout: 20)
    }

    static func open(_ path: String, _ transport: any OutboxTransport) throws -> OutboxClient {
        var configuration = OutboxConfiguration(autoSync: false)
        configuration.clock = ManualClock()
        return try OutboxClient.open(path: path, transport: transport, configuration: configuration)
    }

    // R9.3: a kill after the second request of a batch of three: the two answers were recorded
    // before the third request went, so only the third is resent. Nothing goes dead, nothing waits,
    // the insert is applied once and the row the user deleted stays deleted.
    @Test func aKillMidBatchLeavesOnlyTheRequestInFlightInDoubt() async throws {
        try await Instance.with { instance in
            try await TemporaryFolder.with { path in
                try await instance.sql("insert into lists (id, name, owner) values (170002, 'old', 'alice')")
                let killing = KillingTransport(try Self.transport(instance), killAt: 3)
                let first = try Self.open(path, killing)
                killing.attach(first)
                try await first.settleSession(user: "alice", accessToken: try await instance.token("alice"))
                try await first.enqueue(.insert(into: "lists", key: ["id": 170001], body: ["name": "first"]))
                try await first.enqueue(.update("lists", key: ["id": 170001], set: ["name": "second"]))
                try await first.enqueue(.delete(from: "lists", key: ["id": 170002]))
                _ = try? await first.sync()
                #expect(
                    try await instance.sql("select count(*) from applied where outbox_write is not null") == ["3"],
                    "all three applied before the kill")

                let client = try Self.open(path, try Self.transport(instance))
                try await client.settleSession(user: "alice", accessToken: try await instance.token("alice"))
                let healed = try await client.sync()
                #expect(healed.stoppedBy == nil && healed.syncedCount == 1, "only the delete goes again: \(healed.verdicts)")
                #expect(healed.alreadyOnServerCount == 1, "the resent delete found its row gone: replayed (R9.3)")
                #expect(try await client.queue.all().map(\.state.name) == ["accepted", "accepted", "accepted"])
                #expect(try await instance.sql("select id, name from lists order by id") == ["170001|second"])
                #expect(
                    try await instance.sql("select op, row_id from applied where outbox_write = '1'") == ["insert|170001"],
                    "the insert applied once")
                #expect(try client.log.checkDecisions().isSame)
                client.close()
            }
        }
    }

    // R9.3: a broken answer (no Content-Range) to the second request stops the pass there; the
    // first request's answer stands, so the insert is not sent again and the deleted row never comes
    // back. The same with an insert, then an update whose answer is broken.
    @Test func aBrokenAnswerKeepsTheAnswersBeforeIt() async throws {
        try await Instance.with { instance in
            try await TemporaryFolder.with { path in
                let client = try Self.open(path, try Self.transport(instance))
                try await client.settleSession(user: "alice", accessToken: try await instance.token("alice"))
                try await client.enqueue(.insert(into: "lists", key: ["id": 5], body: ["name": "five"]))
                try await client.enqueue(.delete(from: "lists", key: ["id": 5]))
                try await instance.fault([[:], ["strip": "Content-Range"]])
                let broken = try await client.sync()
                #expect(broken.stoppedBy?.kind == .protocol)
                #expect(broken.verdicts.map(\.kind) == [.accepted], "the insert's answer stands: \(broken.verdicts)")
                #expect(try await client.sync().syncedCount == 1, "the delete alone goes again")

                try await client.enqueue(.insert(into: "lists", key: ["id": 6], body: ["name": "six"]))
                try await client.enqueue(.update("lists", key: ["id": 6], set: ["name": "six, renamed"]))
                try await instance.fault([[:], ["strip": "Content-Range"]])
                let again = try await client.sync()
                #expect(again.stoppedBy?.kind == .protocol && again.verdicts.map(\.kind) == [.accepted])
                let healed = try await client.sync()
                #expect(healed.stoppedBy == nil && healed.syncedCount == 1)
                #expect(try await client.queue.all().allSatisfy { $0.state.name == "accepted" })
                #expect(try await instance.sql("select id, name from lists order by id") == ["6|six, renamed"])
                #expect(
                    try await instance.sql(
                        "select row_id from applied where op = 'insert' and outbox_write is not null order by seq") == [
                            "5", "6",
                        ],
                    "each insert applied once")
                #expect(try client.log.checkDecisions().isSame)
                client.close()
            }
        }
    }

    // R9.4, R4.4: row-level security refusing one write's row (403 42501) is that write's failure:
    // the writes behind it go on, and at the third pass in a row it is blocked(failingAlone).
    @Test func aRowRefusedByRowLevelSecurityFailsAloneAndIsBlockedAtTheThirdPass() async throws {
        try await Instance.with { instance in
            try await TemporaryFolder.with { path in
                let client = try Self.open(path, try Self.transport(instance))
                try await client.settleSession(user: "bob", accessToken: try await instance.token("bob"))
                let claim = try await client.enqueue(
                    .insert(into: "todos", key: ["id": 3], body: ["title": "Mine now", "owner": "alice"]))
                var streaks: [Int] = []
                for pass in 1...3 {
                    try await client.enqueue(.insert(into: "lists", key: ["id": .int(Int64(pass))], body: ["name": "ok"]))
                    let report = try await client.sync()
                    #expect(report.syncedCount == 1, "the write behind it went: \(report.verdicts)")
                    #expect(report.stoppedBy == PassFailure(kind: .http, status: 403, code: "42501"))
                    streaks.append(try #require(try await client.queue.write(claim)).environmentalStreak)
                }
                #expect(streaks == [1, 2, 3])
                let blocked = try #require(try await client.queue.write(claim))
                #expect(blocked.state == .blocked(.failingAlone, refusal: nil) && blocked.refusals == 0)
                #expect(try await instance.sql("select count(*) from lists") == ["3"])
                #expect(try client.log.checkDecisions().isSame)
                client.close()
            }
        }
    }

    // R9.4: a success answer that is not PostgREST's for the request (a middlebox's HTML page) is a
    // broken answer: the write stays pending and goes again, it is never taken as applied.
    @Test func aSuccessThatIsNotPostgRESTsIsABrokenAnswer() async throws {
        try await Instance.with { instance in
            try await TemporaryFolder.with { path in
                let client = try Self.open(path, try Self.transport(instance))
                try await client.settleSession(user: "alice", accessToken: try await instance.token("alice"))
                try await client.enqueue(.insert(into: "lists", key: ["id": 1], body: ["name": "one"]))
                try await instance.fault([["status": 200, "raw": "<html>hello</html>", "contentType": "text/html"]])
                let broken = try await client.sync()
                #expect(broken.stoppedBy?.kind == .protocol && broken.syncedCount == 0)
                #expect(try await client.queue.all().map(\.state.name) == ["pending"])
                #expect(try await instance.sql("select count(*) from lists") == ["0"])
                #expect(try await client.sync().syncedCount == 1)
                #expect(try await instance.sql("select name from lists") == ["one"])
                client.close()
            }
        }
    }
}

/// R9.6 without a server: a name that would leave its path segment is unmade, and nothing is sent.
@Suite struct PostgRESTNameTests {
    @Test("a model written without a key takes it from the key columns of tables: (R2.4)")
    func keysFromTheModel() async throws {
        struct Todo: Codable { var id: Int64, title: String }
        let client = ScriptedHTTPClient()
        let transport = try PostgRESTTransport(
            url: URL(string: "https://abc.supabase.co")!, apiKey: "anon-key", tables: ["todos": ["id"]], client: client)
        #expect(transport.keyColumns(of: "todos") == ["id"] && transport.keyColumns(of: "lists") == nil)
        try await TemporaryFolder.with { path in
            var configuration = OutboxConfiguration(autoSync: false)
            configuration.clock = ManualClock()
            let outbox = try OutboxClient.open(path: path, transport: transport, configuration: configuration)
            try await outbox.settleSession(user: "alice", accessToken: "TOKEN")
            let id = try await outbox.enqueue(try .insert(into: "todos", encoding: Todo(id: 70_001, title: "milk")))
            #expect(try await outbox.queue.write(id)?.key == JSONValue(object: ["id": 70_001]))
        }
    }

    @Test(
        "a table or mutation name that is not one path segment is unmade",
        arguments: [
            WriteOperation.insert, .custom("../lists"), .custom("complete_list?x=1"), .custom("a%2Fb"),
        ] as [WriteOperation])
    func namesStayInTheirSegment(_ operation: WriteOperation) async throws {
        let client = ScriptedHTTPClient()
        let transport = try PostgRESTTransport(
            url: URL(string: "https://abc.supabase.co")!, apiKey: "anon-key", pathPrefix: "/rest/v1", client: client)
        let table = operation == .insert ? "rpc/complete_list" : "lists"
        try await TemporaryFolder.with { path in
            var configuration = OutboxConfiguration(autoSync: false)
            configuration.clock = ManualClock()
            let outbox = try OutboxClient.open(path: path, transport: transport, configuration: configuration)
            try await outbox.settleSession(user: "alice", accessToken: "TOKEN")
            for name in [table, "../../auth/v1/logout", "lists#x", ".."] {
                let id = try await outbox.enqueue(
                    Write(table: name, operation: name == table ? operation : .insert, key: ["id": 1], body: ["a": 1]))
                _ = try await outbox.sync()
                let refusal = try #require(try await outbox.queue.write(id)?.state.refusal)
                #expect(refusal.isFinal && refusal.reason?.hasPrefix("unmade") == true, "\(name): \(refusal)")
            }
            #expect(client.sent.isEmpty, "nothing reached any endpoint: \(client.sent.map(\.url))")
            let control = OutgoingWrite(
                id: 1, origin: Origin(high: 1, low: 1), idempotencyKey: IdempotencyKey(high: 1, low: 1), table: "li\u{7}sts",
                operation: .insert, key: ["id": 1], body: [:])
            #expect(transport.unmadeReason(for: control)?.contains("control") == true)
            outbox.close()
        }
    }
}
