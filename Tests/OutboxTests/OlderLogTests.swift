import Foundation
import OutboxTesting
import Testing

@testable import Outbox

/// A log written by the build before decision 010 (layout 9, one `verdictRecorded` a verdict, key and
/// body decoded as values): `outbox demo --keep` at 6983192, compacted with `mdb_copy -c`, with what that
/// build's `outbox log --json` and `outbox history --json` printed for it. This build opens it, reads
/// every event and every write's history as that build did, verifies it, checks its decisions the
/// same (R8.2, R8.4), and goes on writing to it in its own form.
@Suite struct OlderLogTests {
    static let fixture = LogFixture("layout9-demo")

    /// An event as that build printed it: without what this build's reading adds (a failure's meaning
    /// and fields, answerReceived v4), which the older records imply.
    static func asPrinted(_ json: JSONValue) -> String {
        guard case .object(var fields) = json, case .object(var failure)? = fields["failure"] else {
            return JSONText.render(json)
        }
        failure["meaning"] = nil
        failure["fields"] = nil
        fields["failure"] = .object(failure)
        return JSONText.render(.object(fields))
    }

    @Test func aLogOfTheEarlierFormatReadsAsItDidAndGoesOn() async throws {
        try await TemporaryFolder.with { path in
            try Self.fixture.copy(["data.mdb"], to: path)
            let client = try await openClient(path, transport: SimulatedInstance())
            var log: [String] = []
            try client.log.forEachEvent { recorded in
                log.append(Self.asPrinted(recorded.json))
                return true
            }
            #expect(log == (try Self.fixture.lines("log.jsonl")))
            for id in 1...7 {
                let history = try await client.history(of: WriteID(UInt64(id))).map { Self.asPrinted($0.json) }
                #expect(history == (try Self.fixture.lines("history-\(id).jsonl")), "write \(id)")
            }
            #expect(try await client.verify().isOK)
            #expect(try client.log.checkDecisions().isSame)
            // The refused write of the demo still reads as refused; new writes go on, joined verdicts and all.
            #expect(try await client.write(6)?.state.name == "refused")
            let ids = try await client.enqueue(contentsOf: [todo(40), todo(41), todo(42)])
            try await client.sync()
            for id in ids { #expect(try await client.write(id)?.state == .accepted) }
            var types: [EventType] = []
            try client.log.forEachEvent(from: UInt64(log.count + 1)) { recorded in
                types.append(recorded.event.type)
                return true
            }
            #expect(types.contains(.verdictsRecorded))
            #expect(try await client.verify().isOK)
            let decisions = try client.log.checkDecisions()
            #expect(decisions.isSame, "\(decisions)")
            client.close()
        }
    }
}
