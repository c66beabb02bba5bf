#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// Appends the binary forms the log and projections store: LEB128 varints, length-prefixed bytes.
struct ByteWriter {
    var bytes: [UInt8]

    init(capacity: Int = 64) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    mutating func byte(_ value: UInt8) { bytes.append(value) }

    mutating func bool(_ value: Bool) { bytes.append(value ? 1 : 0) }

    /// Unsigned LEB128.
    mutating func varint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    mutating func varint(_ value: Int) { varint(UInt64(value)) }

    /// Zigzag then LEB128, for signed values.
    mutating func signed(_ value: Int64) { varint(UInt64(bitPattern: (value << 1) ^ (value >> 63))) }

    /// Eight bytes, big-endian: sortable keys.
    mutating func bigEndian(_ value: UInt64) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func littleEndian32(_ value: UInt32) {
        for shift in stride(from: 0, through: 24, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt32(shift))) }
    }

    mutating func raw(_ data: some Collection<UInt8>) { bytes.append(contentsOf: data) }

    mutating func data(_ data: some Collection<UInt8>) {
        varint(data.count)
        bytes.append(contentsOf: data)
    }

    mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { data($0) }
    }

    mutating func optional<T>(_ value: T?, _ write: (inout ByteWriter, T) -> Void) {
        if let value {
            byte(1)
            write(&self, value)
        } else {
            byte(0)
        }
    }

    mutating func array<T>(_ values: [T], _ write: (inout ByteWriter, T) -> Void) {
        varint(values.count)
        for value in values { write(&self, value) }
    }
}

/// Big-endian key helpers.
enum Key {
    static func id(_ value: UInt64) -> [UInt8] {
        var writer = ByteWriter(capacity: 8)
        writer.bigEndian(value)
        return writer.bytes
    }

    static func pair(_ a: UInt64, _ b: UInt64) -> [UInt8] {
        var writer = ByteWriter(capacity: 16)
        writer.bigEndian(a)
        writer.bigEndian(b)
        return writer.bytes
    }

    /// `user` NUL-terminated (users never contain NUL, R2.4), then `id`: per-user lists in id order.
    static func user(_ user: String, _ id: UInt64) -> [UInt8] {
        var writer = ByteWriter(capacity: user.utf8.count + 9)
        writer.raw(user.utf8)
        writer.byte(0)
        writer.bigEndian(id)
        return writer.bytes
    }

    /// The user of a `userPrefix` key; nil when the bytes are not one.
    static func user(ofPrefix key: [UInt8]) -> String? {
        guard key.last == 0, key.firstIndex(of: 0) == key.count - 1 else { return nil }
        return String(validating: key[..<(key.count - 1)], as: UTF8.self)
    }

    static func userPrefix(_ user: String) -> [UInt8] {
        var writer = ByteWriter(capacity: user.utf8.count + 1)
        writer.raw(user.utf8)
        writer.byte(0)
        return writer.bytes
    }

    /// LMDB's key order (and the canonical order of JSON object keys): bytes compared as unsigned,
    /// a prefix first.
    static func precedes(_ x: UnsafeBufferPointer<UInt8>, _ y: UnsafeBufferPointer<UInt8>) -> Bool {
        let common = min(x.count, y.count)
        let order = common == 0 ? 0 : memcmp(x.baseAddress!, y.baseAddress!, common)
        return order != 0 ? order < 0 : x.count < y.count
    }

    static func precedes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.withUnsafeBufferPointer { x in b.withUnsafeBufferPointer { y in precedes(x, y) } }
    }

    static func readBigEndian(_ bytes: UnsafeRawBufferPointer, at offset: Int = 0) -> UInt64 {
        var value: UInt64 = 0
        for index in offset..<(offset + 8) { value = value << 8 | UInt64(bytes[index]) }
        return value
    }
}
