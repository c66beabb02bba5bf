/// 128 random bits: a write's idempotency key (new at enqueue and at every release), or a log's origin.
public struct IdempotencyKey: Hashable, Sendable, CustomStringConvertible {
    /// The key's first 64 bits.
    public let high: UInt64
    /// The key's last 64 bits.
    public let low: UInt64

    /// A key of these 128 bits.
    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// A fresh key from `random`.
    init(using random: any RandomSource) {
        self.init(high: random.next(), low: random.next())
    }

    /// Reads the form `description` writes; nil for anything else.
    public init?(_ text: String) {
        let hex = text.filter { $0 != "-" }
        guard text.count == 36, hex.count == 32, let high = UInt64(hex.prefix(16), radix: 16),
            let low = UInt64(hex.suffix(16), radix: 16)
        else { return nil }
        self.init(high: high, low: low)
    }

    /// 32 lowercase hex digits, in the 8-4-4-4-12 groups of a UUID.
    public var description: String {
        let hex = [high, low].map { value -> String in
            let digits = String(value, radix: 16)
            return String(repeating: "0", count: 16 - digits.count) + digits
        }.joined()
        let chars = Array(hex)
        return [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { String(chars[$0]) }.joined(separator: "-")
    }

    func encode(into writer: inout some ByteSink) {
        writer.bigEndian(high)
        writer.bigEndian(low)
    }

    static func decode(from reader: inout ByteReader) throws -> IdempotencyKey {
        IdempotencyKey(high: try reader.bigEndian(), low: try reader.bigEndian())
    }
}

/// A log's origin: 128 random bits made when the log is created, sent with every write so the instance
/// recognises a write by (origin, id) even after its key was renewed.
public typealias Origin = IdempotencyKey
