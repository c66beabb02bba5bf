import Foundation
import Outbox
import OutboxHTTP
import OutboxTesting
import Testing

/// The PostgREST transport through real HTTP into real PostgreSQL, behind the PostgREST stand-in
/// (R9.2–R9.4, R9.6): each test starts its own instance with `scripts/instance` and stops it.
@Suite("PostgREST transport, through the stand-in into PostgreSQL")
struct PostgRESTTransportTests {
    /// A client of a fresh log, signed in as `user` with a real token, sending through `instance`.
    func client(_ path: String, _ instance: Instance, user: String = "alice", token: String? = nil, batchSize: Int = 50)
        throws -> (OutboxClient, PostgRESTTransport)
    {
        let transport = try PostgRESTTransport(
            url: instance.url, apiKey: instance.apiKey, tables: ["lists": ["id"], "todos": ["id"]], timeout: 20)
        var configuration = OutboxConfiguration(autoSync: false, batchSize: batchSize)
        configuration.clock = ManualClock()
        let client = try OutboxClient.open(path: path, transport: transport, configuration: configuration)
        return (client, transport)
    }

    // R9.2: every op reaches the table as the request it maps to; the instance applies them in order.
    @Test func everyOperationLandsInTheTableInOrder() async throws {
        try await Instance.with { instance in
            try await TemporaryFolder.with { path in
                let (client, _) = try client(path, instance)
                try await client.settleSession(user: "alice", accessToken: try await instance.token("alice"))
                let list = try await client.enqueue(.insert(into: "lists", key: ["id": 7], body: ["name": "Groceries"]))
                try await client.enqueue(
                    .insert(into: "todos", key: ["id": 1], body: ["title": "Milk", "list_id": 7], dependsOn: [list]))
                try await client.enqueue(.update("todos", key: ["id": 1], set: ["title": "Oat milk"]))
                try await client.enqueue(.upsert(into: "todos", key: ["id": 2], body: ["title": "Bread", "list_id": 7]))
                try await client.enqueue(.upsert(into: "todos", key: ["id": 2], body: ["title": "Rye bread", "list_id": 7]))
                try await client.enqueue(.insert(into: "todos", key: ["id": 3], body: ["title": "Eggs", "list_id": 7]))
                try await client.enqueue(.delete(from: "todos", key: ["id": 3]))
                try await client.enqueue(.delete(from: "todos", key: ["id": 99]))
                try await client.enqueue(.custom("complete_list", table: "lists", key: ["id": 7], body: ["list_id": 7]))
                let report = try await client.sync()
                #expect(report.stoppedBy == nil)
                #expect(report.syncedCount == 9, "\(report.verdicts)")
                #expect(
                    try await instance.sql("select id, title, done, owner from todos order by id") == [
                        "1|Oat milk|t|alice", "2|Rye bread|t|alice",
                    ])
                #expect(try await instance.sql("select id, name, owner from lists") == ["7|Groceries|alice"])
                // The apply record: each write's own header, in write-id order (P3).
                let order = try await instance.sql("select outbox_write from applied order by seq").compactMap { Int($0) }
                #expect(order == order.sorted(), "\(order)")
                #expect(
                    Set(order) == Set(1...9).subtracting([8]),
                    "every write applied once; the delete of a missing row changes no row")
                client.close()
            }
        }
    }

    // R4.5, R9.3: consecutive inserts to one table go as one request; a refused row among them is
    // found by splitting, and only it is charged.
    @Test func insertsAreBatchedAndARefusedRowIsSplitOut() async throws {
        try await Instance.with { instance in
            try await TemporaryFolder.with { path in
                let (client, _) = try client(path, instance)
                try await client.settleSession(user: "alice", accessToken: try await instance.token("alice"))
                for id in 1...4 {
                    try await client.enqueue(
                        .insert(into: "todos", key: ["id": .int(Int64(id))], body: ["title": .string("t\(id)")]))
                }
                let report = try await client.sync()
                #expect(report.syncedCount == 4)
                #expect(try await instance.requests().filter { $0.method == "POST" }.count == 1, "one request for four inserts")
                for id in 5...8 {
                    try await client.enqueue(
                        .insert(into: "todos", key: ["id": .int(Int64(id))], body: ["title": .string(id == 6 ? "" : "t\(id)")]))
                }
                let split = try await client.sync()
                #expect(split.syncedCount == 3)
                #expect(split.rejected.map(\.id) == [WriteID(6)])
                let refusal = try #require(try await client.queue.all().first { $0.id == 6 }?.state.refusal)
                #expect(refusal.status == 400 && refusal.code == "23514")
                #expect(try await instance.sql("select count(*) from todos") == ["7"])
                client.close()
            }
        }
    }

    // R9.3, R3.2: a lost acknowledgement (committed, connection dropped) is resent under the same key;
    // the duplicate key is read back, found equal, and the write counts as already on the server.
    // A duplicate that is not the same row is refused.
    @Test func aLostAcknowledgementIsSettledByReadingTheRowBack() async throws {
        try await Instance.with { instance in
            try await TemporaryFolder.with { path in
                let (client, _) = try client(path, instance)
                try await client.settleSession(user: "alice", accessToken: try await instance.token("alice"))
                try await client.enqueue(.insert(into: "todos", key: ["id": 1], body: ["title": "Milk"]))
                try await instance.fault([["drop": true]])
                let lost = try await client.sync()
                #expect(lost.stoppedBy?.kind == .network)
                #expect(try await instance.sql("select title from todos") == ["Milk"], "it was committed")
                let again = try await client.sync()
                #expect(again.syncedCount == 1 && again.alreadyOnServerCount == 1)
                #expect(try await instance.sql("select count(*) from applied") == ["1"], "applied once")

                try await instance.sql("insert into todos (id, title, owner) values (2, 'Something else', 'alice')")
                try await client.enqueue(.insert(into: "todos", key: ["id": 2], body: ["title": "Bread"]))
                let other = try await client.sync()
                #expect(other.rejected.map(\.id) == [WriteID(2)])
                #expect(try await client.queue.all().first { $0.id == 2 }?.state.refusal?.code == "23505")
                client.close()
            }
        }
    }

    // R9.4: refusals by SQLSTATE class go on; schema-cache codes stop and are counted apart.
    @Test func constraintAndTypeErrorsAreRefusalsAndSchemaCodesStop() async throws {
        try await Instance.with { instance in
            try await TemporaryFolder.with { path in
                let transport = try PostgRESTTransport(url: instance.url, apiKey: instance.apiKey, timeout: 20)
                var configuration = OutboxConfiguration(autoSync: false, batchSize: 1)
                configuration.clock = ManualClock()
                let client = try OutboxClient.open(path: path, transport: transport, configuration: configuration)
                try await client.settleSession(user: "alice", accessToken: try await instance.token("alice"))
                try await client.enqueue(.insert(into: "todos", key: ["id": 1], body: ["title": "Milk", "list_id": 999]))
                try await client.enqueue(.insert(into: "todos", key: ["id": "abc"], body: ["title": "Milk"]))
                let refused = try await client.sync()
                #expect(refused.stoppedBy == nil)
                let codes = try await client.queue.all().map { $0.state.refusal.map { "\($0.status ?? 0) \($0.code ?? "")" } }
                #expect(codes == ["409 23503", "400 22P02"])
                try await client.enqueue(.insert(into: "todos", key: ["id": 5], body: ["colour": "red"]))
                let column = try await client.sync()
                #expect(column.stoppedBy == PassFailure(kind: .schemaCache, status: 400, code: "PGRST204"))
                try await client.enqueue(.insert(into: "nowhere", key: ["id": 1], body: ["x": 1]))
                _ = try await client.queue.discard(WriteID(3), withDependents: true)
                let table = try await client.sync()
                #expect(table.stoppedBy?.code == "PGRST205" || table.stoppedBy?.code == "PGRST204")
                client.close()
            }
        }
    }

    // R9.4, R7.3: an expired token and a server down stop the pass and charge nothing; row-level
    // security keeps another user's token off the first user's rows.
    @Test func failuresThatMayPassStopThePassAndChargeNothing() async throws {
        try await Instance.with { instance in
            try await TemporaryFolder.with { path in
                let (client, _) = try client(path, instance)
                try await client.settleSession(user: "alice", accessToken: try await instance.token("alice", expiresIn: -120))
                try await client.enqueue(.insert(into: "todos", key: ["id": 1], body: ["title": "Milk"]))
                let expired = try await client.sync()
                #expect(expired.stoppedBy == PassFailure(kind: .http, status: 401, code: "PGRST303"))
                try await client.settleSession(user: "alice", accessToken: try await instance.token("alice"))
                try await instance.fault([["status": 503, "code": "PGRST001"]])
                let down = try await client.sync()
                #expect(down.stoppedBy?.status == 503 && down.stoppedBy?.code == "PGRST001")
                #expect(try await client.queue.all().first?.refusals == 0, "nothing charged")
                let healed = try await client.sync()
                #expect(healed.syncedCount == 1)

                // bob's token cannot touch alice's row: the update matches no row it may see.
                try await client.settleSession(user: "bob", accessToken: try await instance.token("bob"))
                try await client.enqueue(.update("todos", key: ["id": 1], set: ["title": "bob was here"]))
                let bob = try await client.sync()
                #expect(bob.rejected.count == 1)
                #expect(try await client.queue.all().first { $0.user == "bob" }?.state.refusal?.code == "row_not_found")
                #expect(try await instance.sql("select title, owner from todos") == ["Milk|alice"])
                client.close()
            }
        }
    }

    // R9.6, P6: the token travels only in Authorization; server texts never reach the status, the
    // events or an error's description (the log keeps them for audits).
    @Test func tokensAndServerTextsStayWhereTheyBelong() async throws {
        try await Instance.with { instance in
            try await TemporaryFolder.with { path in
                let (client, _) = try client(path, instance)
                let token = try await instance.token("alice")
                try await client.settleSession(user: "alice", accessToken: token)
                let events = client.events
                let canary = "SERVER-CANARY-7f3a"
                try await instance.fault([["status": 422, "code": "P0001", "message": canary]])
                try await client.enqueue(.insert(into: "todos", key: ["id": 1], body: ["title": "Milk"]))
                let report = try await client.sync()
                #expect(report.rejected.count == 1)
                let requests = try await instance.requests()
                #expect(requests.allSatisfy { !$0.path.contains(token) && $0.headers.values.allSatisfy { !$0.contains(token) } })
                #expect(requests.first?.headers["x-outbox-write"] == "1")
                client.close()
                var seen: [OutboxEvent] = []
                for await event in events { seen.append(event) }
                #expect(!"\(seen)\(report)\(client.syncStatus.value)".contains(canary))
                let bytes = try Data(contentsOf: URL(fileURLWithPath: path + "/data.mdb"))
                #expect(bytes.range(of: Data(token.utf8)) == nil, "no token in the log")
            }
        }
        #expect(throws: PostgRESTTransport.ConfigurationError.self) {
            try PostgRESTTransport(url: URL(string: "http://example.com")!)
        }
    }
}

extension PostgRESTTransportTests {
    // R9.4: every answer that may pass stops the pass and charges nothing, Retry-After honoured.
    @Test func gatewayAndServerAnswersThatMayPassChargeNothing() async throws {
        try await Instance.with { instance in
            try await TemporaryFolder.with { path in
                let (client, _) = try client(path, instance)
                try await client.settleSession(user: "alice", accessToken: try await instance.token("alice"))
                try await client.enqueue(.insert(into: "todos", key: ["id": 1], body: ["title": "Milk"]))
                for (status, retryAfter) in [(429, "7"), (504, nil), (520, nil), (544, nil), (402, nil), (540, nil), (503, "0")]
                    as [(Int, String?)]
                {
                    var fault: [String: Any] = ["status": status, "code": NSNull()]
                    if let retryAfter { fault["retryAfter"] = retryAfter }
                    try await instance.fault([fault])
                    let report = try await client.sync()
                    #expect(report.stoppedBy?.kind == .http && report.stoppedBy?.status == status, "\(status)")
                    if status == 429 { #expect(report.retryAfter == 7) }
                    #expect(try await client.queue.all().first?.refusals == 0, "\(status) charges nothing")
                }
                #expect(try await instance.sql("select count(*) from todos") == ["0"])
                #expect(try await client.sync().syncedCount == 1)
                client.close()
            }
        }
    }

    // R9.4: a request that times out is an outcome unknown: it stays pending and goes again later.
    @Test func aTimeoutIsAFailureThatMayPass() async throws {
        try await Instance.with { instance in
            try await TemporaryFolder.with { path in
                let transport = try PostgRESTTransport(url: instance.url, apiKey: instance.apiKey, timeout: 1)
                var configuration = OutboxConfiguration(autoSync: false)
                configuration.clock = ManualClock()
                let client = try OutboxClient.open(path: path, transport: transport, configuration: configuration)
                try await client.settleSession(user: "alice", accessToken: try await instance.token("alice"))
                try await client.enqueue(.insert(into: "todos", key: ["id": 1], body: ["title": "Milk"]))
                try await instance.fault([["latency": 3]])
                let report = try await client.sync()
                #expect(report.stoppedBy?.kind == .network)
                #expect(try await client.queue.all().first?.state == .pending)
                let again = try await client.sync()
                #expect(again.syncedCount == 1)
                #expect(try await instance.sql("select count(*) from applied") == ["1"], "applied once")
                client.close()
            }
        }
    }

    // `disableNetwork()` and `close()` cancel a request in flight; its write is resent later.
    @Test func switchingTheNetworkOffCancelsARequestInFlight() async throws {
        try await Instance.with { instance in
            try await TemporaryFolder.with { path in
                let (client, _) = try client(path, instance)
                try await client.settleSession(user: "alice", accessToken: try await instance.token("alice"))
                try await client.enqueue(.insert(into: "todos", key: ["id": 1], body: ["title": "Milk"]))
                try await instance.fault([["latency": 120]])
                let started = Date()
                let pass = Task { try await client.sync() }
                // Wait (at most 60 s: CI runs suites side by side on 2 cores) until the stand-in holds the request.
                while try await instance.requests().isEmpty, Date().timeIntervalSince(started) < 60 { await Task.yield() }
                #expect(try await !instance.requests().isEmpty, "the request reached the stand-in")
                await client.disableNetwork()
                let report = try await pass.value
                // Not waited out: the stand-in would have answered accepted after its 120 s.
                #expect(report.stoppedBy?.kind == .network && report.syncedCount == 0)
                #expect(try await client.queue.all().first?.state == .pending)
                await client.enableNetwork()
                let again = try await client.sync()
                #expect(again.syncedCount == 1, "resent, and replayed or applied once")
                #expect(try await instance.sql("select count(*) from applied") == ["1"])
                client.close()
            }
        }
    }

    // PostgreSQL restarted between passes: the pass meets its broken connection as a
    // failure that may pass, and the next goes through; nothing is applied twice.
    @Test func aRestartedDatabaseIsAFailureThatMayPass() async throws {
        try await Instance.with { instance in
            try await TemporaryFolder.with { path in
                let (client, _) = try client(path, instance)
                try await client.settleSession(user: "alice", accessToken: try await instance.token("alice"))
                try await client.enqueue(.insert(into: "todos", key: ["id": 1], body: ["title": "Milk"]))
                #expect(try await client.sync().syncedCount == 1)
                let restarted = try await Instance.run(["restart-database", instance.folder])
                #expect(restarted.status == 0, "\(restarted.output)")
                try await client.enqueue(.insert(into: "todos", key: ["id": 2], body: ["title": "Bread"]))
                let first = try await client.sync()
                if first.syncedCount == 0 { #expect(first.stoppedBy?.status == 503 && first.stoppedBy?.code == "PGRST000") }
                if first.syncedCount == 0 { #expect(try await client.sync().syncedCount == 1) }
                #expect(try await instance.sql("select row_id from applied order by seq") == ["1", "2"])
                client.close()
            }
        }
    }
}

extension PostgRESTTransportTests {
    // R9.4 (PGRST205): a table the server does not know yet keeps its writes pending, counted apart;
    // once the table exists they go.
    @Test func aTableCreatedLaterIsWaitedFor() async throws {
        try await Instance.with { instance in
            try await TemporaryFolder.with { path in
                let transport = try PostgRESTTransport(url: instance.url, apiKey: instance.apiKey, timeout: 20)
                var configuration = OutboxConfiguration(autoSync: false)
                configuration.clock = ManualClock()
                let client = try OutboxClient.open(path: path, transport: transport, configuration: configuration)
                try await client.settleSession(user: "alice", accessToken: try await instance.token("alice"))
                try await client.enqueue(.insert(into: "notes", key: ["id": 1], body: ["text": "hello"]))
                let early = try await client.sync()
                #expect(early.stoppedBy == PassFailure(kind: .schemaCache, status: 404, code: "PGRST205"))
                let waiting = try #require(try await client.queue.all().first)
                #expect(waiting.state == .pending && waiting.refusals == 0 && waiting.schemaRefusals == 1)
                try await instance.sql(
                    "create table notes (id bigint primary key, text text not null); grant select, insert on notes to authenticated"
                )
                let later = try await client.sync()
                #expect(later.syncedCount == 1)
                #expect(try await instance.sql("select text from notes") == ["hello"])
                client.close()
            }
        }
    }

    // The stand-in stopped in the middle of a pass (a request in flight) and started again:
    // the pass stops on the lost connection, and the next sends what is left, each write once.
    @Test func aServerStoppedInTheMiddleOfAPassLosesNothing() async throws {
        try await Instance.with { instance in
            try await TemporaryFolder.with { path in
                let (client, _) = try client(path, instance, batchSize: 1)
                try await client.settleSession(user: "alice", accessToken: try await instance.token("alice"))
                for id in 1...5 {
                    try await client.enqueue(
                        .insert(into: "todos", key: ["id": .int(Int64(id))], body: ["title": .string("t\(id)")]))
                }
                try await instance.fault([[:], [:], ["latency": 30]])
                let started = Date()
                let pass = Task { try await client.sync() }
                // Wait (at most 30 s) until the third request is in flight, then stop the server under it.
                while try await instance.requests().count < 3, Date().timeIntervalSince(started) < 30 { await Task.yield() }
                #expect(try await Instance.run(["stop-standin", instance.folder]).status == 0)
                let stopped = try await pass.value
                #expect(stopped.syncedCount == 2 && stopped.stoppedBy?.kind == .network)
                #expect(try await Instance.run(["start-standin", instance.folder]).status == 0)
                let rest = try await client.sync()
                #expect(rest.syncedCount == 3)
                #expect(try await instance.sql("select row_id from applied order by seq") == ["1", "2", "3", "4", "5"])
                client.close()
            }
        }
    }
}

extension PostgRESTTransportTests {
    // R4.4, R9.4: a batch the transport stopped after its first write: that write applied once, the
    // rest not sent, pending and uncharged, and sent by the next pass. Then the environmental rows of
    // R9.4 from PostgreSQL itself: row-level security refusing another user's row (42501) and a
    // read-only database (25006) stop the pass and charge nothing.
    @Test func aStoppedBatchAndEnvironmentalRefusalsChargeNothing() async throws {
        try await Instance.with { instance in
            try await TemporaryFolder.with { path in
                let (client, _) = try client(path, instance)
                try await client.settleSession(user: "alice", accessToken: try await instance.token("alice"))
                try await client.enqueue(.insert(into: "lists", key: ["id": 7], body: ["name": "Groceries"]))
                for id in 1...2 {
                    try await client.enqueue(
                        .insert(into: "todos", key: ["id": .int(Int64(id))], body: ["title": "Milk", "list_id": 7]))
                }
                #expect(try await client.sync().syncedCount == 3)
                try await client.enqueue(.update("todos", key: ["id": 1], set: ["done": true]))
                try await client.enqueue(.update("todos", key: ["id": 2], set: ["done": true]))
                try await client.enqueue(.update("lists", key: ["id": 7], set: ["name": "Food"]))
                try await instance.fault([[:], ["status": 503, "code": "PGRST001", "retryAfter": "0"]])
                let before = try await instance.requests().count
                let stopped = try await client.sync()
                #expect(stopped.verdicts.map(\.kind) == [.accepted], "\(stopped.verdicts)")
                #expect(stopped.stoppedBy?.status == 503 && stopped.stoppedBy?.code == "PGRST001")
                #expect(try await instance.requests().count - before == 2, "the third write was never sent")
                #expect(try await instance.sql("select id, done from todos order by id") == ["1|t", "2|f"])
                #expect(try await client.queue.all().allSatisfy { $0.refusals == 0 })
                let healed = try await client.sync()
                #expect(healed.syncedCount == 2 && healed.stoppedBy == nil)
                #expect(try await instance.sql("select id, done from todos order by id") == ["1|t", "2|t"])
                #expect(try await instance.sql("select name from lists") == ["Food"])

                // bob's token cannot make a row that claims to be alice's: row-level security (42501).
                try await client.settleSession(user: "bob", accessToken: try await instance.token("bob"))
                let claim = try await client.enqueue(
                    .insert(into: "todos", key: ["id": 3], body: ["title": "Mine now", "owner": "alice"]))
                let refused = try await client.sync()
                #expect(refused.stoppedBy == PassFailure(kind: .http, status: 403, code: "42501"), "\(refused)")
                #expect(refused.verdicts.map(\.kind) == [.failed], "a row's 42501 is that write's failed answer (R9.4)")
                let claimed = try await client.queue.all().first { $0.id == claim }
                #expect(claimed?.state.name == "pending" && claimed?.refusals == 0)
                #expect(try await instance.sql("select count(*) from todos") == ["2"])
                client.close()
            }
            // A database in read-only mode (a replica, a project being restored): 405 25006.
            try await instance.sql(
                "do $$ begin execute format('alter database %I set default_transaction_read_only = on', current_database()); end $$"
            )
            try await TemporaryFolder.with { path in
                let (client, _) = try client(path, instance)
                try await client.settleSession(user: "alice", accessToken: try await instance.token("alice"))
                try await client.enqueue(.insert(into: "todos", key: ["id": 4], body: ["title": "Eggs"]))
                // The setting reaches new sessions only: the stand-in's pooled connections are ended, and
                // each dead one it meets first is a 503 (it reconnects), charged nothing.
                try await instance.sql(
                    "select count(pg_terminate_backend(pid)) >= 0 from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()"
                )
                var readOnly = try await client.sync()
                for _ in 0..<10 where readOnly.stoppedBy?.code == "PGRST000" { readOnly = try await client.sync() }
                #expect(readOnly.stoppedBy == PassFailure(kind: .http, status: 405, code: "25006"), "\(readOnly)")
                #expect(try await client.queue.all().first?.refusals == 0)
                client.close()
            }
        }
    }
}

extension PostgRESTTransportTests {
    // `clearLocalData` (of the session's user) and close() cancel a request in flight; it is
    // not waited out (the stand-in holds it 120 s, the transport's timeout is 100 s), and after close
    // the write is still queued, uncharged, and goes once.
    @Test func clearingAndClosingCancelARequestInFlight() async throws {
        try await Instance.with { instance in
            func held(_ client: OutboxClient) async throws -> (Task<SyncReport, any Error>, Date) {
                try await client.enqueue(.insert(into: "todos", key: ["id": 1], body: ["title": "Milk"]))
                let before = try await instance.requests().count
                try await instance.fault([["latency": 120]])
                let started = Date()
                let pass = Task { try await client.sync() }
                while try await instance.requests().count == before, Date().timeIntervalSince(started) < 60 {
                    await Task.yield()
                }
                return (pass, started)
            }
            try await TemporaryFolder.with { path in
                let transport = try PostgRESTTransport(
                    url: instance.url, apiKey: instance.apiKey, tables: ["todos": ["id"]], timeout: 100)
                let client = try OutboxClient.open(
                    path: path, transport: transport, configuration: OutboxConfiguration(autoSync: false))
                try await client.settleSession(user: "alice", accessToken: try await instance.token("alice"))
                let (pass, started) = try await held(client)
                try await client.clearLocalData(user: "alice")
                let report = try await pass.value
                #expect(report.syncedCount == 0 && Date().timeIntervalSince(started) < 90, "cancelled, not waited out")
                #expect(try await client.queue.all().isEmpty)
                client.close()
            }
            try await TemporaryFolder.with { path in
                let transport = try PostgRESTTransport(
                    url: instance.url, apiKey: instance.apiKey, tables: ["todos": ["id"]], timeout: 100)
                let client = try OutboxClient.open(
                    path: path, transport: transport, configuration: OutboxConfiguration(autoSync: false))
                try await client.settleSession(user: "alice", accessToken: try await instance.token("alice"))
                let (pass, started) = try await held(client)
                client.close()
                _ = try? await pass.value
                #expect(Date().timeIntervalSince(started) < 90, "cancelled, not waited out")
                let again = try OutboxClient.open(
                    path: path, transport: transport, configuration: OutboxConfiguration(autoSync: false))
                try await again.settleSession(user: "alice", accessToken: try await instance.token("alice"))
                #expect(try await again.queue.all().map(\.refusals) == [0], "still queued, uncharged")
                #expect(try await again.sync().syncedCount == 1)
                again.close()
            }
        }
    }
}
