import OutboxTesting
import Testing

@testable import Outbox

/// A report's verdicts (R4.8) are a collection that keeps runs of like verdicts on consecutive writes
/// as one: it must read, change and compare exactly as the array of the same verdicts does.
@Suite("A report's verdicts")
struct ReportVerdictsTests {
    typealias Verdict = SyncReport.Verdict

    /// A verdict from a few ids and kinds, so that runs form and break often.
    static func verdict(_ random: inout SplitMix64) -> Verdict {
        let kinds: [Verdict.Kind] = [.accepted, .accepted, .accepted, .refused, .blocked, .notSent]
        let kind = kinds[Int(random.next() % UInt64(kinds.count))]
        return Verdict(
            id: WriteID(1 + random.next() % 40), kind: kind, refusals: kind == .refused ? Int(random.next() % 2) : 0,
            replayed: random.next() % 5 == 0, blockedReason: kind == .blocked ? .keySpent : nil)
    }

    @Test("R4.8: appends, replacements, removals and slices read as the array of the same verdicts")
    func readsAsTheArray() {
        var random = SplitMix64(seed: 8)
        for _ in 0..<300 {
            var verdicts = SyncReport.Verdicts()
            var array: [Verdict] = []
            for _ in 0..<Int(random.next() % 12) {
                switch random.next() % 4 {
                case 0, 1:
                    let next = Self.verdict(&random)
                    verdicts.append(next)
                    array.append(next)
                case 2:
                    let more = (0..<Int(random.next() % 4)).map { _ in Self.verdict(&random) }
                    verdicts += more
                    array += more
                default:
                    guard !array.isEmpty else { continue }
                    let lower = Int(random.next() % UInt64(array.count))
                    let upper = lower + Int(random.next() % UInt64(array.count - lower + 1))
                    let with = (0..<Int(random.next() % 3)).map { _ in Self.verdict(&random) }
                    verdicts.replaceSubrange(lower..<upper, with: with)
                    array.replaceSubrange(lower..<upper, with: with)
                }
                #expect(Array(verdicts) == array)
                #expect(verdicts.count == array.count && verdicts.isEmpty == array.isEmpty)
                for (index, verdict) in array.enumerated() { #expect(verdicts[index] == verdict) }
                #expect(verdicts == SyncReport.Verdicts(array), "equal verdicts, equal collections")
                #expect(verdicts.hashValue == SyncReport.Verdicts(array).hashValue)
                #expect(verdicts.description == array.description)
            }
            if array.count > 1 {
                #expect(Array(verdicts.dropFirst()) == Array(array.dropFirst()))
                #expect(verdicts.map(\.id) == array.map(\.id))
            }
        }
        let one = Verdict(id: 3, kind: .accepted, refusals: 0)
        let other = Verdict(id: 4, kind: .accepted, refusals: 0, replayed: true)
        #expect(SyncReport.Verdicts([one]) != SyncReport.Verdicts([one, other]))
        #expect([one, other] as SyncReport.Verdicts == SyncReport.Verdicts([one, other]))
    }

    @Test("R4.8: a drain's verdicts on consecutive writes take one run each kind, however many writes")
    func runsOfConsecutiveWrites() {
        var verdicts = SyncReport.Verdicts()
        for id in 1...100_000 { verdicts.append(Verdict(id: WriteID(UInt64(id)), kind: .accepted, refusals: 0)) }
        #expect(verdicts.count == 100_000 && verdicts.runCount == 1)
        #expect(verdicts[41_999] == Verdict(id: 42_000, kind: .accepted, refusals: 0))
        // A refused write, a replayed answer, an id skipped, each starts a run of its own.
        verdicts.append(Verdict(id: 100_001, kind: .refused, refusals: 1))
        verdicts.append(Verdict(id: 100_002, kind: .accepted, refusals: 0, replayed: true))
        verdicts.append(Verdict(id: 100_004, kind: .accepted, refusals: 0, replayed: true))
        verdicts.append(Verdict(id: 100_005, kind: .accepted, refusals: 0, replayed: true))
        #expect(verdicts.runCount == 4 && verdicts.count == 100_004)
        #expect(verdicts.last == Verdict(id: 100_005, kind: .accepted, refusals: 0, replayed: true))
        // The same write twice (answered again in one call) is not a run.
        var again = SyncReport.Verdicts()
        again.append(Verdict(id: 7, kind: .notSent, refusals: 0))
        again.append(Verdict(id: 7, kind: .notSent, refusals: 0))
        #expect(again.runCount == 2 && again.map(\.id) == [7, 7])
    }

    @Test("R4.8: a drained report keeps its verdicts in a handful of runs")
    func aDrainedReportIsSmall() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path, transport: SimulatedInstance())
            _ = try await client.enqueue(contentsOf: (1...1000).map { todo(Int64($0)) })
            let report = try await client.sync()
            #expect(report.syncedCount == 1000 && report.verdicts.count == 1000)
            #expect(report.verdicts.map(\.id) == (1...1000).map { WriteID(UInt64($0)) })
            #expect(report.verdicts.runCount == 1, "the batches' answers join")
            client.close()
        }
    }
}
