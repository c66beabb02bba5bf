import Foundation
import OutboxProcess
import Testing

/// The public surface an app links (Outbox, OutboxHTTP, OutboxTesting), read from the built modules'
/// symbol graphs: it matches the digest checked in at Specs/api/public-api.txt, so no public symbol
/// appears or disappears unnoticed, and every public symbol has a doc comment.
/// After a change on purpose: `OUTBOX_WRITE_API=1 swift test --filter APIDigestTests`.
@Suite struct APIDigestTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized
    static let digest = root.appendingPathComponent("Specs/api/public-api.txt")
    static let modules = ["Outbox", "OutboxHTTP", "OutboxTesting"]

    struct Symbol {
        var line: String
        var documented: Bool
        /// Its doc comment, joined.
        var doc: String
    }

    /// Every public symbol declared in the package's sources, from `swift-symbolgraph-extract`.
    static func symbols() async throws -> [Symbol] {
        // .build/<target triple>/debug/<the test bundle>: the modules beside it, built for that triple.
        let configuration = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let built = configuration.appendingPathComponent("Modules")
        let triple = configuration.deletingLastPathComponent().lastPathComponent
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("outbox-api-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: output, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: output) }
        for module in modules {
            let extracted = try await ChildProcess.run(
                URL(fileURLWithPath: "/usr/bin/env"),
                [
                    "swift-symbolgraph-extract", "-module-name", module, "-I", built.path, "-target", triple,
                    "-minimum-access-level", "public", "-output-dir", output.path, "-Xcc",
                    "-fmodule-map-file=" + root.appendingPathComponent("Sources/COutboxLMDB/module.modulemap").path,
                    "-Xcc", "-fmodule-map-file=" + root.appendingPathComponent("Sources/COutboxCurl/module.modulemap").path,
                    "-Xcc",
                    "-fmodule-map-file=" + root.appendingPathComponent("Sources/COutboxCRC/include/module.modulemap").path,
                ])
            #expect(extracted.succeeded, "swift-symbolgraph-extract \(module): \(extracted.text.suffix(2000))")
        }
        var symbols: [Symbol] = []
        for file in try FileManager.default.contentsOfDirectory(atPath: output.path) where file.hasSuffix(".symbols.json") {
            let data = try Data(contentsOf: output.appendingPathComponent(file))
            let graph = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
            let module = String(file.prefix { $0 != "." && $0 != "@" })
            for symbol in graph["symbols"] as? [[String: Any]] ?? [] {
                // Declared in this package's sources (not members that protocol extensions lend).
                guard let location = symbol["location"] as? [String: Any], let uri = location["uri"] as? String,
                    uri.contains("/Sources/")
                else { continue }
                let path = (symbol["pathComponents"] as? [String] ?? []).joined(separator: ".")
                let declaration = (symbol["declarationFragments"] as? [[String: Any]] ?? []).compactMap {
                    $0["spelling"] as? String
                }
                .joined()
                let comment = symbol["docComment"] as? [String: Any]
                let doc = (comment?["lines"] as? [[String: Any]] ?? []).compactMap { $0["text"] as? String }.joined(
                    separator: " ")
                symbols.append(Symbol(line: "\(module)  \(path)  \(declaration)", documented: comment != nil, doc: doc))
            }
        }
        return symbols
    }

    @Test(.timeLimit(.minutes(5)))
    func thePublicSurfaceIsTheDigestAndEverySymbolIsDocumented() async throws {
        let symbols = try await Self.symbols()
        #expect(symbols.count > 300, "the symbol graphs were read")
        let undocumented = symbols.filter { !$0.documented }.map(\.line)
        #expect(undocumented.isEmpty, "public symbols without a doc comment:\n\(undocumented.joined(separator: "\n"))")
        // The package does not ship SPEC: a doc comment says the rule in words, not by its number.
        let citing = symbols.filter { $0.doc.contains(/\bR[0-9]+\.[0-9]+|SPEC|SCENARIOS\.md|TESTING\.md/) }.map(\.line)
        #expect(citing.isEmpty, "doc comments citing a rule number:\n\(citing.joined(separator: "\n"))")
        let lines = Array(Set(symbols.map(\.line))).sorted()
        let text = lines.joined(separator: "\n") + "\n"
        if ProcessInfo.processInfo.environment["OUTBOX_WRITE_API"] == "1" {
            try FileManager.default.createDirectory(
                at: Self.digest.deletingLastPathComponent(), withIntermediateDirectories: true)
            try text.write(to: Self.digest, atomically: true, encoding: .utf8)
        }
        let recorded = try String(contentsOf: Self.digest, encoding: .utf8).split(separator: "\n").map(String.init)
        let added = Set(lines).subtracting(recorded).sorted()
        let removed = Set(recorded).subtracting(lines).sorted()
        #expect(
            added.isEmpty && removed.isEmpty,
            """
            the public API changed; if on purpose, run OUTBOX_WRITE_API=1 swift test --filter APIDigestTests
            added:
            \(added.joined(separator: "\n"))
            removed:
            \(removed.joined(separator: "\n"))
            """)
    }
}
