// The benchmarks: warm-up, N timed runs, median and best, each figure also a ratio to a baseline
// measured in the same run (this machine is shared and noisy).
//
//   swift run -c release outbox-benchmarks [--quick] [--runs N] [filter]
import COutboxLMDB
import Foundation
import Outbox
import OutboxLMDB

struct Options: Sendable {
    var quick = false
    var runs = 5
    var filter: String?
}

let options: Options = {
    var options = Options()
    var words = Array(CommandLine.arguments.dropFirst())
    while let word = words.first {
        words.removeFirst()
        switch word {
        case "--quick": options.quick = true
        case "--runs":
            guard let text = words.first, let runs = Int(text), runs > 0 else { fatalError("--runs takes a number") }
            options.runs = runs
            words.removeFirst()
        default: options.filter = word
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
func measure<State>(_ setUp: () throws -> State, _ body: (State) throws -> Void, tearDown: (State) -> Void = { _ in }) rethrows -> (median: Double, best: Double) {
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

struct Row {
    let name: String
    let size: Int
    let median: Double
    let best: Double
    let baseline: String
    let baselineMedian: Double
}
var rows: [Row] = []

@MainActor func report(_ name: String, size: Int, _ figure: (median: Double, best: Double), baseline: String, _ base: (median: Double, best: Double)) {
    rows.append(Row(name: name, size: size, median: figure.median, best: figure.best, baseline: baseline, baselineMedian: base.median))
}

/// The raw baseline: one put of the same bytes per write, `perTransaction` puts a transaction, MDB_APPEND.
func rawAppend(path: String, records: [[UInt8]], perTransaction: Int) throws {
    var env: OpaquePointer?
    mdb_env_create(&env)
    mdb_env_set_mapsize(env, 8 << 30)
    mdb_env_set_maxdbs(env, 1)
    mkdir(path, 0o700)
    guard mdb_env_open(env, path, UInt32(MDB_NOTLS), 0o600) == 0 else { fatalError("raw open") }
    defer { mdb_env_close(env) }
    var dbi = MDB_dbi()
    var index = 0
    var sequence: UInt64 = 0
    while index < records.count {
        var txn: OpaquePointer?
        mdb_txn_begin(env, nil, 0, &txn)
        if index == 0 { mdb_dbi_open(txn, "log", UInt32(MDB_CREATE), &dbi) }
        for record in records[index..<min(index + perTransaction, records.count)] {
            sequence += 1
            var key = sequence.bigEndian
            var k = MDB_val(mv_size: 8, mv_data: &key)
            record.withUnsafeBytes { bytes in
                var v = MDB_val(mv_size: bytes.count, mv_data: UnsafeMutableRawPointer(mutating: bytes.baseAddress))
                precondition(mdb_put(txn, dbi, &k, &v, UInt32(MDB_APPEND)) == 0)
            }
        }
        precondition(mdb_txn_commit(txn) == 0)
        index += perTransaction
    }
}

func writes(_ count: Int) -> [Write] {
    (0..<count).map { Write.insert(into: "todos", key: ["id": .int(Int64($0))], body: ["title": "Buy milk", "done": false]) }
}

func bulkEnqueue(path: String, _ all: [Write]) async throws {
    var configuration = OutboxConfiguration(autoSync: false)
    configuration.crashPlan = nil
    let client = try OutboxClient.open(path: path, configuration: configuration)
    try await client.settleSession(user: "alice", accessToken: nil)
    var index = 0
    while index < all.count {
        _ = try await client.enqueue(contentsOf: Array(all[index..<min(index + 1000, all.count)]))
        index += 1000
    }
}

func blocking(_ body: @escaping @Sendable () async throws -> Void) {
    let done = DispatchSemaphore(value: 0)
    Task {
        do { try await body() } catch { fatalError("\(error)") }
        done.signal()
    }
    done.wait()
}

let bulkSize = options.quick ? 10_000 : 1_000_000
let sampleRecords: [[UInt8]] = writes(bulkSize).enumerated().map { index, write in
    RecordCodec.encode(.writeQueued(WriteQueued(id: WriteID(UInt64(index + 1)), user: "alice", table: write.table, operation: write.operation,
        key: write.key, body: write.body, idempotencyKey: IdempotencyKey(high: 1, low: UInt64(index)))), at: Timestamp(milliseconds: 0), sequence: UInt64(index + 1))
}

func selected(_ name: String) -> Bool { options.filter.map { name.contains($0) } ?? true }

if selected("bulk-enqueue") {
    let all = writes(bulkSize)
    let raw = try measure({ temporaryPath() }, { try rawAppend(path: $0, records: sampleRecords, perTransaction: 1000) },
                          tearDown: { try? FileManager.default.removeItem(atPath: $0) })
    let engine = try measure({ temporaryPath() }, { path in blocking { try await bulkEnqueue(path: path, all) } },
                             tearDown: { try? FileManager.default.removeItem(atPath: $0) })
    report("bulk-enqueue (1000/txn, projections included)", size: bulkSize, engine, baseline: "raw LMDB append", raw)
}

if selected("rebuild") {
    let path = temporaryPath()
    blocking { try await bulkEnqueue(path: path, writes(bulkSize)) }
    let log = try EventLog(path: path)
    let projectionEntries = try log.environment.read { txn in
        try ProjectionTable.allCases.reduce(0) { $0 + (try txn.count(log.environment.database($1.rawValue))) }
    }
    let entry = [UInt8](repeating: 0, count: 24)
    let raw = try measure({ temporaryPath() }, { try rawAppend(path: $0, records: Array(repeating: entry, count: projectionEntries), perTransaction: projectionEntries) },
                          tearDown: { try? FileManager.default.removeItem(atPath: $0) })
    let rebuild = try measure({ () }, { try log.rebuild() })
    report("rebuild (\(projectionEntries) projection entries)", size: bulkSize + 2, rebuild, baseline: "raw bulk append of as many entries", raw)
    let bytes = (try? FileManager.default.attributesOfItem(atPath: path + "/data.mdb")[.size] as? Int) ?? 0
    print("log bytes per queued write: \(bytes / bulkSize) (data.mdb \(bytes) bytes for \(bulkSize) writes)")
    try? FileManager.default.removeItem(atPath: path)
}

func format(_ seconds: Double) -> String { seconds >= 1 ? String(format: "%.2f s", seconds) : String(format: "%.1f ms", seconds * 1000) }
print("| case | size | median | best | writes/s (median) | baseline | ratio to baseline (median) |")
print("|---|---|---|---|---|---|---|")
for row in rows {
    print("| \(row.name) | \(row.size) | \(format(row.median)) | \(format(row.best)) | \(Int(Double(row.size) / row.median)) | \(row.baseline): \(format(row.baselineMedian)) | \(String(format: "%.2f", row.median / row.baselineMedian))× |")
}
