/// A JSON value held as its canonical binary form: the bytes `JSONValue.encode` writes, object members
/// in byte order. A write's key and body are made canonical once, when the write is queued; from then
/// on they are stored, compared and sent as these bytes, and the `JSONValue` is built only when
/// something asks for it (the simulated instance, a transport that inspects a body, a rendering).
package struct CanonicalJSON: Hashable, Sendable {
    /// The canonical bytes: equal values, equal bytes.
    package let bytes: [UInt8]

    package init(_ value: JSONValue) { bytes = value.canonicalBytes }

    private init(checked bytes: [UInt8]) { self.bytes = bytes }

    /// Reads one value from `reader`, checked as `JSONValue.decode` checks it (known tags, lengths
    /// inside the record, UTF-8, object members in canonical order, finite numbers, the depth limit),
    /// without building it.
    static func read(from reader: inout ByteReader) throws -> CanonicalJSON {
        let start = reader.offset
        try check(&reader, depth: 0)
        return CanonicalJSON(checked: reader.bytes(from: start))
    }

    /// The value. The bytes were checked when they were read or made, so decoding them cannot fail.
    package var value: JSONValue {
        bytes.withUnsafeBytes { raw in
            var reader = ByteReader(raw)
            do {
                return try JSONValue.decode(from: &reader)
            } catch {
                preconditionFailure("canonical JSON that was checked no longer decodes: \(error)")
            }
        }
    }

    /// Whether the value is an object.
    package var isObject: Bool { bytes.first == JSONValue.Tag.object.rawValue }

    /// The value as JSON text in UTF-8, exactly as `JSONText.render(value)` writes it, rendered
    /// straight from the bytes.
    package var text: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count + bytes.count / 2 + 8)
        bytes.withUnsafeBytes { raw in
            var reader = ByteReader(raw)
            do {
                try Self.render(&reader, to: &out)
            } catch {
                preconditionFailure("canonical JSON that was checked no longer renders: \(error)")
            }
        }
        return out
    }

    private static func check(_ reader: inout ByteReader, depth: Int) throws {
        guard depth < JSONText.maxDepth else { throw DecodeFailure("JSON nested deeper than \(JSONText.maxDepth)") }
        switch JSONValue.Tag(rawValue: try reader.byte()) {
        case .null, .isFalse, .isTrue: break
        case .int: _ = try reader.varint()
        case .double:
            guard Double(bitPattern: try reader.bigEndian()).isFinite else { throw DecodeFailure("a number that is not finite") }
        case .string: try reader.skipString()
        case .array:
            for _ in 0..<(try reader.count()) { try check(&reader, depth: depth + 1) }
        case .object:
            var previous: Range<Int>?
            for _ in 0..<(try reader.count()) {
                let name = try reader.skipString()
                if let previous, !reader.precedes(previous, name) {
                    throw DecodeFailure("JSON object keys not in canonical order")
                }
                previous = name
                try check(&reader, depth: depth + 1)
            }
        case nil: throw DecodeFailure("unknown JSON tag")
        }
    }

    private static func render(_ reader: inout ByteReader, to out: inout [UInt8]) throws {
        switch JSONValue.Tag(rawValue: try reader.byte()) {
        case .null: out.append(contentsOf: "null".utf8)
        case .isFalse: out.append(contentsOf: "false".utf8)
        case .isTrue: out.append(contentsOf: "true".utf8)
        case .int: out.append(contentsOf: String(try reader.signed()).utf8)
        case .double: out.append(contentsOf: JSONText.render(.double(Double(bitPattern: try reader.bigEndian()))).utf8)
        case .string: try quote(reader.skipString(), &reader, to: &out)
        case .array:
            out.append(UInt8(ascii: "["))
            for index in 0..<(try reader.count()) {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                try render(&reader, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object:
            out.append(UInt8(ascii: "{"))
            for index in 0..<(try reader.count()) {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                try quote(reader.skipString(), &reader, to: &out)
                out.append(UInt8(ascii: ":"))
                try render(&reader, to: &out)
            }
            out.append(UInt8(ascii: "}"))
        case nil: throw DecodeFailure("unknown JSON tag")
        }
    }

    /// A JSON string literal for the UTF-8 bytes at `range`, escaped as `JSONText.quote` escapes: every
    /// byte it escapes is ASCII, and no byte of a longer UTF-8 sequence is, so the bytes go as they are.
    private static func quote(_ range: Range<Int>, _ reader: inout ByteReader, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        reader.withBytes(range) { bytes in
            for byte in bytes {
                switch byte {
                case UInt8(ascii: "\""): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
                case UInt8(ascii: "\\"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
                case UInt8(ascii: "\n"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
                case UInt8(ascii: "\r"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
                case UInt8(ascii: "\t"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
                case 0..<0x20:
                    let hex = Array(String(byte, radix: 16).utf8)
                    out.append(contentsOf: "\\u".utf8)
                    out.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: 4 - hex.count))
                    out.append(contentsOf: hex)
                default: out.append(byte)
                }
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}

extension ByteReader {
    /// Skips a length-prefixed string, checking that it is UTF-8; returns where its bytes are.
    @discardableResult
    mutating func skipString() throws -> Range<Int> {
        let length = try count()
        guard length <= remaining else { throw DecodeFailure("ends early") }
        let range = offset..<(offset + length)
        try withBytes(range) { slice in
            if !slice.allSatisfy({ $0 < 0x80 }), String(validating: slice, as: UTF8.self) == nil {
                throw DecodeFailure("invalid UTF-8")
            }
        }
        try skip(length)
        return range
    }
}
