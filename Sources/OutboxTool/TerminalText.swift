internal import Outbox

/// Text from a log or a server, made safe for a terminal: a log copied from a device may hold ESC, BEL,
/// CR or bidirectional overrides in a user, table or mutation name, which printed raw would set the
/// terminal's title, move the cursor or forge lines in a support engineer's terminal. Every character
/// that controls a terminal is printed as a `\u{…}` escape instead (decision 008).
enum TerminalText {
    /// `text` with every control character escaped (line breaks too: one field never makes two lines).
    static func field(_ text: String) -> String { escaped(text, keeping: []) }

    /// A whole output text: its own line breaks and tabs kept, every other control character escaped.
    static func output(_ text: String) -> String { escaped(text, keeping: ["\n", "\t"]) }

    private static func escaped(_ text: String, keeping: Set<Unicode.Scalar>) -> String {
        guard text.unicodeScalars.contains(where: { Write.isControl($0) && !keeping.contains($0) }) else { return text }
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if Write.isControl(scalar) && !keeping.contains(scalar) {
                out.append(contentsOf: "\\u{\(String(scalar.value, radix: 16))}".unicodeScalars)
            } else {
                out.append(scalar)
            }
        }
        return String(out)
    }
}
