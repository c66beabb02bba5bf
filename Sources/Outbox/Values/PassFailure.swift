/// Why a pass stopped (a report's `stoppedBy`, the status's `lastSyncError`): kind, HTTP status and code, never a
/// message or a token.
public struct PassFailure: Hashable, Sendable {
    /// The kinds of failure that stop a pass.
    public enum Kind: String, CaseIterable, Hashable, Sendable, StoredCode {
        /// No connection, a timeout, a failure on the device.
        case network
        /// An HTTP status that may pass (401, 408, 429, 5xx, 42501).
        case http
        /// The server's schema cache does not know the table or a column yet (a failure meaning `schemaCache`).
        case schemaCache
        /// The response broke the wire contract.
        case `protocol`
        /// The token's subject is not the session's user.
        case identityChanged
        /// The app's token provider gave no token (it threw, or returned nil): the pass sent nothing.
        case noToken
        /// Another process held the log's sync lock for longer than the client waits: the pass sent
        /// nothing and charged nothing.
        case busy

        /// The stored code (Specs/log-format.md): fixed per case; a code is never reused.
        var code: UInt8 {
            switch self {
            case .network: return 0
            case .http: return 1
            case .schemaCache: return 2
            case .protocol: return 3
            case .identityChanged: return 4
            case .noToken: return 5
            case .busy: return 6
            }
        }
    }

    /// What kind of failure stopped the pass.
    public var kind: Kind
    /// The HTTP status, when one came.
    public var status: Int?
    /// The server's error code, when one came (never its message).
    public var code: String?
    /// How long the instance asked to wait, in seconds (capped at one hour).
    public var retryAfter: Double?

    /// A failure of `kind`.
    public init(kind: Kind, status: Int? = nil, code: String? = nil, retryAfter: Double? = nil) {
        self.kind = kind
        self.status = Refusal.httpStatus(status)
        self.code = Refusal.identifier(code)
        self.retryAfter = retryAfter
    }

    func encode(into writer: inout some ByteSink) {
        writer.byte(kind.code)
        writer.optional(status) { $0.varint($1) }
        writer.optional(code) { $0.string($1) }
        writer.optional(retryAfter) { $0.bigEndian($1.bitPattern) }
    }

    static func decode(from reader: inout ByteReader) throws -> PassFailure {
        let code = try reader.byte()
        guard let kind = Kind(code: code) else { throw DecodeFailure("unknown failure kind \(code)") }
        return PassFailure(
            kind: kind, status: try reader.optional { try $0.int() },
            code: try reader.optional { try $0.string() },
            retryAfter: try reader.optional { reader in
                let seconds = Double(bitPattern: try reader.bigEndian())
                // The library writes a Retry-After capped at an hour (R5.3): anything else is damage.
                guard seconds.isFinite, seconds >= 0, seconds <= 3600 else {
                    throw DecodeFailure("a Retry-After that is not a number of seconds up to an hour")
                }
                return seconds
            })
    }
}

extension PassFailure: CustomStringConvertible {
    /// The kind, then the status, the code and the wait asked for when there are: `http 503 PGRST001,
    /// retry after 30 s`.
    public var description: String {
        var text = kind.rawValue
        if let status { text += " \(status)" }
        if let code { text += " \(code)" }
        if let retryAfter {
            text += ", retry after \(retryAfter == retryAfter.rounded() ? String(Int(retryAfter)) : String(retryAfter)) s"
        }
        return text
    }
}
