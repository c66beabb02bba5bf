/// The sequences of a write's latest events, its `writeQueued` aside, kept in its entry while the queue
/// holds it (R8.3).
///
/// A drained write's attempt, answer and verdict are noted here instead of under a key of the history
/// index: the verdict rewrites the entry anyway, so the history costs a drained write no B-tree write
/// of its own (decision 012). When the write leaves the queue, what is noted here goes to the index
/// with its `writeQueued`, under one key.
///
/// Stored in a fixed width, so that noting an event keeps the entry's size and LMDB overwrites it in
/// place: varint distances (the first from the write's `writeQueued`, each next from the one before),
/// then zero bytes. A distance is never zero, so the first zero byte ends the list. An event that does
/// not fit, or that comes before the last one noted (an attempt is noted at its answer, after whatever
/// named the write meanwhile), is not noted: the caller moves the events noted so far to the index.
struct RecentEvents: Hashable, Sendable {
    /// The stored width, in bytes.
    static let width = 6

    /// The stored bytes, the first in the lowest eight bits.
    private var word: UInt64

    /// None noted.
    static let none = RecentEvents(word: 0)

    private init(word: UInt64) { self.word = word }

    var isEmpty: Bool { word == 0 }

    /// The sequences noted, in order, for a write queued at `queued`.
    func sequences(after queued: UInt64) -> [UInt64] {
        var result: [UInt64] = []
        _ = walk(after: queued) { result.append($0) }
        return result
    }

    /// The list with `sequence` noted after the others, for a write queued at `queued`: itself when
    /// `sequence` is the last noted, nil when it comes before that or the width has no room for it.
    func noting(_ sequence: UInt64, after queued: UInt64) -> RecentEvents? {
        let (last, used) = walk(after: queued) { _ in }
        if used > 0, sequence == last { return self }
        guard sequence > last else { return nil }
        var distance = sequence - last
        var word = self.word
        var at = used
        repeat {
            guard at < Self.width else { return nil }
            var byte = distance & 0x7f
            distance >>= 7
            if distance != 0 { byte |= 0x80 }
            word |= byte << (8 * UInt64(at))
            at += 1
        } while distance != 0
        return RecentEvents(word: word)
    }

    /// Calls `body` with each sequence noted; returns the last (`queued` when none) and the bytes used.
    private func walk(after queued: UInt64, _ body: (UInt64) -> Void) -> (last: UInt64, used: Int) {
        var last = queued
        var used = 0
        var distance: UInt64 = 0
        var shift: UInt64 = 0
        while used < Self.width {
            let byte = (word >> (8 * UInt64(used))) & 0xff
            if byte == 0, shift == 0 { break }
            distance |= (byte & 0x7f) << shift
            used += 1
            if byte & 0x80 == 0 {
                last &+= distance
                body(last)
                distance = 0
                shift = 0
            } else {
                shift += 7
            }
        }
        return (last, used)
    }

    func encode(into writer: inout some ByteSink) {
        for index in 0..<Self.width { writer.byte(UInt8(truncatingIfNeeded: word >> (8 * UInt64(index)))) }
    }

    /// Reads the stored width; bytes that are not the list's own encoding (a distance of zero, one
    /// written longer than it needs, one cut off by the width, bytes after the zeros) are damage.
    static func decode(from reader: inout ByteReader) throws -> RecentEvents {
        var word: UInt64 = 0
        for index in 0..<width { word |= UInt64(try reader.byte()) << (8 * UInt64(index)) }
        let stored = RecentEvents(word: word)
        // Any valid list is re-encoded to the same bytes from a start of 0.
        var encoded = RecentEvents.none
        var ok = true
        _ = stored.walk(after: 0) { sequence in
            if ok, let next = encoded.noting(sequence, after: 0), next != encoded { encoded = next } else { ok = false }
        }
        guard ok, encoded == stored else { throw DecodeFailure("its recent events are not a list of distances") }
        return stored
    }
}
