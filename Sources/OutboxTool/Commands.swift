internal import Foundation
internal import Outbox
internal import Synchronization

/// What a command ends with: its exit status (0 success, 1 the thing checked is not so, 2 bad usage or
/// an unreadable log).
package enum Exit: Int32 {
    case success = 0
    case notSo = 1
    case failure = 2
    /// `enqueue` only: the write is queued, but its id could not be written to standard output (a
    /// closed pipe, a full disk): the caller must not enqueue it again; standard error names the id.
    case queuedButNotPrinted = 3
    /// Whoever read the output stopped reading (`outbox log LOG | head -1`): the shell's status for a
    /// pipe closed under a writer, with nothing printed.
    case outputClosed = 141
}

/// Where the commands write. The CLI fuzz target silences it: it runs commands thousands of times a second.
package enum Console {
    private static let silent = Atomic<Bool>(false)

    package static func silence(_ isSilent: Bool) { silent.store(isSilent, ordering: .relaxed) }

    static var isSilent: Bool { silent.load(ordering: .relaxed) }
}

/// Prints to standard output, every terminal control character but line breaks and tabs escaped.
func say(_ text: String) {
    if !Console.isSilent { print(TerminalText.output(text)) }
}

/// Prints a piece of a line (a document written as it is read), escaped as `say` escapes.
func sayPart(_ text: String) {
    if !Console.isSilent { print(TerminalText.output(text), terminator: "") }
}

/// Writes a line to standard error, escaped as `say` escapes.
func printError(_ text: String) {
    guard !Console.isSilent else { return }
    var line = TerminalText.output(text)
    if !line.hasSuffix("\n") { line += "\n" }
    FileHandle.standardError.write(Data(line.utf8))
}

/// The `outbox` commands. Every command but `enqueue` opens the log read-only (R8.6).
package enum Commands {
    static let usage = """
        usage: outbox <command> [options]

        commands:
          enqueue <log> --user U --table T --op OP --key JSON [--body JSON] [--depends-on ID,ID] [--base-version N]
                                                       queue a write; prints its id
          queue   <log> [--user U] [--json]             the writes the queue holds, in id order
          history <log> <write-id> [--json]             one write's timeline, event by event
          why     <log> <write-id> [--json]             what holds one write now, and what would free it
          report  <log> [--html FILE]                   the log at a glance; --html: one self-contained page
          log     <log> [--from SEQ] [--to SEQ] [--json]
                                                       the events; --json: one JSON object per line
          verify  <log>                                 "ok" (exit 0), or the first problem (exit 1)
          compact <log> [--before SEQ | --keep-days N] [--archive DIR] [--json]
                                                       moves the log's prefix into an archive segment
          replay  <log> [--until SEQ] [--json]          the queue and verdict table as they stood after SEQ
          replay  <log> --check-decisions               re-runs the replayer's decisions over the recorded answers
          sync    <log> --url URL [--transport postgrest|contract] [--table T] [--schema S] [--batch N] [--json]
                                                       one pass of the queued writes to a real server (token from
                                                       OUTBOX_ACCESS_TOKEN, apikey from OUTBOX_APIKEY)
          scenario <file> [--json]                      runs a scenario (SCENARIOS.md) against the simulated instance
          simulate (--seed S | --seeds N [--start S] | --regressions FILE) [--steps L] [--seconds T] [--journaled]
                                                       the deterministic simulation with faults
          crash [--kills M] [--seed S]                  the SIGKILL crash harness: named crash points, random kills
          damage [--samples N] [--seed S]               the damaged-log suite: record bytes, truncations, page bytes
          demo [--keep DIR]                             queues writes, syncs them against the simulated instance,
                                                       shows the reports, the status and one write's history

        <log> is the log's folder, or its data.mdb file. The read-only commands and compact take
        --archive DIR when the log's archive is not beside it. 'outbox <command> --help' says more.
        Exit status: 0 success, 1 the thing checked is not so, 2 bad usage or an unreadable log.
        """

    /// The commands that only read a log, and open it read-only (R8.6), with the options (taking a
    /// value) and flags each takes.
    static let readOnlyGrammar: [String: (options: Set<String>, flags: Set<String>)] = [
        "queue": (["user", "archive"], ["json"]), "history": (["archive"], ["json"]), "why": (["archive"], ["json"]),
        "report": (["html", "archive"], []), "log": (["from", "to", "archive"], ["json"]), "verify": (["archive"], []),
        "replay": (["until", "archive"], ["json", "check-decisions"]),
    ]

    /// The commands that only read a log.
    package static var readOnlyCommands: Set<String> { Set(readOnlyGrammar.keys) }

    /// The words of read-only `command`, parsed as it parses them.
    static func readOnlyArguments(_ command: String, _ words: [String]) throws(UsageError) -> Arguments {
        let grammar = readOnlyGrammar[command] ?? ([], [])
        return try Arguments(command: command, words: words, options: grammar.options, flags: grammar.flags)
    }

    static let help: [String: String] = [
        "enqueue": """
        usage: outbox enqueue <log> --user U --table T --op OP --key JSON [--body JSON] [--depends-on ID,ID] [--base-version N]

        Queues one write for user U and prints its id once it is durable. Creates the log if it does
        not exist; refuses one that does not verify. OP is insert, update, upsert, delete, or any other word (a custom mutation).
        --key and --body are JSON objects (--body defaults to {}; a delete takes none).
        --depends-on names earlier writes of the same user, comma-separated.
        --base-version is the row version the write was made on (the contract merges or conflicts a
        write made on an older one).
        """,
        "queue": """
        usage: outbox queue <log> [--user U] [--json]

        Every write the queue holds (pending, answered, refused, blocked, dead), in id order; only U's
        with --user. --json prints one JSON object per write and line (Specs/json-fields.md).
        """,
        "history": """
        usage: outbox history <log> <write-id> [--json]

        Every event that touched one write, in order, read from the history index, as a timeline: each
        event's sequence, time and what it meant for the write (sent, answered, refused with the
        server's code and message, released, withdrawn…). --json prints the events as the log holds
        them, one JSON object per line. Exit 1 when the log never held that write.
        """,
        "why": """
        usage: outbox why <log> <write-id> [--json]

        What holds one write now and what would free it, in one sentence: the writes it waits behind
        (same row, dependsOn, its atomic group) down to the one that holds them all, and what holds that
        one (a refusal with its status, code and fields, dead, blocked and why, the last pass's failure,
        a Retry-After, the session's user), then the calls that would free it. Never the server's text.
        --json prints it as one JSON object (Specs/json-fields.md). Exit 1 when the queue does not hold
        the write (see 'outbox history' for one that left it).
        """,
        "report": """
        usage: outbox report <log> [--html FILE]

        The log at a glance: its events, what the queue holds by state, its passes and how the last one
        ended. With --html, writes FILE: one self-contained HTML page (no network, no outside script):
        a timeline of the passes (requests, answers, refusals, failures, what stopped them), the pending
        writes over time, and the writes the queue holds by state, each with its history a click away,
        with a search box for an id, a key, a table or a state. The page shows the server's messages in
        the histories (it is an audit view): share it as you would the log.
        """,
        "log": """
        usage: outbox log <log> [--from SEQ] [--to SEQ] [--json]

        The events from SEQ to SEQ (inclusive), in order. --json prints one JSON object per line.
        """,
        "verify": """
        usage: outbox verify <log> [--archive DIR]

        Re-reads every event, checks each checksum and that sequence numbers have no gaps, folds the
        log into fresh projections and compares them with the stored ones byte for byte. Prints "ok"
        and exits 0, or prints the first problem (naming the file, and the sequence number of a damaged
        record) and exits 1. A compacted log is folded from its snapshot, and each segment of its
        archive that is present is checked (records, checksums, the chain of digests); one that is not
        is named as archived elsewhere, which is not a problem.
        """,
        "compact": """
        usage: outbox compact <log> [--before SEQ | --keep-days N] [--archive DIR] [--json]

        Moves the events before sequence SEQ (every event so far by default; with --keep-days, those
        recorded more than N days ago) into a new segment of the log's archive (DIR, or 'archive' in
        the log's folder), and starts the log at a snapshot of the queue there. Every write the queue
        still holds keeps its whole history in the log; 'outbox history' reads the others from the
        archive. The data file is then written again without the room they took, unless another
        process has the log open. Refuses a log that does not verify (exit 1).
        """,
        "replay": """
        usage: outbox replay <log> [--until SEQ] [--json]
               outbox replay <log> --check-decisions

        Folds the log up to SEQ (the last event by default) and prints the queue (pending writes in id
        order) and the verdict table (every write's state) as they stood just after it.

        With --check-decisions, re-runs the replayer's decisions over every answer recorded in the log
        (with the verdict table, settings and clock reading of that moment) and compares them with the
        events the log holds: prints "same decisions" (exit 0), or the first event where this version
        would decide differently (exit 1).
        """,
        "scenario": """
        usage: outbox scenario <file> [--json]

        Runs a scenario file (../shared/SCENARIOS.md, examples in Specs/scenarios/) on a fresh log in a
        temporary folder against the built-in simulated instance, on a simulated clock. Prints a readable
        transcript, or with --json one JSON document. Exit 0 when every expectation held, 1 when one did
        not (each failure printed), 2 when the file is not a valid scenario (naming the step and field).
        """,
        "simulate": """
        usage: outbox simulate --seed S [--steps L] [--journaled]
               outbox simulate [--seeds N] [--start S] [--regressions FILE] [--steps L] [--seconds T] [--jobs J] [--journaled]

        Runs the deterministic simulation (TESTING.md section 1): per seed, a random workload of users,
        writes and queue calls against the simulated instance behind a faulty network (drops, lost
        responses, duplicates, delayed copies, 5xx, Retry-After, 401, 42501, refusals, schema cache,
        malformed bodies) with crashes, then a healing phase, checking invariants I1-I11. --seed runs
        one seed twice (I11) and prints its trace; --seeds runs N seeds from --start (1), --regressions
        the seeds listed in FILE (one per line, # comments), within --seconds. Prints each failing seed
        with 'reproduce: outbox simulate --seed S', and a closing line 'sim: N seeds, F failed'.
        --journaled runs each log through a journal, as a .full log commits (without its flushes), its
        power losses putting LMDB back to the journal's head: the closing line is then
        'sim (journaled): N seeds, F failed'. Exit 0 when none failed, 1 otherwise.
        """,
        "crash": """
        usage: outbox crash [--kills M] [--seed S] [--points LABEL,LABEL]

        The crash harness (TESTING.md section 2). Worker processes ('outbox crash-worker') run a seeded
        workload on a real log (enqueues, syncs against the simulated instance with lost responses,
        rebuilds, user switches) and report each acknowledged enqueue and each apply at once. The
        harness kills them at every named crash point x {1, 2, 3} (OUTBOX_CRASHPOINT=label#n), then M
        times at random moments (0-60 ms, with a long tail) on one log, and checks after each death
        that every acknowledged write is in the log and the log verifies, and at the end that every
        acknowledged write was applied exactly once, in order. Prints 'crash: N points, M kills, 0 lost'.
        """,
        "crash-worker": """
        usage: outbox crash-worker <log> --seed S --writes N --instance FILE

        The crash harness's child process (see 'outbox crash --help'); not for use by hand.
        """,
        "sync": """
        usage: outbox sync <log> --url URL [--transport postgrest|contract] [--table T] [--schema S] [--batch N] [--json]

        Opens the log for writing and runs one pass (sync) of its queued writes to the server at URL
        (PostgREST or Supabase's Data API: put /rest/v1 in the URL for Supabase), as the user the
        token names (its sub), and prints the report (--json: one JSON object). The token is read
        from OUTBOX_ACCESS_TOKEN, never from an argument; the apikey from OUTBOX_APIKEY if set.
        --table syncs that table's writes only; --schema writes to that schema; --batch sets the
        batch size. Exit 0 when the pass ran to its end (refusals included), 1 when it stopped on a
        failure with writes still queued, 2 for bad usage, a missing token or an unreadable log.
        """,
        "hold-reader": """
        usage: outbox hold-reader <log>

        Opens the log read-only, begins a read transaction, prints READING and waits inside it until
        its standard input ends or it is killed: the harness of the reader-slot tests; not for use by hand.
        """,
        "damage": """
        usage: outbox damage [--samples N] [--seed S] [--record-stride K]

        The damaged-log suite (TESTING.md section 3) on three small logs: every byte of every stored
        record flipped and zeroed (the checksum must catch each and name the record's sequence; with
        --record-stride K, every K-th byte), truncation at every 4 KiB page boundary, and N (2000)
        seeded bytes of LMDB's own page structure, each read by 'outbox verify' (which reads an
        untrusted log in a child process). Never a crash or a hang: exit 0, or 1 or 2 naming the file.
        Prints 'damage: N cases (...), 0 failed'.
        """,
        "demo": """
        usage: outbox demo [--keep DIR]

        Queues a realistic set of writes for two tables, syncs them against the simulated instance (with
        a server error, a refusal and a retry), and prints the reports, the status and the history of the
        refused write. With --keep, the log is made in DIR and kept, for the other commands to read.
        """,
    ]

    /// The command line's words after the program's name; nil, with the reason printed, when one is
    /// not valid UTF-8 (Swift would replace its bytes with U+FFFD and name another file or key).
    package static func commandLineWords() -> [String]? {
        var words: [String] = []
        for index in 1..<Int(CommandLine.argc) {
            guard let raw = CommandLine.unsafeArgv[index], let word = String(validatingCString: raw) else {
                printError("outbox: argument \(index) is not valid UTF-8")
                return nil
            }
            words.append(word)
        }
        return words
    }

    /// Runs one command line. The read-only commands read the log in a child process, unless this is
    /// that child or `readsInAChild` is false (the CLI fuzz target, which reads a log it made).
    package static func run(_ words: [String], readsInAChild: Bool = true) async -> Exit {
        guard let command = words.first else {
            printError(usage)
            return .failure
        }
        if command == "--help" || command == "-h" || command == "help" {
            say(usage)
            return .success
        }
        guard let text = help[command] else {
            printError("outbox: unknown command '\(command)'\n\n\(usage)")
            return .failure
        }
        let rest = Array(words.dropFirst())
        if rest.contains("--help") || rest.contains("-h") {
            say(text)
            return .success
        }
        if readOnlyCommands.contains(command), readsInAChild, !UntrustedLogReader.isChild {
            return UntrustedLogReader.runInChild(command, words)
        }
        do {
            switch command {
            case "enqueue": return try await enqueue(rest)
            case "queue": return try queue(rest)
            case "history": return try history(rest)
            case "why": return try why(rest)
            case "report": return try report(rest)
            case "log": return try log(rest)
            case "verify": return try verify(rest)
            case "compact": return try await compact(rest)
            case "scenario": return try await scenario(rest)
            case "demo": return try await demo(rest)
            case "simulate": return try await simulate(rest)
            case "crash": return try await crash(rest)
            case "damage": return try await damage(rest)
            case "crash-worker": return try await crashWorker(rest)
            case "hold-reader": return try holdReader(rest)
            case "sync": return try await sync(rest)
            default: return try replay(rest)
            }
        } catch let error as UsageError {
            printError("outbox \(command): \(error.message)\n\n\(text)")
            return .failure
        } catch let error as OutboxError {
            printError("outbox \(command): \(error.message)")
            return error.code == .notFound ? .notSo : .failure
        } catch {
            printError("outbox \(command): \(error)")
            return .failure
        }
    }

    static func enqueue(_ words: [String]) async throws -> Exit {
        let args = try Arguments(
            command: "enqueue", words: words, options: ["user", "table", "op", "key", "body", "depends-on", "base-version"],
            flags: [])
        let path = try args.positionals("log")[0]
        let user = try args.required("user")
        let key = try parseJSON(try args.required("key"), option: "key")
        let body = try args.option("body").map { try parseJSON($0, option: "body") } ?? [:]
        var dependsOn: [WriteID] = []
        if let list = args.option("depends-on") {
            for part in list.split(separator: ",", omittingEmptySubsequences: false) {
                guard let id = UInt64(part.filter { $0 != " " }), id > 0 else {
                    throw UsageError(message: "--depends-on takes write ids separated by commas, not '\(list)'")
                }
                dependsOn.append(WriteID(id))
            }
        }
        var baseVersion: Int64?
        if let text = args.option("base-version") {
            guard let version = Int64(text), version >= 1 else {
                throw UsageError(message: "--base-version takes the row version the write was made on (1 or more), not '\(text)'")
            }
            baseVersion = version
        }
        let write = Write(
            table: try args.required("table"), operation: WriteOperation(word: try args.required("op")), key: key, body: body,
            baseVersion: baseVersion, dependsOn: dependsOn)
        // A closed pipe must not kill the process after the commit: the caller would retry and queue
        // the write twice. Printing the id is checked instead.
        signal(SIGPIPE, SIG_IGN)
        let client = try OutboxClient.open(path: path, configuration: OutboxConfiguration(autoSync: false))
        // A support engineer's enqueue goes into a log that reads whole, or not at all: appending to a
        // damaged one would bury the damage under a write that looks sound.
        let report = try await client.verify()
        guard report.isOK else {
            printError("outbox enqueue: \(path): the log does not verify (\(report)); nothing was queued")
            return .failure
        }
        let id = try await client.enqueue(contentsOf: [write], atomic: false, user: user)[0].rawValue
        if let failure = writeToStandardOutput(String(id) + "\n") {
            printError(
                "outbox enqueue: \(path): the write is queued as write \(id), but its id could not be printed (\(failure)); do not enqueue it again"
            )
            return .queuedButNotPrinted
        }
        return .success
    }

    /// Writes `text` to standard output unbuffered; nil once all of it is written, else why not.
    static func writeToStandardOutput(_ text: String) -> String? {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                return String(cString: strerror(errno))
            }
            bytes = bytes.dropFirst(written)
        }
        return nil
    }

    /// `outbox hold-reader <log>`: a reader that stays inside its read transaction until it is killed.
    static func holdReader(_ words: [String]) throws -> Exit {
        let args = try Arguments(command: "hold-reader", words: words, options: [], flags: [])
        let inspector = try LogInspector(path: try args.positionals("log")[0], archive: args.option("archive"))
        try inspector.holdingARead {
            FileHandle.standardOutput.write(Data("READING\n".utf8))
            _ = FileHandle.standardInput.readDataToEndOfFile()
        }
        return .success
    }

    /// The log at `path` opened read-only for a command; one its writer did not close (killed, or the
    /// power failed) is recovered in a temporary copy and the copy read, which standard error says
    /// before the copy is made.
    private static func openForReading(_ path: String, _ args: Arguments) throws -> LogInspector {
        try LogInspector.recovering(path: path, archive: args.option("archive")) { size in
            let megabytes = size >= 1 << 20 ? " (\(size >> 20) MiB)" : ""
            printError(
                "outbox \(args.command): \(path): its writer did not close it (killed, or the power failed): reading a copy\(megabytes) recovered from its journal under \(NSTemporaryDirectory()); the log itself is unchanged"
            )
        }
    }

    static func queue(_ words: [String]) throws -> Exit {
        let args = try readOnlyArguments("queue", words)
        let inspector = try openForReading(try args.positionals("log")[0], args)
        // Each write printed as it is read: a queue of 200,000 is never held whole.
        try inspector.forEachWrite(user: args.option("user")) { write in
            say(args.flag("json") ? JSONText.render(Render.json(write)) : Render.line(write))
        }
        return .success
    }

    /// A `<write-id>` argument: a whole number.
    private static func writeID(_ word: String) throws(UsageError) -> UInt64 {
        guard let id = UInt64(word) else { throw UsageError(message: "<write-id> is a whole number, not '\(word)'") }
        return id
    }

    static func history(_ words: [String]) throws -> Exit {
        let args = try readOnlyArguments("history", words)
        let positionals = try args.positionals("log", "write-id")
        let id = try writeID(positionals[1])
        let inspector = try openForReading(positionals[0], args)
        let events = try inspector.history(of: WriteID(id))
        guard !events.isEmpty else {
            printError("outbox history: \(positionals[0]): the log never held write \(id)")
            return .notSo
        }
        for event in events { say(args.flag("json") ? JSONText.render(event.json) : Render.timeline(event, of: WriteID(id))) }
        return .success
    }

    static func why(_ words: [String]) throws -> Exit {
        let args = try readOnlyArguments("why", words)
        let positionals = try args.positionals("log", "write-id")
        let id = try writeID(positionals[1])
        let inspector = try openForReading(positionals[0], args)
        guard let explanation = try inspector.explain(WriteID(id), now: Timestamp(Date())) else {
            printError(
                "outbox why: \(positionals[0]): the queue does not hold write \(id) ('outbox history' shows what became of it)")
            return .notSo
        }
        say(args.flag("json") ? JSONText.render(explanation.json) : explanation.description)
        return .success
    }

    static func report(_ words: [String]) throws -> Exit {
        let args = try readOnlyArguments("report", words)
        let path = try args.positionals("log")[0]
        let inspector = try openForReading(path, args)
        let progress = ProgressLine("report", total: try? inspector.lastSequence(), json: false)
        let report = try LogReport(path: path, inspector: inspector, progress: progress)
        progress.finish()
        guard let file = args.option("html") else {
            say(report.summary)
            return .success
        }
        do {
            try Data(HTMLReport.page(report).utf8).write(to: URL(fileURLWithPath: file), options: .atomic)
        } catch {
            printError("outbox report: \(file): the page could not be written (\(error.localizedDescription))")
            return .failure
        }
        say("\(file): \(report.rows.count) writes, \(report.passes.count) passes")
        return .success
    }

    static func log(_ words: [String]) throws -> Exit {
        let args = try readOnlyArguments("log", words)
        let path = try args.positionals("log")[0]
        let from = try args.unsigned("from") ?? 1
        let to = try args.unsigned("to") ?? .max
        guard from <= to else { throw UsageError(message: "--from \(from) is after --to \(to)") }
        let inspector = try openForReading(path, args)
        try inspector.forEachEvent(from: from, to: to) { event in
            say(args.flag("json") ? JSONText.render(event.json) : Render.line(event))
            return true
        }
        return .success
    }

    static func verify(_ words: [String]) throws -> Exit {
        let args = try readOnlyArguments("verify", words)
        let path = try args.positionals("log")[0]
        // A log that cannot be opened is unreadable (exit 2); a problem found inside it is exit 1.
        let inspector = try openForReading(path, args)
        let progress = ProgressLine("verify", total: try? inspector.lastSequence(), json: false)
        let report: VerifyReport
        do {
            defer { progress.finish() }
            report = try inspector.verify { progress.update($0, unit: "events") }
        } catch let error as OutboxError where error.code == .damaged {
            say(error.message)
            return .notSo
        }
        say(report.description)
        return report.isOK ? .success : .notSo
    }

    static func replay(_ words: [String]) throws -> Exit {
        let args = try readOnlyArguments("replay", words)
        let inspector = try openForReading(try args.positionals("log")[0], args)
        if args.flag("check-decisions") {
            guard args.option("until") == nil, !args.flag("json") else {
                throw UsageError(message: "--check-decisions takes no other option")
            }
            let report = try inspector.checkDecisions()
            say(report.description)
            return report.isSame ? .success : .notSo
        }
        let last = try inspector.lastSequence()
        let until = try args.unsigned("until") ?? last
        guard until >= 1 else { throw UsageError(message: "--until takes a sequence number from 1") }
        guard until <= last else { throw UsageError(message: "--until \(until) is past the last event (\(last))") }
        // Printed as it is read (two passes: the pending writes, then every write), never held whole.
        let progress = ProgressLine("replay", total: until, json: args.flag("json"))
        let showProgress: (UInt64) -> Void = { progress.update($0, unit: "events") }
        try inspector.withState(asOf: until, progress: showProgress) { state in
            progress.finish()
            var pending: [UInt64] = []
            var count = 0
            try state.forEachWrite { write in
                if write.state == .pending { pending.append(write.id.rawValue) }
                count += 1
            }
            if args.flag("json") {
                // The canonical rendering of {"queue", "sequence", "user", "verdicts"} (keys in that order),
                // written piece by piece.
                sayPart(#"{"queue":["# + pending.map(String.init).joined(separator: ",") + "],")
                sayPart(#""sequence":\#(state.sequence),"user":"# + JSONText.render(state.user.map { .string($0) } ?? .null))
                sayPart(#","verdicts":["#)
                var first = true
                try state.forEachWrite { write in
                    sayPart((first ? "" : ",") + JSONText.render(Render.json(write)))
                    first = false
                }
                sayPart("]}\n")
            } else {
                say("as of sequence \(state.sequence)\(state.user.map { ", session user \(TerminalText.field($0))" } ?? "")")
                say("queue (\(pending.count) pending):")
                try state.forEachWrite { write in if write.state == .pending { say("  " + Render.line(write)) } }
                say("verdict table (\(count) writes):")
                try state.forEachWrite { write in say("  " + Render.line(write)) }
            }
        }
        return .success
    }

    static func parseJSON(_ text: String, option: String) throws -> JSONValue {
        do {
            return try JSONText.parse(text)
        } catch {
            throw UsageError(message: "--\(option): \(error)")
        }
    }
}
