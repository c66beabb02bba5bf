import COutboxLMDB
import Foundation
import Outbox
import OutboxHTTP
import OutboxLMDB
import OutboxProcess
import OutboxTesting
import Synchronization

struct Options: Sendable {
    var quick = false
    var runs = 5
    var filter: String?
    /// Overrides the large cases' size (1,000,000; 10,000 with --quick): `--size 10000000 history`.
    var size: Int?
}

let options: Options = {
    var options = Options()
    var words = Array(CommandLine.arguments.dropFirst())
    while let word = words.first {
        words.removeFirst()
        switch word {
        case "--quick": options.quick = true
        case "--size":
            guard let text = words.first, let size = Int(text), size > 0 else { fatalError("--size takes a number") }
            options.size = size
            words.removeFirst()
        case "--runs":
            guard let text = words.first, let runs = Int(text), runs > 0 else { fatalError("--runs takes a number") }
            options.runs = runs
            words.removeFirst()
        case "--help", "-h":
            print(
                """
                usage: outbox-benchmarks [--quick] [--runs N] [--size N] [FILTER]
                  --quick     small sizes: a smoke run, too small to judge by
                  --runs N    timed runs per case after one warm-up (default 5)
                  --size N    the large cases' size (default 1,000,000; long-life 100,000)
                  FILTER      run only the cases whose name contains it: enqueue-durable, enqueue-concurrent,
                              bulk-enqueue (its two parts: bulk-enqueue-integer, bulk-enqueue-keys), drain,
                              rejected-backlog, rebuild, history, open, long-life, atomic-group, postgrest,
                              contract, instance-storage; and, only when named, profile-none, profile-enqueue,
                              profile-drain, profile-rebuild, profile-floor-none, profile-floor-enqueue,
                              profile-floor-drain, profile-floor-chained-enqueue, profile-floor-chained-drain
                              (instruction counts under callgrind), floors (the chained layout's floors
                              against the SQLite peer, no engine), journal-floors (those floors behind a
                              journal, decision 016, against raw LMDB and the peer), compaction (writes through their whole
                              life: enqueue, drain, take, compact; --size defaults to 10,000,000 there),
                              file-growth (raw appends into a file each commit lengthens, against a file
                              written ahead with zeros: why the engine writes ahead),
                              targets (the cases of the README's targets at 10,000,000 writes, unless
                              --size: enqueue-durable, enqueue-concurrent, bulk-enqueue, drain, rebuild,
                              history, open; at 10,000,000 it needs about 5 GB free under TMPDIR)
                """)
            exit(0)
        default:
            guard !word.hasPrefix("-") else { fatalError("unknown option \(word); see --help") }
            options.filter = word
        }
    }
    return options
}()

func temporaryPath() -> String { NSTemporaryDirectory() + "outbox-bench-" + UUID().uuidString }

func seconds(_ body: () throws -> Void) rethrows -> Double {
    let start = DispatchTime.now().uptimeNanoseconds
    try body()
    return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
}

/// Runs `body` once to warm up and `runs` times timed, each on fresh state from `setUp`.
func measure<State>(_ setUp: () throws -> State, _ body: (State) throws -> Void, tearDown: (State) -> Void = { _ in }) rethrows
    -> (median: Double, best: Double)
{
    var times: [Double] = []
    for run in 0...options.runs {
        let state = try setUp()
        let time = try seconds { try body(state) }
        tearDown(state)
        if run > 0 { times.append(time) }
    }
    times.sort()
    return (times[times.count / 2], times[0])
}

/// One side of a comparison: fresh state from `setUp`, the timed work, the clean-up.
struct MeasuredSide {
    let run: () throws -> Double
    init<State>(
        _ setUp: @escaping () throws -> State, _ body: @escaping (State) throws -> Void,
        tearDown: @escaping (State) -> Void = { _ in }
    ) {
        run = {
            let state = try setUp()
            defer { tearDown(state) }
            return try seconds { try body(state) }
        }
    }
}

/// Runs the sides interleaved (A B A B …: one warm-up round, then `runs` timed rounds), so the drift of
/// this shared machine falls on each side alike. Each side's median and best, and each side's ratio to
/// the first: the median of the ratios taken round by round.
func interleaved(_ sides: [MeasuredSide]) throws -> [(figure: (median: Double, best: Double), ratio: Double)] {
    var times = Array(repeating: [Double](), count: sides.count)
    for round in 0...options.runs {
        let measured = try sides.map { try $0.run() }
        if round > 0 { for index in sides.indices { times[index].append(measured[index]) } }
    }
    func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
    return sides.indices.map { index in
        let ratios = zip(times[0], times[index]).map { $0 / $1 }
        return ((median(times[index]), times[index].min()!), median(ratios))
    }
}

struct FigureRow {
    let name: String
    let size: Int
    let median: Double
    let best: Double
    let baseline: String
    let baselineMedian: Double
    /// The engine's time over the baseline's: per round when the two ran interleaved, else of the medians.
    let ratio: Double
}
@MainActor var rows: [FigureRow] = []

@MainActor func report(
    _ name: String, size: Int, _ figure: (median: Double, best: Double), baseline: String, _ base: (median: Double, best: Double),
    ratio: Double? = nil
) {
    rows.append(
        FigureRow(
            name: name, size: size, median: figure.median, best: figure.best, baseline: baseline, baselineMedian: base.median,
            ratio: ratio ?? figure.median / base.median))
}

/// The first side of an interleaved run against each of the others, named in order.
@MainActor func report(
    _ name: String, size: Int, _ measured: [(figure: (median: Double, best: Double), ratio: Double)], baselines: [String]
) {
    for (index, baseline) in baselines.enumerated() {
        report(
            name, size: size, measured[0].figure, baseline: baseline, measured[index + 1].figure, ratio: measured[index + 1].ratio
        )
    }
}

/// A layout floor against the SQLite peer, measured in the same interleaved run: its time over the
/// peer's (below 1: faster), and its best beside the peer's best.
@MainActor func reportFloor(
    _ name: String, size: Int, _ floor: (figure: (median: Double, best: Double), ratio: Double),
    peer: (figure: (median: Double, best: Double), ratio: Double)
) {
    // Both ratios are to the engine, round by round: their quotient is the floor's to the peer.
    report(name, size: size, floor.figure, baseline: "SQLite peer", peer.figure, ratio: peer.ratio / floor.ratio)
}

func writes(_ count: Int) -> [Write] { writes(from: writeValues(count)) }

/// The keys and bodies of `writes(count)`, as the app holds them before it makes its writes.
func writeValues(_ count: Int) -> [(key: JSONValue, body: JSONValue)] {
    (0..<count).map { (key: ["id": .int(Int64($0))], body: ["title": "Buy milk", "done": false]) }
}

/// The writes an app makes of `values` (each made canonical here, once).
func writes(from values: [(key: JSONValue, body: JSONValue)]) -> [Write] {
    values.map { Write.insert(into: "todos", key: $0.key, body: $0.body) }
}

extension String {
    func leftPadded(_ width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}

/// The same writes keyed by UUIDs, as many offline-first apps make them, from a fixed seed: random
/// (version 4), or time-ordered (version 7: a millisecond timestamp first, four writes a millisecond).
func writesWithUUIDKeys(_ count: Int, timeOrdered: Bool) -> [Write] {
    let random = SeededRandomSource(seed: 42)
    let start: UInt64 = 1_767_225_600_000
    return (0..<count).map { index in
        var (high, low) = (random.next(), random.next())
        high = timeOrdered ? (start + UInt64(index / 4)) << 16 | 0x7000 | high & 0x0FFF : high & 0xFFFF_FFFF_FFFF_0FFF | 0x4000
        low = low & 0x3FFF_FFFF_FFFF_FFFF | 0x8000_0000_0000_0000
        let hex = String(high, radix: 16).leftPadded(16) + String(low, radix: 16).leftPadded(16)
        let uuid = [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { range in
            String(
                hex[hex.index(hex.startIndex, offsetBy: range.lowerBound)..<hex.index(hex.startIndex, offsetBy: range.upperBound)]
            )
        }.joined(separator: "-")
        return Write.insert(into: "todos", key: ["id": .string(uuid)], body: ["title": "Buy milk", "done": false])
    }
}

func bulkEnqueue(path: String, _ all: [Write]) async throws {
    let configuration = OutboxConfiguration(autoSync: false)
    let client = try OutboxClient.open(path: path, configuration: configuration)
    try await client.settleSession(user: "alice", accessToken: nil)
    var index = 0
    while index < all.count {
        _ = try await client.enqueue(contentsOf: Array(all[index..<min(index + 1000, all.count)]))
        index += 1000
    }
    client.close()
}

func blocking(_ body: @escaping @Sendable () async throws -> Void) {
    let done = DispatchSemaphore(value: 0)
    Task {
        do { try await body() } catch { fatalError("\(error)") }
        done.signal()
    }
    done.wait()
}

let bulkSize = options.size ?? (options.quick ? 10_000 : options.filter == "targets" ? 10_000_000 : 1_000_000)
/// The records the raw baseline puts: the same bytes as the engine's `writeQueued` records.
func sampleRecords(_ count: Int) -> [[UInt8]] {
    writes(count).enumerated().map { index, write in
        RecordCodec.encode(
            .writeQueued(
                WriteQueued(
                    id: WriteID(UInt64(index + 1)), user: "alice", table: write.table, operation: write.operation,
                    key: write.key, body: write.body, idempotencyKey: IdempotencyKey(high: 1, low: UInt64(index)))),
            at: Timestamp(milliseconds: 0), sequence: UInt64(index + 1))
    }
}

func selected(_ name: String) -> Bool {
    guard let filter = options.filter else { return true }
    return filter == "targets" ? targetCases.contains(name) : name.contains(filter)
}

/// The cases `targets` runs: those issue 25's targets are measured by, the large ones at 10,000,000
/// writes unless `--size` says otherwise (the single and concurrent enqueues keep their own sizes).
let targetCases: Set = [
    "enqueue-durable", "enqueue-concurrent", "bulk-enqueue-integer", "bulk-enqueue-keys", "drain", "rebuild", "history", "open",
]

func peerRows(_ writes: [Write]) -> [(table: String, op: String, key: String, body: String)] {
    writes.map { ($0.table, $0.operation.description, JSONText.render($0.key), JSONText.render($0.body)) }
}

func removing(_ path: String) { try? FileManager.default.removeItem(atPath: path) }

/// An instance that accepts everything and keeps nothing: the drain figure is the engine's own.
struct LeanInstance: OutboxTransport {
    func send(_ batch: OutgoingBatch, accessToken: String?) async -> RequestAnswer {
        .answered(Array(repeating: WriteAnswer(.accepted), count: batch.writes.count))
    }
    func readRow(table: String, key: JSONValue, accessToken: String?) async throws -> JSONValue? { nil }
}

func openClient(_ path: String, batchSize: Int = 50) throws -> OutboxClient {
    let configuration = OutboxConfiguration(autoSync: false, batchSize: batchSize)
    return try OutboxClient.open(path: path, transport: LeanInstance(), configuration: configuration)
}

/// Opens a client on `path` against the lean instance, signs alice in, runs `body` with it, and closes it.
func withClient(_ path: String, batchSize: Int = 50, _ body: @escaping @Sendable (OutboxClient) async throws -> Void) {
    blocking {
        let client = try openClient(path, batchSize: batchSize)
        try await client.settleSession(user: "alice", accessToken: nil)
        try await body(client)
        client.close()
    }
}

func format(_ seconds: Double) -> String {
    seconds >= 1 ? String(format: "%.2f s", seconds) : String(format: "%.1f ms", seconds * 1000)
}

/// One case of the benchmarks (one file each in Cases/): whether this run includes it, and its run,
/// which adds its figures to `rows` (or prints them).
@MainActor protocol BenchmarkCase {
    static func isSelected() -> Bool
    static func run() throws
}
