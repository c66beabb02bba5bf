import Testing

@testable import Outbox

/// An outgoing write is a value, though its fields are shared by its copies: a change to a copy (the
/// pass re-keys a released write, R3.1; marks a delete sent before, R9.3) reaches that copy alone, and
/// two writes are equal, and hash alike, when their fields are.
@Suite struct OutgoingWriteValueTests {
    private static func made(id: UInt64 = 7) -> OutgoingWrite {
        OutgoingWrite(
            id: WriteID(id), origin: Origin(high: 1, low: 2), idempotencyKey: IdempotencyKey(high: 3, low: 4), table: "todos",
            operation: .delete, key: ["id": 7], body: [:], user: "alice", createdAt: Timestamp(milliseconds: 5))
    }

    @Test func aChangeToACopyReachesThatCopyAlone() {
        let original = Self.made()
        var copy = original
        copy.idempotencyKey = IdempotencyKey(high: 9, low: 9)
        copy.isResend = true
        copy.table = "notes"
        #expect(original.idempotencyKey == IdempotencyKey(high: 3, low: 4))
        #expect(!original.isResend)
        #expect(original.table == "todos")
        #expect(copy.idempotencyKey == IdempotencyKey(high: 9, low: 9) && copy.isResend && copy.table == "notes")
        #expect(copy.id == original.id && copy.user == "alice" && copy.createdAt == Timestamp(milliseconds: 5))
    }

    @Test func equalAndHashedAlikeByTheirFields() {
        let a = Self.made()
        var b = Self.made()
        #expect(a == b)
        #expect(Set([a, b]).count == 1)
        b.isResend = true
        #expect(a != b)
        #expect(Self.made(id: 8) != a)
        b.isResend = false
        #expect(a == b && a.hashValue == b.hashValue)
    }
}
