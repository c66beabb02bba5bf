/// A JSON value held as its canonical binary form: the bytes `JSONValue.encode` writes, object members
/// in byte order. A write's key and body are made canonical once, when the write is queued; from then
/// on they are stored, compared and sent as these bytes, and the `JSONValue` is built only when
/// something asks for it (the simulated instance, a transport that inspects a body, a rendering).
package struct CanonicalJSON: Hashable, Sendable {
    /// The canonical bytes: equal values, equal bytes.
    package let bytes: [UInt8]
    /// Whether a log can hold the value (every number finite, nesting less than `JSONText.maxDepth`
    /// deep): what a reader of the log checks. Read bytes passed that check; a value's encoder notes it.
    /// (A function of the bytes, so equal bytes agree on it.)
    let isHoldable: Bool

    package init(_ value: JSONValue) {
        var writer = ByteWriter()
        isHoldable = value.encode(into: &writer)
        bytes = writer.bytes
    }

    private init(checked bytes: [UInt8]) {
        self.bytes = bytes
        isHoldable = true
    }

    /// At most how many bytes the value is as JSON text, from its length alone: no byte of the canonical
    /// form renders as more than six bytes of text (the widest are a control character in a string,
    /// `\u0001`, and `false` with the comma after it).
    var textLengthBound: Int { bytes.count * 6 }

    /// Reads one value from `reader`, checked as `JSONValue.decode` checks it (known tags, lengths
    /// inside the record, UTF-8, object members in canonical order, finite numbers, the depth limit),
    /// without building it.
    static func read(from reader: inout ByteReader) throws -> CanonicalJSON {
        let start = reader.offset
        _ = try check(&reader, depth: 0, Checking.self)
        return CanonicalJSON(checked: reader.bytes(from: start))
    }

    /// The value's length as JSON text (what `JSONText.renderedLength` counts), checking on the way what
    /// a value can hold that a reader of the log refuses: bytes made from a `JSONValue` that holds a
    /// number that is not finite, or nests deeper than `JSONText.maxDepth`, throw the reason. (Their
    /// strings are UTF-8 and their members in canonical order by construction, and read bytes were
    /// checked whole when they were read.)
    func checkedTextLength() throws(DecodeFailure) -> Int {
        do {
            return try bytes.withUnsafeBytes { raw in
                var reader = ByteReader(raw)
                return try Self.check(&reader, depth: 0, Measuring.self)
            }
        } catch let failure as DecodeFailure {
            throw failure
        } catch {
            preconditionFailure("checking canonical JSON threw \(error)")
        }
    }

    /// How many members the value has when it is an object; nil for any other value.
    package var memberCount: Int? {
        guard isObject else { return nil }
        return bytes.withUnsafeBytes { raw in
            var reader = ByteReader(raw)
            _ = try? reader.byte()
            return try? reader.count()
        }
    }

    /// Calls `body` with each member this object and `other` both hold, in canonical order: where its
    /// name lies in this object's bytes, and its value in each one's, until it returns false. Both
    /// objects' members are in canonical order, so one walk over the two finds them. Nothing for values
    /// that are not objects. For bytes `checkedTextLength` accepts.
    func forEachSharedMember(
        with other: CanonicalJSON, _ body: (_ name: Range<Int>, _ mine: Range<Int>, _ theirs: Range<Int>) -> Bool
    ) {
        guard isObject, other.isObject else { return }
        bytes.withUnsafeBytes { a in
            other.bytes.withUnsafeBytes { b in
                var x = ByteReader(a)
                var y = ByteReader(b)
                do {
                    _ = try x.byte()
                    _ = try y.byte()
                    var (left, right) = (try x.count(), try y.count())
                    guard left > 0, right > 0 else { return }
                    var (myName, theirName) = (try x.skipTrustedString(), try y.skipTrustedString())
                    while true {
                        let order = StoreKey.order(
                            UnsafeRawBufferPointer(rebasing: a[myName]), UnsafeRawBufferPointer(rebasing: b[theirName]))
                        let same = order == 0
                        let mineFirst = order < 0
                        if same || mineFirst {
                            let mine = x.offset
                            _ = try Self.check(&x, depth: 1, Skipping.self)
                            left -= 1
                            if same {
                                let theirs = y.offset
                                _ = try Self.check(&y, depth: 1, Skipping.self)
                                right -= 1
                                if !body(myName, mine..<x.offset, theirs..<y.offset) { return }
                                guard right > 0 else { return }
                                theirName = try y.skipTrustedString()
                            }
                            guard left > 0 else { return }
                            myName = try x.skipTrustedString()
                        } else {
                            _ = try Self.check(&y, depth: 1, Skipping.self)
                            right -= 1
                            guard right > 0 else { return }
                            theirName = try y.skipTrustedString()
                        }
                    }
                } catch {
                    preconditionFailure("canonical JSON that was checked no longer reads: \(error)")
                }
            }
        }
    }

    /// The value whose canonical bytes lie at `range` of `bytes` (a member's value, as `forEachSharedMember` gives it).
    func value(at range: Range<Int>) -> JSONValue {
        bytes[range].withUnsafeBytes { raw in
            var reader = ByteReader(raw)
            do {
                return try JSONValue.decode(from: &reader, depth: 1, limits: false)
            } catch {
                preconditionFailure("canonical JSON that was checked no longer decodes: \(error)")
            }
        }
    }

    /// The value. The bytes were checked when they were read, or made from a value, so decoding them
    /// cannot fail (and gives back a number that is not finite, or a nesting past the limit, as it was
    /// made: enqueue refuses them).
    package var value: JSONValue {
        bytes.withUnsafeBytes { raw in
            var reader = ByteReader(raw)
            do {
                return try JSONValue.decode(from: &reader, limits: false)
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

    /// Checks one value (see `read`; a walk that trusts the text checks its tags, lengths, numbers and
    /// depth only); when the walk `measures`, returns its length as JSON text, else 0. (A type, not a
    /// flag: each walk is compiled on its own, and a read of the log counts nothing.)
    private static func check<Walk: CanonicalWalk>(_ reader: inout ByteReader, depth: Int, _ walk: Walk.Type) throws -> Int {
        let measuring = Walk.measures
        let checkingText = Walk.checksText
        guard depth < JSONText.maxDepth else { throw DecodeFailure("JSON nested deeper than \(JSONText.maxDepth)") }
        switch JSONValue.Tag(rawValue: try reader.byte()) {
        case .null, .isTrue: return 4
        case .isFalse: return 5
        case .int:
            let value = try reader.signed()
            return measuring ? JSONText.digits(value) : 0
        case .double:
            let value = Double(bitPattern: try reader.bigEndian())
            guard value.isFinite else { throw DecodeFailure("a number that is not finite") }
            return measuring ? JSONText.renderedLength(.double(value)) : 0
        case .string:
            let string = checkingText ? try reader.skipString() : try reader.skipTrustedString()
            return measuring ? quotedLength(string, reader) : 0
        case .array:
            let count = try reader.count()
            var length = 2 + max(0, count - 1)
            for _ in 0..<count { length += try check(&reader, depth: depth + 1, walk) }
            return length
        case .object:
            let count = try reader.count()
            var length = 2 + max(0, count - 1)
            var previous: Range<Int>?
            for _ in 0..<count {
                let name = checkingText ? try reader.skipString() : try reader.skipTrustedString()
                if checkingText, let previous, !reader.precedes(previous, name) {
                    throw DecodeFailure("JSON object keys not in canonical order")
                }
                previous = name
                if measuring { length += quotedLength(name, reader) + 1 }
                length += try check(&reader, depth: depth + 1, walk)
            }
            return length
        case nil: throw DecodeFailure("unknown JSON tag")
        }
    }

    /// The length of the JSON string literal `quote` writes for the UTF-8 bytes at `range`.
    private static func quotedLength(_ range: Range<Int>, _ reader: ByteReader) -> Int {
        reader.withBytes(range) { bytes in
            bytes.reduce(2) { length, byte in
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"):
                    length + 2
                case 0..<0x20: length + 6
                default: length + 1
                }
            }
        }
    }

    private static func render(_ reader: inout ByteReader, to out: inout [UInt8]) throws {
        switch JSONValue.Tag(rawValue: try reader.byte()) {
        case .null: out.append(contentsOf: "null".utf8)
        case .isFalse: out.append(contentsOf: "false".utf8)
        case .isTrue: out.append(contentsOf: "true".utf8)
        case .int: out.append(contentsOf: String(try reader.signed()).utf8)
        case .double: out.append(contentsOf: JSONText.render(.double(Double(bitPattern: try reader.bigEndian()))).utf8)
        case .string: try quote(reader.skipTrustedString(), &reader, to: &out)
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
                try quote(reader.skipTrustedString(), &reader, to: &out)
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

    /// Skips a length-prefixed string whose bytes are known to be UTF-8; returns where they are.
    mutating func skipTrustedString() throws -> Range<Int> {
        let length = try count()
        let range = offset..<(offset + length)
        try skip(length)
        return range
    }
}

/// What a walk over canonical bytes does besides checking their structure.
private protocol CanonicalWalk {
    static var measures: Bool { get }
    /// Whether strings are checked as UTF-8 and members as in canonical order.
    static var checksText: Bool { get }
}
/// Checks everything: a read of the log.
private enum Checking: CanonicalWalk {
    static var measures: Bool { false }
    static var checksText: Bool { true }
}
/// Counts the length as JSON text of a `CanonicalJSON`: enqueue's check of a write.
private enum Measuring: CanonicalWalk {
    static var measures: Bool { true }
    static var checksText: Bool { false }
}
/// Steps over a value of a `CanonicalJSON`.
private enum Skipping: CanonicalWalk {
    static var measures: Bool { false }
    static var checksText: Bool { false }
}
