// A journal in front of LMDB (Specs/decisions/016), for its floors. No engine code runs.

import COutboxLMDB
import Foundation
import OutboxTesting

#if canImport(Glibc)
    import Glibc
#endif

/// A write-ahead journal beside an LMDB environment opened `noSync`: each commit's records are
/// appended to it with one write and flushed with `fdatasync`, and LMDB's commit flushes nothing.
/// The file is written with zeros when made, so an append never lengthens it and its flush journals
/// no new size (the engine writes its data file ahead for the same reason). When a commit's records
/// would not fit, the journal checkpoints: LMDB is flushed, its two meta pages are copied into the
/// journal's head and flushed there, a read transaction is held on that snapshot until the next
/// checkpoint (so LMDB reuses none of its pages), and the frames start again after the head.
///
/// Why it would be safe, for the design (decision 016): a commit without a flush may leave a meta page
/// on the disk before the pages it names, so after a power loss LMDB's newest meta cannot be trusted;
/// the checkpoint's pages are intact (flushed, and never reused while held), and writing the metas
/// saved in the head back over LMDB's restores that snapshot, after which the frames past it are
/// applied again. Each record goes in a frame of its length (4 bytes) and its sequence (8 bytes); a
/// record carries its own CRC32C. A recovery reads frames while their sequences ascend past the
/// checkpoint's and each record's CRC holds: frames left from before a checkpoint hold lower
/// sequences, and a torn frame fails its CRC.
final class Journal {
    private let descriptor: Int32
    private let capacity: Int
    /// The environment's data file, whose meta pages a checkpoint copies.
    private let dataPath: String
    private static let headSize = 8192
    private var offset = Journal.headSize
    private var frames: [UInt8] = []
    /// How many checkpoints it made.
    private(set) var checkpoints = 0

    init(path: String, dataPath: String, capacity: Int = 4 << 20) {
        self.dataPath = dataPath
        descriptor = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        precondition(descriptor >= 0, "journal open")
        self.capacity = capacity
        let zeros = [UInt8](repeating: 0, count: capacity)
        precondition(zeros.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, capacity, 0) } == capacity)
        precondition(fsync(descriptor) == 0)
    }

    deinit { close(descriptor) }

    /// Appends one commit's records, their sequences from `first`, and flushes them; checkpoints
    /// `environment` first when they do not fit.
    func append(_ records: some Sequence<[UInt8]>, first: UInt64, checkpointing environment: RawEnvironment) {
        frames.removeAll(keepingCapacity: true)
        var sequence = first
        for record in records {
            withUnsafeBytes(of: UInt32(record.count).littleEndian) { frames.append(contentsOf: $0) }
            withUnsafeBytes(of: sequence.littleEndian) { frames.append(contentsOf: $0) }
            frames.append(contentsOf: record)
            sequence += 1
        }
        precondition(frames.count <= capacity - Self.headSize, "a commit larger than the journal")
        if offset + frames.count > capacity { checkpoint(environment) }
        let written = frames.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, off_t(offset)) }
        precondition(written == frames.count && fdatasync(descriptor) == 0, "journal append")
        offset += frames.count
    }

    /// Flushes `environment`, copies its meta pages into the head and flushes them, holds the
    /// snapshot, and starts the frames again after the head.
    func checkpoint(_ environment: RawEnvironment) {
        environment.flush()
        var metas = [UInt8](repeating: 0, count: Self.headSize)
        let data = open(dataPath, O_RDONLY | O_CLOEXEC)
        precondition(data >= 0 && metas.withUnsafeMutableBytes { pread(data, $0.baseAddress, $0.count, 0) } == Self.headSize)
        close(data)
        let written = metas.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
        precondition(written == Self.headSize && fdatasync(descriptor) == 0, "journal head")
        environment.pinSnapshot()
        offset = Self.headSize
        checkpoints += 1
    }
}

/// The 36 bytes of a random UUID's string (a UUIDv4 key's), lower case.
func randomUUIDString(_ random: inout SplitMix64) -> [UInt8] {
    var bytes = (random.next(), random.next())
    return Array(withUnsafeBytes(of: &bytes) { UUID(uuid: $0.load(as: uuid_t.self)) }.uuidString.lowercased().utf8)
}
