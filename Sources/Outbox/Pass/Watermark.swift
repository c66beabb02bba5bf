/// The log's acknowledged watermark (R8.9): the highest write id at or below which every write of the
/// log is settled for good in what is committed (answered, refused for good, or out of the queue), so
/// none of them is ever sent again and the instance may forget what it keeps to answer them once.
///
/// A pass reads it before each planning commit, from the state committed before that commit, and the
/// request planned there carries it: that commit's flush makes everything before it durable, so the
/// watermark never counts an answer a power loss could still take back (decision 013, the model's
/// `M_VOLATILE_WATERMARK`).
enum Watermark {
    /// The watermark, reading the verdict table from just above `floor` (one known already: it never
    /// falls) to the first write not settled for good.
    static func acknowledged(_ reader: StoreReader, from floor: UInt64) throws -> UInt64 {
        var watermark = floor
        var unsettled = false
        try reader.scan(.writes, [], StoreKey.bytes(id: floor &+ 1)) { key, value in
            let id = try StoreKey.readBigEndian(key)
            let state = try WriteEntry.decode(value, id: WriteID(id)).state
            // The ids before it that the table does not hold left the queue: settled for good.
            if state.isAnswered || state.isRefusedForGood {
                watermark = id
                return true
            }
            watermark = id - 1
            unsettled = true
            return false
        }
        if !unsettled { watermark = max(watermark, try reader.nextWriteID() - 1) }
        return max(watermark, floor)
    }
}
