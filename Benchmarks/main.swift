// The benchmarks: warm-up, N timed runs, median and best, each figure also a ratio to a baseline
// measured in the same run (this machine is shared and noisy).
//
//   swift run -c release outbox-benchmarks [--quick] [--runs N] [--size N] [filter]   (--help: the cases)
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
                              bulk-enqueue, drain, rejected-backlog, rebuild, history, open, long-life,
                              atomic-group, postgrest, contract, instance-storage; and, only when named, profile-none, profile-enqueue,
                              profile-drain, profile-rebuild, profile-floor-none, profile-floor-enqueue,
                              profile-floor-drain, profile-floor-chained-enqueue, profile-floor-chained-drain
                              (instruction counts under callgrind), floors (the chained layout's floors
                              against the SQLite peer, no engine), compaction (writes through their whole
                              life: enqueue, drain, take, compact; --size defaults to 10,000,000 there)
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
var rows: [FigureRow] = []

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

func writes(_ count: Int) -> [Write] {
    (0..<count).map { Write.insert(into: "todos", key: ["id": .int(Int64($0))], body: ["title": "Buy milk", "done": false]) }
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

let bulkSize = options.size ?? (options.quick ? 10_000 : 1_000_000)
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

func selected(_ name: String) -> Bool { options.filter.map { name.contains($0) } ?? true }

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

// Instruction counts: only when named, never in a full run. `profile-none` builds --size writes,
// `profile-enqueue` also bulk-enqueues them into a fresh log (1000 a transaction), `profile-drain` also
// drains that log (batches of 100, lean instance), `profile-rebuild` rebuilds its projections instead;
// `profile-floor-enqueue` and `profile-floor-drain` do the layout floors' work for the same writes
// instead (`profile-floor-none` only makes their records), `profile-floor-chained-enqueue` and
// `profile-floor-chained-drain` the chained layout's floors (decision 012). Under callgrind the differences of the
// totals are the instructions per write, whole (Specs/decisions/010):
//   valgrind --tool=callgrind --callgrind-out-file=/dev/null .build/release/outbox-benchmarks --size 20000 profile-enqueue
if let filter = options.filter, filter.hasPrefix("profile-") {
    let all = writes(options.size ?? 20_000)
    let path = temporaryPath()
    if filter.hasPrefix("profile-floor") {
        // The layout floors of the same writes: their puts (and for the drain its reads), no engine code.
        let records = sampleRecords(all.count)
        if filter.hasPrefix("profile-floor-chained") {
            let env = chainedFloorEnqueue(path: path, records: records)
            if filter == "profile-floor-chained-drain" { chainedFloorDrain(env, count: records.count, batch: 100) }
        } else if filter != "profile-floor-none" {
            let env = floorEnqueue(path: path, records: records)
            if filter == "profile-floor-drain" { floorDrain(env, count: records.count, batch: 100) }
        }
        removing(path)
        print("profile: \(filter), \(all.count) writes")
        exit(0)
    }
    if filter != "profile-none" { blocking { try await bulkEnqueue(path: path, all) } }
    if filter == "profile-drain" {
        withClient(path, batchSize: 100) { client in
            let report = try await client.sync()
            precondition(report.syncedCount == all.count, "drained \(report.syncedCount)")
        }
    }
    if filter == "profile-rebuild" { try EventLog(path: path).rebuild() }
    removing(path)
    print("profile: \(filter), \(all.count) writes")
    exit(0)
}

// 1. Durable enqueue one at a time: each returns after its own full-sync commit; one client for all
// of them. Interleaved with raw LMDB's durable puts and the layout floor's (a write's puts a commit),
// round by round.
if selected("enqueue-durable") {
    let size = options.quick ? 200 : 10_000
    let all = writes(size)
    let records = sampleRecords(size)
    let measured = try interleaved([
        MeasuredSide(
            { temporaryPath() }, { path in withClient(path) { client in for write in all { try await client.enqueue(write) } } },
            tearDown: removing),
        MeasuredSide({ temporaryPath() }, { rawAppend(path: $0, records: records, perTransaction: 1) }, tearDown: removing),
        MeasuredSide(
            { temporaryPath() }, { _ = floorEnqueue(path: $0, records: records, perTransaction: 1) }, tearDown: removing),
    ])
    report(
        "1. durable enqueue, one at a time", size: size, measured,
        baselines: ["raw LMDB, one durable put a commit", "the layout floor, one write's puts a commit"])
}

/// The SQLite peer on a fresh file, and its clean-up.
func peerSide(
    _ body: @escaping (SQLiteOutbox) -> Void, filled rows: [(table: String, op: String, key: String, body: String)] = []
)
    -> MeasuredSide
{
    MeasuredSide(
        { () -> (String, SQLiteOutbox) in
            let path = temporaryPath()
            let peer = SQLiteOutbox(path: path)
            var index = 0
            while index < rows.count {
                peer.enqueue(Array(rows[index..<min(index + 1000, rows.count)]))
                index += 1000
            }
            return (path, peer)
        }, { body($0.1) },
        tearDown: {
            removing($0.0)
            removing($0.0 + "-wal")
            removing($0.0 + "-shm")
        })
}

// 2. Durable enqueue from 16 concurrent tasks (group commit) against the peer under the same load.
if selected("enqueue-concurrent") {
    let size = options.quick ? 320 : 10_000
    let all = writes(size)
    let rows = peerRows(all)
    let engine = MeasuredSide(
        { temporaryPath() },
        { path in
            withClient(path) { client in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for task in 0..<16 {
                        group.addTask {
                            for write in stride(from: task, to: all.count, by: 16).map({ all[$0] }) {
                                try await client.enqueue(write)
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            }
        }, tearDown: removing)
    let peer = peerSide { peer in
        DispatchQueue.concurrentPerform(iterations: 16) { task in
            for index in stride(from: task, to: rows.count, by: 16) { peer.enqueue([rows[index]]) }
        }
    }
    let measured = try interleaved([engine, peer])
    report(
        "2. durable enqueue, 16 concurrent tasks", size: size, measured[0].figure, baseline: "SQLite peer, same load",
        measured[1].figure, ratio: measured[1].ratio)
}

/// The SQLite peer's bulk enqueue: 1000 rows a transaction.
func peerBulk(_ rows: [(table: String, op: String, key: String, body: String)]) -> MeasuredSide {
    peerSide { peer in
        var index = 0
        while index < rows.count {
            peer.enqueue(Array(rows[index..<min(index + 1000, rows.count)]))
            index += 1000
        }
    }
}

// 3. Bulk enqueue, 1000 per transaction, projections included: against raw LMDB, the layout floor and
// the peer, interleaved.
if selected("bulk-enqueue") {
    let all = writes(bulkSize)
    let records = sampleRecords(bulkSize)
    let measured = try interleaved([
        MeasuredSide({ temporaryPath() }, { path in blocking { try await bulkEnqueue(path: path, all) } }, tearDown: removing),
        MeasuredSide({ temporaryPath() }, { rawAppend(path: $0, records: records, perTransaction: 1000) }, tearDown: removing),
        MeasuredSide({ temporaryPath() }, { _ = floorEnqueue(path: $0, records: records) }, tearDown: removing),
        peerBulk(peerRows(all)),
        MeasuredSide({ temporaryPath() }, { _ = chainedFloorEnqueue(path: $0, records: records) }, tearDown: removing),
    ])
    report(
        "3. bulk enqueue (1000/txn, projections included)", size: bulkSize, Array(measured.prefix(4)),
        baselines: ["raw LMDB append", "the layout floor (its puts, no engine code)", "SQLite peer, 1000/txn"])
    reportFloor("3. bulk enqueue, the chained layout's floor (decision 012)", size: bulkSize, measured[4], peer: measured[3])
    // The same with UUID keys. Time-ordered ones (v7) keep their order in `rows` (decision 007); with
    // random ones (v4) each write's row slot (R2.2) lands on a random page of `rows`. Against integer keys.
    let v7 = writesWithUUIDKeys(bulkSize, timeOrdered: true)
    let v4 = writesWithUUIDKeys(bulkSize, timeOrdered: false)
    let keyed = try interleaved([
        MeasuredSide({ temporaryPath() }, { path in blocking { try await bulkEnqueue(path: path, all) } }, tearDown: removing),
        MeasuredSide({ temporaryPath() }, { path in blocking { try await bulkEnqueue(path: path, v7) } }, tearDown: removing),
        MeasuredSide({ temporaryPath() }, { path in blocking { try await bulkEnqueue(path: path, v4) } }, tearDown: removing),
    ])
    report(
        "3. bulk enqueue, UUIDv7 keys", size: bulkSize, keyed[1].figure, baseline: "integer keys", keyed[0].figure,
        ratio: 1 / keyed[1].ratio)
    report(
        "3. bulk enqueue, random UUIDv4 keys", size: bulkSize, keyed[2].figure, baseline: "integer keys", keyed[0].figure,
        ratio: 1 / keyed[2].ratio)
}

/// Peak anonymous memory (RssAnon, so LMDB's mapped file pages are not counted), in bytes.
func rssAnon() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("RssAnon:") }),
        let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "")
    else { return 0 }
    return kilobytes * 1024
}

// 4. and 8. Drain a queue in batches of 100 against the lean instance, interleaved with the peer's
// drain of the same queue, a raw LMDB drain (read 100 records by cursor, append one outcome each, one
// commit a batch, flushed as a pass's commits) and the layout floor of the engine's drain.
if selected("drain") {
    let all = writes(bulkSize)
    let records = sampleRecords(bulkSize)
    let peak = Mutex(0)
    let engine = MeasuredSide(
        { () -> String in
            let path = temporaryPath()
            blocking { try await bulkEnqueue(path: path, all) }
            return path
        },
        { path in
            withClient(path, batchSize: 100) { client in
                let idle = rssAnon()
                let sampler = Task.detached {
                    var high = 0
                    while !Task.isCancelled {
                        high = max(high, rssAnon())
                        try? await Task.sleep(nanoseconds: 5_000_000)
                    }
                    return high
                }
                let report = try await client.sync()
                precondition(report.syncedCount == all.count, "drained \(report.syncedCount)")
                sampler.cancel()
                let high = await sampler.value - idle
                peak.withLock { $0 = max($0, high) }
            }
        }, tearDown: removing)
    let rows = peerRows(all)
    let peer = peerSide({ peer in precondition(peer.drain(batch: 100) == rows.count) }, filled: rows)
    let raw = MeasuredSide(
        { () -> (String, RawEnvironment) in
            let path = temporaryPath()
            return (path, rawAppend(path: path, records: records, perTransaction: 1000))
        }, { rawDrain($0.1, count: records.count, batch: 100) }, tearDown: { removing($0.0) })
    let floor = MeasuredSide(
        { () -> (String, RawEnvironment) in
            let path = temporaryPath()
            return (path, floorEnqueue(path: path, records: records))
        }, { floorDrain($0.1, count: records.count, batch: 100) }, tearDown: { removing($0.0) })
    let chained = MeasuredSide(
        { () -> (String, RawEnvironment) in
            let path = temporaryPath()
            return (path, chainedFloorEnqueue(path: path, records: records))
        }, { chainedFloorDrain($0.1, count: records.count, batch: 100) }, tearDown: { removing($0.0) })
    let measured = try interleaved([engine, peer, raw, floor, chained])
    report(
        "4. drain (batches of 100, lean instance)", size: bulkSize, Array(measured.prefix(4)),
        baselines: [
            "SQLite peer drain", "raw LMDB drain (same flushes)", "the layout floor (its reads and puts, no engine code)",
        ])
    reportFloor("4. drain, the chained layout's floor (decision 012)", size: bulkSize, measured[4], peer: measured[1])
    print(
        "8. peak anonymous memory while draining \(bulkSize): \(peak.withLock { $0 } / 1024) KiB above idle (RssAnon, sampled every 5 ms)"
    )
}

// The chained layout's floors against the SQLite peer alone, interleaved, without the engine: the
// gate of decision 012 (each floor at least twice the peer's throughput), quick to run by hand.
if options.filter == "floors" {
    let all = writes(bulkSize)
    let records = sampleRecords(bulkSize)
    let rows = peerRows(all)
    let enqueue = try interleaved([
        peerBulk(rows),
        MeasuredSide({ temporaryPath() }, { _ = chainedFloorEnqueue(path: $0, records: records) }, tearDown: removing),
    ])
    report(
        "floors: bulk enqueue, the chained layout's floor", size: bulkSize, enqueue[1].figure, baseline: "SQLite peer",
        enqueue[0].figure, ratio: 1 / enqueue[1].ratio)
    let drain = try interleaved([
        peerSide({ peer in precondition(peer.drain(batch: 100) == rows.count) }, filled: rows),
        MeasuredSide(
            { () -> (String, RawEnvironment) in
                let path = temporaryPath()
                return (path, chainedFloorEnqueue(path: path, records: records))
            }, { chainedFloorDrain($0.1, count: records.count, batch: 100) }, tearDown: { removing($0.0) }),
    ])
    report(
        "floors: drain, the chained layout's floor", size: bulkSize, drain[1].figure, baseline: "SQLite peer", drain[0].figure,
        ratio: 1 / drain[1].ratio)
}

/// Refuses every write to the table "later" (422) and accepts the rest: a backlog of refused writes.
struct RefusingInstance: OutboxTransport {
    func send(_ batch: OutgoingBatch, accessToken: String?) async -> RequestAnswer {
        .answered(
            batch.writes.map { write in
                write.table == "later" ? WriteAnswer(.refused(Refusal(status: 422, code: "23514"))) : WriteAnswer(.accepted)
            })
    }
    func readRow(table: String, key: JSONValue, accessToken: String?) async throws -> JSONValue? { nil }
}

// 13. A drain past a backlog of refused writes: 1,000 writes the instance refuses (refused once
// already, so they are on the rejected list), then the queue; against the same drain with no backlog.
// Each pass sends the refused ones again once; the batches after them must not pay for them again.
if selected("rejected-backlog") {
    let size = options.size.map { min($0, 100_000) } ?? (options.quick ? 2_000 : 20_000)
    let backlog = (0..<1_000).map { Write.insert(into: "later", key: ["id": .int(Int64($0))], body: ["title": "x"]) }
    let all = writes(size)
    func side(withBacklog: Bool) -> MeasuredSide {
        MeasuredSide(
            { () -> String in
                let path = temporaryPath()
                blocking {
                    let client = try OutboxClient.open(
                        path: path, transport: RefusingInstance(),
                        configuration: OutboxConfiguration(autoSync: false, batchSize: 100))
                    try await client.settleSession(user: "alice", accessToken: nil)
                    if withBacklog {
                        _ = try await client.enqueue(contentsOf: backlog)
                        _ = try await client.sync()
                    }
                    var index = 0
                    while index < all.count {
                        _ = try await client.enqueue(contentsOf: Array(all[index..<min(index + 1000, all.count)]))
                        index += 1000
                    }
                    client.close()
                }
                return path
            },
            { path in
                blocking {
                    let client = try OutboxClient.open(
                        path: path, transport: RefusingInstance(),
                        configuration: OutboxConfiguration(autoSync: false, batchSize: 100))
                    try await client.settleSession(user: "alice", accessToken: nil)
                    let report = try await client.sync()
                    precondition(report.syncedCount == all.count, "drained \(report.syncedCount)")
                    client.close()
                }
            }, tearDown: removing)
    }
    let measured = try interleaved([side(withBacklog: true), side(withBacklog: false)])
    report(
        "13. drain past 1,000 refused writes", size: size, measured, baselines: ["the same drain with no backlog"])
}

/// An instance whose every request fails with a 503: a pass plans its first batch, sends, and stops.
struct FailingInstance: OutboxTransport {
    func send(_ batch: OutgoingBatch, accessToken: String?) async -> RequestAnswer {
        .failed(RequestFailure(kind: .http, status: 503))
    }
    func readRow(table: String, key: JSONValue, accessToken: String?) async throws -> JSONValue? { nil }
}

// 10. Atomic groups stay linear: `queue.all()` over one group of 10,000 against the same writes with no
// group, and a failed pass (503) with one group of 10,000 pending against one of 1,000, per write.
if selected("atomic-group") {
    let size = options.quick ? 2_000 : 10_000
    /// A log holding `count` writes, in one group or none; `work` timed on a client of it.
    func timed(_ count: Int, atomic: Bool, _ work: @escaping @Sendable (OutboxClient) async throws -> Void) -> (
        median: Double, best: Double
    ) {
        let all = writes(count)
        return measure(
            { () -> String in
                let path = temporaryPath()
                blocking {
                    let client = try OutboxClient.open(
                        path: path, transport: FailingInstance(), configuration: OutboxConfiguration(autoSync: false))
                    try await client.settleSession(user: "alice", accessToken: nil)
                    _ = try await client.enqueue(contentsOf: all, atomic: atomic)
                    client.close()
                }
                return path
            },
            { path in
                blocking {
                    let client = try OutboxClient.open(
                        path: path, transport: FailingInstance(), configuration: OutboxConfiguration(autoSync: false))
                    try await client.settleSession(user: "alice", accessToken: nil)
                    try await work(client)
                    client.close()
                }
            }, tearDown: removing)
    }
    let listAll: @Sendable (OutboxClient) async throws -> Void = { client in _ = try await client.queue.all() }
    report(
        "10. queue.all(), one atomic group", size: size, timed(size, atomic: true, listAll),
        baseline: "the same writes in no group", timed(size, atomic: false, listAll))
    let failedPass: @Sendable (OutboxClient) async throws -> Void = { client in
        let report = try await client.sync()
        precondition(report.stoppedBy != nil)
    }
    let large = timed(size, atomic: true, failedPass)
    let small = timed(size / 10, atomic: true, failedPass)
    report(
        "10. a failed pass with one atomic group pending", size: size, large,
        baseline: "a group a tenth the size, times ten", (small.median * 10, small.best * 10))
}

/// The process's CPU time (user + system) so far, in seconds.
func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

/// Runs `executable ARGUMENTS`; its standard output, or nil when it could not run or failed.
func output(of executable: String, _ arguments: [String]) -> String? {
    guard
        let ended = try? ChildProcess.runBlocking(
            URL(fileURLWithPath: executable), arguments, errors: .apart(.discard)),
        ended.succeeded
    else { return nil }
    return ended.text
}

/// Runs one SQL statement with psql; its output, trimmed (rows `|`-separated), or nil.
func psql(_ databaseURL: String, _ statement: String) -> String? {
    output(of: "/usr/bin/psql", [databaseURL, "-X", "-q", "-A", "-t", "-c", statement])?.trimmingCharacters(
        in: .whitespacesAndNewlines)
}

/// Runs `scripts/instance ARGUMENTS`; its output, or nil when it failed.
func instanceScript(_ arguments: [String]) -> String? {
    output(of: FileManager.default.currentDirectoryPath + "/scripts/instance", arguments)
}

// 11. Drain to PostgreSQL through the PostgREST stand-in over loopback (a real database, real HTTP):
// batched inserts (50 a request) against one request per write, as a hand-written outbox loop sends
// them, in one run; writes/s of both and the client's CPU per write. Starts its own instance with
// scripts/instance (PostgreSQL 15 and python3-psycopg; skipped when they are missing).
/// A running `scripts/instance`: its folder and what `start` printed.
struct RunningInstance {
    let folder: String
    let url: URL
    let apiKey: String?
    let databaseURL: String

    func token(_ user: String) -> String {
        instanceScript(["token", folder, user])?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
    }
}

/// Runs `body` with a fresh instance, stopped and removed after; false (and nothing run) when it cannot start.
func withInstance(_ body: (RunningInstance) -> Void) -> Bool {
    let folder = temporaryPath()
    guard let started = instanceScript(["start", folder]) else { return false }
    defer {
        _ = instanceScript(["stop", folder])
        removing(folder)
    }
    var values: [String: String] = [:]
    for line in started.split(separator: "\n") {
        let parts = line.split(separator: "=", maxSplits: 1)
        if parts.count == 2 { values[String(parts[0])] = String(parts[1]) }
    }
    body(
        RunningInstance(
            folder: folder, url: URL(string: values["OUTBOX_URL"] ?? "")!, apiKey: values["OUTBOX_APIKEY"],
            databaseURL: values["OUTBOX_DATABASE_URL"] ?? ""))
    return true
}

if selected("postgrest") {
    let size = options.quick ? 500 : 10_000
    let ran = withInstance { instance in
        let token = instance.token("alice")
        let url = instance.url
        let apiKey = instance.apiKey
        let cpu = Mutex<[Double]>([])
        func drain(batchSize: Int, firstId: Int) -> (median: Double, best: Double) {
            let path = temporaryPath()
            defer { removing(path) }
            let seconds = Mutex(0.0)
            blocking {
                let transport = try PostgRESTTransport(url: url, apiKey: apiKey, tables: ["todos": ["id"]])
                let client = try OutboxClient.open(
                    path: path, transport: transport, configuration: OutboxConfiguration(autoSync: false, batchSize: batchSize))
                try await client.settleSession(user: "alice", accessToken: token)
                _ = try await client.enqueue(
                    contentsOf: (firstId..<(firstId + size)).map {
                        .insert(into: "todos", key: ["id": .int(Int64($0))], body: ["title": "Buy milk", "done": false])
                    })
                let cpuBefore = cpuSeconds()
                let start = DispatchTime.now().uptimeNanoseconds
                let report = try await client.sync()
                seconds.withLock { $0 = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9 }
                precondition(report.syncedCount == size, "drained \(report.syncedCount): \(String(describing: report.stoppedBy))")
                let used = cpuSeconds() - cpuBefore
                cpu.withLock { $0.append(used / Double(size)) }
                client.close()
            }
            let time = seconds.withLock { $0 }
            return (time, time)
        }
        let batched = drain(batchSize: 50, firstId: 1)
        let single = drain(batchSize: 1, firstId: size + 1)
        report(
            "11. drain to PostgreSQL through the stand-in, inserts batched 50 a request", size: size, batched,
            baseline: "one request per write", single)
        let perWrite = cpu.withLock { $0 }
        print(
            "11. client CPU per write: \(String(format: "%.1f", perWrite[0] * 1e6)) µs batched, \(String(format: "%.1f", perWrite[1] * 1e6)) µs one request per write"
        )
    }
    if !ran { print("11. drain to PostgreSQL: skipped (scripts/instance could not start PostgreSQL and the stand-in)") }
}

// 12. Drain to the reference instance through the contract (a request per batch, every write judged
// by SQL inside PostgreSQL: keys, answers, versions, row locks) over loopback through the stand-in:
// 100,000 inserts (--size) in batches of 50 and of 64 (the instance's cap on a non-atomic batch: the
// subtransaction cache), one device and four at once, against a naive client that sends one PostgREST
// request per write (measured on 5,000 writes), in one run; writes/s, the ratio, the client's CPU per
// write, and the server's time per write inside `outbox_push` (pg_stat_user_functions).
if selected("contract") {
    let size = options.size ?? (options.quick ? 512 : 100_000)
    let naiveSize = options.quick ? 256 : 5_000
    let ran = withInstance { instance in
        _ = psql(instance.databaseURL, "alter database outbox set track_functions = 'pl'")
        let token = instance.token("alice")
        let next = Mutex(1)
        /// Drains `writes` inserts split over `devices` logs syncing at once: seconds, client CPU per write.
        func drain(devices: Int, batchSize: Int, contract: Bool, writes: Int) -> (seconds: Double, cpu: Double) {
            let per = writes / devices
            let first = next.withLock { id in
                defer { id += per * devices }
                return id
            }
            let paths = (0..<devices).map { _ in temporaryPath() }
            defer { paths.forEach(removing) }
            let measured = Mutex((0.0, 0.0))
            blocking {
                var clients: [OutboxClient] = []
                for (index, path) in paths.enumerated() {
                    let transport: any OutboxTransport =
                        contract
                        ? try ContractTransport(url: instance.url, apiKey: instance.apiKey)
                        : try PostgRESTTransport(url: instance.url, apiKey: instance.apiKey, tables: ["todos": ["id"]])
                    let client = try OutboxClient.open(
                        path: path, transport: transport,
                        configuration: OutboxConfiguration(autoSync: false, batchSize: batchSize))
                    try await client.settleSession(user: "alice", accessToken: token)
                    let base = first + index * per
                    _ = try await client.enqueue(
                        contentsOf: (base..<(base + per)).map {
                            .insert(into: "todos", key: ["id": .int(Int64($0))], body: ["title": "Buy milk", "done": false])
                        })
                    clients.append(client)
                }
                let cpuBefore = cpuSeconds()
                let start = DispatchTime.now().uptimeNanoseconds
                try await withThrowingTaskGroup(of: SyncReport.self) { group in
                    for client in clients { group.addTask { try await client.sync() } }
                    for try await report in group {
                        precondition(
                            report.syncedCount == per, "drained \(report.syncedCount): \(String(describing: report.stoppedBy))")
                    }
                }
                let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
                measured.withLock { $0 = (elapsed, (cpuSeconds() - cpuBefore) / Double(per * devices)) }
                for client in clients { client.close() }
            }
            return measured.withLock { $0 }
        }
        /// The time spent inside `outbox_push` so far, in seconds, once its statistics count `calls`.
        func serverTime(calls: Int) -> Double? {
            for _ in 0..<100 {
                let row = psql(
                    instance.databaseURL,
                    "select calls, total_time from pg_stat_user_functions where funcname = 'outbox_push'")?.split(separator: "|")
                if let row, row.count == 2, let seen = Int(row[0]), seen >= calls, let total = Double(row[1]) {
                    return total / 1000
                }
                usleep(200_000)
            }
            return nil
        }
        let naive = drain(devices: 1, batchSize: 1, contract: false, writes: naiveSize)
        let naivePerWrite = naive.seconds / Double(naiveSize)
        var calls = 0
        var server = 0.0
        for (devices, batch) in [(1, 50), (1, 64), (4, 50), (4, 64)] {
            let drained = drain(devices: devices, batchSize: batch, contract: true, writes: size)
            let per = size / devices
            calls += devices * ((per + batch - 1) / batch)
            let total = serverTime(calls: calls)
            let inside = total.map { ($0 - server) / Double(per * devices) }
            if let total { server = total }
            let naiveTime = naivePerWrite * Double(per * devices)
            report(
                "12. drain to the reference instance, contract, batches of \(batch), \(devices == 1 ? "one device" : "\(devices) devices at once")",
                size: per * devices, (drained.seconds, drained.seconds),
                baseline: "one PostgREST request per write (at \(Int(1 / naivePerWrite)) w/s)", (naiveTime, naiveTime))
            let serverText = inside.map { String(format: "%.0f µs", $0 * 1e6) } ?? "not reported in time"
            let share = inside.map { String(format: " (%.1f %% of it)", drained.cpu / $0 * 100) } ?? ""
            print(
                "12. batches of \(batch), \(devices) device(s): client CPU \(String(format: "%.1f", drained.cpu * 1e6)) µs a write\(share); server time inside outbox_push \(serverText) a write"
            )
        }
    }
    if !ran {
        print("12. drain to the reference instance: skipped (scripts/instance could not start PostgreSQL and the stand-in)")
    }
}

/// `ContractTransport` with no watermark: the instance keeps every answer, as before version 2.
struct WithoutWatermark: OutboxTransport {
    let inner: ContractTransport
    init(_ inner: ContractTransport) { self.inner = inner }
    func send(_ batch: OutgoingBatch, accessToken: String?) async -> RequestAnswer {
        await inner.send(batch, accessToken: accessToken)
    }
    func readRow(table: String, key: JSONValue, accessToken: String?) async throws -> JSONValue? {
        try await inner.readRow(table: table, key: key, accessToken: accessToken)
    }
}

// 14. What the reference instance keeps per device (R8.9): one device drains 100,000 inserts (--size)
// in batches of 50 with the acknowledged watermark, and as many without (the instance then keeps every
// key and answer); the bytes of `outbox.keys` and `outbox.answers` rows left for each device's origin.
if selected("instance-storage") {
    let size = options.size ?? (options.quick ? 512 : 100_000)
    let ran = withInstance { instance in
        let token = instance.token("alice")
        func kept(_ origin: String) -> (rows: Int, bytes: Int) {
            let row = psql(
                instance.databaseURL,
                "select (select count(*) from outbox.answers where origin = '\(origin)') + (select count(*) from outbox.keys where origin = '\(origin)'), "
                    + "coalesce((select sum(pg_column_size(a.*)) from outbox.answers a where origin = '\(origin)'), 0) + "
                    + "coalesce((select sum(pg_column_size(k.*)) from outbox.keys k where origin = '\(origin)'), 0)")?
                .split(separator: "|")
            guard let row, row.count == 2, let rows = Int(row[0]), let bytes = Int(row[1]) else { return (-1, -1) }
            return (rows, bytes)
        }
        for (pruning, first) in [(true, 1), (false, size + 1)] {
            let path = temporaryPath()
            defer { removing(path) }
            let origin = Mutex("")
            blocking {
                let inner = try ContractTransport(url: instance.url, apiKey: instance.apiKey)
                let transport: any OutboxTransport = pruning ? inner : WithoutWatermark(inner)
                let client = try OutboxClient.open(
                    path: path, transport: transport, configuration: OutboxConfiguration(autoSync: false, batchSize: 50))
                try await client.settleSession(user: "alice", accessToken: token)
                _ = try await client.enqueue(
                    contentsOf: (first..<(first + size)).map {
                        .insert(into: "todos", key: ["id": .int(Int64($0))], body: ["title": "Buy milk", "done": false])
                    })
                let report = try await client.sync()
                precondition(report.syncedCount == size, "drained \(report.syncedCount)")
                origin.withLock { $0 = (try? client.origin().description) ?? "" }
                client.close()
            }
            let (rows, bytes) = kept(origin.withLock { $0 })
            print(
                "14. instance storage after \(size) writes of one device, \(pruning ? "with the watermark" : "without (version 1's way)"): "
                    + "\(rows) key and answer rows, \(bytes) bytes of rows (\(String(format: "%.1f", Double(bytes) / Double(size))) B a write)"
            )
        }
    }
    if !ran { print("14. instance storage: skipped (scripts/instance could not start PostgreSQL and the stand-in)") }
}

// 9. Long life: one client makes 100,000 single enqueues in a row; the last 10 % against the first
// 10 % of the same client (TESTING.md §5: a per-commit cost that grows is a defect). No fsync, so the
// figure is the engine's own work per commit, not the disk's.
if selected("long-life") {
    let size = options.size ?? (options.quick ? 10_000 : 100_000)
    let tenth = size / 10
    let all = writes(size)
    let path = temporaryPath()
    let marks = Mutex<[Double]>([])
    blocking {
        let configuration = OutboxConfiguration(autoSync: false, durability: .noSync)
        let client = try OutboxClient.open(path: path, configuration: configuration)
        try await client.settleSession(user: "alice", accessToken: nil)
        var times: [Double] = []
        for (index, write) in all.enumerated() {
            if index % tenth == 0 { times.append(Double(DispatchTime.now().uptimeNanoseconds) / 1e9) }
            try await client.enqueue(write)
        }
        times.append(Double(DispatchTime.now().uptimeNanoseconds) / 1e9)
        client.close()
        marks.withLock { $0 = times }
    }
    removing(path)
    let times = marks.withLock { $0 }
    let first = times[1] - times[0]
    let last = times[10] - times[9]
    report(
        "9. long life: the last 10 % of \(size) single enqueues (no fsync), one client", size: tenth, (last, last),
        baseline: "the first 10 % of the same client", (first, first))
}

// 14. Writes through their whole life, only when named (R8.5): enqueue (1000 a transaction, made as
// they are enqueued), drain (batches of 100, lean instance), take (1,000 a call, as an app taking
// what a pass answered), compact. The log's size before and after,
// the compaction's time against a raw copy of the same data file (read, written, flushed), history(of:)
// p99 on live and archived writes, the open time after, and the peak resident memory. It needs disk
// for the log twice over (about 2 × 250 B a write) and its archive (about 300 B a write).
if options.filter == "compaction" {
    let count = options.size ?? 10_000_000
    let path = temporaryPath()
    let enqueued = seconds {
        withClient(path) { client in
            var next = 0
            while next < count {
                let chunk = (next..<min(next + 1000, count)).map { index in
                    Write.insert(into: "todos", key: ["id": .int(Int64(index))], body: ["title": "Buy milk", "done": false])
                }
                _ = try await client.enqueue(contentsOf: chunk)
                next += chunk.count
            }
        }
    }
    let drained = seconds { withClient(path, batchSize: 100) { client in _ = try await client.sync() } }
    let taken = seconds {
        withClient(path) { client in
            var next: UInt64 = 1
            while next <= UInt64(count) {
                let last = min(next + 999, UInt64(count))
                _ = try await client.queue.forgetAnswered(ids: (next...last).map { WriteID($0) })
                next = last + 1
            }
        }
    }
    // Live writes: queued after the drain, still pending at the compaction.
    withClient(path) { client in _ = try await client.enqueue(contentsOf: writes(1000)) }
    func fileSize(_ file: String) -> Int { (try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? 0 }
    let before = fileSize(path + "/data.mdb")
    let copy = path + "-copy.mdb"
    let copied = seconds {
        let data = FileManager.default.contents(atPath: path + "/data.mdb")!
        FileManager.default.createFile(atPath: copy, contents: data)
        let handle = FileHandle(forUpdatingAtPath: copy)!
        try? handle.synchronize()
        try? handle.close()
    }
    removing(copy)
    nonisolated(unsafe) var report: CompactionReport?
    let compacted = seconds { withClient(path) { client in report = try await client.compact() } }
    let after = fileSize(path + "/data.mdb")
    let archive = fileSize(path + "/archive/segment-000001.mdb")
    nonisolated(unsafe) var p99: (live: Int, archived: Int) = (0, 0)
    withClient(path) { client in
        var random = SystemRandomNumberGenerator()
        func percentile(_ ids: ClosedRange<UInt64>) async throws -> Int {
            var latencies: [Double] = []
            for _ in 0..<1000 {
                let id = WriteID(UInt64.random(in: ids, using: &random))
                let start = DispatchTime.now().uptimeNanoseconds
                _ = try await client.history(of: id)
                latencies.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1000)
            }
            return Int(latencies.sorted()[990])
        }
        p99 = (try await percentile(UInt64(count + 1)...UInt64(count + 1000)), try await percentile(1...UInt64(count)))
    }
    let opened = try measure({ () }, { _ in try openClient(path).close() })
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    print("14. \(count) writes through their whole life (compaction)")
    print("  enqueue \(format(enqueued)), drain \(format(drained)), take \(format(taken))")
    print("  data file before \(before) B (\(before / count) B a write), after \(after) B; archive segment \(archive) B")
    print(
        "  compaction \(format(compacted)); a raw copy of the same data file \(format(copied)): \(String(format: "%.2f", compacted / copied))× the copy"
    )
    print("  \(report.map { "\($0)" } ?? "no report")")
    print("  history(of:) p99: live writes \(p99.live) µs, archived writes \(p99.archived) µs")
    print("  open after the compaction, to the first status: median \(format(opened.median)), best \(format(opened.best))")
    print("  peak resident memory \(usage.ru_maxrss / 1024) MiB (LMDB's mapped pages included)")
    removing(path)
    exit(0)
}

if selected("rebuild") || selected("history") || selected("open") {
    let path = temporaryPath()
    blocking { try await bulkEnqueue(path: path, writes(bulkSize)) }
    if selected("rebuild") {
        let log = try EventLog(path: path)
        // Measured before any rebuild: a rebuild rewrites every projection in one transaction, and the
        // file keeps its high-water mark.
        let bytes = (try? FileManager.default.attributesOfItem(atPath: path + "/data.mdb")[.size] as? Int) ?? 0
        let used = try log.environment.read { txn in
            try EventLog.databaseNames.map { name in (name, try txn.usedBytes(log.environment.database(name))) }
        }
        let projectionEntries = try log.environment.read { txn in
            try ProjectionTable.allCases.reduce(0) { $0 + (try txn.count(log.environment.database($1.rawValue))) }
        }
        let entry = [UInt8](repeating: 0, count: 24)
        let measured = try interleaved([
            MeasuredSide({ () }, { try log.rebuild() }),
            MeasuredSide(
                { temporaryPath() },
                {
                    rawAppend(
                        path: $0, records: Array(repeating: entry, count: projectionEntries), perTransaction: projectionEntries)
                }, tearDown: removing),
        ])
        report(
            "5. rebuild (\(projectionEntries) projection entries)", size: bulkSize + 2, measured[0].figure,
            baseline: "raw bulk append of as many entries", measured[1].figure, ratio: measured[1].ratio)
        let payload = writes(1)[0]
        let keyBody = JSONText.render(payload.key).utf8.count + JSONText.render(payload.body).utf8.count
        print(
            "8. log bytes per queued write: \(bytes / bulkSize) (data.mdb \(bytes) bytes for \(bulkSize) writes; key + body \(keyBody) bytes)"
        )
        let inUse = used.filter { $0.1 > 0 }.map { "\($0.0) \($0.1 / bulkSize)" }.joined(separator: ", ")
        print("   pages in use per write: \(used.reduce(0) { $0 + $1.1 } / bulkSize) B (\(inUse))")
        log.close()
    }
    // 6. history(of:) latency, p50 and p99 over 1000 random writes, on this log and a small one.
    if selected("history") {
        let small = temporaryPath()
        blocking { try await bulkEnqueue(path: small, writes(10_000)) }
        for (name, log, count) in [("10k", small, 10_000), ("\(bulkSize / 1000)k", path, bulkSize)] {
            blocking {
                let client = try openClient(log)
                var random = SystemRandomNumberGenerator()
                var latencies: [Double] = []
                for _ in 0..<1000 {
                    let id = WriteID(UInt64.random(in: 1...UInt64(count), using: &random))
                    let start = DispatchTime.now().uptimeNanoseconds
                    _ = try await client.history(of: id)
                    latencies.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1000)
                }
                latencies.sort()
                print("6. history(of:) on a log of \(name) writes: p50 \(Int(latencies[500])) µs, p99 \(Int(latencies[990])) µs")
                client.close()
            }
        }
        removing(small)
    }
    // 7. Open a log holding the pending writes: time to the first status.
    if selected("open") {
        let open = try measure(
            { () },
            { _ in
                let client = try openClient(path)
                precondition(client.syncStatus.value.pendingCount == 0 || client.syncStatus.value.pendingCount == bulkSize)
                client.close()
            })
        print(
            "7. open a log of \(bulkSize) pending writes to the first status: median \(format(open.median)), best \(format(open.best))"
        )
    }
    removing(path)
}

func format(_ seconds: Double) -> String {
    seconds >= 1 ? String(format: "%.2f s", seconds) : String(format: "%.1f ms", seconds * 1000)
}
print("| case | size | median | best | writes/s (median) | baseline (median) | time over the baseline's (median of the rounds) |")
print("|---|---|---|---|---|---|---|")
for row in rows {
    print(
        "| \(row.name) | \(row.size) | \(format(row.median)) | \(format(row.best)) | \(Int(Double(row.size) / row.median)) | \(row.baseline): \(format(row.baselineMedian)) | \(String(format: "%.2f", row.ratio))× |"
    )
}
print("bench: \(rows.count) figures measured\(options.quick ? " (--quick smoke: sizes too small to judge by)" : "")")
