/// Why a write is blocked: stopped until something outside the queue changes (R3.3).
public enum BlockedReason: String, CaseIterable, Hashable, Sendable {
    /// The instance refused the key; a new access token clears it and the next pass resends by itself.
    case credentialRefused
    /// The key was used for a different request; `release` sends it under a fresh key.
    case keySpent
    /// The version the write was based on cannot be read; `withdraw`, or `release` once readable.
    case ancestorUnavailable
    /// The write's version was overtaken; `withdraw` (a release is blocked the same way again).
    case conflictUnresolved
    /// The write keeps failing while the instance answers other writes (R4.4); `release` or `withdraw`.
    case failingAlone
    /// Queued against another instance; `release` or `withdraw`.
    case instanceChanged
    /// The session's token belongs to another user (R7.3); settling the session again clears it.
    case identityChanged

    var code: UInt8 { UInt8(Self.allCases.firstIndex(of: self)!) }

    static func decode(from reader: inout ByteReader) throws -> BlockedReason {
        let code = Int(try reader.byte())
        guard code < allCases.count else { throw DecodeFailure("unknown blocked reason \(code)") }
        return allCases[code]
    }
}
