/// Why bytes could not be decoded. The log reader turns it into an `OutboxError` naming the record.
struct DecodeFailure: Error, Equatable {
    let reason: String
    init(_ reason: String) { self.reason = reason }
}

/// Reads what `ByteWriter` wrote, checking every length against what is left: hostile bytes end in
/// `DecodeFailure`, never in a crash or an oversized allocation.
struct ByteReader {
    private let bytes: UnsafeRawBufferPointer
    private(set) var offset = 0
    /// Collections longer than this are refused before anything is allocated.
    static let maxCount = 1 << 24

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    var isAtEnd: Bool { offset == bytes.count }
    var remaining: Int { bytes.count - offset }

    @inline(__always)
    mutating func byte() throws -> UInt8 {
        guard offset < bytes.count else { throw Self.endsEarly() }
        defer { offset += 1 }
        return bytes[offset]
    }

    /// The failure of a read past the end (made out of line: the reads that throw it are inlined).
    @inline(never)
    static func endsEarly() -> DecodeFailure { DecodeFailure("ends early") }

    mutating func bool() throws -> Bool {
        switch try byte() {
        case 0: return false
        case 1: return true
        case let other: throw DecodeFailure("bad boolean \(other)")
        }
    }

    /// Unsigned LEB128. Most varints are one byte (small counts, lengths, tags), read inline; the rest
    /// go through `longVarint`.
    @inline(__always)
    mutating func varint() throws -> UInt64 {
        if offset < bytes.count {
            let first = bytes[offset]
            if first < 0x80 {
                offset += 1
                return UInt64(first)
            }
        }
        return try longVarint()
    }

    @inline(never)
    private mutating func longVarint() throws -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let next = try byte()
            if shift == 63 && next > 1 { throw DecodeFailure("varint overflows 64 bits") }
            result |= UInt64(next & 0x7F) << shift
            if next & 0x80 == 0 { return result }
            shift += 7
            if shift > 63 { throw DecodeFailure("varint longer than 10 bytes") }
        }
    }

    @inline(__always)
    mutating func count() throws -> Int {
        let value = try varint()
        guard value <= UInt64(min(Self.maxCount, remaining)) else { throw Self.countFailure(value) }
        return Int(value)
    }

    @inline(never)
    private static func countFailure(_ value: UInt64) -> DecodeFailure { DecodeFailure("count \(value) exceeds what is left") }

    mutating func int() throws -> Int {
        let value = try varint()
        guard value <= UInt64(Int.max) else { throw DecodeFailure("integer out of range") }
        return Int(value)
    }

    mutating func signed() throws -> Int64 {
        let raw = try varint()
        return Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1)))
    }

    mutating func bigEndian() throws -> UInt64 {
        guard remaining >= 8 else { throw DecodeFailure("ends early") }
        defer { offset += 8 }
        return StoreKey.readBigEndian(bytes, at: offset)
    }

    mutating func raw(_ count: Int) throws -> [UInt8] {
        guard count <= remaining else { throw DecodeFailure("ends early") }
        defer { offset += count }
        return Self.copy(bytes[offset..<(offset + count)])
    }

    mutating func data() throws -> [UInt8] { try raw(try count()) }

    @inline(__always)
    mutating func skip(_ count: Int) throws {
        guard count <= remaining else { throw Self.endsEarly() }
        offset += count
    }

    /// A copy of the bytes from `start` up to where the reader is.
    func bytes(from start: Int) -> [UInt8] { Self.copy(bytes[start..<offset]) }

    /// `slice` in an array of its own, copied at once (`Array(slice)` goes through the generic copy,
    /// some 400 instructions for a short key).
    private static func copy(_ slice: Slice<UnsafeRawBufferPointer>) -> [UInt8] {
        Array(UnsafeRawBufferPointer(rebasing: slice))
    }

    /// Calls `body` with the bytes at `range`, which the reader has passed.
    func withBytes<R>(_ range: Range<Int>, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(rebasing: bytes[range]))
    }

    /// Whether the bytes at `a` sort before those at `b` (LMDB's order, a prefix first).
    func precedes(_ a: Range<Int>, _ b: Range<Int>) -> Bool {
        withBytes(a) { x in
            withBytes(b) { y in StoreKey.precedes(x.assumingMemoryBound(to: UInt8.self), y.assumingMemoryBound(to: UInt8.self)) }
        }
    }

    mutating func string() throws -> String {
        let length = try count()
        guard length <= remaining else { throw DecodeFailure("ends early") }
        let slice = UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + length)])
        let value: String
        if slice.allSatisfy({ $0 < 0x80 }) {
            // ASCII (names, tables, most keys) is valid UTF-8 as it is: copied in, without the generic
            // validator (a fifth fewer instructions than `String(decoding:as:)` for a name).
            value = String(unsafeUninitializedCapacity: length) { buffer in
                UnsafeMutableRawBufferPointer(buffer).copyMemory(from: slice)
                return length
            }
        } else {
            guard let validated = String(validating: slice, as: UTF8.self) else { throw DecodeFailure("invalid UTF-8") }
            value = validated
        }
        offset += length
        return value
    }

    mutating func optional<T>(_ read: (inout ByteReader) throws -> T) throws -> T? {
        switch try byte() {
        case 0: return nil
        case 1: return try read(&self)
        case let other: throw DecodeFailure("bad optional marker \(other)")
        }
    }

    mutating func array<T>(_ read: (inout ByteReader) throws -> T) throws -> [T] {
        let count = try count()
        if count == 0 { return [] }
        var values: [T] = []
        values.reserveCapacity(count)
        for _ in 0..<count { values.append(try read(&self)) }
        return values
    }

    func expectEnd() throws {
        guard isAtEnd else { throw DecodeFailure("\(remaining) unexpected trailing bytes") }
    }
}
