import Foundation
import Outbox
import OutboxHTTP
import OutboxTesting
import Testing

/// One set of tests for every transport (the simulated instance, the PostgREST transport through the
/// stand-in into PostgreSQL, the contract transport through the stand-in into the reference
/// instance): the same writes get the same outcomes, whatever carries them.
@Suite("Transport conformance")
struct TransportConformanceTests {
    /// A server and the transport to it, as the tests drive them.
    struct Subject {
        let transport: any OutboxTransport
        let token: String?
        /// The next request is applied but its answer is lost.
        let loseNextAcknowledgement: () async throws -> Void
    }

    enum Kind: String, CaseIterable, Sendable {
        case simulated, postgrest, contract
    }

    /// Runs `body` with a fresh subject of `kind`, and stops what it started.
    static func with(_ kind: Kind, _ body: (Subject) async throws -> Void) async throws {
        switch kind {
        case .simulated:
            let instance = SimulatedInstance()
            try await body(
                Subject(transport: instance, token: nil, loseNextAcknowledgement: { instance.script([.lostResponse]) }))
        case .postgrest:
            try await Instance.with { instance in
                let transport = try PostgRESTTransport(
                    url: instance.url, apiKey: instance.apiKey, tables: ["lists": ["id"], "todos": ["id"]], timeout: 20)
                try await body(
                    Subject(
                        transport: transport, token: try await instance.token("alice"),
                        loseNextAcknowledgement: { try await instance.fault([["drop": true]]) }))
            }
        case .contract:
            try await Instance.with { instance in
                let transport = try ContractTransport(url: instance.url, apiKey: instance.apiKey, timeout: 20)
                try await body(
                    Subject(
                        transport: transport, token: try await instance.token("alice"),
                        loseNextAcknowledgement: { try await instance.fault([["drop": true]]) }))
            }
        }
    }

    func client(_ path: String, _ subject: Subject) async throws -> OutboxClient {
        var configuration = OutboxConfiguration(autoSync: false)
        configuration.clock = ManualClock()
        let client = try OutboxClient.open(path: path, transport: subject.transport, configuration: configuration)
        try await client.settleSession(user: "alice", accessToken: subject.token)
        return client
    }

    // R4.1, R2.2: writes of every plain op are answered accepted, in order, each once.
    @Test("every op is accepted", arguments: Kind.allCases)
    func everyOpIsAccepted(_ kind: Kind) async throws {
        try await Self.with(kind) { subject in
            try await withTemporaryLog { path in
                let client = try await client(path, subject)
                try await client.enqueue(.insert(into: "todos", key: ["id": 1], body: ["title": "Milk"]))
                try await client.enqueue(.update("todos", key: ["id": 1], set: ["title": "Oat milk"]))
                try await client.enqueue(.upsert(into: "todos", key: ["id": 2], body: ["title": "Bread"]))
                try await client.enqueue(.delete(from: "todos", key: ["id": 2]))
                let report = try await client.sync()
                #expect(report.verdicts.map(\.kind) == [.accepted, .accepted, .accepted, .accepted])
                #expect(report.stoppedBy == nil && report.remainingCount == 0)
                client.close()
            }
        }
    }

    // R3.2, R4.6: a lost acknowledgement is resent under the same key and counted already on the
    // server, applied once.
    @Test("a lost acknowledgement is applied once", arguments: Kind.allCases)
    func aLostAcknowledgementIsAppliedOnce(_ kind: Kind) async throws {
        try await Self.with(kind) { subject in
            try await withTemporaryLog { path in
                let client = try await client(path, subject)
                try await client.enqueue(.insert(into: "todos", key: ["id": 1], body: ["title": "Milk"]))
                try await subject.loseNextAcknowledgement()
                let lost = try await client.sync()
                #expect(lost.stoppedBy?.kind == .network && lost.syncedCount == 0)
                let again = try await client.sync()
                #expect(again.syncedCount == 1 && again.alreadyOnServerCount == 1)
                client.close()
            }
        }
    }

    // R6.4: withdraw's read returns the row the server holds, or null for none.
    @Test("the row read returns what the server holds", arguments: Kind.allCases)
    func theRowReadReturnsWhatTheServerHolds(_ kind: Kind) async throws {
        try await Self.with(kind) { subject in
            try await withTemporaryLog { path in
                let client = try await client(path, subject)
                try await client.enqueue(.insert(into: "todos", key: ["id": 1], body: ["title": "Milk"]))
                try await client.sync()
                let held = try await subject.transport.readRow(table: "todos", key: ["id": 1], accessToken: subject.token)
                guard case .object(let row)? = held else {
                    Issue.record("no row: \(String(describing: held))")
                    return
                }
                #expect(row["title"] == "Milk" && row["id"] == 1)
                #expect(try await subject.transport.readRow(table: "todos", key: ["id": 9], accessToken: subject.token) == nil)
                client.close()
            }
        }
    }
}
