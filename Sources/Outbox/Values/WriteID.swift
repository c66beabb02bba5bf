/// A write's id: assigned at enqueue, strictly increasing across every table and user of one log, so
/// the order of ids is the order the writes were made.
public struct WriteID: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible,
    ExpressibleByIntegerLiteral
{
    public let rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    /// The id `rawValue`.
    public init(_ rawValue: UInt64) { self.rawValue = rawValue }
    public init(integerLiteral value: UInt64) { rawValue = value }
    public static func < (a: WriteID, b: WriteID) -> Bool { a.rawValue < b.rawValue }
    public var description: String { String(rawValue) }
}

extension [WriteID] {
    /// Whether this list, whose ids ascend, holds `id`: a binary search, no set built.
    func ascendingContains(_ id: WriteID) -> Bool { ascendingIndex(of: id) != nil }

    /// Where this list, whose ids ascend, holds `id`, if it does. An id outside the first and last is
    /// not searched for, and in a run of consecutive ids (a batch, mostly) it lies its distance from
    /// the first.
    func ascendingIndex(of id: WriteID) -> Int? {
        guard let first, let last, first <= id, id <= last else { return nil }
        let index =
            last.rawValue &- first.rawValue == UInt64(count &- 1)
            ? Int(id.rawValue &- first.rawValue) : ascendingInsertionIndex(of: id)
        return self[index] == id ? index : nil
    }

    /// The first index of this list, whose ids ascend, whose id is not below `id`.
    func ascendingInsertionIndex(of id: WriteID) -> Int {
        var low = startIndex
        var high = endIndex
        while low < high {
            let middle = low + (high - low) / 2
            if self[middle] < id { low = middle + 1 } else { high = middle }
        }
        return low
    }
}
