import Foundation
import Outbox
import OutboxHTTP
import OutboxTesting
import Testing

/// The conformance checks `OutboxTesting` ships, run against every transport of the project (the
/// simulated instance, the PostgREST transport through the stand-in into PostgreSQL, the contract
/// transport through the stand-in into the reference instance): the same writes get the same
/// outcomes, whatever carries them. R4.1, R2.2 (every op accepted); R3.2, R4.6 (a lost
/// acknowledgement applied once); R6.4 (the row read).
@Suite("Transport conformance")
struct TransportConformanceTests {
    enum Kind: String, CaseIterable, Sendable {
        case simulated, postgrest, contract
    }

    /// Runs `body` with a fresh subject of `kind`, and stops what it started.
    static func with(_ kind: Kind, _ body: (TransportConformance.Subject) async throws -> Void) async throws {
        switch kind {
        case .simulated:
            let instance = SimulatedInstance()
            try await body(
                TransportConformance.Subject(
                    transport: instance, token: nil, loseNextAcknowledgement: { instance.script([.lostResponse]) }))
        case .postgrest:
            try await Instance.with { instance in
                let transport = try PostgRESTTransport(
                    url: instance.url, apiKey: instance.apiKey, tables: ["lists": ["id"], "todos": ["id"]], timeout: 20)
                try await body(
                    TransportConformance.Subject(
                        transport: transport, token: try await instance.token("alice"),
                        loseNextAcknowledgement: { try await instance.fault([["drop": true]]) }))
            }
        case .contract:
            try await Instance.with { instance in
                let transport = try ContractTransport(url: instance.url, apiKey: instance.apiKey, timeout: 20)
                try await body(
                    TransportConformance.Subject(
                        transport: transport, token: try await instance.token("alice"),
                        loseNextAcknowledgement: { try await instance.fault([["drop": true]]) }))
            }
        }
    }

    @Test("every transport keeps every promise", arguments: Kind.allCases, TransportConformance.checks)
    func conforms(_ kind: Kind, _ check: TransportConformance.Check) async throws {
        try await Self.with(kind) { subject in try await check.run(subject) }
    }

    @Test("a broken promise fails its check, naming it")
    func aBrokenPromiseFails() async throws {
        // A transport whose lost acknowledgement is not lost: the server applies nothing twice, but
        // the pass is not stopped, so the check says so.
        let instance = SimulatedInstance()
        let subject = TransportConformance.Subject(transport: instance, token: nil, loseNextAcknowledgement: {})
        let failure = try await #require(throws: TransportConformance.Failure.self) {
            try await TransportConformance.aLostAcknowledgementIsAppliedOnce.run(subject)
        }
        #expect(failure.check == "a lost acknowledgement is applied once")
    }
}
