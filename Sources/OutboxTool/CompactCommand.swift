internal import Foundation
internal import Outbox

extension Commands {
    /// `outbox compact <log> [--before SEQ | --keep-days N] [--archive DIR] [--json]`: moves the log's
    /// prefix into a new archive segment and starts it at a snapshot (R8.5).
    static func compact(_ words: [String]) async throws -> Exit {
        let args = try Arguments(command: "compact", words: words, options: ["before", "keep-days", "archive"], flags: ["json"])
        let path = try args.positionals("log")[0]
        let before = try args.unsigned("before")
        let keepDays = try args.option("keep-days").map { text in
            guard let days = Double(text), days >= 0, days.isFinite else {
                throw UsageError(message: "--keep-days takes a number of days (0 or more), not '\(text)'")
            }
            return days
        }
        guard before == nil || keepDays == nil else { throw UsageError(message: "--before and --keep-days exclude each other") }
        if let before, before < 1 { throw UsageError(message: "--before takes a sequence number from 1") }
        guard FileManager.default.fileExists(atPath: path) else {
            printError("outbox compact: \(path): no log here")
            return .failure
        }
        var configuration = OutboxConfiguration(autoSync: false)
        configuration.archiveFolder = args.option("archive")
        let client = try OutboxClient.open(path: path, configuration: configuration)
        defer { client.close() }
        let verified = try await client.verify()
        guard verified.isOK else {
            printError("outbox compact: \(path): the log does not verify (\(verified)); nothing was compacted")
            return .notSo
        }
        var horizon = before
        if let keepDays {
            // The first event recorded within the last `keepDays` days: the events from it on stay.
            let since = Timestamp(Date()).adding(seconds: -keepDays * 86_400)
            horizon = try client.log.firstSequence(recordedAtOrAfter: since)
        }
        let report: CompactionReport
        do {
            report = try await client.compact(before: horizon)
        } catch let error as OutboxError where error.code == .busy {
            printError("outbox compact: \(path) is being synced: nothing was compacted; try again when that pass ends")
            return .notSo
        }
        say(args.flag("json") ? JSONText.render(report.json) : report.description)
        return .success
    }
}
