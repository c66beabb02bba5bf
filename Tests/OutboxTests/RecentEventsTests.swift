import Testing

@testable import Outbox

/// A write's recent events in its entry (`RecentEvents`): distances in a fixed width, so that an entry
/// keeps its size as events are noted; what does not fit is refused, never cut (R8.3); stored bytes that
/// are not a list's own encoding are damage (R8.6).
@Suite struct RecentEventsTests {
    private static func bytes(_ recent: RecentEvents) -> [UInt8] {
        var w = ByteWriter(capacity: RecentEvents.width)
        recent.encode(into: &w)
        return w.bytes
    }

    private static func decode(_ bytes: [UInt8]) throws -> RecentEvents {
        try bytes.withUnsafeBytes { raw in
            var r = ByteReader(raw)
            return try RecentEvents.decode(from: &r)
        }
    }

    @Test func eventsAreNotedInOrderAsDistancesInAFixedWidth() throws {
        var recent = RecentEvents.none
        #expect(Self.bytes(recent) == [0, 0, 0, 0, 0, 0])
        for sequence: UInt64 in [1_010, 1_011, 1_012] { recent = try #require(recent.noting(sequence, after: 10)) }
        #expect(recent.sequences(after: 10) == [1_010, 1_011, 1_012])
        #expect(Self.bytes(recent) == [0xe8, 0x07, 1, 1, 0, 0], "1000 from the queued event, then 1 and 1")
        #expect(try Self.decode(Self.bytes(recent)) == recent)
        #expect(recent.noting(1_012, after: 10) == recent, "the last one again changes nothing")
        #expect(recent.noting(1_011, after: 10) == nil, "an earlier one is refused")
        recent = try #require(recent.noting(1_013, after: 10))
        #expect(recent.noting(1_013 + 200, after: 10) == nil, "two bytes, and one is left")
        recent = try #require(recent.noting(1_014, after: 10))
        #expect(Self.bytes(recent) == [0xe8, 0x07, 1, 1, 1, 1])
        #expect(recent.noting(1_015, after: 10) == nil, "full: six bytes")
        #expect(RecentEvents.none.noting(10 + (1 << 42), after: 10) == nil, "a distance wider than the width")
        let widest = try #require(RecentEvents.none.noting(10 + (1 << 42) - 1, after: 10))
        #expect(widest.sequences(after: 10) == [10 + (1 << 42) - 1])
        #expect(try Self.decode(Self.bytes(widest)) == widest)
    }

    @Test func bytesThatAreNotAListAreDamage() throws {
        for damaged: [UInt8] in [
            [0, 1, 0, 0, 0, 0],  // bytes after the end
            [0x80, 0, 0, 0, 0, 0],  // a distance of zero, written long
            [0x81, 0, 0, 0, 0, 0],  // a distance written longer than it needs
            [1, 1, 1, 1, 1, 0x81],  // a distance cut off by the width
        ] {
            #expect(throws: DecodeFailure.self, "\(damaged)") { try Self.decode(damaged) }
        }
        #expect(throws: DecodeFailure.self) { try Self.decode([1, 2, 3]) }
    }
}
