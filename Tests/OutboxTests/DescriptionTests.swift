import Foundation
import OutboxTesting
import Testing

@testable import Outbox

/// A report, a status and a pass failure print as one short line, not as a dump of their fields, and
/// never with a server's text or a token (R3.4, R7.1).
@Suite struct DescriptionTests {
    @Test func aReportAndTheStatusPrintAsOneLine() async throws {
        try await TemporaryFolder.with { path in
            let instance = SimulatedInstance()
            var configuration = testConfiguration()
            configuration.batchSize = 1
            let client = try await openClient(path, user: nil, configuration: configuration, transport: instance)
            try await client.settleSession(user: "alice", accessToken: "secret-token-42")
            for n in 1...3 { try await client.enqueue(todo(Int64(n))) }
            instance.script([
                .verdict(.accepted),
                .verdict(.refused(Refusal(status: 422, code: "23514", message: "the server's own words"))),
                .status(503, code: "PGRST001", retryAfter: "30"),
            ])
            let report = try await client.sync()
            #expect(
                report.description
                    == "synced 1 (0 already on the server), rejected 1, blocked 0, held 0, remaining 1; "
                    + "stopped by http 503 PGRST001, retry after 30 s")
            #expect("\(report)" == report.description)
            let status = client.syncStatus.value
            #expect(
                status.description
                    == "network unknown, pending 1, rejected 1, blocked 0, last failure http 503 PGRST001, retry after 30 s")
            for text in [report.description, status.description] {
                #expect(!text.contains("secret-token-42") && !text.contains("own words"))
            }
            #expect(PassFailure(kind: .network).description == "network")
            #expect(PassFailure(kind: .http, status: 429, retryAfter: 0.5).description == "http 429, retry after 0.5 s")
        }
    }
}
