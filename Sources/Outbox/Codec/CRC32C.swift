import COutboxCRC

/// CRC-32C (Castagnoli, polynomial 0x1EDC6F41, reflected 0x82F63B78): by the processor's instruction
/// where it has one (x86-64 with SSE 4.2), else slicing-by-8.
///
/// The checksum every log record carries. Check value: `CRC32C.checksum("123456789")` is `0xE3069283`.
package enum CRC32C {
    /// Whether the processor's CRC-32C instruction computes `update` (checked once a process).
    package static let usesHardware = outbox_crc32c_hardware_available() != 0

    /// Continues `crc` (a value this function returned, or 0 to start) over `bytes`.
    package static func update(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard let base = bytes.baseAddress else { return crc }
        if usesHardware { return ~outbox_crc32c_hardware_update(~crc, base, bytes.count) }
        return tableUpdate(crc, bytes)
    }

    /// The eight slicing tables, one after another in one allocation that lives as long as the
    /// process: table k's entry for byte b is at k * 256 + b. Read through a pointer, with no array to
    /// retain per call and no bounds check per byte (every index is a byte plus a table's offset).
    // nonisolated(unsafe): filled once by the static's thread-safe initialization, only read after.
    nonisolated(unsafe) private static let table: UnsafePointer<UInt32> = {
        let table = UnsafeMutablePointer<UInt32>.allocate(capacity: 8 * 256)
        for byte in 0..<256 {
            var crc = UInt32(byte)
            for _ in 0..<8 { crc = (crc & 1) != 0 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
            table[byte] = crc
        }
        for slice in 1..<8 {
            for byte in 0..<256 {
                let previous = table[(slice - 1) * 256 + byte]
                table[slice * 256 + byte] = (previous >> 8) ^ table[Int(previous & 0xFF)]
            }
        }
        return UnsafePointer(table)
    }()

    /// `update` by the slicing tables, whatever the processor (what a processor without the
    /// instruction runs; the tests compare the two).
    package static func tableUpdate(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard let base = bytes.baseAddress else { return crc }
        let t = table
        var crc = ~crc
        var index = 0
        let count = bytes.count
        while count - index >= 8 {
            let word = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: index, as: UInt64.self))
            let lo = crc ^ UInt32(truncatingIfNeeded: word)
            let hi = UInt32(truncatingIfNeeded: word >> 32)
            crc =
                t[7 * 256 + Int(lo & 0xFF)] ^ t[6 * 256 + Int((lo >> 8) & 0xFF)] ^ t[5 * 256 + Int((lo >> 16) & 0xFF)]
                ^ t[4 * 256 + Int(lo >> 24)] ^ t[3 * 256 + Int(hi & 0xFF)] ^ t[2 * 256 + Int((hi >> 8) & 0xFF)]
                ^ t[256 + Int((hi >> 16) & 0xFF)] ^ t[Int(hi >> 24)]
            index += 8
        }
        while index < count {
            crc = (crc >> 8) ^ t[Int((crc ^ UInt32(base.load(fromByteOffset: index, as: UInt8.self))) & 0xFF)]
            index += 1
        }
        return ~crc
    }

    /// The checksum of `bytes`.
    package static func checksum(_ bytes: some Sequence<UInt8>) -> UInt32 {
        let array = Array(bytes)
        return array.withUnsafeBytes { update(0, $0) }
    }
}
