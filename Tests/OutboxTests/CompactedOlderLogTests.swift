import Foundation
import OutboxLMDB
import OutboxTesting
import Testing

@testable import Outbox

/// A compacted log of layout 10, whose snapshot holds that layout's projections (each user's counters
/// in a table of their own): made at df79cb2 by alice's writes 1–6 sent and taken, 7–8 answered, 9–10
/// pending, then bob's 11–13, compacted into one segment, then bob's 14; with what that build's
/// `outbox log --json` and `outbox history --json` printed for it. This build reads it as that one
/// did, its counters included, each user's mark put at their first pending write (R4.2), and goes on
/// writing to it (R8.2, R8.5).
@Suite struct CompactedOlderLogTests {
    static let fixture = LogFixture("layout10-compacted")

    @Test func aCompactedLogOfTheEarlierLayoutReadsAsItDidAndGoesOn() async throws {
        try await TemporaryFolder.with { path in
            try Self.fixture.copy(["data.mdb", "archive/segment-000001.mdb"], to: path)
            let client = try await openClient(path, user: nil, transport: SimulatedInstance())
            var log: [String] = []
            try client.log.forEachEvent { recorded in
                log.append(JSONText.render(recorded.json))
                return true
            }
            #expect(log == (try Self.fixture.lines("log.jsonl")))
            for id in [3, 7, 9, 12] {
                let history = try client.log.history(of: WriteID(UInt64(id))).map { JSONText.render($0.json) }
                #expect(history == (try Self.fixture.lines("history-\(id).jsonl")), "write \(id)")
            }
            #expect(
                try client.log.read { try $0.counters(user: "alice") }
                    == Counters(pending: 2, rejected: 0, blocked: 0, answered: 2, behind: 0, sendFrom: 9))
            let bob = Counters(pending: 4, rejected: 0, blocked: 0, answered: 0, behind: 0, sendFrom: 11)
            #expect(try client.log.read { try $0.counters(user: "bob") } == bob)
            #expect(try await client.verify().isOK)

            try await client.settleSession(user: "alice", accessToken: nil)
            #expect(try await client.sync().syncedCount == 2)
            #expect(
                try client.log.read { try $0.counters(user: "alice") }
                    == Counters(pending: 0, rejected: 0, blocked: 0, answered: 4, behind: 0, sendFrom: 15))
            try await client.rebuild()
            #expect(try client.log.read { try $0.counters(user: "bob") } == bob)
            #expect(try await client.verify().isOK)
            client.close()
            // The tables layout 10 kept the counters and the pending writes in went with the rebuild on open.
            let environment = try Environment(path: path, databases: EventLog.databaseNames)
            #expect(try !environment.write { txn in try txn.deleteDatabase(named: "counters") })
            #expect(try !environment.write { txn in try txn.deleteDatabase(named: "pending") })
            environment.close()
        }
    }
}
