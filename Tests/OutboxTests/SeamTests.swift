import Foundation
import OutboxTesting
import Synchronization
import Testing

@testable import Outbox

@Suite struct SeamTests {
    // TESTING.md §2: a crash point does nothing until armed, then acts at its n-th pass.
    @Test func crashPointsFireAtTheNamedPass() async throws {
        try await TemporaryFolder.with { path in
            let hits = Mutex<[Int]>([])
            var configuration = testConfiguration()
            let plan = CrashPlan(point: .enqueueAfterCommit, occurrence: 2, action: { hits.withLock { $0.append(1) } })
            configuration.crashPlan = plan
            let client = try await openClient(path, configuration: configuration)
            _ = try await client.enqueue(todo(1))
            #expect(hits.withLock { $0 }.isEmpty)
            _ = try await client.enqueue(todo(2))
            #expect(hits.withLock { $0 } == [1])
            _ = try await client.enqueue(todo(3))
            #expect(plan.passCount == 3)
            #expect(hits.withLock { $0 } == [1], "fires once")
        }
    }

    // An app whose process happens to have OUTBOX_CRASHPOINT set must not kill itself: the default
    // configuration arms nothing, whatever the environment says; only the harness reads it.
    @Test func anAppsConfigurationNeverReadsTheCrashPointVariable() throws {
        setenv(CrashPlan.environmentVariable, "enqueue.afterCommit#1", 1)
        defer { unsetenv(CrashPlan.environmentVariable) }
        #expect(OutboxConfiguration().crashPlan == nil)
        #expect(OutboxConfiguration(autoSync: false, durability: .noSync).crashPlan == nil)
        let plan = try #require(try CrashPlan.fromEnvironment())
        #expect(plan.point == .enqueueAfterCommit && plan.occurrence == 1)
    }

    @Test func crashPlansAreWrittenLabelHashN() {
        let plan = CrashPlan.parse("pass.afterSend#3")
        #expect(plan?.point == .passAfterSend && plan?.occurrence == 3)
        for bad in [
            "pass.afterSend", "pass.afterSend#0", "pass.afterSend#-1", "pass.afterSend#x", "nowhere#1", "pass.afterSend#1#2",
            "#1",
        ] {
            #expect(CrashPlan.parse(bad) == nil, "\(bad)")
        }
        #expect(Set(CrashPoint.allCases.map(\.rawValue)).count == CrashPoint.allCases.count, "labels are unique")
    }

    // R5.6: the same seed and clock make the same log.
    @Test func sameSeedSameLog() async throws {
        var logs: [[String]] = []
        for _ in 0..<2 {
            try await TemporaryFolder.with { path in
                let client = try await openClient(path, configuration: testConfiguration(seed: 42))
                _ = try await client.enqueue(contentsOf: [todo(1), todo(2)])
                logs.append(try await client.events().map { JSONText.render($0.json) })
            }
        }
        #expect(logs[0] == logs[1])
    }

    @Test func badSessionAndConfigurationAreTypedErrors() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let before = try client.eventCount()
            await #expect(throws: OutboxError.invalidWrite) { try await client.settleSession(user: "", accessToken: nil) }
            await #expect(throws: OutboxError.invalidWrite) { try await client.settleSession(user: "a\u{0}b", accessToken: nil) }
            #expect(try client.eventCount() == before)
            #expect(client.currentUser == "alice")
        }
        await TemporaryFolder.with { path in
            var configuration = testConfiguration()
            configuration.maxRefusals = 0
            #expect(throws: OutboxError.self) { try OutboxClient.open(path: path, configuration: configuration) }
        }
    }
}

/// Errors an app shows and compares.
@Suite struct ErrorTests {
    // Every code has a value to compare with (`error == .alreadyOpen`), and each is its own.
    @Test func everyCodeCanBeCompared() {
        let values: [OutboxError] = [
            .invalidWrite, .noUser, .notFound, .closed, .storage, .damaged, .alreadyOpen, .networkDisabled, .rowReadFailed,
            .noTransport, .doesNotExist, .archived, .compacted, .busy, .needsRecovery,
        ]
        #expect(Set(values.map(\.code.kind)) == Set(OutboxError.Code.Kind.allCases))
        #expect(Set(values).count == values.count)
    }

    // `localizedDescription` is the outbox's sentence, not "The operation could not be completed".
    @Test func theLocalizedDescriptionSaysWhatHappened() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            do {
                _ = try await openClient(path)
                Issue.record("a second open of the same log succeeded")
            } catch {
                #expect(error as? OutboxError == .alreadyOpen)
                #expect(error.localizedDescription == (error as? OutboxError)?.message)
                #expect(error.localizedDescription.contains(path) || error.localizedDescription.contains("open"))
            }
            client.close()
        }
    }
}
