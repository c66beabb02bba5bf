internal import Foundation
internal import Outbox

extension Commands {
    static func demo(_ words: [String]) async throws -> Exit {
        let args = try Arguments(command: "demo", words: words, options: ["keep"], flags: [])
        return .success
    }
}
