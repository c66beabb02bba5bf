import Foundation
import OutboxTesting
import Testing

@testable import Outbox

/// Keys and bodies from an app's own values: variables and optionals, `Encodable` models in and
/// `Decodable` models back, and `JSONValue` through `Codable`.
@Suite struct SwiftValuesTests {
    struct Todo: Codable, Equatable {
        var id: Int
        var title: String
        var done: Bool
        var note: String?
        var tags: [String]
    }

    /// Encodes as an array: not a body.
    struct Pair: Encodable {
        func encode(to encoder: any Encoder) throws {
            var array = encoder.unkeyedContainer()
            try array.encode(1)
            try array.encode(2)
        }
    }

    /// Fails to encode, as a model with an invalid field would.
    struct Broken: Encodable {
        struct Failure: Error {}
        func encode(to encoder: any Encoder) throws { throw Failure() }
    }

    @Test func variablesAndOptionalsMakeKeysAndBodies() throws {
        let id = 7
        let title = "Milk"
        let note: String? = nil
        let price: Double? = 2.5
        let tags = ["dairy", "cold"]
        let write = Write.insert(
            into: "todos", key: ["id": id], body: ["title": title, "note": note, "price": price, "tags": tags, "done": false])
        #expect(write.key == ["id": 7])
        #expect(write.body == ["title": "Milk", "note": nil, "price": 2.5, "tags": ["dairy", "cold"], "done": false])
        #expect(Write.update("todos", key: ["id": id], set: ["title": title], baseVersion: 2).body == ["title": "Milk"])
        #expect(Write.delete(from: "todos", key: ["id": id]).key == ["id": 7])
        // Nested values of mixed kinds come as JSONValue, literals as before.
        let nested = Write.upsert(
            into: "lists", key: ["id": id], body: ["meta": JSONValue(object: ["owner": title, "size": 3]), "count": Int64(2)])
        #expect(nested.body == ["meta": ["owner": "Milk", "size": 3], "count": 2])
        #expect(JSONValue(tags) == ["dairy", "cold"] && JSONValue(["a": 1]) == ["a": 1] && JSONValue(note) == .null)
    }

    @Test func jsonValueIsCodableAndKeepsIntegersIntegers() throws {
        let value: JSONValue = ["n": 9_007_199_254_740_993, "x": 0.1, "s": "é\u{0}", "a": [true, nil, ["k": -1]], "o": [:]]
        let data = try JSONEncoder().encode(value)
        #expect(try JSONDecoder().decode(JSONValue.self, from: data) == value)
        #expect(try JSONText.parse(String(decoding: data, as: UTF8.self)) == value)
    }

    @Test func anEncodableModelIsQueuedAndReadBack() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            let todo = Todo(id: 3, title: "Bread", done: false, note: nil, tags: ["bakery"])
            let id = try await client.enqueue(try .insert(into: "todos", key: ["id": todo.id], encoding: todo))
            let queued = try #require(try await client.queue.write(id))
            #expect(queued.body == ["id": 3, "title": "Bread", "done": false, "tags": ["bakery"]])
            #expect(try queued.write.body(as: Todo.self) == todo)
            let edit = try Write.update("todos", key: ["id": 3], encoding: ["title": "Rye"], baseVersion: 1)
            #expect(edit.body == ["title": "Rye"] && edit.baseVersion == 1)
            client.close()
        }
    }

    // A model that does not encode, or not as an object, and a body read as the wrong model, are
    // invalid writes with a typed error; nothing is queued.
    @Test func whatDoesNotEncodeOrDecodeIsATypedError() async throws {
        try await TemporaryFolder.with { path in
            let client = try await openClient(path)
            for attempt in [
                { try Write.insert(into: "todos", key: ["id": 1], encoding: Pair()) },
                { try Write.upsert(into: "todos", key: ["id": 1], encoding: Broken()) },
            ] {
                await #expect {
                    try await client.enqueue(try attempt())
                } throws: { error in
                    (error as? OutboxError)?.code == .invalidWrite
                }
            }
            #expect(try await client.queue.all().isEmpty, "nothing was queued")
            let id = try await client.enqueue(.insert(into: "todos", key: ["id": 1], body: ["title": 5]))
            let queued = try #require(try await client.queue.write(id))
            #expect {
                try queued.write.body(as: Todo.self)
            } throws: { error in
                (error as? OutboxError)?.code == .invalidWrite
            }
            client.close()
        }
    }

    // The operation type is named so that an app importing Foundation as well keeps Foundation's
    // `Operation` unqualified: this line does not compile if the two clash.
    @Test func foundationsOperationKeepsItsName() {
        let work: Operation = BlockOperation {}
        let kind: WriteOperation = .upsert
        #expect(work is BlockOperation && kind.description == "upsert")
    }
}
