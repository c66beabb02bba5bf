/// The stored form of one event:
///
/// ```
/// byte 0      payload version (per event type; see EventType.currentVersion)
/// byte 1      event type code (EventType.rawValue)
/// varint      time, zigzag milliseconds since 1970
/// …           payload
/// 4 bytes     CRC32C, little-endian, over the 8-byte big-endian sequence number and every byte above
/// ```
///
/// The sequence number is inside the checksum, so a record moved to another key is caught too.
package enum RecordCodec {
    /// Why a record could not be read.
    package enum Failure: Error, Hashable, Sendable {
        case checksumMismatch
        case tooShort
        case unknownType(UInt8)
        /// A payload version newer than this build knows (R8.1): a clear error, not a guess.
        case newerVersion(type: String, version: UInt8, known: UInt8)
        case malformed(String)

        var reason: String {
            switch self {
            case .checksumMismatch: return "checksum mismatch"
            case .tooShort: return "record too short"
            case .unknownType(let code): return "unknown event type \(code)"
            case .newerVersion(let type, let version, let known):
                return "\(type) version \(version) is newer than this build reads (\(known)); upgrade the tool"
            case .malformed(let reason): return "malformed payload: \(reason)"
            }
        }
    }

    /// The record for `event` at `sequence`.
    package static func encode(_ event: Event, at time: Timestamp, sequence: UInt64) -> [UInt8] {
        var writer = ByteWriter(capacity: 96)
        writeBody(event, at: time, into: &writer)
        let crc = writer.bytes.withUnsafeBytes { checksum(sequence: sequence, body: $0) }
        writer.littleEndian32(crc)
        return writer.bytes
    }

    /// Everything the checksum covers after the sequence number: the version, the type, the time and
    /// the payload.
    static func writeBody(_ event: Event, at time: Timestamp, into writer: inout some ByteSink) {
        writer.byte(event.type.currentVersion)
        writer.byte(event.type.rawValue)
        writer.signed(time.rawValue)
        event.encodePayload(into: &writer)
    }

    /// CRC32C over the sequence number's 8 big-endian bytes, then `body`.
    static func checksum(sequence: UInt64, body: UnsafeRawBufferPointer) -> UInt32 {
        let head = withUnsafeBytes(of: sequence.bigEndian) { CRC32C.update(0, $0) }
        return CRC32C.update(head, body)
    }

    /// Reads the record stored at `sequence`: checks its checksum, upcasts an older payload version,
    /// and decodes it. Any damage is a `Failure`, never a crash.
    package static func decode(_ bytes: UnsafeRawBufferPointer, sequence: UInt64) throws(Failure) -> RecordedEvent {
        guard bytes.count >= 7 else { throw .tooShort }
        let bodyCount = bytes.count - 4
        let stored =
            UInt32(bytes[bodyCount]) | UInt32(bytes[bodyCount + 1]) << 8 | UInt32(bytes[bodyCount + 2]) << 16
            | UInt32(bytes[bodyCount + 3]) << 24
        guard checksum(sequence: sequence, body: UnsafeRawBufferPointer(rebasing: bytes[0..<bodyCount])) == stored else {
            throw .checksumMismatch
        }

        let version = bytes[0]
        guard let type = EventType(rawValue: bytes[1]) else { throw .unknownType(bytes[1]) }
        guard version <= type.currentVersion else {
            throw .newerVersion(type: type.name, version: version, known: type.currentVersion)
        }
        guard version >= 1 else { throw .malformed("version 0") }
        do {
            var reader = ByteReader(UnsafeRawBufferPointer(rebasing: bytes[2..<bodyCount]))
            let time = Timestamp(milliseconds: try reader.signed())
            func decodePayload(_ raw: UnsafeRawBufferPointer) throws -> Event {
                var payloadReader = ByteReader(raw)
                let event = try Event.decodePayload(type: type, from: &payloadReader)
                try payloadReader.expectEnd()
                return event
            }
            // A current payload is decoded where it lies; an older one is upcast into a copy first.
            let event: Event
            if version < type.currentVersion {
                let payload = try Upcasting.upcast(type: type, from: version, payload: try reader.raw(reader.remaining))
                event = try payload.withUnsafeBytes { try decodePayload($0) }
            } else {
                event = try decodePayload(UnsafeRawBufferPointer(rebasing: bytes[(bodyCount - reader.remaining)..<bodyCount]))
            }
            return RecordedEvent(sequence: sequence, at: time, event: event)
        } catch let failure as DecodeFailure {
            throw .malformed(failure.reason)
        } catch {
            throw .malformed("\(error)")
        }
    }

    /// Decodes a record where it lies in a transaction.
    static func decode(_ stored: RawSpan, sequence: UInt64) throws(Failure) -> RecordedEvent {
        let result = stored.withUnsafeBytes { raw in Result { () throws(Failure) in try decode(raw, sequence: sequence) } }
        return try result.get()
    }

    /// Decodes a record held in an array (tests, fuzzing).
    package static func decode(_ bytes: [UInt8], sequence: UInt64) throws(Failure) -> RecordedEvent {
        let result = bytes.withUnsafeBytes { raw in Result { () throws(Failure) in try decode(raw, sequence: sequence) } }
        return try result.get()
    }

    /// `bytes` with its checksum recomputed for `sequence`: lets a fuzzer's mutations reach the payload.
    package static func fixingChecksum(_ bytes: [UInt8], sequence: UInt64) -> [UInt8] {
        guard bytes.count >= 4 else { return bytes }
        var writer = ByteWriter(capacity: bytes.count)
        writer.raw(bytes.dropLast(4))
        let crc = writer.bytes.withUnsafeBytes { checksum(sequence: sequence, body: $0) }
        writer.littleEndian32(crc)
        return writer.bytes
    }
}
