internal import Foundation

/// The subject (`sub` claim) of a JWT, read from its payload without checking the signature: the
/// instance checks that (R7.3). Nil when the token is not a JWT with a string subject.
package enum AccessToken {
    package static func subject(of token: String) -> String? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        var base64 = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64), let text = String(data: data, encoding: .utf8),
            case .object(let claims)? = try? JSONText.parse(text), case .string(let subject)? = claims["sub"]
        else { return nil }
        return subject
    }
}

extension AccessToken {
    /// A JWT-shaped token naming `subject`, unsigned: what the scenario runner, the demo and tests sign
    /// in with (the simulated instance checks no signature).
    /// `serial` makes each sign-in's token a new one (R3.3: a new token clears credentialRefused).
    package static func unsigned(subject: String, serial: Int = 0) -> String {
        func base64URL(_ text: String) -> String {
            Data(text.utf8).base64EncodedString().replacingOccurrences(of: "=", with: "")
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        }
        return base64URL("{\"alg\":\"none\"}") + "." + base64URL("{\"sub\":" + JSONText.quote(subject) + ",\"iat\":\(serial)}")
            + ".unsigned"
    }
}
