/// JSON text: a strict RFC 8259 parser (duplicate keys, trailing data, nesting past 64 levels and
/// integers beyond 64 bits are errors) and a canonical renderer (sorted keys, no spaces). Written here rather than through
/// Foundation so that integers stay integers and errors say where the text went wrong.
public enum JSONText {
    /// Deepest nesting accepted.
    public static let maxDepth = 64

    /// Why a text is not JSON: what was expected and at which byte offset.
    public struct ParseError: Error, Hashable, Sendable, CustomStringConvertible {
        /// Where the text went wrong, in UTF-8 bytes from its start.
        public let offset: Int
        /// What was wrong there.
        public let reason: String
        public var description: String { "not valid JSON at byte \(offset): \(reason)" }
    }

    /// Parses one JSON value, with nothing but white space around it.
    public static func parse(_ text: String) throws(ParseError) -> JSONValue {
        var parser = Parser(bytes: Array(text.utf8))
        parser.skipSpace()
        let value = try parser.value(depth: 0)
        parser.skipSpace()
        guard parser.index == parser.bytes.count else { throw parser.error("unexpected text after the value") }
        return value
    }

    /// Canonical text: object keys sorted by their UTF-8 bytes, no white space.
    public static func render(_ value: JSONValue) -> String {
        var out = ""
        write(value, to: &out)
        return out
    }

    private static func write(_ value: JSONValue, to out: inout String) {
        switch value {
        case .null: out += "null"
        case .bool(let value): out += value ? "true" : "false"
        case .int(let value): out += String(value)
        case .double(let value):
            if !value.isFinite {
                out += "null"
            } else if value == value.rounded(), abs(value) < 1e15 {
                out += String(Int64(value)) + ".0"
            } else {
                out += "\(value)"
            }
        case .string(let value): quote(value, to: &out)
        case .array(let values):
            out += "["
            for (index, element) in values.enumerated() {
                if index > 0 { out += "," }
                write(element, to: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (index, key) in members.keys.sorted(by: JSONValue.precedes).enumerated() {
                if index > 0 { out += "," }
                quote(key, to: &out)
                out += ":"
                write(members[key]!, to: &out)
            }
            out += "}"
        }
    }

    /// The length in UTF-8 bytes of `render(value)`, counted without rendering it (enqueue checks every
    /// write against `Write.maxJSONBytes`; rendering each would cost a string per write).
    public static func renderedLength(_ value: JSONValue) -> Int {
        switch value {
        case .null: return 4
        case .bool(let value): return value ? 4 : 5
        case .int(let value): return digits(value)
        case .double(let value):
            var out = ""
            write(.double(value), to: &out)
            return out.utf8.count
        case .string(let value): return quotedLength(value)
        case .array(let values): return 2 + max(0, values.count - 1) + values.reduce(0) { $0 + renderedLength($1) }
        case .object(let members):
            return 2 + max(0, members.count - 1) + members.reduce(0) { $0 + quotedLength($1.key) + 1 + renderedLength($1.value) }
        }
    }

    /// The decimal digits of `value`, with its sign.
    static func digits(_ value: Int64) -> Int {
        var count = value < 0 ? 2 : 1
        var rest = value.magnitude / 10
        while rest > 0 {
            count += 1
            rest /= 10
        }
        return count
    }

    /// The length of `quote(value)`.
    private static func quotedLength(_ value: String) -> Int {
        var count = 2
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"", "\\", "\n", "\r", "\t": count += 2
            case _ where scalar.value < 0x20: count += 6
            default: count += UTF8.width(scalar)
            }
        }
        return count
    }

    /// A JSON string literal for `value`.
    public static func quote(_ value: String, to out: inout String) {
        out += "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }

    /// `value` as a JSON string, quoted and escaped.
    public static func quote(_ value: String) -> String {
        var out = ""
        quote(value, to: &out)
        return out
    }

    private struct Parser {
        let bytes: [UInt8]
        var index = 0

        func error(_ reason: String) -> ParseError { ParseError(offset: index, reason: reason) }

        mutating func skipSpace() {
            while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
        }

        mutating func expect(_ literal: String, _ value: JSONValue) throws(ParseError) -> JSONValue {
            let expected = Array(literal.utf8)
            guard index + expected.count <= bytes.count, Array(bytes[index..<(index + expected.count)]) == expected else {
                throw error("expected \(literal)")
            }
            index += expected.count
            return value
        }

        mutating func value(depth: Int) throws(ParseError) -> JSONValue {
            guard depth < JSONText.maxDepth else { throw error("nested deeper than \(JSONText.maxDepth) levels") }
            guard index < bytes.count else { throw error("expected a value, found the end") }
            switch bytes[index] {
            case UInt8(ascii: "n"): return try expect("null", .null)
            case UInt8(ascii: "t"): return try expect("true", .bool(true))
            case UInt8(ascii: "f"): return try expect("false", .bool(false))
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "["):
                index += 1
                var values: [JSONValue] = []
                skipSpace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                    index += 1
                    return .array(values)
                }
                while true {
                    skipSpace()
                    values.append(try value(depth: depth + 1))
                    skipSpace()
                    guard index < bytes.count else { throw error("unterminated array") }
                    if bytes[index] == UInt8(ascii: ",") {
                        index += 1
                        continue
                    }
                    if bytes[index] == UInt8(ascii: "]") {
                        index += 1
                        return .array(values)
                    }
                    throw error("expected , or ] in array")
                }
            case UInt8(ascii: "{"):
                index += 1
                var members: [String: JSONValue] = [:]
                skipSpace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                    index += 1
                    return .object(members)
                }
                while true {
                    skipSpace()
                    guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a member name") }
                    let start = index
                    let key = try string()
                    skipSpace()
                    guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected :") }
                    index += 1
                    skipSpace()
                    let member = try value(depth: depth + 1)
                    guard members.updateValue(member, forKey: key) == nil else {
                        throw ParseError(offset: start, reason: "duplicate member name \(JSONText.quote(key))")
                    }
                    skipSpace()
                    guard index < bytes.count else { throw error("unterminated object") }
                    if bytes[index] == UInt8(ascii: ",") {
                        index += 1
                        continue
                    }
                    if bytes[index] == UInt8(ascii: "}") {
                        index += 1
                        return .object(members)
                    }
                    throw error("expected , or } in object")
                }
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
            default: throw error("unexpected character")
            }
        }

        mutating func number() throws(ParseError) -> JSONValue {
            let start = index
            var isInteger = true
            if bytes[index] == UInt8(ascii: "-") { index += 1 }
            func digits(_ p: inout Parser) -> Int {
                let from = p.index
                while p.index < p.bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(p.bytes[p.index]) { p.index += 1 }
                return p.index - from
            }
            let intStart = index
            let count = digits(&self)
            guard count > 0 else { throw error("expected a digit") }
            if count > 1 && bytes[intStart] == UInt8(ascii: "0") { throw ParseError(offset: intStart, reason: "leading zero") }
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                isInteger = false
                index += 1
                guard digits(&self) > 0 else { throw error("expected a digit after .") }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                isInteger = false
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
                guard digits(&self) > 0 else { throw error("expected a digit in the exponent") }
            }
            let text = String(decoding: bytes[start..<index], as: UTF8.self)
            if isInteger {
                // Kept exactly or refused: read as a double, 9223372036854775808 and …809 would be one
                // number, and two rows one key.
                guard let value = Int64(text) else {
                    throw ParseError(
                        offset: start, reason: "an integer beyond 64 bits (write it as a string to keep it exactly)")
                }
                return .int(value)
            }
            guard let value = Double(text), value.isFinite else { throw ParseError(offset: start, reason: "number out of range") }
            return .double(value)
        }

        mutating func hex4() throws(ParseError) -> UInt32 {
            guard index + 4 <= bytes.count else { throw error("short \\u escape") }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let c = bytes[index]
                let digit: UInt32
                switch c {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(c - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(c - UInt8(ascii: "a") + 10)
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(c - UInt8(ascii: "A") + 10)
                default: throw error("bad hex digit in \\u escape")
                }
                value = value << 4 | digit
                index += 1
            }
            return value
        }

        mutating func string() throws(ParseError) -> String {
            index += 1
            var scalars = String.UnicodeScalarView()
            var run: [UInt8] = []
            func flush(_ p: Parser) throws(ParseError) {
                if run.isEmpty { return }
                guard let text = String(validating: run, as: UTF8.self) else { throw p.error("invalid UTF-8 in string") }
                scalars.append(contentsOf: text.unicodeScalars)
                run.removeAll(keepingCapacity: true)
            }
            while true {
                guard index < bytes.count else { throw error("unterminated string") }
                let c = bytes[index]
                if c == UInt8(ascii: "\"") {
                    try flush(self)
                    index += 1
                    return String(scalars)
                }
                if c < 0x20 { throw error("control character in string") }
                if c != UInt8(ascii: "\\") {
                    run.append(c)
                    index += 1
                    continue
                }
                try flush(self)
                index += 1
                guard index < bytes.count else { throw error("unterminated escape") }
                let e = bytes[index]
                index += 1
                switch e {
                case UInt8(ascii: "\""): scalars.append("\"")
                case UInt8(ascii: "\\"): scalars.append("\\")
                case UInt8(ascii: "/"): scalars.append("/")
                case UInt8(ascii: "b"): scalars.append("\u{08}")
                case UInt8(ascii: "f"): scalars.append("\u{0C}")
                case UInt8(ascii: "n"): scalars.append("\n")
                case UInt8(ascii: "r"): scalars.append("\r")
                case UInt8(ascii: "t"): scalars.append("\t")
                case UInt8(ascii: "u"):
                    var code = try hex4()
                    if (0xD800..<0xDC00).contains(code) {
                        guard index + 6 <= bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                        else {
                            throw error("lone surrogate")
                        }
                        index += 2
                        let low = try hex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw error("bad low surrogate") }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let scalar = Unicode.Scalar(code) else { throw error("lone surrogate") }
                    scalars.append(scalar)
                default: throw error("unknown escape")
                }
            }
        }
    }
}
