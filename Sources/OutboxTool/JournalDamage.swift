internal import Foundation
internal import Outbox
internal import OutboxProcess
internal import OutboxTesting

extension Commands {
    /// 7. The journal of a log its writer did not close (a device's copy after a kill): its data file
    /// as its last checkpoint left it, its journal holding the commits of four enqueues since, and its
    /// commit mark. Every byte of the two heads' first 32 bytes and of the commits (every `stride`th
    /// byte of their records), and a seeded sample of the heads' meta pages, flipped: `outbox verify`,
    /// in a child, which recovers a copy, must read every enqueue, or refuse the log with a message
    /// naming its file; never crash, hang, or read the log without its last enqueues.
    static func journalDamage(in root: String, stride: Int, samples: Int, _ rng: SeededRandomSource) async throws -> (
        cases: Int, refused: Int, problems: [String]
    ) {
        let log = try await unclosedLog(in: root)
        let scratch = root + "/scratch-unclosed"
        var cases = 0
        var refused = 0
        var problems: [String] = []
        for (offset, mutate) in journalBytes(of: log, stride: stride, samples: samples, rng) {
            var damaged = log.journal
            damaged[offset] = mutate(damaged[offset])
            cases += 1
            try? FileManager.default.removeItem(atPath: scratch)
            try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
            try log.dataFile.write(to: URL(fileURLWithPath: scratch + "/data.mdb"))
            try damaged.write(to: URL(fileURLWithPath: scratch + "/journal"))
            try log.mark.write(to: URL(fileURLWithPath: scratch + "/last-commit"))
            switch checkJournalDamage(scratch, last: log.last) {
            case .read: break
            case .refused: refused += 1
            case .failed(let problem): problems.append("unclosed log, journal byte \(offset): \(problem)")
            }
        }
        return (cases, refused, problems)
    }

    /// A log whose writer did not close it, as its files were when the writer stopped.
    private struct UnclosedLog {
        let dataFile: Data
        let journal: Data
        let mark: Data
        /// The sequence of its last event, which the journal alone holds.
        let last: UInt64
        /// Where the journal's commits end, and how large each head slot is.
        let commitsEnd: Int
        let slotSize: Int
    }

    private static func unclosedLog(in root: String) async throws -> UnclosedLog {
        let path = root + "/unclosed"
        var configuration = OutboxConfiguration(autoSync: false)
        configuration.clock = ManualClock()
        configuration.random = SeededRandomSource(seed: 11)
        let outbox = try OutboxClient.open(path: path, configuration: configuration)
        try await outbox.settleSession(user: "alice", accessToken: AccessToken.unsigned(subject: "alice"))
        for n in 0..<3 {
            try await outbox.enqueue(.insert(into: "todos", key: ["id": .int(Int64(n))], body: ["n": .int(Int64(n))]))
        }
        try outbox.log.checkpoint()
        let dataFile = try Data(contentsOf: URL(fileURLWithPath: path + "/data.mdb"))
        for n in 3..<7 {
            try await outbox.enqueue(.insert(into: "todos", key: ["id": .int(Int64(n))], body: ["n": .int(Int64(n))]))
        }
        let journal = try Data(contentsOf: URL(fileURLWithPath: path + "/journal"))
        let mark = try Data(contentsOf: URL(fileURLWithPath: path + "/last-commit"))
        let last = try outbox.log.lastSequence()
        outbox.close()
        let slotSize = Journal.slotSize(metaPagesSize: 2 * Int(sysconf(Int32(_SC_PAGESIZE))))
        // The commits follow the two head slots; the last ends where zeros (never written) begin.
        let tail = journal[(2 * slotSize)...]
        let commitsEnd = (tail.lastIndex { $0 != 0 } ?? 2 * slotSize) + 1
        return UnclosedLog(
            dataFile: dataFile, journal: journal, mark: mark, last: last, commitsEnd: commitsEnd, slotSize: slotSize)
    }

    /// The journal's bytes to damage, each with how: flipped, or (in a head's first bytes) zeroed.
    private static func journalBytes(
        of log: UnclosedLog, stride: Int, samples: Int, _ rng: SeededRandomSource
    ) -> [(Int, (UInt8) -> UInt8)] {
        let flip: (UInt8) -> UInt8 = { $0 ^ 0x01 }
        var bytes: [(Int, (UInt8) -> UInt8)] = []
        for slot in 0..<2 {
            for offset in (slot * log.slotSize)..<(slot * log.slotSize + 32) { bytes.append((offset, flip)) }
            for _ in 0..<samples {
                bytes.append((slot * log.slotSize + 32 + Int(rng.next(below: UInt64(log.slotSize - 32))), flip))
            }
        }
        for offset in Swift.stride(from: 2 * log.slotSize, to: log.commitsEnd, by: stride) { bytes.append((offset, flip)) }
        return bytes
    }

    /// What the tool made of a damaged journal.
    private enum JournalOutcome {
        /// Read whole: it verified, its last event there.
        case read
        /// Refused, naming the log.
        case refused
        case failed(String)
    }

    /// `outbox verify` on a log whose journal is damaged: exit 0 with the log's last event there, or
    /// 1 or 2 with a message naming the log.
    private static func checkJournalDamage(_ folder: String, last: UInt64) -> JournalOutcome {
        var environment = toolEnvironment
        environment["SWIFT_BACKTRACE"] = "enable=no"
        func tool(_ arguments: [String]) throws -> ChildProcess.Ended {
            try ChildProcess.runBlocking(
                ChildProcess.currentProgram, arguments, environment: environment, errors: .apart(.capture))
        }
        do {
            let verified = try tool(["verify", folder])
            if verified.signalled { return .failed("the tool crashed (signal \(verified.status))") }
            switch verified.status {
            case 0:
                let read = try tool(["log", folder, "--from", String(last), "--to", String(last)])
                let lines = read.text.split(separator: "\n").count
                return read.status == 0 && lines == 1
                    ? .read
                    : .failed("verify said ok, and the log's last event (\(last)) reads as \(lines) lines, exit \(read.status)")
            case 1, 2:
                let text = verified.text + verified.errorText
                return text.contains(folder)
                    ? .refused : .failed("exit \(verified.status) without naming the log: \(text.prefix(200))")
            default:
                return .failed("exit \(verified.status): \((verified.text + verified.errorText).prefix(200))")
            }
        } catch {
            return .failed("cannot run the tool: \(error)")
        }
    }
}
