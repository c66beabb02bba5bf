import Testing

@testable import Outbox

/// A read transaction decodes each entry once, whatever order the pass asks for them in; the entries it
/// hands the next write transaction are each one it read, under its own id.
@Suite struct EntryMemoTests {
    /// The entry of write `id` as the test's store holds it (even ids have none): its queued sequence
    /// names the id, so an entry handed back under another id shows.
    private static func stored(_ id: WriteID) -> WriteEntry? {
        guard id.rawValue % 2 == 1 else { return nil }
        return DeciderTests.entry(id.rawValue)
    }

    @Test func readsEachEntryOnceAndHandsBackTheOneUnderItsId() {
        // In order (the run), twice, backward, with gaps and far away (outside the run).
        let asked: [UInt64] = [5, 6, 7, 8, 5, 6, 3, 9, 10, 100, 7, 11, 4, 100, 12, 2, 1, 13, 3, 101]
        let memo = EntryMemo()
        var reads: [UInt64] = []
        for id in asked.map({ WriteID($0) }) {
            let found = memo.entry(id) {
                reads.append(id.rawValue)
                return Self.stored(id)
            }
            #expect(found?.queuedSequence == Self.stored(id)?.queuedSequence, "\(id)")
        }
        #expect(reads == [5, 6, 7, 8, 3, 9, 10, 100, 11, 4, 12, 2, 1, 13, 101])
        var listed: [UInt64: UInt64?] = [:]
        memo.forEachDecoded { id, entry in
            #expect(!listed.keys.contains(id.rawValue), "\(id) listed twice")
            listed.updateValue(entry?.queuedSequence, forKey: id.rawValue)
        }
        #expect(memo.count == reads.count)
        #expect(listed == Dictionary(uniqueKeysWithValues: reads.map { ($0, Self.stored(WriteID($0))?.queuedSequence) }))
    }

    @Test func startsAgainPastItsLimit() {
        let memo = EntryMemo()
        var reads = 0
        for id in 1...1500 as ClosedRange<UInt64> {
            _ = memo.entry(WriteID(id)) {
                reads += 1
                return Self.stored(WriteID(id))
            }
        }
        #expect(memo.count < 1024)
        // The first ids were forgotten and are read again; the last were kept.
        _ = memo.entry(WriteID(1)) {
            reads += 1
            return nil
        }
        _ = memo.entry(WriteID(1500)) {
            reads += 1
            return nil
        }
        #expect(reads == 1501)
    }
}
