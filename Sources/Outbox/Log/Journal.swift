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
/// - two head slots of `slotSize` bytes each: "OBXJ", version 1 and three zero bytes, the generation
///   (8; one more each checkpoint), the log's last sequence at the checkpoint (8), the length of the
///   meta pages (4), LMDB's two meta pages as flushed, then a CRC32C of the slot's bytes before it
///   (4). A checkpoint writes the slot the newest head is not in, so a torn head leaves the one before
///   it; the head is the valid slot of the higher generation.
/// - commits, from `framesStart`: "OBXC", the generation of the head they follow (8), the first
///   record's sequence (8), the number of records (4), the length of the records (4), the records
///   (each its length, 4, then its bytes), then a CRC32C of the commit's bytes before it (4).
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

        package init(generation: UInt64, sequence: UInt64, metaPages: [UInt8]) {
            self.generation = generation
            self.sequence = sequence
            self.metaPages = metaPages
        }
    }

    /// A commit's records do not fit after the last commit: checkpoint first.
    package struct Full: Error {}

    package static let defaultCapacity = 4 << 20
    private static let headMagic = Array("OBXJ".utf8)
    private static let commitMagic = Array("OBXC".utf8)
    private static let commitHeaderSize = 28

    package let path: String
    package let capacity: Int
    /// The bytes of a head slot; commits start after the two.
    package let slotSize: Int
    package var framesStart: Int { 2 * slotSize }
    private let descriptor: Int32
    /// The newest valid head and its slot; nil before the first checkpoint.
    package private(set) var head: Head?
    private var headSlot = 1
    /// Where the next commit goes.
    package private(set) var end: Int

    /// Opens the journal at `path` for meta pages of `metaPagesSize` bytes in all, making it when
    /// missing (`capacity` bytes of zeros, flushed). Finds its head and the end of its commits.
    package init(path: String, metaPagesSize: Int, capacity: Int = Journal.defaultCapacity) throws {
        self.path = path
        slotSize = (32 + metaPagesSize + 4095) / 4096 * 4096
        precondition(capacity > 2 * slotSize, "a journal smaller than its heads")
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Self.failure(path, "cannot open the journal") }
        var status = stat()
        guard fstat(fd, &status) == 0 else {
            close(fd)
            throw Self.failure(path, "cannot read the journal's size")
        }
        let size = Int(status.st_size)
        if size < capacity {
            let zeros = [UInt8](repeating: 0, count: capacity - size)
            let written = zeros.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(size)) }
            guard written == zeros.count, fsync(fd) == 0 else {
                close(fd)
                throw Self.failure(path, "cannot make the journal")
            }
        }
        descriptor = fd
        self.capacity = max(capacity, size)
        end = 2 * slotSize
        for slot in 0..<2 {
            if let found = try readHead(slot: slot), found.generation > head?.generation ?? 0 {
                head = found
                headSlot = slot
            }
        }
        if head != nil { end = try scan().end }
    }

    deinit { close(descriptor) }

    /// Whether a commit of `records` fits after the last commit.
    package func fits(_ records: [[UInt8]]) -> Bool { end + Self.size(of: records) <= capacity }

    /// Appends one commit of `records`, whose sequences run from `first`, with one write, and flushes
    /// it. Throws `Full` when it does not fit (nothing is written).
    package func append(_ records: [[UInt8]], first: UInt64) throws {
        guard let head else { preconditionFailure("a journal appended to before its first checkpoint") }
        guard fits(records) else { throw Full() }
        var w = ByteWriter(capacity: Self.size(of: records))
        w.raw(Self.commitMagic)
        w.littleEndian64(head.generation)
        w.littleEndian64(first)
        w.littleEndian32(UInt32(records.count))
        w.littleEndian32(UInt32(records.reduce(0) { $0 + 4 + $1.count }))
        for record in records {
            w.littleEndian32(UInt32(record.count))
            w.raw(record)
        }
        w.littleEndian32(w.bytes.withUnsafeBytes { CRC32C.update(0, $0) })
        try write(w.bytes, at: end)
        guard fdatasync(descriptor) == 0 else { throw failure("cannot flush the journal") }
        end += w.bytes.count
    }

    /// Records a checkpoint: LMDB was flushed with the log at `sequence`, and `metaPages` are its meta
    /// pages as flushed. The head goes into the other slot and is flushed; commits start again after
    /// the heads.
    package func checkpoint(sequence: UInt64, metaPages: [UInt8]) throws {
        precondition(32 + metaPages.count <= slotSize, "meta pages larger than the journal's head")
        let next = Head(generation: (head?.generation ?? 0) + 1, sequence: sequence, metaPages: metaPages)
        let slot = 1 - headSlot
        var w = ByteWriter(capacity: slotSize)
        w.raw(Self.headMagic)
        w.raw([1, 0, 0, 0])
        w.littleEndian64(next.generation)
        w.littleEndian64(next.sequence)
        w.littleEndian32(UInt32(metaPages.count))
        w.raw(metaPages)
        w.littleEndian32(w.bytes.withUnsafeBytes { CRC32C.update(0, $0) })
        try write(w.bytes, at: slot * slotSize)
        guard fdatasync(descriptor) == 0 else { throw failure("cannot flush the journal") }
        head = next
        headSlot = slot
        end = framesStart
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
        while offset + Self.commitHeaderSize + 4 <= capacity {
            let header = try read(Self.commitHeaderSize, at: offset)
            guard Array(header[0..<4]) == Self.commitMagic, Self.uint64(header, 4) == head.generation,
                Self.uint64(header, 12) == next
            else { break }
            let count = Int(Self.uint32(header, 20))
            let length = Int(Self.uint32(header, 24))
            guard offset + Self.commitHeaderSize + length + 4 <= capacity else { break }
            let body = try read(length + 4, at: offset + Self.commitHeaderSize)
            let checksum = body.withUnsafeBytes { body in
                header.withUnsafeBytes { CRC32C.update(CRC32C.update(0, $0), UnsafeRawBufferPointer(rebasing: body[0..<length])) }
            }
            guard checksum == Self.uint32(body, length), let commit = Self.records(body[0..<length], count: count)
            else { break }
            for record in commit {
                records.append((next, record))
                next += 1
            }
            offset += Self.commitHeaderSize + length + 4
        }
        return (records, offset)
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
            generation: Self.uint64(bytes, 8), sequence: Self.uint64(bytes, 16), metaPages: Array(bytes[28..<(28 + length)]))
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
