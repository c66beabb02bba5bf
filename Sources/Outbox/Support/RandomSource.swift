internal import Synchronization

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// Where the library draws randomness: idempotency keys, the log's origin.
public protocol RandomSource: Sendable {
    /// 64 random bits.
    func next() -> UInt64
}

/// The system's generator, drawn in blocks: one system call gives 64 numbers (32 idempotency keys)
/// instead of one call per number. A process that forks without exec would share the unused
/// numbers with its child; the library never forks.
public struct SystemRandomSource: RandomSource {
    private let pool = Pool()

    /// The system's randomness, drawn in blocks.
    public init() {}

    public func next() -> UInt64 { pool.next() }

    private final class Pool: Sendable {
        private static let size = 64
        private let state = Mutex<(values: [UInt64], next: Int)>(([], 0))

        func next() -> UInt64 {
            state.withLock { state in
                if state.next == state.values.count {
                    state.values = Self.draw()
                    state.next = 0
                }
                defer { state.next += 1 }
                return state.values[state.next]
            }
        }

        /// `arc4random_buf` (glibc: one `getrandom` call for the whole block; it never fails).
        private static func draw() -> [UInt64] {
            var values = [UInt64](repeating: 0, count: size)
            values.withUnsafeMutableBytes { arc4random_buf($0.baseAddress!, $0.count) }
            return values
        }
    }
}
