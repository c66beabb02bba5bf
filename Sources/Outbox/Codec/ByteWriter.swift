/// Where the binary forms the log and projections store are written: LEB128 varints, length-prefixed
/// bytes. One encoder serves four sinks: `ByteWriter` grows an array, `ByteCount` only counts (the
/// size LMDB must reserve), `PageWriter` writes into the page LMDB reserved (`MDB_RESERVE`), and
/// `ScratchWriter` counts and writes what fits into a buffer of the stack, in one pass.
protocol ByteSink {
    mutating func byte(_ value: UInt8)
    mutating func raw(_ bytes: UnsafeRawBufferPointer)
}

extension ByteSink {
    mutating func bool(_ value: Bool) { byte(value ? 1 : 0) }

    /// Unsigned LEB128.
    mutating func varint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            byte(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        byte(UInt8(value))
    }

    mutating func varint(_ value: Int) { varint(UInt64(value)) }

    /// Zigzag then LEB128, for signed values.
    mutating func signed(_ value: Int64) { varint(UInt64(bitPattern: (value << 1) ^ (value >> 63))) }

    /// Eight bytes, big-endian: sortable keys.
    mutating func bigEndian(_ value: UInt64) {
        withUnsafeBytes(of: value.bigEndian) { raw($0) }
    }

    mutating func littleEndian32(_ value: UInt32) {
        withUnsafeBytes(of: value.littleEndian) { raw($0) }
    }

    mutating func littleEndian64(_ value: UInt64) {
        withUnsafeBytes(of: value.littleEndian) { raw($0) }
    }

    mutating func raw(_ data: some Collection<UInt8>) {
        if let done: Void = data.withContiguousStorageIfAvailable({ raw(UnsafeRawBufferPointer($0)) }) { return done }
        for value in data { byte(value) }
    }

    mutating func data(_ data: some Collection<UInt8>) {
        varint(data.count)
        raw(data)
    }

    mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { data($0) }
    }

    mutating func optional<T>(_ value: T?, _ write: (inout Self, T) -> Void) {
        if let value {
            byte(1)
            write(&self, value)
        } else {
            byte(0)
        }
    }

    mutating func array<T>(_ values: [T], _ write: (inout Self, T) -> Void) {
        varint(values.count)
        for value in values { write(&self, value) }
    }
}

/// A sink that grows an array.
struct ByteWriter: ByteSink {
    var bytes: [UInt8]

    init(capacity: Int = 64) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    mutating func byte(_ value: UInt8) { bytes.append(value) }
    mutating func raw(_ data: UnsafeRawBufferPointer) { bytes.append(contentsOf: data) }
}

/// A sink that only counts what would be written.
struct ByteCount: ByteSink {
    private(set) var count = 0
    mutating func byte(_ value: UInt8) { count += 1 }
    mutating func raw(_ data: UnsafeRawBufferPointer) { count += data.count }
}

/// A sink over memory reserved for exactly what will be written (a page `MDB_RESERVE` handed out).
struct PageWriter: ByteSink {
    private let buffer: UnsafeMutableRawBufferPointer
    private(set) var offset = 0

    init(_ buffer: UnsafeMutableRawBufferPointer) { self.buffer = buffer }

    /// The bytes written so far.
    var written: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: buffer[..<offset]) }

    mutating func byte(_ value: UInt8) {
        precondition(offset < buffer.count, "more bytes written than reserved")
        buffer[offset] = value
        offset += 1
    }

    mutating func raw(_ data: UnsafeRawBufferPointer) {
        precondition(data.count <= buffer.count - offset, "more bytes written than reserved")
        guard let source = data.baseAddress else { return }
        (buffer.baseAddress! + offset).copyMemory(from: source, byteCount: data.count)
        offset += data.count
    }

    /// Checks that the reservation was exactly filled.
    func finish() { precondition(offset == buffer.count, "\(offset) bytes written into \(buffer.count) reserved") }
}

/// A sink over a fixed buffer that writes the bytes that fit and counts them all: one pass gives a
/// value's size and, when it fits, its bytes.
struct ScratchWriter: ByteSink {
    private let buffer: UnsafeMutableRawBufferPointer
    /// Every byte written, those that did not fit included.
    private(set) var count = 0

    init(_ buffer: UnsafeMutableRawBufferPointer) { self.buffer = buffer }

    /// The bytes written so far, or nil once they no longer fit.
    var written: UnsafeRawBufferPointer? {
        count <= buffer.count ? UnsafeRawBufferPointer(rebasing: buffer[..<count]) : nil
    }

    mutating func byte(_ value: UInt8) {
        if count < buffer.count { buffer[count] = value }
        count += 1
    }

    mutating func raw(_ data: UnsafeRawBufferPointer) {
        if data.count <= buffer.count - count, let source = data.baseAddress {
            (buffer.baseAddress! + count).copyMemory(from: source, byteCount: data.count)
        }
        count += data.count
    }
}
