/// A usage error: exit status 2, with the command's help named.
struct UsageError: Error {
    let message: String
}

/// Parsed command-line words: positionals, `--name value` options and `--flag` switches.
/// Every option must be one the command declares, given once.
struct Arguments {
    private(set) var positionals: [String] = []
    private var options: [String: String] = [:]
    private var flags: Set<String> = []
    let command: String

    init(command: String, words: [String], options known: Set<String>, flags knownFlags: Set<String>) throws(UsageError) {
        self.command = command
        var index = 0
        while index < words.count {
            let word = words[index]
            index += 1
            if word == "--" {
                positionals.append(contentsOf: words[index...])
                break
            }
            guard word.hasPrefix("--"), word.count > 2 else {
                positionals.append(word)
                continue
            }
            var name = String(word.dropFirst(2))
            var inline: String?
            if let equals = name.firstIndex(of: "=") {
                inline = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            if knownFlags.contains(name) {
                guard inline == nil else { throw UsageError(message: "--\(name) takes no value") }
                guard flags.insert(name).inserted else { throw UsageError(message: "--\(name) given twice") }
            } else if known.contains(name) {
                let value: String
                if let inline {
                    value = inline
                } else {
                    guard index < words.count else { throw UsageError(message: "--\(name) needs a value") }
                    value = words[index]
                    index += 1
                }
                guard options.updateValue(value, forKey: name) == nil else { throw UsageError(message: "--\(name) given twice") }
            } else {
                throw UsageError(message: "unknown option --\(name)")
            }
        }
    }

    func flag(_ name: String) -> Bool { flags.contains(name) }
    func option(_ name: String) -> String? { options[name] }

    func required(_ name: String) throws(UsageError) -> String {
        guard let value = options[name] else { throw UsageError(message: "--\(name) is required") }
        return value
    }

    /// Exactly `names.count` positionals, named for the message.
    func positionals(_ names: String...) throws(UsageError) -> [String] {
        guard positionals.count == names.count else {
            throw UsageError(
                message: "expected \(names.map { "<\($0)>" }.joined(separator: " ")), got \(positionals.count) argument(s)")
        }
        return positionals
    }

    func unsigned(_ name: String) throws(UsageError) -> UInt64? {
        guard let text = options[name] else { return nil }
        guard let value = UInt64(text) else { throw UsageError(message: "--\(name) takes a whole number, not '\(text)'") }
        return value
    }
}
