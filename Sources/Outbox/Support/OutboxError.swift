public import Foundation
internal import OutboxLMDB

/// An error of the outbox: what happened, to which file or write, and what to do. Never a server's
/// text or a token (R3.4, R8.7).
///
/// Compare with the static values (`error == .notFound`), or switch on `code`.
public struct OutboxError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of error; new kinds may be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        enum Kind: String, CaseIterable, Hashable, Sendable {
            case invalidWrite, noUser, notFound, closed, storage, damaged, alreadyOpen, networkDisabled
            case rowReadFailed, noTransport, doesNotExist
        }
        let kind: Kind
        /// The write is not valid (R2.4); nothing was written.
        public static let invalidWrite = Code(kind: .invalidWrite)
        /// A write was enqueued with no signed-in user (R2.4).
        public static let noUser = Code(kind: .noUser)
        /// The queue does not hold that write.
        public static let notFound = Code(kind: .notFound)
        /// The client was closed.
        public static let closed = Code(kind: .closed)
        /// LMDB failed (disk full, I/O error, permissions).
        public static let storage = Code(kind: .storage)
        /// The log is damaged, foreign, or of a newer format (R8.6).
        public static let damaged = Code(kind: .damaged)
        /// The log is already open in this process.
        public static let alreadyOpen = Code(kind: .alreadyOpen)
        /// The network switch is off (R5.5).
        public static let networkDisabled = Code(kind: .networkDisabled)
        /// Reading the row from the instance failed (withdraw, R6.4); nothing changed.
        public static let rowReadFailed = Code(kind: .rowReadFailed)
        /// The call needs a transport and the client has none.
        public static let noTransport = Code(kind: .noTransport)
        /// No log at that path (read-only tools never create one, R8.8).
        public static let doesNotExist = Code(kind: .doesNotExist)
        public var description: String { kind.rawValue }
    }

    public let code: Code
    /// What happened, for a person.
    public let message: String
    /// The write concerned, if one is.
    public let writeID: WriteID?
    /// The log sequence number of a damaged record, if that is the problem.
    public let sequence: UInt64?

    init(_ code: Code, _ message: String, writeID: WriteID? = nil, sequence: UInt64? = nil) {
        self.code = code
        self.message = message
        self.writeID = writeID
        self.sequence = sequence
    }

    public var description: String { message }

    /// Errors are equal when their codes are: `error == .notFound`.
    public static func == (a: OutboxError, b: OutboxError) -> Bool { a.code == b.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    public static let notFound = OutboxError(.notFound, "not found")
    public static let invalidWrite = OutboxError(.invalidWrite, "invalid write")
    public static let noUser = OutboxError(.noUser, "no user")
    public static let closed = OutboxError(.closed, "closed")
    public static let damaged = OutboxError(.damaged, "damaged")
    public static let networkDisabled = OutboxError(.networkDisabled, "network disabled")
    public static let rowReadFailed = OutboxError(.rowReadFailed, "row read failed")
    public static let storage = OutboxError(.storage, "storage failed")
    public static let alreadyOpen = OutboxError(.alreadyOpen, "already open")
    public static let noTransport = OutboxError(.noTransport, "no transport")
    public static let doesNotExist = OutboxError(.doesNotExist, "does not exist")

    static func invalid(_ reason: String) -> OutboxError {
        OutboxError(.invalidWrite, "invalid write: \(reason); nothing was written")
    }

    static func notFound(_ id: WriteID) -> OutboxError {
        OutboxError(.notFound, "write \(id) is not in the queue", writeID: id)
    }

    static func damagedRecord(path: String, sequence: UInt64, reason: String) -> OutboxError {
        OutboxError(.damaged, "\(path): the record at sequence \(sequence) is damaged (\(reason))", sequence: sequence)
    }

    static func damaged(path: String, _ reason: String, sequence: UInt64? = nil) -> OutboxError {
        OutboxError(.damaged, "\(path): \(reason)", sequence: sequence)
    }

    /// Wraps an LMDB error, keeping its message (which names the file).
    static func storage(_ error: LMDBError) -> OutboxError {
        if error.isAlreadyOpen { return OutboxError(.alreadyOpen, error.description) }
        if error.isClosed { return OutboxError(.closed, "the outbox client is closed") }
        if error.isDoesNotExist { return OutboxError(.doesNotExist, error.description) }
        if error.isDamage || error.isMissingDatabase || error.isEmptyFile || error.isNotALog {
            return OutboxError(.damaged, error.description)
        }
        return OutboxError(.storage, error.description)
    }
}

/// Runs `body`, turning LMDB's errors into `OutboxError`, and projection bytes that no longer decode
/// into `.damaged` naming the file at `path`.
func storageErrors<R>(path: String, _ body: () throws -> R) throws -> R {
    do {
        return try body()
    } catch let error as LMDBError {
        throw OutboxError.storage(error)
    } catch let failure as DecodeFailure {
        // Projection bytes that no longer read (the log's own records name their sequence already).
        throw OutboxError.damaged(
            path: path, "\(failure.reason); the log itself may be sound: its projections can be rebuilt from it")
    }
}

/// `localizedDescription` says what happened, in the outbox's own words (never "error 1").
extension OutboxError: LocalizedError {
    public var errorDescription: String? { message }
}
