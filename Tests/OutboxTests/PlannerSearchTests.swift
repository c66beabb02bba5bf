import Testing

@testable import Outbox

/// The planner finds a dependency among the writes of the batch it builds by a binary search over
/// their ids, which ascend (R4.5: a write may go in the request after what it depends on).
@Suite struct PlannerSearchTests {
    @Test func findsEveryIdOfAnAscendingListAndNoOther() {
        for count in 0...9 {
            // Odd ids only, so every even id between, before and after them is missing.
            let ids = (0..<count).map { WriteID(UInt64(2 * $0 + 1)) }
            for candidate in 0...UInt64(2 * count + 2) {
                #expect(ids.ascendingContains(WriteID(candidate)) == ids.contains(WriteID(candidate)), "\(count) \(candidate)")
            }
        }
    }

    // A run of consecutive ids is indexed by its distance from the first; a list with a gap is searched.
    @Test func indexesRunsAndListsWithGaps() {
        for count in 0...9 {
            let run = (0..<count).map { WriteID(UInt64(5 + $0)) }
            let gapped = run.enumerated().map { $0.offset < count / 2 ? $0.element : WriteID($0.element.rawValue + 3) }
            for ids in [run, gapped] {
                for candidate in 0...UInt64(20) {
                    #expect(
                        ids.ascendingIndex(of: WriteID(candidate)) == ids.firstIndex(of: WriteID(candidate)),
                        "\(ids) \(candidate)")
                }
            }
        }
    }
}
