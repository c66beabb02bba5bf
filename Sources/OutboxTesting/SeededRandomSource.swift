public import Outbox
internal import Synchronization

/// SplitMix64 held by value: the same seed draws the same numbers. One generator a simulation's
/// stream (a simulation draws from several, each of its own seed).
public struct SplitMix64: Hashable, Sendable {
    /// The generator's state: the seed, advanced once a draw.
    public private(set) var state: UInt64

    /// A generator that draws the same numbers for the same `seed`.
    public init(seed: UInt64) { state = seed }

    /// The next number.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A seeded generator (SplitMix64) to inject as the client's randomness: the same seed draws the
/// same numbers, for tests and simulations.
public final class SeededRandomSource: RandomSource {
    private let generator: Mutex<SplitMix64>

    /// A generator that draws the same numbers for the same `seed`.
    public init(seed: UInt64) { generator = Mutex(SplitMix64(seed: seed)) }

    public func next() -> UInt64 { generator.withLock { $0.next() } }

    /// A number in `0..<bound`.
    public func next(below bound: UInt64) -> UInt64 { bound == 0 ? 0 : next() % bound }
}
