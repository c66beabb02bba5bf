import Foundation
import OutboxLMDB
import OutboxTesting
import Testing

@testable import Outbox

/// An error keeps what caused it, in its own words, and where the library made it; the message stays
/// the outbox's and never takes in what the cause says of a server.
@Suite("Errors keep their causes")
struct ErrorCauseTests {
    @Test func anLMDBErrorIsTheCauseAndSpeaksLMDBsWords() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let error = try #require(throws: OutboxError.self) { try OutboxClient.open(path: path) }
            #expect(error.code == .alreadyOpen)
            #expect(error.message.contains("share the one open client"))
            let lmdb = try #require(error.cause as? LMDBError)
            #expect(lmdb.isAlreadyOpen && lmdb.path == error.message.split(separator: ":").first.map(String.init))
            // LMDB's layer says what LMDB refused, in its words, not the outbox's.
            #expect(lmdb.reason.contains("LMDB") && !lmdb.reason.contains("client") && !lmdb.reason.contains("log"))
            #expect(error.location.file.hasPrefix("Outbox/"))
            _ = client
        }
    }

    @Test func aForeignFileSaysNotALogWhileItsLMDBErrorSaysWhatLMDBFound() throws {
        let folder = TemporaryFolder(created: true)
        defer { folder.remove() }
        let path = folder.path
        // An LMDB file with none of a log's databases.
        try Environment(path: path, databases: ["other"]).close()
        var options = EventLog.Options()
        options.readOnly = true
        let error = try #require(throws: OutboxError.self) { try EventLog(path: path, options: options) }
        #expect(error.code == .damaged && error.message.contains("not an outbox log"))
        let lmdb = try #require(error.cause as? LMDBError)
        #expect(lmdb.isMissingDatabase && lmdb.reason.hasSuffix(" database") && !lmdb.reason.contains("outbox"))
    }

    @Test func aFailedRowReadKeepsTheTransportsErrorOutOfItsMessage() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path, transport: RowTransport(fails: true))
            let id = try await client.enqueue(todo(1))
            try await client.record(id, .blocked(.failingAlone, refusal: nil))
            let error = try await #require(throws: OutboxError.self) { try await client.queue.withdraw(id) }
            #expect(error.code == .rowReadFailed && error.writeID == id)
            #expect(error.cause is RowTransport.ReadFailed)
            #expect(!error.message.contains("ReadFailed"))
        }
    }

    @Test func aValueThatDoesNotEncodeKeepsTheEncodersError() throws {
        struct Refuses: Encodable {
            struct Nope: Error {}
            func encode(to encoder: any Encoder) throws { throw Nope() }
        }
        let error = try #require(throws: OutboxError.self) { try JSONValue(encoding: Refuses()) }
        #expect(error.code == .invalidWrite && error.cause is Refuses.Nope)
    }

    @Test func errorsAreStillEqualByTheirCodes() {
        #expect(OutboxError(.storage, "a", cause: CocoaError(.fileNoSuchFile)) == .storage)
        #expect(OutboxError(.storage, "a") != .damaged)
    }
}
