internal import Foundation

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// A write-ahead journal in front of a log's LMDB environment (decision 016): each commit's records
/// are appended to it and flushed, so that LMDB may commit without flushing; a checkpoint, after LMDB
/// was flushed, keeps LMDB's meta pages in the journal's head, so that after a power loss LMDB can be
/// put back to that snapshot (its pages held by a reader meanwhile) and the commits after it replayed.
///
/// The file has a fixed size (`capacity`), written with zeros when made, so that an append never
/// lengthens it. Little-endian throughout:
/// - two head slots of `slotSize` bytes each: "OBXJ", version 1, the head's flags (1: bit 0 says
///   LMDB is whole after it, `Head.lmdbIsWhole`) and two zero bytes, the generation (8; one more each
///   checkpoint), the log's last sequence at the checkpoint (8), the length of the
///   meta pages (4), LMDB's two meta pages as flushed, then a CRC32C of the slot's bytes before it
///   (4). A checkpoint writes the slot the newest head is not in, so a torn head leaves the one before
///   it; the head is the valid slot of the higher generation.
/// - commits, from `framesStart`: "OBXC", the generation of the head they follow (8), the first
///   record's sequence (8), the number of records (4), the length of the records (4), the records
///   (each its length, 4, then its bytes), then a CRC32C of the commit's bytes before it (4). A
///   checkpoint writes an empty one first, once its head is flushed (journals written before it
///   have none; they read the same).
///
/// The commits after the head are read while each is whole (its CRC holds), of the head's generation
/// and continues the sequence: what a failed or torn commit, or an earlier generation, left there ends
/// them. Used by one writer at a time.
package final class Journal: @unchecked Sendable {
    /// The last checkpoint.
    package struct Head: Equatable, Sendable {
        package var generation: UInt64
        /// The log's last sequence when LMDB was flushed.
        package var sequence: UInt64
        /// LMDB's two meta pages as flushed then.
        package var metaPages: [UInt8]
        /// Whether LMDB's data file is whole as it is after this checkpoint: every commit after it was
        /// made durable by LMDB itself (its pages flushed, then its meta page), or none was made (the
        /// log was closed). Otherwise commits after it may have been made without a flush, and after a
        /// power loss LMDB's newest meta page may name pages the disk never got: the next open puts
        /// LMDB back to this head.
        package var lmdbIsWhole: Bool

        package init(generation: UInt64, sequence: UInt64, metaPages: [UInt8], lmdbIsWhole: Bool = false) {
            self.generation = generation
            self.sequence = sequence
            self.metaPages = metaPages
            self.lmdbIsWhole = lmdbIsWhole
        }
    }

    package static let defaultCapacity = 4 << 20
    private static let headMagic = Array("OBXJ".utf8)
    private static let commitMagic = Array("OBXC".utf8)
    private static let commitHeaderSize = 28

    package let path: String
    /// The file's size: commits after the heads fit in it until a checkpoint starts them again. A
    /// commit larger than all of that room is written anyway, after a checkpoint, lengthening the file.
    package private(set) var capacity: Int
    /// The bytes of a head slot; commits start after the two.
    package let slotSize: Int
    package var framesStart: Int { 2 * slotSize }

    /// The bytes of a head slot for meta pages of `metaPagesSize` bytes in all: a whole number of 4 KiB.
    package static func slotSize(metaPagesSize: Int) -> Int { (32 + metaPagesSize + 4095) / 4096 * 4096 }
    /// -1 once closed.
    private var descriptor: Int32
    /// The newest valid head; nil before the first checkpoint.
    package private(set) var head: Head?
    /// Where the next commit goes.
    package private(set) var end: Int
    /// Where the commits flushed end: a power loss may take back what was written after it.
    package private(set) var flushedEnd = 0
    /// The commit being built (`startCommit`, `add`, `writeCommit`), header first.
    private var pending: [UInt8] = []
    private var pendingCount = 0
    /// Whether commits were written since the last flush (`writeCommit(flush: false)`).
    package private(set) var hasUnflushedCommits = false
    /// Whether a flush reaches the disk (`fdatasync`); the simulation's journals only count them.
    private let syncs: Bool

    /// Opens the journal at `path` for meta pages of `metaPagesSize` bytes in all, making it when
    /// missing (`capacity` bytes of zeros, flushed). Finds its head and the end of its commits.
    /// `readOnly` opens an existing journal to read it, changing nothing (throws `.doesNotExist` when
    /// there is none).
    package init(
        path: String, metaPagesSize: Int, capacity: Int = Journal.defaultCapacity, readOnly: Bool = false, syncs: Bool = true
    ) throws {
        self.path = path
        self.syncs = syncs
        slotSize = Self.slotSize(metaPagesSize: metaPagesSize)
        precondition(capacity > 2 * slotSize, "a journal smaller than its heads")
        let fd = readOnly ? open(path, O_RDONLY | O_CLOEXEC) : open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            if readOnly && errno == ENOENT { throw OutboxError(.doesNotExist, "\(path): no journal") }
            throw Self.failure(path, "cannot open the journal")
        }
        var status = stat()
        guard fstat(fd, &status) == 0 else {
            closeDescriptor(fd)
            throw Self.failure(path, "cannot read the journal's size")
        }
        let size = Int(status.st_size)
        if size < capacity && !readOnly {
            let zeros = [UInt8](repeating: 0, count: capacity - size)
            let written = zeros.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(size)) }
            guard written == zeros.count, !syncs || fsync(fd) == 0 else {
                closeDescriptor(fd)
                throw Self.failure(path, "cannot make the journal")
            }
        }
        descriptor = fd
        // Read-only, a journal its writer was still making (killed before its zeros were written)
        // is as long as it is.
        self.capacity = readOnly ? size : max(capacity, size)
        end = 2 * slotSize
        head = try newestHead()?.head
        if head != nil { end = try scan().end }
        flushedEnd = end
    }

    deinit { close() }

    /// Closes the file, and with it the lock `lockAlone` or `lockShared` took.
    package func close() {
        if descriptor >= 0 { closeDescriptor(descriptor) }
        descriptor = -1
    }

    // MARK: - Who else has it open

    /// Locks the journal for this open alone, when no other open holds it (`flock`, not waiting):
    /// every writer of the log holds it shared while it is open (`lockShared`), so a journal locked
    /// alone is one no running process appends to, and what it holds past its head may be recovered.
    package func lockAlone() -> Bool { flock(descriptor, LOCK_EX | LOCK_NB) == 0 }

    /// Whether no writer has the journal open (waiting while one recovers the log); for a reader,
    /// which holds no lock after.
    package func hasNoWriter() -> Bool {
        guard flock(descriptor, LOCK_SH) == 0 else { return false }
        defer { _ = flock(descriptor, LOCK_UN) }
        return flock(descriptor, LOCK_EX | LOCK_NB) == 0
    }

    /// Holds the lock shared (waiting while another open recovers the log), or turns the lock
    /// `lockAlone` took into a shared one.
    package func lockShared() throws {
        guard flock(descriptor, LOCK_SH) == 0 else { throw failure("cannot lock the journal") }
    }

    // MARK: - Commits

    /// Whether a commit of `records` fits after the last commit.
    package func fits(_ records: [[UInt8]]) -> Bool { end + Self.size(of: records) <= capacity }

    /// Appends one commit of `records`, whose sequences run from `first`, with one write, and flushes
    /// it (lengthening the file when it does not fit).
    package func append(_ records: [[UInt8]], first: UInt64) throws {
        startCommit(first: first)
        for record in records { record.withUnsafeBytes { add($0) } }
        try writeCommit(flush: true)
    }

    /// Starts building a commit whose first record has sequence `first`.
    package func startCommit(first: UInt64) {
        pending.removeAll(keepingCapacity: true)
        Self.startCommit(first: first, in: &pending)
        pendingCount = 0
    }

    /// Appends to `bytes` the header of a commit whose first record is `first` (its generation, count
    /// and length are set by `seal`).
    private static func startCommit(first: UInt64, in bytes: inout [UInt8]) {
        bytes.append(contentsOf: commitMagic)
        bytes.append(contentsOf: repeatElement(0, count: 8))  // the generation, set when sealed
        withUnsafeBytes(of: first.littleEndian) { bytes.append(contentsOf: $0) }
        bytes.append(contentsOf: repeatElement(0, count: 8))  // the count and the length, set when sealed
    }

    /// Completes the commit `startCommit` began in `bytes`, holding `count` records: its generation,
    /// count and length set, its checksum appended.
    private static func seal(_ bytes: inout [UInt8], generation: UInt64, count: Int) {
        bytes.withUnsafeMutableBytes { bytes in
            bytes.storeBytes(of: generation.littleEndian, toByteOffset: 4, as: UInt64.self)
            bytes.storeBytes(of: UInt32(count).littleEndian, toByteOffset: 20, as: UInt32.self)
            bytes.storeBytes(of: UInt32(bytes.count - commitHeaderSize).littleEndian, toByteOffset: 24, as: UInt32.self)
        }
        let checksum = bytes.withUnsafeBytes { CRC32C.update(0, $0) }
        withUnsafeBytes(of: checksum.littleEndian) { bytes.append(contentsOf: $0) }
    }

    /// Adds a record to the commit being built.
    package func add(_ record: UnsafeRawBufferPointer) {
        withUnsafeBytes(of: UInt32(record.count).littleEndian) { pending.append(contentsOf: $0) }
        pending.append(contentsOf: record)
        pendingCount += 1
    }

    /// The bytes of the commit being built, so far.
    package var pendingSize: Int { pending.count }

    /// Whether the commit being built fits after the last commit.
    package var commitFits: Bool { end + pending.count + 4 <= capacity }

    /// Writes the commit built, with one write, after the last commit (of the head's generation), and
    /// flushes it when `flush` says so; a commit not flushed is flushed by the next one that is, by
    /// `flush()`, or by a checkpoint. A commit that does not fit lengthens the file.
    package func writeCommit(flush: Bool) throws {
        guard let head else { preconditionFailure("a journal appended to before its first checkpoint") }
        Self.seal(&pending, generation: head.generation, count: pendingCount)
        try write(pending, at: end)
        end += pending.count
        capacity = max(capacity, end)
        if flush {
            try self.flush()
        } else {
            hasUnflushedCommits = true
        }
    }

    /// Flushes the commits written without a flush.
    package func flush() throws {
        guard !syncs || fdatasync(descriptor) == 0 else { throw failure("cannot flush the journal") }
        hasUnflushedCommits = false
        flushedEnd = end
    }

    /// Puts where the next commit goes back to `offset`, where a commit LMDB then failed to commit
    /// was written: the commit written next goes over it (recovery reads no stale bytes past a
    /// shorter one, nor the failed one itself once a commit of its sequence follows).
    package func rewind(to offset: Int) {
        precondition(offset >= framesStart && offset <= end, "a journal rewound past its commits")
        end = offset
        flushedEnd = min(flushedEnd, end)
    }

    /// Records a checkpoint: LMDB was flushed with the log at `sequence`, and `metaPages` are its meta
    /// pages as flushed; `lmdbIsWhole` when LMDB makes every commit after it durable itself, or none
    /// follows (`Head.lmdbIsWhole`). The head goes into the slot the newest head (of any process's
    /// checkpoint) is not in, with the next generation, and is flushed; commits start again after the
    /// heads.
    package func checkpoint(sequence: UInt64, metaPages: [UInt8], lmdbIsWhole: Bool = false) throws {
        precondition(32 + metaPages.count <= slotSize, "meta pages larger than the journal's head")
        let newest = try newestHead()
        let next = Head(
            generation: (newest?.head.generation ?? 0) + 1, sequence: sequence, metaPages: metaPages, lmdbIsWhole: lmdbIsWhole)
        let slot = 1 - (newest?.slot ?? 1)
        var w = ByteWriter(capacity: slotSize)
        w.raw(Self.headMagic)
        w.raw([1, lmdbIsWhole ? 1 : 0, 0, 0])
        w.littleEndian64(next.generation)
        w.littleEndian64(next.sequence)
        w.littleEndian32(UInt32(metaPages.count))
        w.raw(metaPages)
        w.littleEndian32(w.bytes.withUnsafeBytes { CRC32C.update(0, $0) })
        try write(w.bytes, at: slot * slotSize)
        try flush()
        head = next
        // An empty commit of the new generation where commits start, flushed after the head: should
        // the head fail to read later, it shows that the head was whole once, so that the one before
        // it may name pages reused since (`generationOfCommitsPastTheHead`). Written only once the
        // head is on the disk: a power loss during the checkpoint then leaves no such proof.
        var marker: [UInt8] = []
        Self.startCommit(first: sequence + 1, in: &marker)
        Self.seal(&marker, generation: next.generation, count: 0)
        try write(marker, at: framesStart)
        end = framesStart + marker.count
        try flush()
    }

    /// Whether the newest head in the file now says LMDB is whole after it (`Head.lmdbIsWhole`); true
    /// before the first checkpoint (no commit went through the journal).
    package func newestHeadSaysLMDBIsWhole() throws -> Bool { try newestHead()?.head.lmdbIsWhole ?? true }

    /// Whether a slot of the file names a generation above this open's head: another process
    /// checkpointed since (a torn head counts too). Reads the two slots' first bytes only.
    package func hasNewerHead() throws -> Bool {
        let mine = head?.generation ?? 0
        for slot in 0..<2 {
            let bytes = try read(16, at: slot * slotSize)
            if Array(bytes[0..<4]) == Self.headMagic, Self.uint64(bytes, 8) > mine { return true }
        }
        return false
    }

    /// The valid head of the higher generation in the file now, and its slot.
    private func newestHead() throws -> (head: Head, slot: Int)? {
        var newest: (head: Head, slot: Int)?
        for slot in 0..<2 {
            if let found = try readHead(slot: slot), found.generation > newest?.head.generation ?? 0 {
                newest = (found, slot)
            }
        }
        return newest
    }

    /// The records of the commits after the head, in order, each with its sequence: the first follows
    /// the head's sequence, and each commit is whole. None before the first checkpoint.
    package func committed() throws -> [(sequence: UInt64, record: [UInt8])] { try scan().records }

    /// The commits after the head: their records, and where the next commit goes.
    private func scan() throws -> (records: [(sequence: UInt64, record: [UInt8])], end: Int) {
        guard let head else { return ([], framesStart) }
        var records: [(sequence: UInt64, record: [UInt8])] = []
        var offset = framesStart
        var next = head.sequence + 1
        while let commit = try commit(at: offset), commit.generation == head.generation, commit.first == next {
            for record in commit.records {
                records.append((next, record))
                next += 1
            }
            offset = commit.end
        }
        return (records, offset)
    }

    /// The whole commit at `offset` (its CRC holds, its lengths add up), of any generation; nil when
    /// none is there.
    private func commit(at offset: Int) throws -> (generation: UInt64, first: UInt64, records: [[UInt8]], end: Int)? {
        guard offset + Self.commitHeaderSize + 4 <= capacity else { return nil }
        let header = try read(Self.commitHeaderSize, at: offset)
        guard Array(header[0..<4]) == Self.commitMagic else { return nil }
        let count = Int(Self.uint32(header, 20))
        let length = Int(Self.uint32(header, 24))
        guard offset + Self.commitHeaderSize + length + 4 <= capacity else { return nil }
        let body = try read(length + 4, at: offset + Self.commitHeaderSize)
        let checksum = body.withUnsafeBytes { body in
            header.withUnsafeBytes { CRC32C.update(CRC32C.update(0, $0), UnsafeRawBufferPointer(rebasing: body[0..<length])) }
        }
        guard checksum == Self.uint32(body, length), let records = Self.records(body[0..<length], count: count) else {
            return nil
        }
        return (Self.uint64(header, 4), Self.uint64(header, 12), records, offset + Self.commitHeaderSize + length + 4)
    }

    /// The generation of the whole commit where commits start, when it is above the head's: a head of
    /// that generation was written and flushed (a checkpoint writes its empty commit there only then,
    /// and other commits follow only such a head) and no longer reads, so the head found is not the
    /// newest, and its snapshot's pages may have been reused since. Nil otherwise (a newer head torn
    /// as it was written, by a power loss in its checkpoint, has no commit after it: the head found is
    /// then still whole).
    package func generationOfCommitsPastTheHead() throws -> UInt64? {
        guard let head, let first = try commit(at: framesStart), first.generation > head.generation else { return nil }
        return first.generation
    }

    /// The records of a commit's body, or nil when its lengths do not add up.
    private static func records(_ body: ArraySlice<UInt8>, count: Int) -> [[UInt8]]? {
        var records: [[UInt8]] = []
        var offset = body.startIndex
        for _ in 0..<count {
            guard body.endIndex - offset >= 4 else { return nil }
            let length = Int(uint32(Array(body[offset..<(offset + 4)]), 0))
            offset += 4
            guard body.endIndex - offset >= length else { return nil }
            records.append(Array(body[offset..<(offset + length)]))
            offset += length
        }
        return offset == body.endIndex ? records : nil
    }

    /// The head in `slot`, or nil when the slot holds none that reads (never written, or torn); a
    /// whole head of another version throws `.damaged`, naming it.
    private func readHead(slot: Int) throws -> Head? {
        guard (slot + 1) * slotSize <= capacity else { return nil }
        let bytes = try read(slotSize, at: slot * slotSize)
        guard Array(bytes[0..<4]) == Self.headMagic else { return nil }
        let length = Int(Self.uint32(bytes, 24))
        guard 32 + length <= slotSize,
            bytes.withUnsafeBytes({ CRC32C.update(0, UnsafeRawBufferPointer(rebasing: $0[0..<(28 + length)])) })
                == Self.uint32(bytes, 28 + length)
        else { return nil }
        guard bytes[4] == 1 else {
            throw OutboxError.damaged(path: path, "the journal is of version \(bytes[4]), which this build does not read")
        }
        return Head(
            generation: Self.uint64(bytes, 8), sequence: Self.uint64(bytes, 16), metaPages: Array(bytes[28..<(28 + length)]),
            lmdbIsWhole: bytes[5] & 1 != 0)
    }

    /// The bytes a commit of `records` takes.
    private static func size(of records: [[UInt8]]) -> Int { commitHeaderSize + records.reduce(0) { $0 + 4 + $1.count } + 4 }

    private func write(_ bytes: [UInt8], at offset: Int) throws {
        let written = bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, off_t(offset)) }
        guard written == bytes.count else { throw failure("cannot write the journal") }
    }

    private func read(_ count: Int, at offset: Int) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let got = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, count, off_t(offset)) }
        guard got == count else { throw failure("cannot read the journal") }
        return bytes
    }

    private func failure(_ what: String) -> OutboxError { Self.failure(path, what) }

    private static func failure(_ path: String, _ what: String) -> OutboxError {
        OutboxError(.storage, "\(path): \(what) (\(String(cString: strerror(errno))))")
    }

    private static func uint32(_ bytes: [UInt8], _ at: Int) -> UInt32 {
        (0..<4).reduce(0) { $0 | UInt32(bytes[at + $1]) << (8 * $1) }
    }

    private static func uint64(_ bytes: [UInt8], _ at: Int) -> UInt64 {
        (0..<8).reduce(0) { $0 | UInt64(bytes[at + $1]) << (8 * $1) }
    }
}

/// `close(2)`, out of reach of the method of that name.
private func closeDescriptor(_ fd: Int32) { _ = close(fd) }
