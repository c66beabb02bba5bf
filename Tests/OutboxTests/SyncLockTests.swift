import Foundation
import OutboxTesting
import Synchronization
import Testing

@testable import Outbox

/// R5.7 in one process: the log's sync lock, held here as another process would hold it.
@Suite("The sync lock")
struct SyncLockTests {
    @Test("R5.7: a pass that finds the lock held past its wait sends nothing, charges nothing and reports busy")
    func aHeldLockMakesThePassBusy() async throws {
        try await TemporaryFolder.with { path in
            let instance = SimulatedInstance()
            var configuration = testConfiguration()
            configuration.syncLockWait = 0
            let client = try await openClient(path, configuration: configuration, transport: instance)
            let id = try await client.enqueue(todo(1))
            var held: SyncLock?
            if case .acquired(let lock) = try SyncLock.attempt(logPath: path) { held = lock }
            #expect(held != nil, "the lock of a log nobody syncs is free")
            let before = try client.eventCount()
            let busy = try await client.sync()
            #expect(busy.stoppedBy == PassFailure(kind: .busy) && busy.remainingCount == 1)
            #expect(instance.received.isEmpty, "nothing was sent")
            #expect(try client.eventCount() == before, "a busy pass leaves no trace in the log")
            #expect(try await client.write(id)?.refusals == 0)
            guard case .held(let holder) = try SyncLock.attempt(logPath: path) else {
                Issue.record("a held lock is not free")
                return
            }
            #expect(holder?.processId == getpid(), "the holder says who it is")
            held = nil
            // Released (its holder gone), the next pass takes it and sends.
            #expect(try await client.sync().syncedCount == 1)
            guard case .acquired = try SyncLock.attempt(logPath: path) else {
                Issue.record("a pass keeps the lock after it ends")
                return
            }
            #expect(held == nil)
        }
    }

    @Test("R5.7: a pass waits for the lock on the client's clock, and sends once it is free")
    func aPassWaitsForTheLock() async throws {
        try await TemporaryFolder.with { path in
            let instance = SimulatedInstance()
            let clock = ManualClock()
            var configuration = testConfiguration()
            configuration.clock = clock
            configuration.syncLockWait = 5
            let client = try await openClient(path, configuration: configuration, transport: instance)
            try await client.enqueue(todo(1))
            var held: SyncLock?
            if case .acquired(let lock) = try SyncLock.attempt(logPath: path) { held = lock }
            #expect(held != nil)
            let pass = Task { try await client.sync() }
            // The pass polls on the clock: it has not sent while the lock is held, whatever the time.
            while clock.nextDue == nil { await Task.yield() }
            clock.advance(seconds: 1)
            #expect(instance.received.isEmpty)
            held = nil
            var steps = 0
            while instance.received.isEmpty, steps < 10_000 {
                clock.advance(seconds: 0.05)
                await Task.yield()
                steps += 1
            }
            let report = try await pass.value
            #expect(report.syncedCount == 1 && report.stoppedBy == nil)
            #expect(held == nil)
        }
    }

    @Test("R5.7: past the wait, the pass ends busy")
    func aPassGivesUpAfterItsWait() async throws {
        try await TemporaryFolder.with { path in
            let instance = SimulatedInstance()
            let clock = ManualClock()
            var configuration = testConfiguration()
            configuration.clock = clock
            configuration.syncLockWait = 2
            let client = try await openClient(path, configuration: configuration, transport: instance)
            try await client.enqueue(todo(1))
            guard case .acquired(let held) = try SyncLock.attempt(logPath: path) else { return }
            let ended = Atomic<Bool>(false)
            let pass = Task {
                defer { ended.store(true, ordering: .sequentiallyConsistent) }
                return try await client.sync()
            }
            var steps = 0
            while !ended.load(ordering: .sequentiallyConsistent), steps < 10_000 {
                clock.advance(seconds: 0.5)
                await Task.yield()
                steps += 1
            }
            let report = try await pass.value
            #expect(report.stoppedBy?.kind == .busy && instance.received.isEmpty)
            withExtendedLifetime(held) {}
        }
    }
}
