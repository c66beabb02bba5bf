import Foundation
import Outbox
import OutboxScenario
import Testing

/// Every scenario under Specs/scenarios runs, and every expectation in it holds.
@Suite("Scenarios")
struct ScenarioTests {
    static let folder = URL(filePath: #filePath).deletingLastPathComponent().appending(path: "../../Specs/scenarios").standardized

    static var files: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).filter { $0.hasSuffix(".json") }.sorted()
    }

    @Test("Specs/scenarios holds at least 40 scenarios")
    func enough() {
        #expect(Self.files.count >= 40)
    }

    @Test("every expectation of the scenario holds", arguments: files)
    func scenario(_ file: String) async throws {
        let text = try String(contentsOf: Self.folder.appending(path: file), encoding: .utf8)
        let document = try await ScenarioRunner().run(try Scenario.parse(text))
        guard case .object(let fields) = document, case .array(let failures)? = fields["failures"] else {
            Issue.record("no failures list")
            return
        }
        #expect(failures.isEmpty, "\(file): \(failures.map(JSONText.render).joined(separator: "\n"))")
        guard case .object(let final)? = fields["final"] else { return }
        #expect(final["verify"] == .string("ok"), "\(file): the log does not verify")
    }

    @Test("the same scenario gives the same document twice (R5.6)")
    func deterministic() async throws {
        for file in Self.files.prefix(10) {
            let text = try String(contentsOf: Self.folder.appending(path: file), encoding: .utf8)
            let first = try await ScenarioRunner().run(try Scenario.parse(text))
            let second = try await ScenarioRunner().run(try Scenario.parse(text))
            #expect(first == second, "\(file)")
        }
    }
}
