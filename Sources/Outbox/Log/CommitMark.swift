internal import Foundation
internal import Synchronization

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// The last flushed commit of a log, kept beside it in a small file of its own (`last-commit` in the
/// log's folder, or `<file>-last-commit` beside a single-file log), where damage to LMDB's meta pages
/// cannot reach.
///
/// LMDB 0.9 keeps two meta pages and opens the newer; a flipped bit in the newer one can make LMDB
/// open the older, silently undoing the last commit, after which the next enqueue would reuse an id
/// the instance already knows. The mark catches it: after every commit flushed with the full sync
/// (`.standard` on a `.full` log), the log's last sequence is written here (not flushed itself, so it
/// can only lag behind the log, never lead it); on open, a log that ends before its mark is refused.
/// A pass's commits (`MDB_NOMETASYNC`, which a power loss may legitimately undo) and logs opened
/// `.noSync` do not move it. A mark of another log (another origin), or one that does not read, is
/// ignored (and, when the log is opened for writing, replaced).
///
/// Layout (36 bytes): "OBXM"; version 1 and three zero bytes; the log's origin, high and low (8 + 8,
/// big-endian); the sequence (8, big-endian); a CRC32C of the 32 bytes before it (4, little-endian).
final class CommitMark: Sendable {
    /// Where the mark of the environment at `environmentPath` lives (decided by what the environment
    /// is, not by what is on disk now).
    static func path(forEnvironment environmentPath: String, isFolder: Bool) -> String {
        isFolder ? environmentPath + "/last-commit" : environmentPath + "-last-commit"
    }

    struct Mark: Equatable {
        var origin: Origin
        var sequence: UInt64
    }

    static let magic = Array("OBXM".utf8)

    static func encode(_ mark: Mark) -> [UInt8] {
        var writer = ByteWriter(capacity: 40)
        writer.raw(magic)
        writer.raw([1, 0, 0, 0])
        writer.raw(withUnsafeBytes(of: mark.origin.high.bigEndian) { Array($0) })
        writer.raw(withUnsafeBytes(of: mark.origin.low.bigEndian) { Array($0) })
        writer.raw(withUnsafeBytes(of: mark.sequence.bigEndian) { Array($0) })
        writer.littleEndian32(CRC32C.checksum(writer.bytes))
        return writer.bytes
    }

    static func decode(_ bytes: [UInt8]) -> Mark? {
        guard bytes.count == 36, Array(bytes[0..<4]) == magic, bytes[4] == 1,
            CRC32C.checksum(bytes[0..<32])
                == (0..<4).reduce(UInt32(0), { $0 | UInt32(bytes[32 + $1]) << (8 * $1) })
        else { return nil }
        func word(_ at: Int) -> UInt64 { bytes[at..<(at + 8)].reduce(0) { $0 << 8 | UInt64($1) } }
        return Mark(origin: Origin(high: word(8), low: word(16)), sequence: word(24))
    }

    /// The mark at `path`, if there is one that reads.
    static func read(at path: String) -> Mark? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return decode([UInt8](data))
    }

    let path: String
    private let origin: Origin
    /// The open file (-1 once closed).
    private let descriptor: Mutex<Int32>

    /// Opens (creating, 0600) the mark of a log opened for writing; nil when it cannot be opened, which
    /// only loses the check, never a write.
    init?(path: String, origin: Origin) {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return nil }
        self.path = path
        self.origin = origin
        descriptor = Mutex(fd)
    }

    deinit { close() }

    /// Records that the log's commits through `sequence` are flushed.
    func advance(to sequence: UInt64) {
        let bytes = Self.encode(Mark(origin: origin, sequence: sequence))
        descriptor.withLock { fd in
            guard fd >= 0 else { return }
            _ = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        }
    }

    func close() {
        descriptor.withLock { fd in
            if fd >= 0 { closeDescriptor(fd) }
            fd = -1
        }
    }
}

/// `close(2)`, out of reach of the method of that name.
private func closeDescriptor(_ fd: Int32) { _ = close(fd) }
