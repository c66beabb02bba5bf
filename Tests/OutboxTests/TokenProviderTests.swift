import OutboxTesting
import Synchronization
import Testing

@testable import Outbox

/// R7.5: tokens from the app's provider, asked before each pass and once more on a token-class 401.
@Suite struct TokenProviderTests {
    final class Provider: Sendable {
        let tokens: Mutex<[String?]>
        let asked = Mutex(0)
        init(_ tokens: [String?]) { self.tokens = Mutex(tokens) }
        func next() throws -> String? {
            asked.withLock { $0 += 1 }
            return tokens.withLock { $0.isEmpty ? nil : $0.removeFirst() }
        }
    }

    func open(_ path: String, _ provider: Provider, _ instance: SimulatedInstance) async throws -> OutboxClient {
        let client = try OutboxClient.open(
            path: path, transport: instance, configuration: testConfiguration(), accessToken: { try provider.next() })
        try await client.settleSession(user: "alice", accessToken: nil)
        return client
    }

    @Test func anExpiredTokenIsAskedForOnceMoreAndTheSameRequestGoesAgain() async throws {
        try await TemporaryFolder.with { path in
            let instance = SimulatedInstance()
            let provider = Provider([token(subject: "alice"), token(subject: "alice") + "-fresh"])
            let client = try await open(path, provider, instance)
            try await client.enqueue(todo(1))
            instance.script([.status(401, code: "PGRST303", meaning: .tokenRefused)])
            let report = try await client.sync()
            #expect(report.syncedCount == 1 && report.stoppedBy == nil)
            #expect(provider.asked.withLock { $0 } == 2)
            let received = instance.received
            #expect(received.count == 2 && received[0].writes == received[1].writes, "the same request, again")
            #expect(received.map(\.accessToken) == [token(subject: "alice"), token(subject: "alice") + "-fresh"])
            let keys = try await client.history(of: 1).compactMap { event -> [IdempotencyKey]? in
                if case .attemptStarted(let attempt) = event.event { return attempt.writes.map(\.idempotencyKey) }
                return nil
            }
            #expect(keys.count == 1, "one attempt, under one key")
        }
    }

    // A token refused in the middle of a batch (a transport that sends a request per write): the rest
    // goes again under a fresh token, from the write that was not sent.
    @Test func aTokenRefusedInTheMiddleOfABatchResendsTheRest() async throws {
        try await TemporaryFolder.with { path in
            let instance = SimulatedInstance()
            let provider = Provider([token(subject: "alice"), token(subject: "alice") + "-fresh"])
            let client = try await open(path, provider, instance)
            for n in 1...3 { try await client.enqueue(todo(Int64(n))) }
            let refused = RequestFailure(kind: .http, status: 401, code: "PGRST303", text: "JWT expired", meaning: .tokenRefused)
            instance.script([.verdict(.accepted), .verdict(.notSent(refused))])
            let report = try await client.sync()
            #expect(report.syncedCount == 3 && report.stoppedBy == nil, "\(report)")
            #expect(provider.asked.withLock { $0 } == 2)
            #expect(instance.received.map(\.writes) == [[1, 2, 3], [2, 3]])
            #expect(instance.received.last?.accessToken == token(subject: "alice") + "-fresh")
            #expect(instance.applied.map(\.id) == [1, 2, 3])
            #expect(try client.log.checkDecisions().isSame)
        }
    }

    @Test func aSecondRefusalOfTheTokenStopsThePass() async throws {
        try await TemporaryFolder.with { path in
            let instance = SimulatedInstance()
            let provider = Provider([token(subject: "alice"), token(subject: "alice"), token(subject: "alice")])
            let client = try await open(path, provider, instance)
            try await client.enqueue(todo(1))
            instance.script([
                .status(401, code: "PGRST301", meaning: .tokenRefused), .status(401, code: "PGRST303", meaning: .tokenRefused),
            ])
            let report = try await client.sync()
            #expect(report.stoppedBy == PassFailure(kind: .http, status: 401, code: "PGRST303"))
            #expect(provider.asked.withLock { $0 } == 2)
            #expect(try await client.write(1)?.refusals == 0)
            // A 401 of another class (a gateway's, no code) is not a token to refresh.
            instance.script([.status(401)])
            let gateway = try await client.sync()
            #expect(gateway.stoppedBy?.status == 401 && provider.asked.withLock { $0 } == 3)
        }
    }

    @Test func noTokenOrAnotherUsersTokenSendsNothing() async throws {
        try await TemporaryFolder.with { path in
            let instance = SimulatedInstance()
            let provider = Provider([nil, token(subject: "bob"), token(subject: "alice")])
            let client = try await open(path, provider, instance)
            let events = client.events
            try await client.enqueue(todo(1))
            let none = try await client.sync()
            #expect(none.stoppedBy == PassFailure(kind: .noToken) && none.remainingCount == 1)
            #expect(client.syncStatus.value.lastSyncError == PassFailure(kind: .noToken))
            let bob = try await client.sync()
            #expect(bob.stoppedBy == PassFailure(kind: .identityChanged))
            #expect(instance.received.isEmpty, "nothing sent, nothing charged")
            #expect(try await client.write(1)?.refusals == 0)
            // R7.3: the provider's token of another user latches the soft block, as a session would.
            #expect(bob.blockedCount == 1)
            #expect(client.syncStatus.value.blockedCount == 1 && client.syncStatus.value.pendingCount == 0)
            #expect(try await client.write(1)?.state == .blocked(.identityChanged, refusal: nil))
            // A matching token lifts it, and the write goes.
            let alice = try await client.sync()
            #expect(alice.syncedCount == 1 && alice.stoppedBy == nil)
            client.close()
            var stopped: [PassFailure] = []
            for await event in events { if case .passStopped(let failure) = event { stopped.append(failure) } }
            #expect(stopped.contains(PassFailure(kind: .identityChanged)), "events told it: \(stopped)")
        }
    }
}

extension TokenProviderTests {
    /// A transport whose row reads keep the token they were given.
    final class RowReadingTransport: OutboxTransport {
        let tokens = Mutex<[String?]>([])
        func send(_ batch: OutgoingBatch, accessToken: String?) async -> RequestAnswer {
            .answered(batch.writes.map { _ in WriteAnswer(.accepted) })
        }
        func readRow(table: String, key: JSONValue, accessToken: String?) async throws -> JSONValue? {
            tokens.withLock { $0.append(accessToken) }
            return ["id": 1]
        }
    }

    // R7.5: the token is resolved in one place for sends and reads: withdraw's row read on a client
    // opened with a token provider goes with the provider's token, not the session's (none here).
    @Test func withdrawReadsTheRowWithTheProvidersToken() async throws {
        try await TemporaryFolder.with { path in
            let transport = RowReadingTransport()
            let provider = Provider([token(subject: "alice"), nil])
            let client = try OutboxClient.open(
                path: path, transport: transport, configuration: testConfiguration(), accessToken: { try provider.next() })
            try await client.settleSession(user: "alice", accessToken: nil)
            let id = try await client.enqueue(todo(1))
            try await client.record(id, .blocked(.failingAlone, refusal: nil))
            #expect(try await client.queue.withdraw(id) == .withdrawn(row: ["id": 1]))
            #expect(transport.tokens.withLock { $0 } == [token(subject: "alice")])
            let other = try await client.enqueue(todo(2))
            try await client.record(other, .blocked(.failingAlone, refusal: nil))
            await #expect(throws: OutboxError.self) { try await client.queue.withdraw(other) }
            #expect(try await client.write(other)?.state == .blocked(.failingAlone, refusal: nil), "nothing changed")
        }
    }
}

/// A transport that accepts everything and keeps the batches it was sent.
final class CapturingTransport: OutboxTransport {
    let batches = Mutex<[OutgoingBatch]>([])
    func send(_ batch: OutgoingBatch, accessToken: String?) async -> RequestAnswer {
        batches.withLock { $0.append(batch) }
        return .answered(batch.writes.map { _ in WriteAnswer(.accepted) })
    }
    func readRow(table: String, key: JSONValue, accessToken: String?) async throws -> JSONValue? { nil }
}

@Suite struct OutgoingWriteTests {
    // The boundary carries what a real transport needs: the write's user and when it was queued.
    @Test func aWriteGoesOutWithItsUserAndItsTime() async throws {
        try await TemporaryFolder.with { path in
            let clock = ManualClock()
            let transport = CapturingTransport()
            let client = try await openClient(path, configuration: testConfiguration(clock: clock), transport: transport)
            let queuedAt = clock.now()
            try await client.enqueue(todo(1))
            clock.advance(seconds: 90)
            try await client.sync()
            let sent = try #require(transport.batches.withLock { $0.first?.writes.first })
            #expect(sent.user == "alice" && sent.createdAt == queuedAt)
            let failure: any Error = RequestFailure(kind: .network)
            #expect(failure is RequestFailure)
        }
    }
}
