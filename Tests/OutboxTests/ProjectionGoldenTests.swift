import Foundation
import Testing

@testable import Outbox

/// The projections' stored layout, pinned: the golden records' samples folded in order, every table's
/// keys and values in hex (`Golden/projections/layout<N>.txt`). A changed key, value or table fails
/// here; a deliberate change (a new layout, with older ones rebuilt on open) writes the file again with
/// `OUTBOX_WRITE_GOLDEN=1 swift test --filter ProjectionGolden` (R8.2).
@Suite struct ProjectionGoldenTests {
    static let file = GoldenRecordTests.folder.appendingPathComponent("projections/layout\(projectionLayoutVersion).txt")

    static func render(_ projections: MemoryProjections) -> String {
        let hex = { (bytes: [UInt8]) in hexDigits(bytes) }
        var text =
            "# The projections of layout \(projectionLayoutVersion) after the golden samples (ProjectionGoldenTests). Do not edit by hand.\n"
        for table in ProjectionTable.allCases {
            text += "table \(table.rawValue)\n"
            for (key, value) in projections.sortedEntries(table) { text += "\(hex(key)) \(hex(value))\n" }
        }
        return text
    }

    @Test func theSamplesFoldIntoTheGoldenProjections() throws {
        var projector = Projector(store: MemoryProjections())
        for record in GoldenRecordTests.samples() {
            if case .logCompacted = record.event { continue }  // it starts a fold at its own state
            try projector.apply(record)
        }
        let rendered = Self.render(projector.store)
        if ProcessInfo.processInfo.environment["OUTBOX_WRITE_GOLDEN"] == "1" {
            try rendered.write(to: Self.file, atomically: true, encoding: .utf8)
        }
        #expect(rendered == (try String(contentsOf: Self.file, encoding: .utf8)), "the layout's stored bytes changed")
        #expect(rendered.contains("636f756e746572733a"), "a user's counters are in meta")
    }
}
