internal import Foundation
internal import Outbox
internal import OutboxScenario

extension Commands {
    static func scenario(_ words: [String]) async throws -> Exit {
        let args = try Arguments(command: "scenario", words: words, options: [], flags: ["json"])
        let path = try args.positionals("file")[0]
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw UsageError(message: "\(path): cannot read the file as UTF-8 text")
        }
        let document: JSONValue
        let folder = ScenarioRunner.temporaryFolder()
        // Interrupted (Ctrl-C, a kill that can be caught), the run's log (bodies on disk) goes with it.
        let stopHandling = removing(folder, onSignals: [SIGINT, SIGTERM, SIGHUP])
        defer { stopHandling() }
        do {
            document = try await ScenarioRunner().run(try Scenario.parse(text), in: folder)
        } catch let error as ScenarioError {
            printError("outbox scenario: \(path): not a valid scenario: \(error)")
            return .failure
        }
        if args.flag("json") {
            say(JSONText.render(document))
        } else {
            say(Transcript.render(document))
        }
        guard case .object(let fields) = document, case .array(let failures)? = fields["failures"] else { return .failure }
        for case .string(let failure) in failures { printError("expectation failed: \(failure)") }
        return failures.isEmpty ? .success : .notSo
    }
}

/// Handles `signals` until the returned function is called: each removes `folder` and ends the
/// process with the status the signal would have given (128 + its number).
private func removing(_ folder: String, onSignals signals: [Int32]) -> () -> Void {
    let sources = signals.map { number in
        signal(number, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
        source.setEventHandler {
            // The run goes on writing while this removes: a file it makes between the listing and the
            // folder's own removal (the commit mark's replacement) leaves the folder; remove again.
            for _ in 0..<100 where FileManager.default.fileExists(atPath: folder) {
                try? FileManager.default.removeItem(atPath: folder)
            }
            exit(128 + number)
        }
        source.resume()
        return source
    }
    return {
        for source in sources { source.cancel() }
        for number in signals { signal(number, SIG_DFL) }
    }
}

/// The readable form of a scenario's output document.
enum Transcript {
    static func render(_ document: JSONValue) -> String {
        guard case .object(let top) = document else { return JSONText.render(document) }
        var lines: [String] = []
        if case .string(let name)? = top["name"] { lines.append("scenario: \(name)") }
        if case .array(let steps)? = top["steps"] {
            for case .object(let step) in steps {
                let index = step["index"].map(JSONText.render) ?? "?"
                let action = step["action"].flatMap { if case .string(let s) = $0 { s } else { nil } } ?? "?"
                var line = "  [\(index)] \(action)"
                for key in ["id", "ids", "result", "row"] {
                    if let value = step[key] { line += " \(key)=\(JSONText.render(value))" }
                }
                if step["crashed"] == .bool(true) { line += " (the client crashed and was reopened)" }
                lines.append(line)
                if let report = step["report"] { lines.append("      " + summary(report)) }
                if case .array(let passes)? = step["autoPasses"] {
                    for pass in passes { lines.append("      automatic pass: " + summary(pass)) }
                }
            }
        }
        if case .object(let final)? = top["final"] {
            lines.append("final:")
            if case .array(let queue)? = final["queue"] {
                for case .object(let write) in queue {
                    let ref = write["ref"].flatMap { if case .string(let s) = $0 { s } else { nil } } ?? "?"
                    let state = write["state"].flatMap { if case .string(let s) = $0 { s } else { nil } } ?? "?"
                    var line = "  \(ref): \(state)"
                    if case .string(let reason)? = write["reason"] { line += " (\(reason))" }
                    if case .int(let refusals)? = write["refusals"], refusals > 0 { line += ", \(refusals) refusal(s)" }
                    if write["waiting"] == .bool(true) { line += ", waiting" }
                    lines.append(line)
                }
            }
            if let status = final["status"] { lines.append("  status: \(JSONText.render(status))") }
            if let instance = final["instance"] { lines.append("  instance: \(JSONText.render(instance))") }
            if let verify = final["verify"] { lines.append("  verify: \(JSONText.render(verify))") }
        }
        if case .array(let failures)? = top["failures"] {
            lines.append(failures.isEmpty ? "every expectation held" : "\(failures.count) expectation(s) failed")
        }
        return lines.joined(separator: "\n")
    }

    /// One line for a sync report.
    static func summary(_ report: JSONValue) -> String {
        guard case .object(let r) = report else { return JSONText.render(report) }
        func n(_ key: String) -> String { r[key].map(JSONText.render) ?? "0" }
        var text =
            "synced \(n("syncedCount")) (already on server \(n("alreadyOnServerCount"))), rejected \(n("rejectedCount")), "
            + "blocked \(n("blockedCount")), held \(n("heldCount")), held behind other tables \(n("heldBehindOtherTablesCount")), "
            + "remaining \(n("remainingCount"))"
        if n("heldBehindDeadOrBlockedCount") != "0" {
            text += ", held behind dead or blocked \(n("heldBehindDeadOrBlockedCount"))"
        }
        if let stopped = r["stoppedBy"], stopped != .null { text += "; stopped by \(JSONText.render(stopped))" }
        if let after = r["retryAfter"], after != .null { text += ", retry after \(JSONText.render(after)) s" }
        if case .array(let verdicts)? = r["verdicts"], !verdicts.isEmpty {
            let parts = verdicts.compactMap { verdict -> String? in
                guard case .object(let v) = verdict, case .string(let ref)? = v["ref"], case .string(let kind)? = v["verdict"]
                else { return nil }
                return "\(ref) \(kind)" + (v["replayed"] == .bool(true) ? " (replayed)" : "")
            }
            text += "; " + parts.joined(separator: ", ")
        }
        return text
    }
}
