internal import Foundation
public import Outbox

/// The promises every transport keeps, as checks an app runs against its own transport and server
/// (the project runs them against its own three): the same writes get the same outcomes, whatever
/// carries them. Each check opens a log of its own, signs in user `alice`, writes table `todos`
/// keyed by `id`, and throws `TransportConformance.Failure` naming the promise it found broken.
///
/// ```swift
/// @Test(arguments: TransportConformance.checks)
/// func conforms(_ check: TransportConformance.Check) async throws {
///     let server = try await MyTestServer.start()
///     try await check.run(TransportConformance.Subject(
///         transport: MyTransport(url: server.url), token: server.token(for: "alice"),
///         loseNextAcknowledgement: { await server.dropTheNextAnswer() }))
/// }
/// ```
public enum TransportConformance {
    /// A server and the transport to it, as the checks drive them.
    public struct Subject: Sendable {
        /// The transport under test.
        public var transport: any OutboxTransport
        /// The access token of user `alice`, nil when the server needs none.
        public var token: String?
        /// Makes the server apply the next request and its answer be lost on the way back.
        public var loseNextAcknowledgement: @Sendable () async throws -> Void

        /// A subject: `transport` to a server that knows table `todos` keyed by `id`.
        public init(
            transport: any OutboxTransport, token: String?, loseNextAcknowledgement: @escaping @Sendable () async throws -> Void
        ) {
            self.transport = transport
            self.token = token
            self.loseNextAcknowledgement = loseNextAcknowledgement
        }
    }

    /// A promise a check found broken.
    public struct Failure: Error, CustomStringConvertible {
        /// The check's name.
        public let check: String
        /// What it expected and what it found.
        public let message: String
        public var description: String { "\(check): \(message)" }
    }

    /// One promise, checked against a subject.
    public struct Check: Sendable, CustomStringConvertible {
        /// What the check expects, in a phrase.
        public let name: String
        let body: @Sendable (Subject, OutboxClient, _ expect: (Bool, String) throws -> Void) async throws -> Void

        /// Runs the check on a log of its own; throws `Failure` when the promise does not hold.
        public func run(_ subject: Subject) async throws {
            try await TemporaryFolder.with { path in
                var configuration = OutboxConfiguration(autoSync: false)
                configuration.clock = ManualClock()
                let client = try await OutboxClient.open(
                    at: URL(filePath: path), transport: subject.transport, configuration: configuration)
                defer { client.close() }
                try await client.settleSession(user: "alice", accessToken: subject.token)
                try await body(subject, client) { holds, message in
                    if !holds { throw Failure(check: name, message: message) }
                }
            }
        }

        public var description: String { name }
    }

    /// Every check.
    public static let checks: [Check] = [
        everyOpIsAccepted, aLostAcknowledgementIsAppliedOnce, theRowReadReturnsWhatTheServerHolds,
    ]

    /// Writes of every plain operation are answered accepted, in order, each once.
    public static let everyOpIsAccepted = Check(name: "every op is accepted") { _, client, expect in
        try await client.enqueue(.insert(into: "todos", key: ["id": 1], body: ["title": "Milk"]))
        try await client.enqueue(.update("todos", key: ["id": 1], set: ["title": "Oat milk"]))
        try await client.enqueue(.upsert(into: "todos", key: ["id": 2], body: ["title": "Bread"]))
        try await client.enqueue(.delete(from: "todos", key: ["id": 2]))
        let report = try await client.sync()
        try expect(
            report.verdicts.map(\.kind) == [.accepted, .accepted, .accepted, .accepted], "verdicts \(report.verdicts.map(\.kind))"
        )
        try expect(report.stoppedBy == nil && report.remainingCount == 0, "the pass stopped or left writes: \(report)")
    }

    /// A lost acknowledgement is sent again under the same key and counted as already on the server:
    /// applied once.
    public static let aLostAcknowledgementIsAppliedOnce = Check(name: "a lost acknowledgement is applied once") {
        subject, client, expect in
        try await client.enqueue(.insert(into: "todos", key: ["id": 1], body: ["title": "Milk"]))
        try await subject.loseNextAcknowledgement()
        let lost = try await client.sync()
        try expect(lost.stoppedBy?.kind == .network && lost.syncedCount == 0, "the pass with the lost answer: \(lost)")
        let again = try await client.sync()
        try expect(again.syncedCount == 1 && again.alreadyOnServerCount == 1, "the pass after it: \(again)")
    }

    /// The row read (withdraw's) returns the row the server holds, or nil for none.
    public static let theRowReadReturnsWhatTheServerHolds = Check(name: "the row read returns what the server holds") {
        subject, client, expect in
        try await client.enqueue(.insert(into: "todos", key: ["id": 1], body: ["title": "Milk"]))
        try await client.sync()
        let held = try await subject.transport.readRow(table: "todos", key: ["id": 1], accessToken: subject.token)
        guard case .object(let row)? = held else {
            try expect(false, "no row: \(String(describing: held))")
            return
        }
        try expect(row["title"] == "Milk" && row["id"] == 1, "the row read: \(row)")
        let none = try await subject.transport.readRow(table: "todos", key: ["id": 9], accessToken: subject.token)
        try expect(none == nil, "a row the server lacks read as \(String(describing: none))")
    }
}
