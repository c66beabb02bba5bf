internal import COutboxLMDB

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// An error of the LMDB layer: what failed, on which file, and what to do.
///
/// `code` wraps a private enum so cases can be added without breaking clients (swift-nio, swift-system).
/// `MDB_NOTFOUND` is never an error here: lookups return `nil`.
public struct LMDBError: Error, Hashable, Sendable, CustomStringConvertible {
    enum Kind: Hashable, Sendable {
        /// A C error code returned by an `mdb_*` call, with the call's name.
        case lmdb(Int32, call: String)
        /// The path is already open in this process (LMDB forbids two environments on one file per process).
        case alreadyOpen
        /// A database the layout needs is not in the file: not a log of ours, or damaged.
        case missingDatabase(String)
        /// A file-system call failed with `errno`.
        case system(Int32, call: String)
        /// The path does not exist and the environment was opened read-only.
        case doesNotExist
        /// A key longer than LMDB accepts (511 bytes by default).
        case keyTooLong(Int)
        /// The environment was closed.
        case closed
        /// A read-only open found an empty data file (a creation that never wrote its first page).
        case emptyFile
        /// The data file is not a regular file (a device, a pipe, a socket).
        case notARegularFile(String)
        /// This user may not read the data file (or, for a write, write it or its lock file).
        case permissionDenied(file: String, access: String)
        /// A read-only open could not read the file's header as LMDB's (an `mdb_env_open` failure other
        /// than a missing or foreign file): a damaged header, or not an LMDB file.
        case unreadableHeader(Int32)
    }

    let kind: Kind
    /// The environment's path.
    public let path: String

    init(_ kind: Kind, path: String) {
        self.kind = kind
        self.path = path
    }

    /// The LMDB or errno code behind this error, if there is one.
    public var code: Int32? {
        switch kind {
        case .lmdb(let code, _), .system(let code, _): return code
        default: return nil
        }
    }

    /// `MDB_MAP_FULL`: the map is too small for this transaction. The environment grows the map and
    /// retries by itself; callers only see it when growth itself failed.
    public var isMapFull: Bool { code == MDB_MAP_FULL && { if case .lmdb = kind { return true } else { return false } }() }
    /// The path is already open in this process.
    public var isAlreadyOpen: Bool { kind == .alreadyOpen }
    /// The file is missing one of the databases a log has (foreign or damaged file).
    public var isMissingDatabase: Bool { if case .missingDatabase = kind { return true } else { return false } }
    /// The log does not exist (read-only open of a missing path).
    public var isDoesNotExist: Bool { kind == .doesNotExist }
    /// The environment was closed.
    public var isClosed: Bool { kind == .closed }
    /// A read-only open found an empty data file: not a log (yet).
    public var isEmptyFile: Bool { kind == .emptyFile }
    /// The data file is not a regular file, or cannot be read as LMDB's: not a log.
    public var isNotALog: Bool {
        switch kind {
        case .notARegularFile, .unreadableHeader: return true
        default: return false
        }
    }
    /// The data file is a device, a pipe or a socket.
    public var isNotARegularFile: Bool { if case .notARegularFile = kind { return true } else { return false } }
    /// LMDB found a damaged page (`MDB_CORRUPTED`, `MDB_PAGE_NOTFOUND`), not a foreign or newer file.
    public var isDamagedPages: Bool {
        guard case .lmdb(let code, _) = kind else { return false }
        return code == MDB_CORRUPTED || code == MDB_PAGE_NOTFOUND
    }
    /// This user may not read (or write) the log's files.
    public var isPermissionDenied: Bool { if case .permissionDenied = kind { return true } else { return false } }
    /// LMDB found an invalid page or file header (`MDB_CORRUPTED`, `MDB_INVALID`, `MDB_PAGE_NOTFOUND`, `MDB_VERSION_MISMATCH`).
    public var isDamage: Bool {
        guard case .lmdb(let code, _) = kind else { return false }
        return code == MDB_CORRUPTED || code == MDB_INVALID || code == MDB_PAGE_NOTFOUND || code == MDB_VERSION_MISMATCH
    }

    /// What failed, in LMDB's words, without the path.
    public var reason: String {
        switch kind {
        case .lmdb(let code, let call):
            let text = String(cString: mdb_strerror(code))
            if code == MDB_INVALID || code == MDB_VERSION_MISMATCH {
                return "not an LMDB file of a version this build reads (\(call): \(text))"
            }
            if code == MDB_CORRUPTED || code == MDB_PAGE_NOTFOUND {
                return "the LMDB page structure is damaged (\(call): \(text))"
            }
            return "\(call) failed: \(text) (LMDB code \(code))"
        case .alreadyOpen:
            return "already open in this process (LMDB allows one environment a file in a process)"
        case .missingDatabase(let name):
            return "it has no '\(name)' database"
        case .system(let code, let call):
            return "\(call) failed: \(String(cString: strerror(code)))"
        case .doesNotExist:
            return "no LMDB environment here (a read-only open creates none)"
        case .keyTooLong(let length):
            return "a key of \(length) bytes is longer than LMDB accepts"
        case .closed:
            return "the environment is closed"
        case .emptyFile:
            return "the data file is empty"
        case .notARegularFile(let file):
            return "\(file) is not a regular file"
        case .permissionDenied(let file, let access):
            return "permission denied: this user may not \(access) \(file)"
        case .unreadableHeader(let code):
            return "not a readable LMDB file: its header does not read (mdb_env_open: \(String(cString: mdb_strerror(code))))"
        }
    }

    public var description: String { "\(path): \(reason)" }
}

@inline(__always)
func check(_ rc: Int32, _ call: @autoclosure () -> String, path: String) throws(LMDBError) {
    if rc != 0 { throw LMDBError(.lmdb(rc, call: call()), path: path) }
}
