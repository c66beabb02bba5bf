internal import Foundation
internal import Outbox
internal import OutboxProcess
internal import OutboxTesting

/// The damaged-log suite (TESTING.md §3): three small logs; every byte of every stored record flipped
/// and zeroed (the checksum must catch each, naming the record's sequence), truncation at every 4 KiB
/// page boundary, and a seeded sample of bytes in LMDB's own page structure, read by the tool in a
/// child process; a compacted log and its archive; the journals of a log not closed and of two closed
/// ones. Never a crash or a hang: exit 0 (read correctly), 1 or 2 with a message naming the file.
extension Commands {
    static func damage(_ words: [String]) async throws -> Exit {
        let args = try Arguments(command: "damage", words: words, options: ["samples", "seed", "record-stride"], flags: [])
        let samples = Int(try args.unsigned("samples") ?? 2000)
        let stride = max(1, Int(try args.unsigned("record-stride") ?? 1))
        let rng = SeededRandomSource(seed: try args.unsigned("seed") ?? 1)
        let root = TemporaryFolder(prefix: "outbox-damage").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        var tally = DamageTally()
        let logs = try await makeSmallLogs(in: root)
        for (index, path) in logs.enumerated() {
            let log = DamagedLog(
                index: index, path: path, original: try Data(contentsOf: URL(fileURLWithPath: path + "/data.mdb")),
                scratch: root + "/scratch-\(index)")
            let records = try LogInspector(path: path).log.storedRecords()
            let recordBytes = try damageRecords(log, records, stride: stride, &tally)
            try damageKeys(log, records, &tally)
            try damageEntries(log, &tally)
            try damageMetaPages(log, &tally)
            // 5. Truncation at every 4 KiB page boundary.
            for end in Swift.stride(from: 0, to: log.original.count, by: 4096) {
                tally.truncations += 1
                try write(log.original.prefix(end), to: log.scratch)
                if let problem = checkWithTool(log.scratch) {
                    tally.problems.append("log \(index), truncated at \(end): \(problem)")
                }
            }
            let share = samples / logs.count + (index < samples % logs.count ? 1 : 0)
            try damagePageBytes(log, count: share, avoiding: recordBytes, rng, &tally)
        }
        let compacted = try await compactedLogDamage(in: root, stride: stride)
        tally.problems += compacted.problems
        let journal = try await journalDamage(in: root, stride: 4 * stride, samples: 16, rng)
        tally.problems += journal.unclosed.problems + journal.closed.problems
        for problem in tally.problems.prefix(30) { say("  " + problem) }
        let total =
            tally.records + tally.keys + tally.entries + tally.metas + tally.truncations + tally.pages + compacted.cases
            + journal.unclosed.cases + journal.closed.cases
        say(
            "damage: \(total) cases (\(tally.records) record bytes, \(tally.keys) key bytes, \(tally.entries) entry bytes, \(tally.metas) meta bits, \(tally.truncations) truncations, \(tally.pages) page bytes, \(compacted.cases) of a compacted log: its snapshot and records, its archive segment's records, the segment missing; \(journal.unclosed.cases) journal bytes of a log not closed, \(journal.unclosed.refused) of them refused naming it; \(journal.closed.cases) of two closed logs, \(journal.closed.refused) refused by verify and by an open for writing alike), \(tally.problems.count) failed"
        )
        return tally.problems.isEmpty ? .success : .notSo
    }

    /// 1. Every byte of every record, flipped and zeroed, in every copy of it in the file (LMDB's
    /// copy-on-write leaves stale copies in free pages): caught by the checksum, naming the sequence.
    /// Returns the file's bytes that hold records.
    private static func damageRecords(
        _ log: DamagedLog, _ records: [(sequence: UInt64, bytes: [UInt8])], stride: Int, _ tally: inout DamageTally
    ) throws -> Set<Int> {
        var recordBytes = Set<Int>()
        for record in records {
            let copies = occurrences(of: record.bytes, in: log.original)
            guard !copies.isEmpty else {
                tally.problems.append("log \(log.index): record \(record.sequence) is not found in data.mdb")
                continue
            }
            for copy in copies { recordBytes.formUnion(copy..<(copy + record.bytes.count)) }
            for position in Swift.stride(from: 0, to: record.bytes.count, by: stride) {
                for mutate in [{ (b: UInt8) in b ^ 0x01 }, { (_: UInt8) in UInt8(0) }] {
                    let before = record.bytes[position]
                    if mutate(before) == before { continue }
                    var damaged = log.original
                    for copy in copies { damaged[copy + position] = mutate(before) }
                    tally.records += 1
                    try write(damaged, to: log.scratch)
                    if let problem = checkRecordDamage(log.scratch, sequence: record.sequence) {
                        tally.problems.append("log \(log.index), byte \(position) of record \(record.sequence): \(problem)")
                    }
                }
            }
        }
        return recordBytes
    }

    /// 2. Every byte of every log key (the 8 bytes before the record in its leaf node), flipped:
    /// reading in order must stop at the gap and name the sequence that is missing.
    private static func damageKeys(_ log: DamagedLog, _ records: [(sequence: UInt64, bytes: [UInt8])], _ tally: inout DamageTally)
        throws
    {
        let last = records.map(\.sequence).max() ?? 0
        for record in records {
            let key = withUnsafeBytes(of: record.sequence.bigEndian) { Array($0) }
            let copies = occurrences(of: key + record.bytes, in: log.original)
            guard !copies.isEmpty else {
                tally.problems.append("log \(log.index): the key of record \(record.sequence) is not found in data.mdb")
                continue
            }
            for position in 0..<8 {
                var damaged = log.original
                for copy in copies { damaged[copy + position] ^= 0x01 }
                tally.keys += 1
                try write(damaged, to: log.scratch)
                if let problem = checkKeyDamage(log.scratch, sequence: record.sequence, last: last) {
                    tally.problems.append(
                        "log \(log.index), byte \(position) of the key of record \(record.sequence): \(problem)")
                }
            }
        }
    }

    /// 3. Every byte of every entry of the verdict table, flipped: the queue the library and
    /// `outbox queue` read must refuse the entry (its checksum), never show a changed write.
    private static func damageEntries(_ log: DamagedLog, _ tally: inout DamageTally) throws {
        for entry in try LogInspector(path: log.path).log.storedWriteEntries() {
            let id = entry.key.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            let copies = occurrences(of: entry.key + entry.value, in: log.original)
            guard !copies.isEmpty else {
                tally.problems.append("log \(log.index): the entry of write \(id) is not found in data.mdb")
                continue
            }
            for position in 0..<entry.value.count {
                var damaged = log.original
                for copy in copies { damaged[copy + entry.key.count + position] ^= 0x01 }
                tally.entries += 1
                try write(damaged, to: log.scratch)
                if let problem = checkEntryDamage(log.scratch) {
                    tally.problems.append("log \(log.index), byte \(position) of the entry of write \(id): \(problem)")
                }
            }
        }
    }

    /// 4. Every bit of the transaction id of both LMDB meta pages, flipped, with the log's commit mark
    /// beside it: LMDB may then open the older meta page and undo the last commit; the log must read
    /// whole, or be refused naming the file, never read as if it ended earlier.
    private static func damageMetaPages(_ log: DamagedLog, _ tally: inout DamageTally) throws {
        let mark = try Data(contentsOf: URL(fileURLWithPath: log.path + "/last-commit"))
        let marked = try LogInspector(path: log.path).lastSequence()
        let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
        for page in 0..<2 {
            for bit in 0..<64 {
                var damaged = log.original
                damaged[page * pageSize + 144 + bit / 8] ^= UInt8(1 << (bit % 8))
                tally.metas += 1
                try write(damaged, to: log.scratch)
                try mark.write(to: URL(fileURLWithPath: log.scratch + "/last-commit"))
                if let problem = checkRollback(log.scratch, marked: marked) {
                    tally.problems.append("log \(log.index), bit \(bit) of meta page \(page)'s transaction id: \(problem)")
                }
            }
        }
    }

    /// 6. A seeded sample of LMDB's own bytes (outside records), read by the tool in a child.
    private static func damagePageBytes(
        _ log: DamagedLog, count: Int, avoiding recordBytes: Set<Int>, _ rng: SeededRandomSource, _ tally: inout DamageTally
    ) throws {
        let size = UInt64(log.original.count)
        for _ in 0..<count {
            var offset = Int(rng.next(below: size))
            while recordBytes.contains(offset) { offset = Int(rng.next(below: size)) }
            var damaged = log.original
            damaged[offset] ^= UInt8(1 + rng.next(below: 255))
            tally.pages += 1
            try write(damaged, to: log.scratch)
            if let problem = checkWithTool(log.scratch) {
                tally.problems.append("log \(log.index), page byte \(offset): \(problem)")
            }
        }
    }

    /// Where `needle` starts in `haystack`, every time.
    private static func occurrences(of needle: [UInt8], in haystack: Data) -> [Int] {
        let bytes = [UInt8](haystack)
        guard let first = needle.first, needle.count <= bytes.count else { return [] }
        var found: [Int] = []
        var index = 0
        while index + needle.count <= bytes.count {
            if bytes[index] == first && bytes[index..<(index + needle.count)].elementsEqual(needle) { found.append(index) }
            index += 1
        }
        return found
    }

    /// A fresh folder holding only `data` as its data file.
    private static func write(_ data: Data, to folder: String) throws {
        try? FileManager.default.removeItem(atPath: folder)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try data.write(to: URL(fileURLWithPath: folder + "/data.mdb"))
    }

    /// A record's byte changed, the page structure intact: `verify` (in this process: nothing of LMDB
    /// is damaged) must name that record's sequence.
    private static func checkRecordDamage(_ folder: String, sequence: UInt64) -> String? {
        do {
            let report = try LogInspector(path: folder).verify()
            if report.isOK { return "verify said ok" }
            if report.sequence != sequence {
                return "verify named \(report.sequence.map(String.init) ?? "no sequence"): \(report)"
            }
            return nil
        } catch let error as OutboxError {
            return error.sequence == sequence ? nil : "opening failed without naming the sequence: \(error)"
        } catch {
            return "\(error)"
        }
    }

    /// A log key's byte changed: `verify`, the state as of the last event (`replay --until`) and the
    /// events up to it (`log --to`) must each refuse the log, naming the damaged record's sequence as
    /// the one missing, never stop early as if the log ended there.
    private static func checkKeyDamage(_ folder: String, sequence: UInt64, last: UInt64) -> String? {
        do {
            let inspector = try LogInspector(path: folder)
            let report = try inspector.verify()
            if report.isOK { return "verify said ok" }
            if report.sequence != sequence {
                return "verify named \(report.sequence.map(String.init) ?? "no sequence"): \(report)"
            }
            for (what, read) in [
                ("replay --until \(last)", { _ = try inspector.state(asOf: last) }),
                ("log --to \(last)", { try inspector.forEachEvent(from: 1, to: last) { _ in true } }),
            ] as [(String, () throws -> Void)] {
                do {
                    try read()
                    return "\(what) read the log as if it were whole"
                } catch let error as OutboxError where error.code == .damaged && error.sequence == sequence {
                    continue
                } catch {
                    return "\(what) failed without naming sequence \(sequence): \(error)"
                }
            }
            return nil
        } catch let error as OutboxError {
            return error.sequence == sequence ? nil : "opening failed without naming the sequence: \(error)"
        } catch {
            return "\(error)"
        }
    }

    /// A verdict-table entry's byte changed: reading the queue refuses it as damage naming the file.
    private static func checkEntryDamage(_ folder: String) -> String? {
        do {
            let writes = try LogInspector(path: folder).all(user: nil)
            return "the queue read as \(writes.count) writes, the damage unseen"
        } catch let error as OutboxError where error.code == .damaged {
            return error.message.contains(folder) ? nil : "damage reported without naming the file: \(error)"
        } catch {
            return "\(error)"
        }
    }

    /// A meta page's transaction id changed: the log reads to its marked end, or is refused.
    private static func checkRollback(_ folder: String, marked: UInt64) -> String? {
        do {
            let inspector = try LogInspector(path: folder)
            let last = try inspector.lastSequence()
            return last >= marked ? nil : "the log read as ending at \(last), before its marked \(marked), and was not refused"
        } catch let error as OutboxError {
            return error.message.contains(folder) ? nil : "refused without naming the file: \(error)"
        } catch {
            return "\(error)"
        }
    }

    /// The environment the suite runs the tool in: an untrusted log read in a child of its own, which
    /// a hang ends after 20 s.
    static var toolEnvironment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment[UntrustedLogReader.timeoutVariable] = "20"
        environment[UntrustedLogReader.childVariable] = nil
        return environment
    }

    /// Runs `outbox verify` on a damaged copy: exit 0, or 1 or 2 with a message naming the file.
    private static func checkWithTool(_ folder: String) -> String? {
        let ended: ChildProcess.Ended
        do {
            ended = try ChildProcess.runBlocking(ChildProcess.currentProgram, ["verify", folder], environment: toolEnvironment)
        } catch {
            return "cannot run the tool: \(error)"
        }
        let text = ended.text
        if ended.signalled { return "the tool crashed (signal \(ended.status))" }
        switch ended.status {
        case 0: return nil
        case 1, 2:
            // One clear message: a reader's crash is told in a line, not with the runtime's backtrace.
            let lines = text.split(separator: "\n").count
            if lines > 3 { return "exit \(ended.status) with \(lines) lines of output: \(text.prefix(160))" }
            return text.contains(folder) ? nil : "exit \(ended.status) without naming the file: \(text.prefix(160))"
        default: return "exit \(ended.status): \(text.prefix(160))"
        }
    }

    /// Three small logs with every kind of event: writes, a pass with refusals and a lost response, a
    /// release, a withdraw, a discard, answers taken, two users.
    /// A compacted log (R8.5): every byte of its records, the snapshot among them, flipped (the
    /// checksum names the sequence); every byte of the records in its archive segment, flipped (`verify`
    /// names the segment's file); and the segment removed (the log verifies, the segment is named as
    /// not present, an archived write's history says it is archived).
    private static func compactedLogDamage(in root: String, stride: Int) async throws -> (cases: Int, problems: [String]) {
        let path = root + "/compacted"
        var configuration = OutboxConfiguration(autoSync: false, batchSize: 2)
        configuration.clock = ManualClock()
        configuration.random = SeededRandomSource(seed: 7)
        let outbox = try OutboxClient.open(path: path, transport: SimulatedInstance(), configuration: configuration)
        try await outbox.settleSession(user: "alice", accessToken: AccessToken.unsigned(subject: "alice"))
        for n in 0..<8 {
            try await outbox.enqueue(.upsert(into: "todos", key: ["id": .int(Int64(n))], body: ["n": .int(Int64(n))]))
        }
        try await outbox.sync()
        _ = try await outbox.queue.takeAnswered()
        try await outbox.enqueue(.insert(into: "todos", key: ["id": 50], body: ["kept": true]))
        let archived = try LogInspector.records(of: outbox)
        try await outbox.compact()
        try await outbox.enqueue(.insert(into: "todos", key: ["id": 51], body: ["after": true]))
        outbox.close()
        let segment = path + "/archive/segment-000001.mdb"
        let original = try Data(contentsOf: URL(fileURLWithPath: path + "/data.mdb"))
        let originalSegment = try Data(contentsOf: URL(fileURLWithPath: segment))
        let scratch = root + "/scratch-compacted"
        var cases = 0
        var problems: [String] = []
        for record in try LogInspector(path: path).log.storedRecords() {
            let copies = occurrences(of: record.bytes, in: original)
            for position in Swift.stride(from: 0, to: record.bytes.count, by: stride) where !copies.isEmpty {
                var damaged = original
                for copy in copies { damaged[copy + position] ^= 0x01 }
                cases += 1
                try write(damaged, to: scratch)
                if let problem = checkRecordDamage(scratch, sequence: record.sequence) {
                    problems.append("compacted log, byte \(position) of record \(record.sequence): \(problem)")
                }
            }
        }
        for record in archived {
            let copies = occurrences(of: record.bytes, in: originalSegment)
            guard !copies.isEmpty else {
                problems.append("compacted log: record \(record.sequence) is not found in its archive segment")
                continue
            }
            for position in Swift.stride(from: 0, to: record.bytes.count, by: stride) {
                var damaged = originalSegment
                for copy in copies { damaged[copy + position] ^= 0x01 }
                cases += 1
                try write(original, to: scratch)
                try FileManager.default.createDirectory(atPath: scratch + "/archive", withIntermediateDirectories: true)
                try damaged.write(to: URL(fileURLWithPath: scratch + "/archive/segment-000001.mdb"))
                let report = try LogInspector(path: scratch).verify()
                if report.isOK || report.problem?.contains("segment-000001.mdb") != true {
                    problems.append(
                        "compacted log, byte \(position) of archived record \(record.sequence): verify said \(report)")
                }
            }
        }
        cases += 1
        try write(original, to: scratch)
        let inspector = try LogInspector(path: scratch)
        let report = try inspector.verify()
        if !report.isOK || report.segmentsMissing.count != 1 {
            problems.append("compacted log, its segment missing: verify said \(report)")
        }
        do {
            _ = try inspector.history(of: WriteID(1))
            problems.append("compacted log, its segment missing: write 1's history read as if whole")
        } catch let error as OutboxError where error.code == .archived {
        }
        return (cases, problems)
    }

    package static func makeSmallLogs(in root: String) async throws -> [String] {
        var logs: [String] = []
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        for variant in 0..<3 {
            let path = root + "/log-\(variant)"
            var configuration = OutboxConfiguration(autoSync: false, batchSize: 1 + variant)
            configuration.clock = ManualClock()
            configuration.random = SeededRandomSource(seed: UInt64(variant + 1))
            let instance = SimulatedInstance()
            let outbox = try OutboxClient.open(path: path, transport: instance, configuration: configuration)
            try await outbox.settleSession(user: "alice", accessToken: AccessToken.unsigned(subject: "alice"))
            for n in 0..<(8 + variant * 4) {
                try await outbox.enqueue(
                    .upsert(into: n % 3 == 0 ? "lists" : "todos", key: ["id": .int(Int64(n % 5))], body: ["n": .int(Int64(n))]))
            }
            instance.script([
                .verdict(.accepted), .verdict(.refused(Refusal(status: 422, code: "23514", message: "check"))), .lostResponse,
                .verdict(.blocked(.instanceChanged, refusal: nil)),
            ])
            try await outbox.sync()
            try await outbox.sync()
            for write in try await outbox.queue.all() {
                switch write.state {
                case .refused: _ = try await outbox.queue.release(write.id)
                case .blocked: _ = try await outbox.queue.withdraw(write.id)
                default: break
                }
            }
            if variant > 0 {
                try await outbox.settleSession(user: "bob", accessToken: AccessToken.unsigned(subject: "bob"))
                try await outbox.enqueue(.insert(into: "todos", key: ["id": 99], body: ["title": "bob's"]))
            }
            _ = try await outbox.queue.takeAnswered()
            outbox.close()
            logs.append(path)
        }
        return logs
    }
}

/// What the damage suite counted and found, over every log.
private struct DamageTally {
    var records = 0, keys = 0, entries = 0, metas = 0, truncations = 0, pages = 0
    var problems: [String] = []
}

/// One small log under damage: its data file as written, and where each damaged copy is put.
private struct DamagedLog {
    let index: Int
    let path: String
    let original: Data
    let scratch: String
}
