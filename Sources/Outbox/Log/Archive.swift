internal import Foundation
internal import OutboxLMDB
internal import Synchronization

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// A log's archive: a folder of segment files, each an LMDB file of the log's format holding the
/// events of a range of sequences that a compaction moved out of the log (R8.5).
///
/// A segment's databases: `log` (sequence → record, as in the log, every sequence of its range),
/// `carried` (the records before its range that the log still held for the writes whose history
/// ends in it), `history` (write id, sequence → empty: every event of those writes, wherever it
/// lies) and `meta` (its number, range, the digest of the segment before it, and the log's origin).
/// `history(of:)` of a write it ends reads that one file. The log's `logCompacted` event lists every
/// segment with its digest, so a segment replaced, damaged or gone is named, never a silent gap.
package struct Archive: Sendable {
    /// The archive's folder.
    package let folder: String
    /// The segments read so far, kept open for the next read.
    private let opened = OpenedSegments()

    static let databaseNames = ["log", "carried", "history", "meta"]

    package init(folder: String) { self.folder = folder }

    /// Closes the segments it keeps open.
    func close() { opened.closeAll() }

    /// The archive beside the log at `logPath`: `archive` in a log's folder, or `<file>-archive`
    /// beside a single-file log.
    package static func beside(log logPath: String) -> Archive {
        var isFolder: ObjCBool = false
        let exists = FileManager.default.fileExists(atPath: logPath, isDirectory: &isFolder)
        return Archive(folder: exists && !isFolder.boolValue ? logPath + "-archive" : logPath + "/archive")
    }

    func path(of segment: ArchiveSegment) -> String { folder + "/" + segment.fileName }

    /// Whether the segment's file is in the folder.
    func holds(_ segment: ArchiveSegment) -> Bool { FileManager.default.fileExists(atPath: path(of: segment)) }

    /// The error for a segment that is not in the folder.
    func missing(_ segment: ArchiveSegment, what: String) -> OutboxError {
        OutboxError(
            .archived,
            "\(what) is in archive \(segment), which is not in \(folder): it was deleted or shipped elsewhere")
    }

    // MARK: - Writing

    /// What a compaction hands the new segment.
    struct Contents {
        var number: Int
        var previousDigest: [UInt8]
        var origin: [UInt8]
        /// The first and last sequence of its range.
        var first: UInt64
        var last: UInt64
        /// Calls its argument with each record of the range, in order, then returns.
        var records: ((UInt64, RawSpan) throws -> Void) throws -> Void
        /// Records before the range, for the writes that end here, in order.
        var carried: [(UInt64, [UInt8])]
        /// Calls its argument with each write whose history ends here, in id order, and the sequences
        /// of its every event, in order.
        var histories: ((WriteID, [UInt64]) throws -> Void) throws -> Void
        /// Bytes the segment's file may grow to: the log's data file is never smaller.
        var sizeHint: Int
    }

    /// Puts `contents` into a new segment's transaction; returns the segment's digest, and how many
    /// writes' histories it holds with the lowest and highest of them.
    private static func fill(_ access: WriteAccess, _ environment: Environment, with contents: Contents) throws -> (
        digest: [UInt8], writes: (count: Int, lowest: WriteID?, highest: WriteID?)
    ) {
        let log = environment.database("log")
        let carried = environment.database("carried")
        let history = environment.database("history")
        let meta = environment.database("meta")
        var hash = SHA256()
        hash.update(contents.previousDigest)
        var expected = contents.first
        try contents.records { sequence, bytes in
            guard sequence == expected else {
                throw OutboxError(.damaged, "sequence \(expected) is missing from the range being archived", sequence: expected)
            }
            expected += 1
            let key = StoreKey.bytes(id: sequence)
            let value = bytes.copiedBytes
            hash.update(key)
            hash.update(StoreKey.bytes(id: UInt64(value.count)))
            hash.update(value)
            _ = try access.put(log, key: key, value: value, options: .append)
        }
        guard expected == contents.last + 1 else {
            throw OutboxError(.damaged, "sequence \(expected) is missing from the range being archived", sequence: expected)
        }
        for (sequence, bytes) in contents.carried {
            _ = try access.put(carried, key: StoreKey.bytes(id: sequence), value: bytes, options: .append)
        }
        var writes: (count: Int, lowest: WriteID?, highest: WriteID?) = (0, nil, nil)
        try contents.histories { id, sequences in
            writes = (writes.count + 1, writes.lowest ?? id, id)
            for sequence in sequences {
                _ = try access.put(history, key: StoreKey.bytes(pair: id.rawValue, sequence), value: [], options: .append)
            }
        }
        let digest = hash.finish()
        var description = ByteWriter(capacity: 96)
        description.varint(contents.number)
        description.varint(contents.first)
        description.varint(contents.last)
        description.data(contents.previousDigest)
        description.data(digest)
        description.data(contents.origin)
        _ = try access.put(meta, key: Array("segment".utf8), value: description.bytes)
        return (digest, writes)
    }

    /// Writes a segment, flushed, under its final name, and returns its description. A segment of the
    /// same number left by a compaction that did not commit is replaced.
    func write(_ contents: Contents, crashPlan: CrashPlan?) throws -> ArchiveSegment {
        try FileManager.default.createDirectory(
            atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let final =
            folder + "/"
            + ArchiveSegment(
                number: contents.number, firstSequence: 0, lastSequence: 0, lowestWrite: nil, highestWrite: nil,
                writeCount: 0, digest: []
            ).fileName
        let partial = final + ".partial"
        for leftover in [partial, partial + "-lock"] { _ = unlink(leftover) }
        guard FileManager.default.createFile(atPath: partial, contents: nil, attributes: [.posixPermissions: 0o600]) else {
            throw OutboxError(.storage, "the archive segment \(partial) cannot be created")
        }
        var options = Environment.Options()
        // A segment is smaller than the log it comes from; a map that holds it from the start spares
        // the transaction the reruns that growing the map by doubling would cost.
        options.mapSize = max(64 << 20, contents.sizeHint)
        let environment = try storageErrors(path: partial) {
            try Environment(path: partial, databases: Self.databaseNames, options: options)
        }
        defer { environment.close() }
        var writes: (count: Int, lowest: WriteID?, highest: WriteID?) = (0, nil, nil)
        let digest = try storageErrors(path: partial) {
            try environment.write { txn in
                let (digest, written) = try Self.fill(txn.unsafeAccess, environment, with: contents)
                writes = written
                return digest
            }
        }
        crashPlan?.pass(.compactionSegmentWritten)
        environment.close()
        _ = unlink(partial + "-lock")
        _ = unlink(partial + "-holders-lock")
        guard rename(partial, final) == 0 else {
            throw OutboxError(.storage, "the archive segment \(partial) cannot be renamed: \(String(cString: strerror(errno)))")
        }
        try flushFolder(folder)
        return ArchiveSegment(
            number: contents.number, firstSequence: contents.first, lastSequence: contents.last, lowestWrite: writes.lowest,
            highestWrite: writes.highest, writeCount: writes.count, digest: digest)
    }

    // MARK: - Reading

    /// `segment`'s file, opened read-only, or kept open since an earlier read while it is the same file;
    /// throws `.archived` when it is not there.
    func open(_ segment: ArchiveSegment, what: String) throws -> Environment {
        let path = path(of: segment)
        var status = stat()
        guard stat(path, &status) == 0 else {
            opened.forget(path)
            throw missing(segment, what: what)
        }
        let file = OpenedSegments.File(device: UInt64(status.st_dev), inode: UInt64(status.st_ino), size: Int64(status.st_size))
        return try opened.environment(at: path, file: file) {
            var options = Environment.Options()
            options.readOnly = true
            return try storageErrors(path: path) {
                try Environment(path: path, databases: Self.databaseNames, options: options)
            }
        }
    }

    /// Runs `body` with a read transaction on `segment`'s file; throws `.archived` when it is not there.
    func read<R>(
        _ segment: ArchiveSegment, what: String, _ body: (SegmentReader) throws -> R
    ) throws -> R {
        let path = path(of: segment)
        let environment = try open(segment, what: what)
        return try storageErrors(path: path) {
            try environment.read { txn in
                try body(SegmentReader(access: txn.unsafeAccess, environment: environment, path: path, segment: segment))
            }
        }
    }
}

/// The segment files an archive has opened, kept open: reading the history of an archived write
/// then costs a lookup, not an open of its file. A file replaced, resized or removed since it was
/// opened is opened again or reported missing; the one it replaced is closed once its reads end.
final class OpenedSegments: Sendable {
    /// What tells one file from the next under the same name.
    struct File: Equatable {
        var device: UInt64
        var inode: UInt64
        var size: Int64
    }

    private let opened = Mutex<[String: (file: File, environment: Environment)]>([:])

    /// The environment open at `path` when it is still `file`, else the one `open` gives.
    func environment(at path: String, file: File, open: () throws -> Environment) throws -> Environment {
        try opened.withLock { opened in
            if let kept = opened[path] {
                if kept.file == file { return kept.environment }
                kept.environment.close()
                opened[path] = nil
            }
            let environment = try open()
            opened[path] = (file, environment)
            return environment
        }
    }

    /// Closes the file at `path`, when one is open: it is gone.
    func forget(_ path: String) {
        opened.withLock { opened in opened.removeValue(forKey: path)?.environment.close() }
    }

    func closeAll() {
        let environments = opened.withLock { opened in
            defer { opened = [:] }
            return opened.values.map(\.environment)
        }
        for environment in environments { environment.close() }
    }
}

/// Reads records from the archive's segments by sequence (the state as of a sequence before the
/// last compaction).
struct ArchivedRecords {
    let archive: Archive
    let segments: [ArchiveSegment]

    /// The record at `sequence` from the segment whose range holds it; nil when none does.
    func record(_ sequence: UInt64) throws -> RecordedEvent? {
        guard let segment = segments.first(where: { $0.firstSequence <= sequence && sequence <= $0.lastSequence }) else {
            return nil
        }
        let path = archive.path(of: segment)
        let environment = try archive.open(segment, what: "sequence \(sequence)")
        return try storageErrors(path: path) {
            try environment.read { txn in
                try StoreKey.bytes(id: sequence).withUnsafeBytes { key in
                    try txn.unsafeAccess.withValue(environment.database("log"), key: key) { bytes in
                        try EventLog.decode(bytes, sequence: sequence, path: path)
                    }
                }
            }
        }
    }
}

/// Reads one segment inside a read transaction.
struct SegmentReader {
    let access: ReadAccess
    let environment: Environment
    let path: String
    let segment: ArchiveSegment

    /// The record at `sequence`, in the segment's range or carried.
    func record(_ sequence: UInt64) throws -> RecordedEvent? {
        for name in ["log", "carried"] {
            let found = try StoreKey.bytes(id: sequence).withUnsafeBytes { key in
                try access.withValue(environment.database(name), key: key) { bytes in
                    try EventLog.decode(bytes, sequence: sequence, path: path)
                }
            }
            if let found { return found }
        }
        return nil
    }

    /// The sequences of every event of write `id`, when its history ends in this segment.
    func history(of id: WriteID) throws -> [UInt64] {
        var found: [UInt64] = []
        try access.forEach(environment.database("history"), prefix: StoreKey.bytes(id: id.rawValue)) { key, _ in
            found.append(try StoreKey.readBigEndian(key, at: 8))
            return true
        }
        return found
    }

    /// Calls `body` with each event of the range from `from` through `to`, checking that none is missing.
    func forEachEvent(from: UInt64, to: UInt64, _ body: (RecordedEvent) throws -> Bool) throws -> Bool {
        let first = max(from, segment.firstSequence)
        let last = min(to, segment.lastSequence)
        guard first <= last else { return true }
        var expected = first
        var goOn = true
        try access.forEach(environment.database("log"), prefix: [], from: StoreKey.bytes(id: first)) { key, value in
            guard expected <= last else { return false }
            let sequence = try EventLog.sequence(ofKey: key, expected: expected, path: path)
            expected += 1
            goOn = try body(try EventLog.decode(value, sequence: sequence, path: path))
            return goOn
        }
        if goOn, expected <= last {
            throw OutboxError.damaged(path: path, "sequence \(expected) is missing from the segment", sequence: expected)
        }
        return goOn
    }

    /// Checks the segment against its description: its meta, every record's checksum, no sequence
    /// missing, and the digest; returns the problem, or nil.
    func check(previousDigest: [UInt8], origin: [UInt8]) throws -> String? {
        guard let stored = try access.get(environment.database("meta"), key: Array("segment".utf8)) else {
            return "\(path): the segment's description is missing"
        }
        let described: (number: Int, first: UInt64, last: UInt64, previous: [UInt8], digest: [UInt8], origin: [UInt8])
        do {
            described = try stored.withUnsafeBytes { raw in
                var reader = ByteReader(raw)
                return (
                    try reader.int(), try reader.varint(), try reader.varint(), try reader.data(), try reader.data(),
                    try reader.data()
                )
            }
        } catch {
            return "\(path): the segment's description is damaged"
        }
        guard described.number == segment.number, described.first == segment.firstSequence,
            described.last == segment.lastSequence
        else {
            return
                "\(path): the file holds segment \(described.number) (sequences \(described.first)–\(described.last)), not \(segment)"
        }
        guard described.origin == origin else { return "\(path): the segment is another log's" }
        guard described.previous == previousDigest else {
            return "\(path): the digest it keeps of the segment before it is not that segment's"
        }
        var hash = SHA256()
        hash.update(previousDigest)
        do {
            _ = try forEachEvent(from: segment.firstSequence, to: segment.lastSequence) { _ in true }
            try access.forEach(environment.database("log"), prefix: []) { key, value in
                hash.update(key.copiedBytes)
                hash.update(StoreKey.bytes(id: UInt64(value.byteCount)))
                hash.update(value.copiedBytes)
                return true
            }
            try access.forEach(environment.database("carried"), prefix: []) { key, value in
                _ = try EventLog.decode(value, sequence: try StoreKey.readBigEndian(key), path: path)
                return true
            }
        } catch let error as OutboxError where error.code == .damaged {
            return error.message
        }
        let digest = hash.finish()
        guard digest == described.digest, digest == segment.digest else {
            return "\(path): the segment's digest is not the one the log keeps for \(segment): it was changed or replaced"
        }
        return nil
    }
}

/// `fsync` of a folder, so that a rename in it is durable.
func flushFolder(_ folder: String) throws {
    let descriptor = open(folder, O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { throw OutboxError(.storage, "\(folder) cannot be opened: \(String(cString: strerror(errno)))") }
    defer { close(descriptor) }
    guard fsync(descriptor) == 0 else {
        throw OutboxError(.storage, "\(folder) cannot be flushed: \(String(cString: strerror(errno)))")
    }
}
