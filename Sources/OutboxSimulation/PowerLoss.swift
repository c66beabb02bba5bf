internal import Foundation
internal import Outbox
internal import OutboxLMDB

/// The simulation's storage model of a power loss (TESTING.md §1, §2; SPEC R2.3).
///
/// SIGKILL and a closed client lose nothing LMDB committed, because the OS still writes its cache out.
/// A power loss can: LMDB flushes a commit's data pages, then writes the meta page that makes them
/// the file's state, and a commit made with `MDB_NOMETASYNC` (a pass's events) does not wait for that
/// meta page to reach the disk. The next commit's data flush carries it, so at most the last commit is
/// undone, and only when it was such a commit. LMDB keeps the pages of the two newest commits
/// untouched, so the older meta page still describes a whole tree.
///
/// `undoLastCommit` makes the file what the disk would hold after the worst such power loss: the newer
/// of the two meta pages takes the older one's content, so LMDB opens the previous commit.
enum PowerLoss {
    struct Unexpected: Error, CustomStringConvertible {
        let description: String
    }

    /// LMDB 0.9's meta page: a 16-byte page header, then `MDB_meta`; the magic at its start, the free
    /// database's `md_pad` (the page size) at 24, and the transaction id at 128.
    private static let metaOffset = 16
    private static let metaLength = 136
    private static let magic: UInt32 = 0xBEEF_C0DE

    /// Takes back the newest commit of the closed LMDB file at `path`.
    static func undoLastCommit(file path: String) throws {
        guard let handle = FileHandle(forUpdatingAtPath: path) else { throw Unexpected(description: "cannot open \(path)") }
        defer { try? handle.close() }
        let first = try page(handle, at: 0, length: 4096)
        guard read32(first, metaOffset) == magic else {
            throw Unexpected(description: "\(path): page 0 is not an LMDB meta page")
        }
        let pageSize = Int(read32(first, metaOffset + 24))
        guard pageSize >= 512, pageSize <= 65536 else { throw Unexpected(description: "\(path): page size \(pageSize)") }
        let second = try page(handle, at: UInt64(pageSize), length: metaOffset + metaLength)
        guard read32(second, metaOffset) == magic else {
            throw Unexpected(description: "\(path): page 1 is not an LMDB meta page")
        }
        let ids = (read64(first, metaOffset + 128), read64(second, metaOffset + 128))
        guard ids.0 != ids.1 else { throw Unexpected(description: "\(path): both meta pages name commit \(ids.0)") }
        let (newer, older) = ids.0 > ids.1 ? (UInt64(0), second) : (UInt64(pageSize), first)
        try handle.seek(toOffset: newer + UInt64(metaOffset))
        try handle.write(contentsOf: older[metaOffset..<(metaOffset + metaLength)])
    }

    /// A journaled log's power loss: the journal's bytes from `start` to `end`, written and not
    /// flushed, never reached the disk (zeros, as the file was made). LMDB's data file is left as it
    /// is: the next open puts it back to the journal's head unless the head says LMDB is whole after it.
    static func loseJournal(folder: String, from start: Int, to end: Int) throws {
        guard let handle = FileHandle(forUpdatingAtPath: folder + "/journal") else {
            throw Unexpected(description: "cannot open \(folder)/journal")
        }
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64(start))
        try handle.write(contentsOf: Data(count: end - start))
    }

    private static func page(_ handle: FileHandle, at offset: UInt64, length: Int) throws -> [UInt8] {
        try handle.seek(toOffset: offset)
        let bytes = [UInt8](try handle.read(upToCount: length) ?? Data())
        guard bytes.count == length else { throw Unexpected(description: "the file ends inside its meta pages") }
        return bytes
    }

    private static func read32(_ bytes: [UInt8], _ at: Int) -> UInt32 {
        (0..<4).reduce(0) { $0 | UInt32(bytes[at + $1]) << (8 * $1) }
    }

    private static func read64(_ bytes: [UInt8], _ at: Int) -> UInt64 {
        (0..<8).reduce(0) { $0 | UInt64(bytes[at + $1]) << (8 * $1) }
    }
}
