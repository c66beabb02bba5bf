/// Why the instance refused a write, or why the library refused it itself (`final`).
///
/// `message` is the instance's text, cut to 200 Unicode scalars. It is kept in the log for audits and
/// shown by the audit tools, but never put in the status, the `events` stream or an error's description.
public struct Refusal: Hashable, Sendable {
    /// The HTTP status, or nil for a refusal made by the library (unsent, unmade).
    public var status: Int?
    /// The server's code (a SQLSTATE such as `23505`, or the server's own), if any.
    public var code: String?
    /// The instance's reason word, or the library's own sentence for a final refusal.
    public var reason: String?
    /// The instance's message text (audits only).
    public var message: String?
    /// The fields the instance would not take.
    public var fields: [String]
    /// Whether the item is trashed, and whether it can be restored.
    public var trashed: Bool
    /// Whether the row is in the trash and can be restored.
    public var restorable: Bool
    /// The grant the key lacks, if the instance named one.
    public var missingGrant: String?
    /// A refusal the library made (unsent, or unmade): never sent again, never released.
    public var isFinal: Bool

    /// A refusal; a transport fills in what its server said.
    public init(
        status: Int? = nil, code: String? = nil, reason: String? = nil, message: String? = nil, fields: [String] = [],
        trashed: Bool = false, restorable: Bool = false, missingGrant: String? = nil, isFinal: Bool = false
    ) {
        self.status = Self.httpStatus(status)
        self.code = Self.identifier(code)
        self.reason = reason.map { Self.cut($0) }
        // A "code" that is no identifier is the server's text: audits only, with the message.
        self.message = (message ?? (self.code == nil ? code : nil)).map { Self.cut($0) }
        self.fields = Self.names(fields)
        self.trashed = trashed
        self.restorable = restorable
        self.missingGrant = missingGrant.map { Self.cut($0) }
        self.isFinal = isFinal
    }

    /// `status` when it can be an HTTP status (100 to 999); anything else a transport passes is nil.
    public static func httpStatus(_ status: Int?) -> Int? { status.flatMap { (100...999).contains($0) ? $0 : nil } }

    /// The longest code kept: PostgREST's (`PGRST204`) and SQLSTATEs (`23505`) are far shorter.
    public static let maxCodeLength = 32

    /// `code` when it is a code: 1 to 32 ASCII letters, digits, `_`, `-` or `.`. Anything else (a
    /// sentence, an e-mail address, 96,000 characters) is the server's text, and is nil here: a code
    /// reaches the status and the events, where the server's text never does.
    public static func identifier(_ code: String?) -> String? {
        guard let code, (1...maxCodeLength).contains(code.utf8.count),
            code.utf8.allSatisfy({ byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "_")
                    || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
            })
        else { return nil }
        return code
    }

    /// The most field names kept from a server's answer.
    public static let maxFields = 64

    /// A server's list of field names, as the log keeps it: at most 64, each cut to 200 Unicode scalars.
    public static func names(_ fields: [String]) -> [String] { fields.prefix(maxFields).map { cut($0) } }

    /// The longest server text the log keeps.
    public static let maxTextScalars = 200

    /// `text` cut to 200 Unicode scalars.
    public static func cut(_ text: String) -> String {
        text.unicodeScalars.count <= maxTextScalars
            ? text : String(String.UnicodeScalarView(text.unicodeScalars.prefix(maxTextScalars)))
    }

    /// A refusal the library makes because a write this one waits for was withdrawn or discarded.
    public static func unsent(because reason: String) -> Refusal { Refusal(reason: reason, isFinal: true) }

    func encode(into writer: inout some ByteSink) {
        writer.optional(status) { $0.varint($1) }
        writer.optional(code) { $0.string($1) }
        writer.optional(reason) { $0.string($1) }
        writer.optional(message) { $0.string($1) }
        writer.array(fields) { $0.string($1) }
        writer.byte((trashed ? 1 : 0) | (restorable ? 2 : 0) | (isFinal ? 4 : 0))
        writer.optional(missingGrant) { $0.string($1) }
    }

    static func decode(from reader: inout ByteReader) throws -> Refusal {
        let status = try reader.optional { try $0.int() }
        let code = try reader.optional { try $0.string() }
        let reason = try reader.optional { try $0.string() }
        let message = try reader.optional { try $0.string() }
        let fields = try reader.array { try $0.string() }
        let flags = try reader.byte()
        guard flags < 8 else { throw DecodeFailure("bad refusal flags") }
        let grant = try reader.optional { try $0.string() }
        return Refusal(
            status: status, code: code, reason: reason, message: message, fields: fields, trashed: flags & 1 != 0,
            restorable: flags & 2 != 0, missingGrant: grant, isFinal: flags & 4 != 0)
    }
}
