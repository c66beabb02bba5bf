public import Foundation
internal import OutboxLMDB

/// An error of the outbox: what happened, to which file or write, and what to do. Never a server's
/// text or a token.
///
/// Compare with the static values (`error == .notFound`), or switch on `code`.
public struct OutboxError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of error; new kinds may be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        enum Kind: String, CaseIterable, Hashable, Sendable {
            case invalidWrite, noUser, notFound, closed, storage, damaged, alreadyOpen, networkDisabled
            case rowReadFailed, noTransport, doesNotExist, archived, compacted, busy, needsRecovery
        }
        let kind: Kind
        /// The write is not valid; nothing was written.
        public static let invalidWrite = Code(kind: .invalidWrite)
        /// A write was enqueued with no signed-in user.
        public static let noUser = Code(kind: .noUser)
        /// The queue does not hold that write.
        public static let notFound = Code(kind: .notFound)
        /// The client was closed.
        public static let closed = Code(kind: .closed)
        /// LMDB failed (disk full, I/O error, permissions).
        public static let storage = Code(kind: .storage)
        /// The log is damaged, foreign, or of a newer format.
        public static let damaged = Code(kind: .damaged)
        /// The log is already open in this process.
        public static let alreadyOpen = Code(kind: .alreadyOpen)
        /// The network switch is off.
        public static let networkDisabled = Code(kind: .networkDisabled)
        /// Reading the row from the instance failed (withdraw); nothing changed.
        public static let rowReadFailed = Code(kind: .rowReadFailed)
        /// The call needs a transport and the client has none.
        public static let noTransport = Code(kind: .noTransport)
        /// No log at that path (read-only tools never create one).
        public static let doesNotExist = Code(kind: .doesNotExist)
        /// What was asked for was moved into an archive segment that is not present (deleted, or
        /// shipped elsewhere).
        public static let archived = Code(kind: .archived)
        /// The change feed was asked to resume before the log's compaction: it resumes from its
        /// snapshot on.
        public static let compacted = Code(kind: .compacted)
        /// A pass of this process or another held the log's sync lock for longer than `syncLockWait`.
        public static let busy = Code(kind: .busy)
        /// The log's last commits are in its journal and not yet in its data file (its writer was
        /// killed, or the power failed): a read-only open does not recover them; an open for
        /// writing does.
        public static let needsRecovery = Code(kind: .needsRecovery)
        public var description: String { kind.rawValue }
    }

    /// What kind of error it is: compare it, `error.code == .notFound`.
    public let code: Code
    /// What happened, for a person.
    public let message: String
    /// The write concerned, if one is.
    public let writeID: WriteID?
    /// The log sequence number of a damaged record, if that is the problem.
    public let sequence: UInt64?
    /// The error underneath, when another one caused this: LMDB's (`LMDBError`, in LMDB's words), the
    /// file system's, a transport's. For the app's own diagnostics: it is not part of `message`, and
    /// a transport's error may carry what its server said.
    public let cause: (any Error)?
    /// Where in the library the error was made (file and line), for a report of a bug.
    public let location: SourceLocation

    /// A place in the library's source.
    public struct SourceLocation: Hashable, Sendable, CustomStringConvertible {
        /// The file, as `#fileID` names it (`Outbox/Client/Syncing.swift`).
        public let file: String
        /// The line in that file.
        public let line: Int
        public var description: String { "\(file):\(line)" }
    }

    init(
        _ code: Code, _ message: String, writeID: WriteID? = nil, sequence: UInt64? = nil, cause: (any Error)? = nil,
        file: String = #fileID, line: Int = #line
    ) {
        self.code = code
        self.message = message
        self.writeID = writeID
        self.sequence = sequence
        self.cause = cause
        self.location = SourceLocation(file: file, line: line)
    }

    public var description: String { message }

    /// Errors are equal when their codes are: `error == .notFound`.
    public static func == (a: OutboxError, b: OutboxError) -> Bool { a.code == b.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// An error of code `notFound`, to compare with: `#expect(throws: OutboxError.notFound)`.
    public static let notFound = OutboxError(.notFound, "not found")
    /// An error of code `invalidWrite`, to compare with.
    public static let invalidWrite = OutboxError(.invalidWrite, "invalid write")
    /// An error of code `noUser`, to compare with.
    public static let noUser = OutboxError(.noUser, "no user")
    /// An error of code `closed`, to compare with.
    public static let closed = OutboxError(.closed, "closed")
    /// An error of code `damaged`, to compare with.
    public static let damaged = OutboxError(.damaged, "damaged")
    /// An error of code `networkDisabled`, to compare with.
    public static let networkDisabled = OutboxError(.networkDisabled, "network disabled")
    /// An error of code `rowReadFailed`, to compare with.
    public static let rowReadFailed = OutboxError(.rowReadFailed, "row read failed")
    /// An error of code `storage`, to compare with.
    public static let storage = OutboxError(.storage, "storage failed")
    /// An error of code `alreadyOpen`, to compare with.
    public static let alreadyOpen = OutboxError(.alreadyOpen, "already open")
    /// An error of code `noTransport`, to compare with.
    public static let noTransport = OutboxError(.noTransport, "no transport")
    /// An error of code `archived`, to compare with.
    public static let archived = OutboxError(.archived, "archived")
    /// An error of code `compacted`, to compare with.
    public static let compacted = OutboxError(.compacted, "compacted")
    /// An error of code `busy`, to compare with.
    public static let busy = OutboxError(.busy, "busy")
    /// An error of code `needsRecovery`, to compare with.
    public static let needsRecovery = OutboxError(.needsRecovery, "needs recovery")
    /// An error of code `doesNotExist`, to compare with.
    public static let doesNotExist = OutboxError(.doesNotExist, "does not exist")

    static func invalid(_ reason: String, cause: (any Error)? = nil, file: String = #fileID, line: Int = #line) -> OutboxError {
        OutboxError(.invalidWrite, "invalid write: \(reason); nothing was written", cause: cause, file: file, line: line)
    }

    static func notFound(_ id: WriteID) -> OutboxError {
        OutboxError(.notFound, "write \(id) is not in the queue", writeID: id)
    }

    static func damagedRecord(
        path: String, sequence: UInt64, reason: String, cause: (any Error)? = nil, file: String = #fileID, line: Int = #line
    ) -> OutboxError {
        OutboxError(
            .damaged, "\(path): the record at sequence \(sequence) is damaged (\(reason))", sequence: sequence, cause: cause,
            file: file, line: line)
    }

    static func damaged(
        path: String, _ reason: String, sequence: UInt64? = nil, cause: (any Error)? = nil, file: String = #fileID,
        line: Int = #line
    ) -> OutboxError {
        OutboxError(.damaged, "\(path): \(reason)", sequence: sequence, cause: cause, file: file, line: line)
    }

    /// An LMDB error in the outbox's words (it names the file); the LMDB error is its cause.
    static func storage(_ error: LMDBError, file: String = #fileID, line: Int = #line) -> OutboxError {
        let path = error.path
        let (code, message): (Code, String)
        if error.isAlreadyOpen {
            (code, message) = (
                .alreadyOpen, "\(path): already open in this process; share the one open client instead of opening it again"
            )
        } else if error.isClosed {
            (code, message) = (.closed, "the outbox client is closed")
        } else if error.isDoesNotExist {
            (code, message) = (.doesNotExist, "\(path): no log here (nothing is created by a read-only open)")
        } else if error.isMissingDatabase {
            (code, message) = (.damaged, "\(path): not an outbox log (\(error.reason)), or its layout is damaged")
        } else if error.isEmptyFile {
            (code, message) = (
                .damaged,
                "\(path): not an outbox log: \(error.reason) (a creation that did not complete; an app's open creates the log)"
            )
        } else if error.isNotARegularFile {
            (code, message) = (.damaged, "\(path): not an outbox log: \(error.reason)")
        } else if error.isNotALog {
            (code, message) = (.damaged, "\(path): \(error.reason); the file is damaged or not a log")
        } else if error.isDamagedPages {
            (code, message) = (.damaged, "\(path): \(error.reason); restore the log from a copy")
        } else if error.isDamage {
            (code, message) = (.damaged, error.description)
        } else {
            (code, message) = (.storage, error.description)
        }
        return OutboxError(code, message, cause: error, file: file, line: line)
    }
}

/// Runs `body`, turning LMDB's errors into `OutboxError`, and projection bytes that no longer decode
/// into `.damaged` naming the file at `path`.
func storageErrors<R>(path: String, _ body: () throws -> R) throws -> R {
    do {
        return try body()
    } catch {
        throw storageError(error, path: path)
    }
}

/// `error` as `storageErrors` throws it: LMDB's errors as `OutboxError`, projection bytes that no
/// longer decode as `.damaged` naming the file; anything else as it is.
func storageError(_ error: any Error, path: String) -> any Error {
    switch error {
    case let error as LMDBError: return OutboxError.storage(error)
    case let failure as DecodeFailure:
        // Projection bytes that no longer read (the log's own records name their sequence already).
        return OutboxError.damaged(
            path: path, "\(failure.reason); the log itself may be sound: its projections can be rebuilt from it", cause: failure)
    default: return error
    }
}

/// `localizedDescription` says what happened, in the outbox's own words (never "error 1").
extension OutboxError: LocalizedError {
    public var errorDescription: String? { message }
}
