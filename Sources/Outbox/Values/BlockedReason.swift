/// Why a write is blocked: stopped until something outside the queue changes.
public enum BlockedReason: String, CaseIterable, Hashable, Sendable, StoredCode {
    /// The instance refused the key; a new access token clears it and the next pass resends by itself.
    case credentialRefused
    /// The key was used for a different request; `release` sends it under a fresh key.
    case keySpent
    /// The version the write was based on cannot be read; `withdraw`, or `release` once readable.
    case ancestorUnavailable
    /// The write's version was overtaken; `withdraw` (a release is blocked the same way again).
    case conflictUnresolved
    /// The write keeps failing while the instance answers other writes; `release` or `withdraw`.
    case failingAlone
    /// Queued against another instance; `release` or `withdraw`.
    case instanceChanged
    /// The session's token belongs to another user; settling the session again clears it.
    case identityChanged

    /// The code the log and the `blocked` list store (Specs/log-format.md): fixed per case, whatever the
    /// order of the cases. A new case takes a new code; a code is never reused.
    var code: UInt8 {
        switch self {
        case .credentialRefused: return 0
        case .keySpent: return 1
        case .ancestorUnavailable: return 2
        case .conflictUnresolved: return 3
        case .failingAlone: return 4
        case .instanceChanged: return 5
        case .identityChanged: return 6
        }
    }

    static func decode(from reader: inout ByteReader) throws -> BlockedReason {
        let code = try reader.byte()
        guard let reason = BlockedReason(code: code) else { throw DecodeFailure("unknown blocked reason \(code)") }
        return reason
    }
}

/// An enum the log stores as an explicit one-byte code, fixed per case whatever the order of the
/// cases (Specs/log-format.md, "Stored codes").
protocol StoredCode: CaseIterable {
    var code: UInt8 { get }
}

extension StoredCode {
    /// The case stored as `code`; nil for a code no case has (damage, or a newer build's case).
    init?(code: UInt8) {
        guard let found = Self.allCases.first(where: { $0.code == code }) else { return nil }
        self = found
    }
}
