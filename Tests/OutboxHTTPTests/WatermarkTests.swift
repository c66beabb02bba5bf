import Foundation
import Outbox
import OutboxHTTP
import OutboxTesting
import Synchronization
import Testing

/// R8.9: each push of the contract's version 2 carries the log's acknowledged watermark; the
/// reference instance forgets the keys and answers at or below it, and a write sent again at or below
/// it is a broken contract, never a second apply. Version 1 keeps working, as before.
@Suite("Watermark pruning, through the stand-in into the reference instance")
struct WatermarkTests {
    /// A transport that keeps every batch it sends.
    final class Recording: OutboxTransport {
        let inner: ContractTransport
        let batches = Mutex<[OutgoingBatch]>([])
        init(_ inner: ContractTransport) { self.inner = inner }
        var prunesByWatermark: Bool { inner.prunesByWatermark }
        func send(_ batch: OutgoingBatch, accessToken: String?) async -> RequestAnswer {
            batches.withLock { $0.append(batch) }
            return await inner.send(batch, accessToken: accessToken)
        }
        func readRow(table: String, key: JSONValue, accessToken: String?) async throws -> JSONValue? {
            try await inner.readRow(table: table, key: key, accessToken: accessToken)
        }
    }

    @Test func theInstanceKeepsOnlyTheAnswersAboveTheWatermarkAndNeverAppliesBelowIt() async throws {
        try await Instance.with { instance in
            try await TemporaryFolder.with { path in
                let contract = try ContractTransport(url: instance.url, apiKey: instance.apiKey)
                let transport = Recording(contract)
                var configuration = OutboxConfiguration(autoSync: false, batchSize: 50)
                configuration.clock = ManualClock()
                let client = try OutboxClient.open(path: path, transport: transport, configuration: configuration)
                let token = try await instance.token("alice")
                try await client.settleSession(user: "alice", accessToken: token)
                try await client.enqueue(
                    contentsOf: (1...120).map { .insert(into: "todos", key: ["id": .int(Int64($0))], body: ["title": "t"]) })
                #expect(try await client.sync().syncedCount == 120)
                let sent = transport.batches.withLock { $0 }
                // Each request carries what was settled before the commit that plans it (which also
                // records the answer before it, durable only with the next commit): nothing, nothing, 50.
                #expect(sent.map(\.acknowledgedWatermark) == [nil, nil, WriteID(50)])
                #expect(try await instance.sql("select count(*) from outbox.answers") == ["70"])
                #expect(try await instance.sql("select count(*) from outbox.keys") == ["70"])
                #expect(try await instance.sql("select watermark from outbox.watermarks where owner = 'alice'") == ["50"])
                // The next push carries 120: the instance keeps nothing of this device's.
                try await client.enqueue(.insert(into: "todos", key: ["id": 121], body: ["title": "t"]))
                #expect(try await client.sync().syncedCount == 1)
                #expect(transport.batches.withLock { $0.last?.acknowledgedWatermark } == WriteID(120))
                #expect(try await instance.sql("select count(*) from outbox.answers") == ["1"])

                // A write sent again at or below the watermark is refused whole: nothing applied twice.
                let applied = try await instance.sql("select count(*) from applied")
                let again = await contract.send(sent[0], accessToken: token)
                guard case .contractBroken(let why) = again else {
                    Issue.record("a resend below the watermark was answered \(again)")
                    return
                }
                #expect(why.contains("watermark"))
                #expect(try await instance.sql("select count(*) from applied") == applied)
                // The client's own queue never goes below it: its writes are settled.
                #expect(try await client.sync().syncedCount == 0)
                client.close()
            }
        }
    }

    @Test func versionOneKeepsWorkingAndKeepsEveryAnswer() async throws {
        try await Instance.with { instance in
            let token = try await instance.token("alice")
            func push(_ body: String) async throws -> JSONValue {
                let response = try await URLSessionHTTPClient().send(
                    HTTPRequest(
                        method: "POST", url: instance.url.appendingPathComponent("rpc/outbox_push"),
                        headers: [
                            "Authorization": "Bearer " + token, "apikey": instance.apiKey, "Content-Type": "application/json",
                        ],
                        body: Data(body.utf8)), timeout: 10)
                return try JSONText.parse(String(decoding: response.body, as: UTF8.self))
            }
            let write =
                #"{"id":1,"idempotencyKey":"k1","user":"alice","table":"todos","op":"insert","key":{"id":901},"body":{"title":"a"}}"#
            let first = try await push(
                #"{"batch":{"version":1,"origin":"o1","atomic":false,"watermark":5,"writes":[\#(write)]}}"#)
            guard case .object(let answer) = first, case .array(let verdicts)? = answer["verdicts"] else {
                Issue.record("no answer: \(first)")
                return
            }
            #expect(answer["version"] == 1 && verdicts.count == 1)
            // Version 1 forgets nothing (its batches carry no watermark; one there is ignored).
            #expect(try await instance.sql("select count(*) from outbox.answers where origin = 'o1'") == ["1"])
            #expect(try await instance.sql("select count(*) from outbox.watermarks") == ["0"])
            let unknown = try await push(#"{"batch":{"version":3,"origin":"o1","atomic":false,"writes":[]}}"#)
            #expect(unknown == ["version": 2, "error": "version_unsupported", "versions": [1, 2]])
        }
    }

    @Test func aTransportSpeaksVersionOneToAnInstanceThatSpeaksOnlyThat() async throws {
        let client = ScriptedHTTPClient([
            .status(200, body: #"{"version":1,"error":"version_unsupported","versions":[1]}"#),
            .status(
                200,
                body: #"{"version":1,"aborted":false,"verdicts":[{"id":7,"verdict":"accepted","version":1,"replayed":false}]}"#),
            .status(
                200,
                body: #"{"version":1,"aborted":false,"verdicts":[{"id":8,"verdict":"accepted","version":1,"replayed":false}]}"#),
        ])
        let transport = try ContractTransport(url: URL(string: "https://abc.supabase.co")!, apiKey: "anon", client: client)
        func batch(_ id: UInt64) -> OutgoingBatch {
            OutgoingBatch(
                writes: [
                    OutgoingWrite(
                        id: WriteID(id), origin: IdempotencyKey(high: 1, low: 2),
                        idempotencyKey: IdempotencyKey(high: 3, low: id),
                        table: "todos", operation: .insert, key: ["id": .int(Int64(id))], body: ["title": "a"], user: "alice")
                ], acknowledgedWatermark: WriteID(id - 1))
        }
        #expect(await transport.send(batch(7), accessToken: "T") == .answered([WriteAnswer(.accepted)]))
        #expect(await transport.send(batch(8), accessToken: "T") == .answered([WriteAnswer(.accepted)]))
        let bodies = client.sent.map { String(decoding: $0.body ?? Data(), as: UTF8.self) }
        #expect(bodies.count == 3)
        #expect(bodies[0].contains(#""version":2,"watermark":6"#))
        #expect(bodies[1].contains(#""version":1,"writes""#) && !bodies[1].contains("watermark"))
        #expect(bodies[2].contains(#""version":1,"writes""#), "it stays on version 1")
    }
}
