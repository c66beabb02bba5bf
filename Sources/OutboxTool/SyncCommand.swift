internal import Foundation
internal import Outbox
internal import OutboxHTTP

extension Commands {
    /// `outbox sync <log> --url URL [--transport postgrest|contract] [--table T] [--schema S] [--batch N] [--json]`:
    /// one pass of the log's queued writes to a real server: its own tables through PostgREST, or a
    /// reference instance through the outbox's contract. The token comes from `OUTBOX_ACCESS_TOKEN`
    /// (never an argument: other users see arguments in `ps`), the apikey from `OUTBOX_APIKEY`.
    static func sync(_ words: [String]) async throws -> Exit {
        let args = try Arguments(
            command: "sync", words: words, options: ["url", "transport", "table", "schema", "batch"], flags: ["json"])
        let path = try args.positionals("log")[0]
        let transportName = args.option("transport") ?? "postgrest"
        guard transportName == "postgrest" || transportName == "contract" else {
            throw UsageError(message: "--transport \(transportName): the transports are postgrest and contract")
        }
        guard let url = URL(string: try args.required("url")), url.scheme != nil else {
            throw UsageError(message: "--url takes an http(s) URL")
        }
        let environment = ProcessInfo.processInfo.environment
        guard let token = environment["OUTBOX_ACCESS_TOKEN"], !token.isEmpty else {
            throw UsageError(message: "the access token is read from OUTBOX_ACCESS_TOKEN, which is not set")
        }
        guard let user = AccessToken.subject(of: token) else {
            throw UsageError(message: "OUTBOX_ACCESS_TOKEN is not a JWT with a subject (its sub claim names the user)")
        }
        var configuration = OutboxConfiguration(autoSync: false)
        // Another process syncing this log (R5.7): say so at once rather than wait for it.
        configuration.syncLockWait = 0
        if let batch = try args.unsigned("batch") {
            guard (1...10_000).contains(batch) else { throw UsageError(message: "--batch takes a number from 1 to 10000") }
            configuration.batchSize = Int(batch)
        }
        let transport: any OutboxTransport
        do {
            let apiKey = environment["OUTBOX_APIKEY"]
            transport =
                transportName == "contract"
                ? try ContractTransport(url: url, apiKey: apiKey, schema: args.option("schema"))
                : try PostgRESTTransport(url: url, apiKey: apiKey, schema: args.option("schema"))
        } catch let error as TransportConfigurationError {
            throw UsageError(message: "--url: \(error)")
        }
        guard FileManager.default.fileExists(atPath: path) else {
            printError("outbox sync: \(path): no log here")
            return .failure
        }
        let client = try OutboxClient.open(path: path, transport: transport, configuration: configuration)
        defer { client.close() }
        try await client.settleSession(user: user, accessToken: token)
        let progress = SyncProgress(
            ProgressLine("sync", total: UInt64(client.syncStatus.value.pendingCount), json: args.flag("json")))
        client.listen { progress.note($0) }
        let report = try await client.sync(table: args.option("table"))
        progress.finish()
        if report.stoppedBy?.kind == .busy {
            let holder = SyncLock.holder(logPath: path).map { " by \($0)" } ?? " by another process"
            printError("outbox sync: \(path) is being synced\(holder): nothing sent; try again when that pass ends")
            return .notSo
        }
        // Writes of other users are never sent with this token (R7.3): say so, not "remaining 0".
        let others = try client.pendingCount(exceptUser: user)
        if args.flag("json") {
            say(JSONText.render(report.json))
        } else {
            say(
                "synced \(report.syncedCount) (\(report.alreadyOnServerCount) already on the server), rejected \(report.rejectedCount), blocked \(report.blockedCount), held \(report.heldCount), remaining \(report.remainingCount)"
            )
            for verdict in report.verdicts {
                say(
                    "  write \(verdict.id): \(verdict.kind.rawValue)\(verdict.replayed ? " (replayed)" : "")\(verdict.blockedReason.map { " (\($0.rawValue))" } ?? "")"
                )
            }
            if let stopped = report.stoppedBy { say("stopped by \(JSONText.render(stopped.reportJSON))") }
        }
        if others > 0 {
            printError(
                "outbox sync: \(others) pending write\(others == 1 ? "" : "s") of other users than \(user) not sent: each user's writes go with that user's token"
            )
            return .notSo
        }
        return report.stoppedBy != nil && report.remainingCount > 0 ? .notSo : .success
    }
}

/// The verdicts of a running `outbox sync`, counted from the client's events and shown as they come.
private final class SyncProgress: @unchecked Sendable {
    // @unchecked Sendable: every use goes through `lock`.
    private let lock = NSLock()
    private let line: ProgressLine
    private var answered: UInt64 = 0
    private var refused: UInt64 = 0
    private var blocked: UInt64 = 0

    init(_ line: ProgressLine) { self.line = line }

    func note(_ event: OutboxEvent) {
        lock.withLock {
            switch event {
            case .accepted, .columnOverwritten, .conflicted: answered += 1
            case .mutationRejected, .deadLetter: refused += 1
            case .blocked: blocked += 1
            default: return
            }
            line.update(answered + refused + blocked, unit: "writes", detail: ", \(refused) refused, \(blocked) blocked")
        }
    }

    func finish() { lock.withLock { line.finish() } }
}
