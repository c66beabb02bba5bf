internal import Foundation
internal import Outbox
internal import OutboxProcess
internal import OutboxTesting

extension Commands {
    /// What the journal cases found: how many, how many refused, and the problems.
    struct JournalDamageTally {
        var cases = 0
        var refused = 0
        var problems: [String] = []
    }

    /// 7. The journals of three logs: one its writer did not close (a device's copy after a kill: its
    /// data file as its last checkpoint left it, its journal holding the commits of four enqueues
    /// since, and its commit mark), and two closed (the last head, written by the close, says LMDB is
    /// whole), one with commits since the head before and one without (a checkpoint just before the
    /// close: the head before then names the data file as it is). Every byte of the two heads' first
    /// 32 bytes and of the commits (every `stride`th byte of their records), and a seeded sample of
    /// the heads' meta pages, flipped: `outbox verify`, in a child, which recovers a copy of the log
    /// not closed, must read every enqueue, or refuse the log with a message naming its file; never
    /// crash, hang, or read the log without its last enqueues.
    /// Of a closed log, an open for writing (`outbox enqueue`, in a child) must then say the same:
    /// open it when `verify` read it, refuse it naming it when `verify` refused it.
    static func journalDamage(in root: String, stride: Int, samples: Int, _ rng: SeededRandomSource) async throws
        -> (unclosed: JournalDamageTally, closed: JournalDamageTally)
    {
        var unclosed = JournalDamageTally()
        var closed = JournalDamageTally()
        for shape in JournaledLogShape.allCases {
            let log = try await journaledLog(in: root, shape)
            let scratch = root + "/scratch-" + shape.folder
            let isClosed = shape != .notClosed
            var tally = isClosed ? closed : unclosed
            for (offset, mutate) in journalBytes(of: log, stride: stride, samples: samples, rng) {
                var damaged = log.journal
                damaged[offset] = mutate(damaged[offset])
                tally.cases += 1
                try? FileManager.default.removeItem(atPath: scratch)
                try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
                try log.dataFile.write(to: URL(fileURLWithPath: scratch + "/data.mdb"))
                try damaged.write(to: URL(fileURLWithPath: scratch + "/journal"))
                try log.mark.write(to: URL(fileURLWithPath: scratch + "/last-commit"))
                var outcome = checkJournalDamage(scratch, last: log.last)
                if isClosed, case .read = outcome { outcome = checkOpenForWriting(scratch, refused: false) }
                if isClosed, case .refused = outcome { outcome = checkOpenForWriting(scratch, refused: true) }
                switch outcome {
                case .read: break
                case .refused: tally.refused += 1
                case .failed(let problem): tally.problems.append("\(shape) log, journal byte \(offset): \(problem)")
                }
            }
            if isClosed { closed = tally } else { unclosed = tally }
        }
        return (unclosed, closed)
    }

    /// How a journaled log's writer left it.
    private enum JournaledLogShape: CaseIterable, CustomStringConvertible {
        case notClosed
        /// Closed with commits after its last checkpoint.
        case closed
        /// Checkpointed, then closed.
        case checkpointedAndClosed

        var folder: String { description.replacingOccurrences(of: " ", with: "-") }

        var description: String {
            switch self {
            case .notClosed: "unclosed"
            case .closed: "closed"
            case .checkpointedAndClosed: "checkpointed and closed"
            }
        }
    }

    /// A journaled log as its files were when its writer stopped (killed, or after closing it).
    private struct JournaledLog {
        let dataFile: Data
        let journal: Data
        let mark: Data
        /// The sequence of its last event (which, of a log not closed, the journal alone holds).
        let last: UInt64
        /// Where the journal's commits end, and how large each head slot is.
        let commitsEnd: Int
        let slotSize: Int
    }

    private static func journaledLog(in root: String, _ shape: JournaledLogShape) async throws -> JournaledLog {
        let path = root + "/" + shape.folder
        var configuration = OutboxConfiguration(autoSync: false)
        configuration.clock = ManualClock()
        configuration.random = SeededRandomSource(seed: 11)
        let outbox = try OutboxClient.open(path: path, configuration: configuration)
        try await outbox.settleSession(user: "alice", accessToken: AccessToken.unsigned(subject: "alice"))
        for n in 0..<3 {
            try await outbox.enqueue(.insert(into: "todos", key: ["id": .int(Int64(n))], body: ["n": .int(Int64(n))]))
        }
        try outbox.log.checkpoint()
        var dataFile = try Data(contentsOf: URL(fileURLWithPath: path + "/data.mdb"))
        for n in 3..<7 {
            try await outbox.enqueue(.insert(into: "todos", key: ["id": .int(Int64(n))], body: ["n": .int(Int64(n))]))
        }
        let last = try outbox.log.lastSequence()
        if shape == .checkpointedAndClosed { try outbox.log.checkpoint() }
        if shape != .notClosed {
            outbox.close()
            dataFile = try Data(contentsOf: URL(fileURLWithPath: path + "/data.mdb"))
        }
        let journal = try Data(contentsOf: URL(fileURLWithPath: path + "/journal"))
        let mark = try Data(contentsOf: URL(fileURLWithPath: path + "/last-commit"))
        if shape == .notClosed { outbox.close() }
        let slotSize = Journal.slotSize(metaPagesSize: 2 * Int(sysconf(Int32(_SC_PAGESIZE))))
        // The commits follow the two head slots; the last ends where zeros (never written) begin.
        let tail = journal[(2 * slotSize)...]
        let commitsEnd = (tail.lastIndex { $0 != 0 } ?? 2 * slotSize) + 1
        return JournaledLog(
            dataFile: dataFile, journal: journal, mark: mark, last: last, commitsEnd: commitsEnd, slotSize: slotSize)
    }

    /// The journal's bytes to damage, each with how: flipped, or (in a head's first bytes) zeroed.
    private static func journalBytes(
        of log: JournaledLog, stride: Int, samples: Int, _ rng: SeededRandomSource
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

    /// An open for writing of a closed log whose journal is damaged, `outbox enqueue` in a child, where
    /// `verify` read it (`refused` false: it must open it and enqueue) or refused it (it must refuse it
    /// too, naming the log).
    private static func checkOpenForWriting(_ folder: String, refused: Bool) -> JournalOutcome {
        do {
            let opened = try tool(
                ["enqueue", folder, "--user", "alice", "--table", "todos", "--op", "insert", "--key", #"{"id": 100}"#])
            if opened.signalled { return .failed("an open for writing crashed (signal \(opened.status))") }
            let text = opened.text + opened.errorText
            switch (refused, opened.status) {
            case (false, 0): return .read
            case (true, 1), (true, 2):
                return text.contains(folder)
                    ? .refused : .failed("an open for writing refused it without naming the log: \(text.prefix(200))")
            case (false, _):
                return .failed("verify read it, an open for writing did not (exit \(opened.status)): \(text.prefix(200))")
            case (true, _):
                return .failed("verify refused it, an open for writing did not (exit \(opened.status)): \(text.prefix(200))")
            }
        } catch {
            return .failed("cannot run the tool: \(error)")
        }
    }

    /// The tool, in a child, without Swift's backtracer (a crash is reported by its signal).
    private static func tool(_ arguments: [String]) throws -> ChildProcess.Ended {
        var environment = toolEnvironment
        environment["SWIFT_BACKTRACE"] = "enable=no"
        return try ChildProcess.runBlocking(
            ChildProcess.currentProgram, arguments, environment: environment, errors: .apart(.capture))
    }
}
