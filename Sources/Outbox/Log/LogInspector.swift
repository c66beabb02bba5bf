internal import Foundation
internal import OutboxLMDB

/// Read-only access to a log file, for the tools (R8.6): opens without creating anything and never
/// writes to the data file.
package final class LogInspector: Sendable {
    package let log: EventLog
    /// The folder of the copy recovered and read in the log's stead (`recovering`), removed with the
    /// inspector; nil when the log itself is read.
    package let recoveredCopy: String?

    /// Opens the log at `path` read-only. A missing log throws `.doesNotExist`; a foreign or damaged one
    /// `.damaged`; one its writer did not close, whose last commits only an open for writing can
    /// recover, `.needsRecovery` (`recovering` reads a recovered copy of it).
    package convenience init(path: String, archive: String? = nil) throws {
        var options = EventLog.Options()
        options.readOnly = true
        options.archiveFolder = archive
        self.init(log: try EventLog(path: path, options: options), recoveredCopy: nil)
    }

    private init(log: EventLog, recoveredCopy: String?) {
        self.log = log
        self.recoveredCopy = recoveredCopy
    }

    deinit {
        guard let recoveredCopy else { return }
        log.close()
        try? FileManager.default.removeItem(atPath: recoveredCopy)
    }

    /// Opens the log at `path` read-only, as `init` does; a log its writer did not close (it was
    /// killed or lost power: `.needsRecovery`) is copied, with its journal and commit mark, into a
    /// new folder under `scratch`, recovered there by an open for writing, and the copy read
    /// (`recoveredCopy`): the log itself is never written to. Its archive is read where it is.
    /// `copying` is told the data file's size in bytes before the copy begins.
    package static func recovering(
        path: String, archive: String? = nil, scratch: String = NSTemporaryDirectory(), copying: (Int) -> Void = { _ in }
    ) throws -> LogInspector {
        do {
            return try LogInspector(path: path, archive: archive)
        } catch let error as OutboxError where error.code == .needsRecovery {
            let location = try storageErrors(path: path) { try Environment.locate(path, create: false) }
            let size = (try? FileManager.default.attributesOfItem(atPath: location.dataFile)[.size] as? Int) ?? 0
            copying(size)
            let archiveFolder = archive ?? Archive.beside(log: path).folder
            let files = filesToRecover(location)
            let copy = try copyForRecovery(files, into: scratch, path: path)
            do {
                var options = EventLog.Options()
                options.archiveFolder = archiveFolder
                try EventLog(path: copy, options: options).close()
                options.readOnly = true
                return LogInspector(log: try EventLog(path: copy, options: options), recoveredCopy: copy)
            } catch {
                try? FileManager.default.removeItem(atPath: copy)
                guard let error = error as? OutboxError else { throw error }
                // What went wrong with the copy is told of the log.
                let message = (files + [(path, "")]).reduce(error.message) { message, file in
                    message.replacingOccurrences(of: file.name.isEmpty ? copy : copy + "/" + file.name, with: file.original)
                }
                throw OutboxError(error.code, message, writeID: error.writeID, sequence: error.sequence, cause: error)
            }
        }
    }

    /// The files of the log at `location` a recovery reads, each with its name in a log's folder.
    private static func filesToRecover(_ location: (path: String, isFolder: Bool, dataFile: String)) -> [(
        original: String, name: String
    )] {
        [
            (location.dataFile, "data.mdb"),
            (CommitJournal.path(forEnvironment: location.path, isFolder: location.isFolder), "journal"),
            (CommitMark.path(forEnvironment: location.path, isFolder: location.isFolder), "last-commit"),
        ]
    }

    /// A new folder (0700) under `scratch` holding `files` (those present) under their names.
    private static func copyForRecovery(
        _ files: [(original: String, name: String)], into scratch: String, path: String
    ) throws -> String {
        let copy = scratch.hasSuffix("/") ? scratch : scratch + "/"
        let folder = copy + "outbox-recovered-" + UUID().uuidString
        do {
            try FileManager.default.createDirectory(
                atPath: folder, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            for (file, name) in files where FileManager.default.fileExists(atPath: file) {
                try FileManager.default.copyItem(atPath: file, toPath: folder + "/" + name)
            }
        } catch {
            try? FileManager.default.removeItem(atPath: folder)
            throw OutboxError(
                .storage, "\(path): its writer did not close it, and a copy to recover it in could not be made in \(scratch)",
                cause: error)
        }
        return folder
    }

    /// Every write the queue holds, in id order; only `user`'s when given.
    package func all(user: String?) throws -> [QueuedWrite] {
        try log.read { try QueuedWrite.all(user: user, reader: $0) }
    }

    package func history(of id: WriteID) throws -> [RecordedEvent] { try log.history(of: id) }

    /// What holds write `id` now (any user's), as `queue.explain(_:)` says it; nil when the queue does
    /// not hold it.
    package func explain(_ id: WriteID, now: Timestamp) throws -> WriteExplanation? {
        try log.read { try Explainer.explain(id, reader: $0, context: Explainer.Context(now: now)) }
    }

    package func forEachEvent(from: UInt64, to: UInt64, _ body: (RecordedEvent) throws -> Bool) throws {
        try log.forEachEvent(from: from, to: to, body)
    }

    package func verify(progress: ((UInt64) -> Void)? = nil) throws -> VerifyReport { try log.verify(progress: progress) }

    package func state(asOf sequence: UInt64) throws -> QueueSnapshot { try log.state(asOf: sequence) }

    package func withState<R>(
        asOf sequence: UInt64, progress: ((UInt64) -> Void)? = nil, _ body: (PastState) throws -> R
    ) throws -> R {
        try log.withState(asOf: sequence, progress: progress, body)
    }

    /// Calls `body` with each write the queue holds, in id order; only `user`'s when given.
    package func forEachWrite(user: String?, _ body: (QueuedWrite) throws -> Void) throws {
        try log.read { reader in
            try QueuedWrite.forEach(user: user, reader: reader) { write in
                try body(write)
                return true
            }
        }
    }

    package func lastSequence() throws -> UInt64 { try log.lastSequence() }
}

extension LogInspector {
    /// Every stored record of an open client's log (the damaged-log harness).
    package static func records(of client: OutboxClient) throws -> [(sequence: UInt64, bytes: [UInt8])] {
        try client.log.storedRecords()
    }

    /// Runs `body` inside a read transaction (the reader-slot harness: a reader killed there).
    package func holdingARead(_ body: () -> Void) throws { try log.read { _ in body() } }

    package func checkDecisions() throws -> DecisionReport { try log.checkDecisions() }
}
