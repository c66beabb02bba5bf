internal import Foundation

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// The log's sync lock (R5.7): at most one pass sends from a log at a time, across processes. It is a
/// `flock` on a small file beside the log (`sync-lock` in the log's folder, or `<file>-sync-lock`
/// beside a single-file log), which the operating system releases when its holder dies, so a killed
/// process never leaves it held. The holder writes who it is into the file (process id and name), so
/// the one that finds it held can say by whom.
///
/// `flock` locks belong to the open file, not to the process: two clients of one log in one process
/// exclude each other as two processes do. A pass holds the lock only while it plans, sends and
/// records; nothing holds it between passes.
package final class SyncLock: Sendable {
    /// Who holds a lock, as its holder wrote it: its process id and name.
    package struct Holder: Hashable, Sendable, CustomStringConvertible {
        package let processId: Int32
        package let name: String
        package var description: String { "process \(processId) (\(name))" }
    }

    private let descriptor: Int32

    private init(descriptor: Int32) { self.descriptor = descriptor }

    deinit {
        _ = ftruncate(descriptor, 0)
        _ = flock(descriptor, LOCK_UN)
        close(descriptor)
    }

    /// Where the lock of the log at `logPath` lives.
    package static func path(forLog logPath: String) -> String {
        var isFolder: ObjCBool = false
        let exists = FileManager.default.fileExists(atPath: logPath, isDirectory: &isFolder)
        return exists && !isFolder.boolValue ? logPath + "-sync-lock" : logPath + "/sync-lock"
    }

    /// What trying the lock found.
    package enum Attempt: Sendable {
        case acquired(SyncLock)
        /// Another pass holds it; its holder, when it said.
        case held(Holder?)
    }

    /// Takes the lock of the log at `logPath` if no one holds it, without waiting. Throws only when the
    /// lock file cannot be opened (a folder that cannot be written).
    package static func attempt(logPath: String) throws(OutboxError) -> Attempt {
        let path = path(forLog: logPath)
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw OutboxError(.storage, "the sync lock \(path) cannot be opened: \(String(cString: strerror(errno)))")
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let holder = readHolder(descriptor)
            close(descriptor)
            return .held(holder)
        }
        let me = "\(getpid()) \(ProcessInfo.processInfo.processName)\n"
        _ = ftruncate(descriptor, 0)
        _ = me.withCString { pwrite(descriptor, $0, strlen($0), 0) }
        return .acquired(SyncLock(descriptor: descriptor))
    }

    /// Who holds the lock of the log at `logPath` now, if anyone says so.
    package static func holder(logPath: String) -> Holder? {
        let descriptor = open(path(forLog: logPath), O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        return readHolder(descriptor)
    }

    private static func readHolder(_ descriptor: Int32) -> Holder? {
        var bytes = [UInt8](repeating: 0, count: 256)
        let count = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, 256, 0) }
        guard count > 0 else { return nil }
        let text = String(decoding: bytes.prefix(count), as: UTF8.self)
        let parts = text.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, let id = Int32(parts[0]) else { return nil }
        let name = parts[1].prefix { $0 != "\n" }.unicodeScalars.filter { $0.properties.generalCategory != .control }
        return Holder(processId: id, name: String(String.UnicodeScalarView(name.prefix(64))))
    }
}
