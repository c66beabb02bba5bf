import Foundation
import Outbox
import OutboxHTTP
import OutboxTesting
import Testing

/// R9.2–R9.4 with a scripted HTTP client: the request each op makes, and what each answer maps to.
@Suite struct PostgRESTClassificationTests {
    static let origin = Origin(high: 1, low: 2)

    static func write(
        _ id: UInt64, _ operation: WriteOperation, table: String = "todos", key: JSONValue = ["id": 1],
        body: JSONValue = ["title": "Milk"]
    ) -> OutgoingWrite {
        OutgoingWrite(
            id: WriteID(id), origin: origin, idempotencyKey: IdempotencyKey(high: id, low: id), table: table,
            operation: operation, key: key, body: body)
    }

    static func transport(_ client: ScriptedHTTPClient) throws -> PostgRESTTransport {
        try PostgRESTTransport(
            url: URL(string: "https://abc.supabase.co")!, apiKey: "anon-key", schema: "app", tables: ["todos": ["id"]],
            pathPrefix: "/rest/v1", headers: ["X-Client-Info": "outbox"], client: client)
    }

    // R9.2: the request of every op, its headers, and the token only in Authorization.
    @Test func everyOperationMakesItsRequest() async throws {
        let client = ScriptedHTTPClient()
        client.answer(
            .status(201), .status(200), .status(204, headers: ["Content-Range": "*/1"]),
            .status(204, headers: ["Content-Range": "*/0"]), .status(204))
        let transport = try Self.transport(client)
        let writes = [
            Self.write(1, .insert), Self.write(2, .upsert), Self.write(3, .update, body: ["done": true]),
            Self.write(4, .delete, key: ["id": "a b&c+é"], body: [:]),
            Self.write(5, .custom("complete_list"), body: ["list_id": 7]),
        ]
        // R9.3: one request a write, each sent on its own (the library records each answer first).
        #expect(transport.requestSize(for: OutgoingBatch(writes: writes)) == 1)
        var answers: [RequestAnswer] = []
        for write in writes { answers.append(await transport.send(OutgoingBatch(writes: [write]), accessToken: "TOKEN")) }
        #expect(answers == Array(repeating: .answered([WriteAnswer(.accepted)]), count: 5))
        let sent = client.sent
        #expect(sent.map(\.method) == ["POST", "POST", "PATCH", "DELETE", "POST"])
        #expect(
            sent.map(\.url.absoluteString) == [
                "https://abc.supabase.co/rest/v1/todos", "https://abc.supabase.co/rest/v1/todos?on_conflict=id",
                "https://abc.supabase.co/rest/v1/todos?id=eq.1", "https://abc.supabase.co/rest/v1/todos?id=eq.a%20b%26c%2B%C3%A9",
                "https://abc.supabase.co/rest/v1/rpc/complete_list",
            ])
        #expect(
            sent.map { $0.headers["Prefer"] } == [
                "return=minimal", "resolution=merge-duplicates,return=minimal", "count=exact,return=minimal",
                "count=exact,return=minimal", nil,
            ])
        #expect(
            sent.map { $0.body.map { String(decoding: $0, as: UTF8.self) } } == [
                #"{"id":1,"title":"Milk"}"#, #"{"id":1,"title":"Milk"}"#, #"{"done":true}"#, nil, #"{"list_id":7}"#,
            ])
        for request in sent {
            #expect(request.headers["Authorization"] == "Bearer TOKEN" && request.headers["apikey"] == "anon-key")
            #expect(request.headers["Content-Profile"] == "app" && request.headers["X-Client-Info"] == "outbox")
            #expect(!request.url.absoluteString.contains("TOKEN"))
            #expect(request.headers["X-Outbox-Origin"] == Self.origin.description)
        }
        #expect(sent.map { $0.headers["X-Outbox-Write"] } == ["1", "2", "3", "4", "5"])
        #expect(transport.unmadeReason(for: Self.write(6, .insert, table: "legacy")) != nil, "an unknown table is unmade (R4.3)")
        #expect(transport.unmadeReason(for: Self.write(7, .update, key: ["id": ["nested": 1]])) != nil)
        #expect(transport.unmadeReason(for: Self.write(8, .update, key: ["uid": 1])) != nil, "not the table's key column")
    }

    // R9.4, row by row, for a batch of one write.
    @Test(
        "R9.4, R9.1: what each answer is, PostgREST's codes mapped to what they mean",
        arguments: [
            (ScriptedHTTPClient.Answer.error(401, "PGRST303"), "failed 401 PGRST303 tokenRefused"),
            (.error(401, "PGRST301"), "failed 401 PGRST301 tokenRefused"), (.error(401, "42501"), "alone 401 42501"),
            (.error(403, "42501"), "alone 403 42501"), (.error(401, nil), "failed 401 - mayPass"),
            (.error(405, "25006"), "failed 405 25006 mayPass"), (.error(402, nil), "failed 402 - mayPass"),
            (.error(540, nil), "failed 540 - mayPass"),
            (.error(408, nil), "failed 408 - mayPass"),
            (.error(429, nil, headers: ["Retry-After": "12"]), "failed 429 - mayPass after 12"),
            (.error(503, "PGRST001", headers: ["Retry-After": "0"]), "failed 503 PGRST001 mayPass after 0"),
            (.error(500, "40001"), "failed 500 40001 mayPass"), (.error(504, "PGRST003"), "failed 504 PGRST003 mayPass"),
            (.status(520), "failed 520 - mayPass"), (.status(522), "failed 522 - mayPass"),
            (.status(524), "failed 524 - mayPass"),
            (.status(544), "failed 544 - mayPass"), (.error(404, "PGRST205"), "failed 404 PGRST205 schemaCache"),
            (.error(400, "PGRST204"), "failed 400 PGRST204 schemaCache"),
            (.error(404, "PGRST202"), "failed 404 PGRST202 schemaCache"),
            (.error(400, "23514"), "failed 400 23514 refused"), (.error(409, "23503"), "failed 409 23503 refused"),
            (.error(400, "22P02"), "failed 400 22P02 refused"), (.error(400, "P0001"), "failed 400 P0001 refused"),
            (.error(400, "PGRST102"), "failed 400 PGRST102 refused"), (.error(406, "PGRST116"), "failed 406 PGRST116 refused"),
            (.status(413, body: "<html>too large</html>"), "failed 413 - refused"),
            (.failure(.timeout), "failed timeout"), (.failure(.network), "failed network"),
        ] as [(ScriptedHTTPClient.Answer, String)])
    func classification(_ scripted: ScriptedHTTPClient.Answer, _ expected: String) async throws {
        let client = ScriptedHTTPClient([scripted])
        let answer = try await Self.transport(client).send(OutgoingBatch(writes: [Self.write(1, .upsert)]), accessToken: nil)
        #expect(Self.describe(answer) == expected)
    }

    // R9.1: PostgREST's codes are read here, in the transport's mapping, and nowhere in the library.
    @Test func codesWithoutAStatusAndTheFieldsOfARefusal() async throws {
        for code in ["22P02", "23505", "42703", "P0001", "0A000"] {
            #expect(RequestFailure.Meaning.postgREST(status: nil, code: code) == .refused)
        }
        #expect(RequestFailure.Meaning.postgREST(status: nil, code: "42501") == .mayPass)
        #expect(RequestFailure.Meaning.postgREST(status: nil, code: "XX000") == .mayPass)
        #expect(RequestFailure.Meaning.postgREST(status: 400, code: "42501") == .mayPass)
        #expect(RequestFailure.Meaning.postgREST(status: 403, code: "PGRST301") == .refused, "a token class needs its 401")
        // The column a refusal names travels with the failure, and the refusal the library records keeps it.
        let client = ScriptedHTTPClient([.error(400, "23502", #"null value in column "title" violates not-null constraint"#)])
        let answer = try await Self.transport(client).send(OutgoingBatch(writes: [Self.write(1, .insert)]), accessToken: nil)
        guard case .failed(let failure) = answer else {
            Issue.record("a write's own request that is refused fails as a request: \(answer)")
            return
        }
        #expect(failure.fields == ["title"] && failure.meaning == .refused)
    }

    /// R4.3 with R9.4's PostgREST rows, written again apart from the library's code.
    static func expected(status: Int, code: String?) -> RequestFailure.Meaning {
        if status == 401, ["PGRST301", "PGRST302", "PGRST303"].contains(code) { return .tokenRefused }
        if ["PGRST204", "PGRST205", "PGRST202"].contains(code) { return .schemaCache }
        if code == "42501" || code == "25006" || [401, 402, 408, 429].contains(status) || !(400..<500).contains(status) {
            return .mayPass
        }
        return .refused
    }

    // TESTING.md §3: the mapping is total over every status and the codes that matter.
    @Test func postgRESTMappingIsTotal() {
        let codes: [String?] = [
            nil, "PGRST204", "PGRST205", "PGRST202", "PGRST301", "PGRST302", "PGRST303", "42501", "25006", "23505",
            "22P02", "P0001", "0A000", "<html>",
        ]
        for status in 100...599 {
            for code in codes {
                #expect(RequestFailure.Meaning.postgREST(status: status, code: code) == Self.expected(status: status, code: code))
            }
        }
    }

    static func describe(_ answer: RequestAnswer) -> String {
        switch answer {
        case .failed(let failure) where failure.kind == .http:
            return "failed \(failure.status ?? 0) \(failure.code ?? "-") \(failure.meaning)"
                + (failure.retryAfter.map { " after \($0)" } ?? "")
        case .failed(let failure): return "failed \(failure.kind.rawValue)"
        case .answered(let answers):
            return answers.map { answer in
                switch answer.verdict {
                case .refused(let refusal): return "refused \(refusal.status ?? 0) \(refusal.code ?? "-")"
                case .failed(let status, let code, _): return "alone \(status ?? 0) \(code ?? "-")"
                default: return "\(answer.verdict)" + (answer.replayed ? " replayed" : "")
                }
            }.joined(separator: ", ")
        case .contractBroken(let description): return "broken: \(description)"
        }
    }

    // R9.3: a duplicate insert read back; R9.4: a 2xx that breaks the contract; R4.5: a batch of
    // inserts as one request, refused whole as a request-level answer.
    @Test func duplicatesAreReadBackAndBrokenAnswersStop() async throws {
        let client = ScriptedHTTPClient()
        let transport = try Self.transport(client)
        client.answer(.error(409, "23505"), .status(200, body: #"[{"id":1,"title":"Milk","done":false}]"#))
        #expect(
            Self.describe(await transport.send(OutgoingBatch(writes: [Self.write(1, .insert)]), accessToken: nil))
                == "accepted replayed")
        #expect(client.sent.last?.method == "GET" && client.sent.last?.url.query == "id=eq.1")
        client.answer(.error(409, "23505"), .status(200, body: #"[{"id":1,"title":"Bread"}]"#))
        #expect(
            Self.describe(await transport.send(OutgoingBatch(writes: [Self.write(1, .insert)]), accessToken: nil))
                == "refused 409 23505")
        client.answer(.status(204))
        #expect(
            Self.describe(await transport.send(OutgoingBatch(writes: [Self.write(1, .update)]), accessToken: nil)).hasPrefix(
                "broken:"),
            "an update answered without the count it asked for")
        let inserts = (1...3).map { Self.write(UInt64($0), .insert, key: ["id": .int(Int64($0))]) }
        client.answer(.status(201))
        #expect(
            await transport.send(OutgoingBatch(writes: inserts), accessToken: nil)
                == .answered(Array(repeating: WriteAnswer(.accepted), count: 3)))
        #expect(
            client.sent.last?.body.map { String(decoding: $0, as: UTF8.self) }
                == #"[{"id":1,"title":"Milk"},{"id":2,"title":"Milk"},{"id":3,"title":"Milk"}]"#)
        client.answer(.error(409, "23505"))
        #expect(
            Self.describe(await transport.send(OutgoingBatch(writes: inserts), accessToken: nil)) == "failed 409 23505 refused")
    }
}

extension PostgRESTClassificationTests {
    // R9.1: a payload goes out as the canonical JSON bytes of the write as queued (the row: the key's
    // members, then the body's), the same bytes on every send.
    @Test func payloadsGoOutAsTheQueuedBytes() async throws {
        let client = ScriptedHTTPClient()
        let transport = try Self.transport(client)
        let body: JSONValue = [
            "title": "Lait \u{e9} \u{1}\"", "x": 0.1, "big": 9_007_199_254_740_993, "tags": ["b", nil, false], "n": -0.0,
        ]
        let write = Self.write(1, .insert, body: body)
        #expect(write.bodyJSON == Array(JSONText.render(body).utf8) && write.keyJSON == Array(#"{"id":1}"#.utf8))
        _ = await transport.send(OutgoingBatch(writes: [write]), accessToken: nil)
        _ = await transport.send(OutgoingBatch(writes: [write]), accessToken: nil)
        let sent = client.sent.compactMap(\.body).map { Array($0) }
        let row = Array(
            #"{"id":1,"big":9007199254740993,"n":0.0,"tags":["b",null,false],"title":"Lait \#u{e9} \u0001\"","x":0.1}"#.utf8)
        #expect(sent == [row, row])
        guard case .object(var merged) = body else { return }
        merged["id"] = 1
        #expect(try JSONText.parse(String(decoding: row, as: UTF8.self)) == .object(merged))
        // A body that names a key column too: the key's value wins, and the row is one object.
        let both = Self.write(2, .upsert, body: ["id": 9, "title": "Milk"])
        _ = await transport.send(OutgoingBatch(writes: [both]), accessToken: nil)
        #expect(client.sent.last?.body.map { String(decoding: $0, as: UTF8.self) } == #"{"id":1,"title":"Milk"}"#)
    }

    // R9.3: a delete that finds no row is accepted; replayed when an earlier attempt sent it.
    @Test func aResentDeleteThatFindsNoRowIsReplayed() async throws {
        let client = ScriptedHTTPClient()
        let transport = try Self.transport(client)
        var delete = Self.write(1, .delete, body: [:])
        client.answer(.status(204, headers: ["Content-Range": "*/0"]), .status(204, headers: ["Content-Range": "*/0"]))
        #expect(Self.describe(await transport.send(OutgoingBatch(writes: [delete]), accessToken: nil)) == "accepted")
        delete.isResend = true
        #expect(Self.describe(await transport.send(OutgoingBatch(writes: [delete]), accessToken: nil)) == "accepted replayed")
    }

    // R9.3: handed more writes than one request carries, the transport sends one request and answers
    // the rest not sent (the library never does this: it sends `requestSize(for:)` writes at a time).
    @Test func writesPastOneRequestAreNotSent() async throws {
        let client = ScriptedHTTPClient()
        let transport = try Self.transport(client)
        let updates = (1...3).map { Self.write(UInt64($0), .update, key: ["id": .int(Int64($0))]) }
        client.answer(.error(503, "PGRST001", headers: ["Retry-After": "0"]))
        let failure = RequestFailure(kind: .http, status: 503, code: "PGRST001", retryAfter: "0", text: "server text")
        #expect(
            await transport.send(OutgoingBatch(writes: updates), accessToken: nil)
                == .answered([WriteAnswer(.notSent(failure)), WriteAnswer(.notSent(nil)), WriteAnswer(.notSent(nil))]))
        #expect(client.sent.count == 1, "the writes after the first request are not sent")
        let inserts = (1...3).map { Self.write(UInt64($0), .insert, key: ["id": .int(Int64($0))]) } + updates
        #expect(transport.requestSize(for: OutgoingBatch(writes: inserts)) == 3, "a run of inserts is one request")
    }

    // R9.3, R4.3: an atomic group that cannot be one PostgREST request is unmade, whole and for good;
    // one that can goes as one request.
    @Test func anAtomicGroupAcrossTablesIsUnmade() async throws {
        let client = ScriptedHTTPClient()
        let transport = try PostgRESTTransport(
            url: URL(string: "https://abc.supabase.co")!, tables: ["todos": ["id"], "lists": ["id"]], client: client)
        try await TemporaryFolder.with { path in
            var configuration = OutboxConfiguration(autoSync: false)
            configuration.clock = ManualClock()
            let outbox = try OutboxClient.open(path: path, transport: transport, configuration: configuration)
            try await outbox.settleSession(user: "alice", accessToken: nil)
            _ = try await outbox.enqueue(
                contentsOf: [
                    .insert(into: "lists", key: ["id": 7], body: ["name": "L"]),
                    .insert(into: "todos", key: ["id": 1], body: ["title": "T"]),
                ],
                atomic: true)
            let report = try await outbox.sync()
            #expect(client.sent.isEmpty, "nothing sent")
            #expect(report.rejected.count == 2)
            for write in try await outbox.queue.all() {
                let refusal = try #require(write.state.refusal)
                #expect(refusal.isFinal && refusal.reason?.contains("contract transport") == true)
            }
            _ = try await outbox.enqueue(
                contentsOf: [
                    .insert(into: "todos", key: ["id": 2], body: ["title": "A"]),
                    .insert(into: "todos", key: ["id": 3], body: ["title": "B"]),
                ],
                atomic: true)
            let together = try await outbox.sync()
            #expect(together.syncedCount == 2 && client.sent.count == 1, "one request for the group")
            outbox.close()
        }
    }
}
