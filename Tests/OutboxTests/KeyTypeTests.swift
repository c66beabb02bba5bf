import OutboxTesting
import Testing

@testable import Outbox

/// One key type across the API: a row is read back with the same dictionary of
/// Swift values a write was made with. `key: ["id": base + 1]` type-checks only while every call
/// that takes a key takes the same key type: this file building is half the test.
@Suite struct KeyTypeTests {
    @Test func aRowIsReadWithTheKeyItWasWrittenWith() async throws {
        try await TemporaryFolder.with { path in
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

/// Keys from the model (R2.4): a write made from a model alone takes its key from the key
/// columns the transport knows; a key and body that disagree on a column are bad input (R2.4).
@Suite struct KeyFromModelTests {
    struct Todo: Codable, Equatable {
        var id: Int64
        var title: String
    }

    @Test func aModelWrittenWithoutAKeyTakesItFromTheTablesKeyColumns() async throws {
        try await TemporaryFolder.with { path in
            let instance = SimulatedInstance()
            instance.setKeyColumns(["todos": ["id"]])
            let client = try await openClient(path, transport: instance)
            let insert = try await client.enqueue(try .insert(into: "todos", encoding: Todo(id: 70_001, title: "milk")))
            let update = try await client.enqueue(try .update("todos", encoding: Todo(id: 70_001, title: "eggs")))
            let written = try await client.queue.all()
            #expect(written.map(\.key) == [JSONValue(object: ["id": 70_001]), JSONValue(object: ["id": 70_001])])
            #expect(written.last?.follows == [insert])
            #expect(try await client.sync().syncedCount == 2)
            #expect(
                try await instance.readRow(table: "todos", key: ["id": 70_001], accessToken: nil)
                    == JSONValue(object: ["id": 70_001, "title": "eggs"]))
            _ = update
        }
    }

    @Test func aKeyThatDisagreesWithTheBodyIsRefusedAndNothingIsQueued() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path, transport: SimulatedInstance())
            let before = try client.eventCount()
            await #expect(throws: OutboxError.self) {
                try await client.enqueue(
                    try .insert(into: "todos", key: ["id": 70_001], encoding: Todo(id: 70_002, title: "milk")))
            }
            // One bad write of a batch queues none of it.
            await #expect(throws: OutboxError.self) {
                try await client.enqueue(contentsOf: [
                    .insert(into: "todos", key: ["id": 1], body: ["title": "a"]),
                    .update("todos", key: ["id": 1], set: ["id": 2, "title": "b"]),
                ])
            }
            #expect(try client.eventCount() == before)
            // The same value, as an integer or a whole double, is no disagreement.
            let id = try await client.enqueue(.insert(into: "todos", key: ["id": 7], body: ["id": 7.0, "title": "a"]))
            #expect(try await client.queue.write(id) != nil)
        }
    }

    @Test func aModelWithoutAKeyNeedsTheColumnsAndEachOfThemInTheModel() async throws {
        try await TemporaryFolder.with { path in
            struct Untitled: Codable { var title: String }
            let unknown = try await openClient(path, transport: SimulatedInstance())
            do {
                try await unknown.enqueue(try .insert(into: "todos", encoding: Todo(id: 1, title: "a")))
                Issue.record("a write without a key queued with no key columns known")
            } catch let error as OutboxError {
                #expect(error.code == .invalidWrite)
                #expect(error.description.contains("key columns"))
            }
            unknown.close()
            let instance = SimulatedInstance()
            instance.setKeyColumns(["todos": ["id"]])
            let client = try await openClient(path, transport: instance)
            do {
                try await client.enqueue(try .insert(into: "todos", encoding: Untitled(title: "a")))
                Issue.record("a model without its key column queued")
            } catch let error as OutboxError {
                #expect(error.code == .invalidWrite)
                #expect(error.description.contains("no id"))
            }
            #expect(try await client.queue.all().isEmpty)
        }
    }
}
