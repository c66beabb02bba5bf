import Foundation
import OutboxTesting
import Testing

@testable import Outbox

@Suite("Sync passes")
struct SyncTests {
    @Test("R4.1: a pass sends pending writes in id order and records each verdict")
    func sendsInOrder() async throws {
        try await TemporaryFolder.with { path in
            let instance = SimulatedInstance()
            let client = try await openClient(path, transport: instance)
            for n in 1...3 { try await client.enqueue(todo(Int64(n))) }
            instance.script([.verdict(.accepted), .verdict(.refused(Refusal(status: 422, code: "23514")))])
            let report = try await client.sync()
            #expect(report.syncedCount == 2)
            #expect(report.rejected.map(\.id) == [WriteID(2)])
            #expect(report.remainingCount == 0)
            #expect(instance.applied.map(\.id) == [WriteID(1), WriteID(3)])
            let states = try await client.queue.all().map(\.state.name)
            #expect(states == ["accepted", "refused", "accepted"])
            #expect(try await client.verify().isOK)
        }
    }

    @Test("R4.4: writes a transport did not send stay pending, uncharged, and the pass stops after the batch")
    func notSentWritesStayPending() async throws {
        try await TemporaryFolder.with { path in
            let instance = SimulatedInstance()
            let client = try await openClient(path, transport: instance)
            for n in 1...4 { try await client.enqueue(todo(Int64(n))) }
            let failure = RequestFailure(kind: .http, status: 503, code: "PGRST001", retryAfter: "5", text: "SERVER-CANARY")
            instance.script([.verdict(.accepted), .verdict(.notSent(failure))])
            let report = try await client.sync()
            #expect(report.verdicts.map(\.kind) == [.accepted, .notSent, .notSent, .notSent])
            #expect(report.syncedCount == 1 && report.remainingCount == 3)
            #expect(report.stoppedBy == PassFailure(kind: .http, status: 503, code: "PGRST001", retryAfter: 5))
            #expect(instance.received.count == 1, "the pass stopped after the batch")
            let rest = try await client.queue.all().filter { $0.id != 1 }
            #expect(rest.allSatisfy { $0.state.name == "pending" && $0.refusals == 0 }, "nothing charged")
            #expect(!"\(report)\(client.syncStatus.value)".contains("SERVER-CANARY"))
            // No streak: a request that failed is no write failing alone.
            let failed = try await client.history(of: 2).filter { if case .writeFailed = $0.event { true } else { false } }
            #expect(failed.isEmpty)
            // A transport that stops without saying why stops the pass as a broken contract.
            instance.script([.verdict(.notSent(nil))])
            let silent = try await client.sync()
            #expect(silent.stoppedBy == PassFailure(kind: .protocol) && silent.syncedCount == 0)
            let healed = try await client.sync()
            #expect(healed.syncedCount == 3 && healed.stoppedBy == nil)
            #expect(instance.applied.map(\.id) == [1, 2, 3, 4])
            #expect(try await client.verify().isOK)
            #expect(try client.log.checkDecisions().isSame)
        }
    }
}

@Suite("Replay-verify of decisions (R8.4)")
struct DecisionCheckTests {
    @Test("a log whose recorded decision differs from today's is reported at that event")
    func findsADifferentDecision() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let id = try await client.enqueue(todo(1))
            let refusal = Refusal(status: 422, code: "23514")
            try await client.log.append { appender in
                let pass = appender.nextSequence
                try appender.append(
                    .passStarted(
                        PassStarted(passId: pass, user: "alice", table: nil, automatic: false, maxRefusals: 5, batchSize: 1)))
                try appender.append(
                    .answerReceived(
                        AnswerReceived(passId: pass, writes: [id], answer: .answered([WriteAnswer(.refused(refusal))]))))
                // What an older version might have decided: accepted. Today's decides refused.
                try appender.append(.verdictRecorded(VerdictRecorded(writeId: id, passId: pass, state: .accepted, refusals: 0)))
                try appender.append(.passEnded(PassEnded(passId: pass, stoppedBy: nil)))
            }
            let report = try client.log.checkDecisions()
            #expect(!report.isSame)
            #expect(report.sequence == 6)
        }
    }

    /// A batch's verdicts are one `verdictsRecorded` event (decision 010). A log that holds them one
    /// event each, as earlier versions wrote them, checks the same; so does the joined form; a joined
    /// event with one verdict changed is reported at that event.
    @Test("verdicts joined in one event or one event each check the same; a changed one is found")
    func joinedAndSingleVerdictsCheckTheSame() async throws {
        for form in ["single", "joined", "changed"] {
            try await TemporaryFolder.with { path in
                let client = try await openClient(path)
                let ids = try await client.enqueue(contentsOf: [todo(1), todo(2), todo(3)])
                let refusal = Refusal(status: 422, code: "23514")
                try await client.log.append { appender in
                    let pass = appender.nextSequence
                    try appender.append(
                        .passStarted(
                            PassStarted(passId: pass, user: "alice", table: nil, automatic: false, maxRefusals: 5, batchSize: 3)))
                    try appender.append(
                        .answerReceived(
                            AnswerReceived(
                                passId: pass, writes: ids,
                                answer: .answered([
                                    WriteAnswer(.accepted), WriteAnswer(.refused(refusal)), WriteAnswer(.accepted),
                                ])
                            )))
                    var verdicts = [
                        VerdictRecorded(writeId: ids[0], passId: pass, state: .accepted, refusals: 0),
                        VerdictRecorded(writeId: ids[1], passId: pass, state: .refused(refusal), refusals: 1),
                        VerdictRecorded(writeId: ids[2], passId: pass, state: .accepted, refusals: 0),
                    ]
                    if form == "changed" { verdicts[2].state = .merged(fields: ["title"]) }
                    if form == "single" {
                        for verdict in verdicts { try appender.append(.verdictRecorded(verdict)) }
                    } else {
                        try appender.append(.verdictsRecorded(VerdictsRecorded(passId: pass, verdicts: verdicts)))
                    }
                    try appender.append(.passEnded(PassEnded(passId: pass, stoppedBy: nil)))
                }
                let report = try client.log.checkDecisions()
                if form == "changed" {
                    #expect(report.difference?.contains("verdictsRecorded") == true, "\(report)")
                    #expect(report.sequence == (try client.log.lastSequence()) - 1, "the verdicts event")
                } else {
                    #expect(report.isSame, "\(form): \(report)")
                }
                #expect(try await client.verify().isOK)
                #expect(try await client.write(ids[1])?.state == .refused(refusal))
                #expect(
                    try await client.history(of: ids[2]).map(\.event.type).last
                        == (form == "single" ? .verdictRecorded : .verdictsRecorded))
            }
        }
    }

    /// The pass itself records a batch's verdicts as one event: a drain of 3 writes in one batch logs one
    /// `verdictsRecorded`, and each write's history holds it.
    @Test("a drained batch records its verdicts in one event")
    func aDrainedBatchRecordsOneVerdictsEvent() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path, transport: SimulatedInstance())
            let ids = try await client.enqueue(contentsOf: [todo(1), todo(2), todo(3)])
            try await client.sync()
            var types: [EventType] = []
            try client.log.forEachEvent { recorded in
                types.append(recorded.event.type)
                return true
            }
            #expect(types.filter { $0 == .verdictsRecorded }.count == 1 && !types.contains(.verdictRecorded), "\(types)")
            for id in ids {
                let history = try await client.history(of: id)
                #expect(history.flatMap(\.event.verdicts).filter { $0.writeId == id }.map(\.state) == [.accepted])
            }
            #expect(try client.log.checkDecisions().isSame)
        }
    }

    @Test("a pass that went on where today's code stops is reported")
    func findsAMissedStop() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let id = try await client.enqueue(todo(1))
            try await client.log.append { appender in
                let pass = appender.nextSequence
                try appender.append(
                    .passStarted(
                        PassStarted(passId: pass, user: "alice", table: nil, automatic: false, maxRefusals: 5, batchSize: 1)))
                try appender.append(
                    .answerReceived(
                        AnswerReceived(passId: pass, writes: [id], answer: .failed(RequestFailure(kind: .http, status: 503)))))
                try appender.append(.passEnded(PassEnded(passId: pass, stoppedBy: nil)))
            }
            let report = try client.log.checkDecisions()
            #expect(report.difference?.contains("this version stops it with http 503") == true)
        }
    }

    @Test("every scenario-like run of real passes has the same decisions")
    func realPassesAgree() async throws {
        try await TemporaryFolder.with { path in
            let instance = SimulatedInstance()
            let client = try await openClient(path, transport: instance)
            for n in 1...8 { try await client.enqueue(todo(Int64(n))) }
            instance.script([
                .verdict(.refused(Refusal(status: 422, code: "23514"))), .verdict(.merged(fields: ["title"])), .status(503),
                .verdict(.failed(status: 500, text: "boom")), .status(400, code: "PGRST204", meaning: .schemaCache),
            ])
            for _ in 0..<4 { try await client.sync() }
            let report = try client.log.checkDecisions()
            #expect(report.isSame, "\(report)")
            #expect(report.answers >= 4)
        }
    }
}

@Suite("Misuse (R4.9)")
struct SyncMisuseTests {
    @Test("sync throws only for misuse: no transport, or a closed client")
    func misuse() async throws {
        try await TemporaryFolder.with { path in
            let bare = try await openClient(path)
            await #expect(throws: OutboxError(.noTransport, "")) { try await bare.sync() }
            bare.close()
            let client = try await openClient(path, transport: SimulatedInstance())
            #expect(try await client.sync().verdicts.isEmpty)
            client.close()
            await #expect(throws: OutboxError.closed) { try await client.sync() }
        }
    }
}

@Suite("Atomic group bounds")
struct AtomicGroupBoundsTests {
    @Test("an atomic group of more than maxGroupSize writes is refused and writes nothing (R2.4)")
    func tooLarge() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let before = try client.eventCount()
            let writes = (0...WriteQueued.maxGroupSize).map { todo(Int64($0)) }
            await #expect(throws: OutboxError.invalidWrite) { try await client.enqueue(contentsOf: writes, atomic: true) }
            #expect(try client.eventCount() == before)
        }
    }
}
