import Foundation
import OutboxProcess
import Testing

/// The README as a new user meets it: its first Swift block, the tour, builds as written in a
/// package of its own that depends on this one, and runs to its end printing what the README says it
/// prints; every other Swift block builds too.
@Suite struct ReadmeTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized

    /// The README's fenced blocks of `language`, in order.
    static func blocks(_ language: String, in text: String) -> [String] {
        var blocks: [String] = []
        var current: [Substring]?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil, line == "```\(language)" {
                current = []
            } else if current != nil, line == "```" {
                blocks.append(current!.joined(separator: "\n") + "\n")
                current = nil
            } else {
                current?.append(line)
            }
        }
        return blocks
    }

    @Test(.timeLimit(.minutes(20)))
    func theTourBuildsAndRunsAsWritten() async throws {
        let readme = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        let swift = Self.blocks("swift", in: readme)
        let tour = try #require(swift.first, "the README has a Swift block")
        // Kept in .build, so that a second run builds only what changed.
        let scratch = Self.root.appendingPathComponent(".build/readme-tour")
        let sources = scratch.appendingPathComponent("Sources")
        try? FileManager.default.removeItem(at: sources)
        for target in ["Tour", "Snippets"] {
            try FileManager.default.createDirectory(at: sources.appendingPathComponent(target), withIntermediateDirectories: true)
        }
        try tour.write(to: sources.appendingPathComponent("Tour/main.swift"), atomically: true, encoding: .utf8)
        // A manifest block (how an app depends on the package) is not code of a target: each product
        // it names must be a library of this package.
        let manifests = swift.dropFirst().filter { $0.hasPrefix("// swift-tools-version") }
        let package = try String(contentsOf: Self.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        for manifest in manifests {
            let named = manifest.components(separatedBy: ".product(name: \"").dropFirst().map { $0.prefix { $0 != "\"" } }
            #expect(!named.isEmpty, "a manifest block that names no product")
            for product in named { #expect(package.contains(".library(name: \"\(product)\""), "no library \(product)") }
        }
        for (index, block) in swift.dropFirst().filter({ !$0.hasPrefix("// swift-tools-version") }).enumerated() {
            try block.write(
                to: sources.appendingPathComponent("Snippets/snippet\(index + 1).swift"), atomically: true, encoding: .utf8)
        }
        // A path dependency is named by its folder (this checkout's, whatever it is called).
        let identity = Self.root.lastPathComponent.lowercased()
        let manifest = """
            // swift-tools-version:6.0
            import PackageDescription

            let package = Package(
                name: "readme-tour",
                dependencies: [.package(path: "\(Self.root.path)")],
                targets: [
                    .executableTarget(
                        name: "Tour",
                        dependencies: [
                            .product(name: "Outbox", package: "\(identity)"),
                            .product(name: "OutboxTesting", package: "\(identity)"),
                        ]),
                    .target(
                        name: "Snippets",
                        dependencies: [
                            .product(name: "Outbox", package: "\(identity)"),
                            .product(name: "OutboxHTTP", package: "\(identity)"),
                        ]),
                ]
            )

            """
        try manifest.write(to: scratch.appendingPathComponent("Package.swift"), atomically: true, encoding: .utf8)
        let build = try ChildProcess(
            URL(fileURLWithPath: "/usr/bin/env"), ["swift", "build", "--package-path", scratch.path], errors: .merged)
        build.kill(after: 1100)
        let built = await build.ended()
        #expect(built.succeeded, "the README's Swift does not build:\n\(built.text.suffix(4000))")
        guard built.succeeded else { return }

        let run = try ChildProcess(scratch.appendingPathComponent(".build/debug/Tour"), [], errors: .apart(.capture))
        run.kill(after: 120)
        let ran = await run.ended()
        #expect(ran.succeeded, "the tour ended with \(ran.status): \(ran.errorText.suffix(2000))")
        let printed = try #require(
            Self.blocks("text", in: readme).first { $0.hasPrefix("synced") }, "the README says what it prints")
        #expect(ran.text == printed, "the tour printed:\n\(ran.text)")
    }
}
