public import Outbox
internal import Synchronization

/// A seeded generator (SplitMix64): the same seed draws the same numbers, for tests and simulations.
public final class SeededRandomSource: RandomSource {
    private let state: Mutex<UInt64>

    /// A generator that draws the same numbers for the same `seed`.
    public init(seed: UInt64) { state = Mutex(seed) }

    public func next() -> UInt64 {
        state.withLock { state in
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// A number in `0..<bound`.
    public func next(below bound: UInt64) -> UInt64 { bound == 0 ? 0 : next() % bound }
}
