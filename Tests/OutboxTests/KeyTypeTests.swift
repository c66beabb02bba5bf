import OutboxTesting
import Testing

@testable import Outbox

/// One key type across the API (issue 27, item 3): a row is read back with the same dictionary of
/// Swift values a write was made with. `key: ["id": base + 1]` used to fail to type-check (and the
/// compiler to produce a diagnostic) when `readRow` took only a `JSONValue`: this file building is
/// half the test.
@Suite struct KeyTypeTests {
    @Test func aRowIsReadWithTheKeyItWasWrittenWith() async throws {
        try await withTemporaryLog { path in
            let instance = SimulatedInstance()
            let client = try await openClient(path, transport: instance)
            let base: Int64 = 70_000
            try await client.enqueue(.insert(into: "todos", key: ["id": base + 1], body: ["title": "milk"]))
            #expect(try await client.sync().syncedCount == 1)
            let row = try await instance.readRow(table: "todos", key: ["id": base + 1], accessToken: nil)
            #expect(row == JSONValue(object: ["id": base + 1, "title": "milk"]))
            let transport: any OutboxTransport = instance
            let again = try await transport.readRow(table: "todos", key: ["id": base + 1], accessToken: nil)
            #expect(again == row)
            #expect(try await transport.readRow(table: "todos", key: ["id": base + 2], accessToken: nil) == nil)
        }
    }
}
