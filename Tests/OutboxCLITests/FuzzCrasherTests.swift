import Foundation
import OutboxFuzzing
import Testing

/// Every input a fuzzer once crashed on (Fuzz/crashers/<target>/) runs through the same target body,
/// and now returns normally.
@Suite("Fuzz crashers")
struct FuzzCrasherTests {
    static let folder = URL(filePath: #filePath).deletingLastPathComponent().appending(path: "../../Fuzz/crashers").standardized

    static var crashers: [String] {
        let targets = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return targets.sorted().flatMap { target in
            ((try? FileManager.default.contentsOfDirectory(atPath: folder.appending(path: target).path)) ?? []).sorted().map { "\(target)/\($0)" }
        }
    }

    @Test("every crasher is replayed", arguments: crashers)
    func replay(_ crasher: String) throws {
        let target = String(crasher.split(separator: "/")[0])
        let body = try #require(FuzzTargets.all[target], "no fuzz target \(target)")
        body([UInt8](try Data(contentsOf: Self.folder.appending(path: crasher))))
    }

    @Test("the crashers folder is read") func found() { #expect(!Self.crashers.isEmpty) }
}
