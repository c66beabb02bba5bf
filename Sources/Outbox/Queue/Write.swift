public import Foundation

/// A write the app asks the outbox to make: what `enqueue` takes.
///
/// ```swift
/// try await outbox.enqueue(.insert(into: "todos", key: ["id": 42], body: ["title": "Buy milk"]))
/// try await outbox.enqueue(.update("todos", key: ["id": 42], set: ["done": true], baseVersion: 3))
/// ```
public struct Write: Hashable, Sendable {
    /// The table it writes.
    public var table: String
    /// What it does to its row.
    public var operation: WriteOperation
    /// The row's primary key: a non-empty JSON object.
    public var key: JSONValue
    /// A JSON object; empty for a delete.
    public var body: JSONValue
    /// The row version the edit was made on.
    public var baseVersion: Int64?
    /// Ids of earlier writes of the same user this one must follow (earlier writes to the same row are followed by themselves).
    public var dependsOn: [WriteID]

    /// A write of any operation; the static functions below read better.
    public init(
        table: String, operation: WriteOperation, key: JSONValue, body: JSONValue = [:], baseVersion: Int64? = nil,
        dependsOn: [WriteID] = []
    ) {
        self.table = table
        self.operation = operation
        self.key = key
        self.body = body
        self.baseVersion = baseVersion
        self.dependsOn = dependsOn
    }

    /// Inserts a row: the key merged with the body.
    public static func insert(into table: String, key: JSONValue, body: JSONValue, dependsOn: [WriteID] = []) -> Write {
        Write(table: table, operation: .insert, key: key, body: body, dependsOn: dependsOn)
    }

    /// Sets the fields of `body` on the row; `baseVersion` is the row version the edit was made on.
    public static func update(
        _ table: String, key: JSONValue, set body: JSONValue, baseVersion: Int64? = nil, dependsOn: [WriteID] = []
    ) -> Write {
        Write(table: table, operation: .update, key: key, body: body, baseVersion: baseVersion, dependsOn: dependsOn)
    }

    /// Inserts the row, or merges the body into the row already there.
    public static func upsert(into table: String, key: JSONValue, body: JSONValue, dependsOn: [WriteID] = []) -> Write {
        Write(table: table, operation: .upsert, key: key, body: body, dependsOn: dependsOn)
    }

    /// Deletes the row; `baseVersion` is the row version the delete was decided on.
    public static func delete(from table: String, key: JSONValue, baseVersion: Int64? = nil, dependsOn: [WriteID] = []) -> Write {
        Write(table: table, operation: .delete, key: key, body: [:], baseVersion: baseVersion, dependsOn: dependsOn)
    }

    /// A named mutation the instance knows, with `body` as its arguments.
    public static func custom(
        _ name: String, table: String, key: JSONValue, body: JSONValue, dependsOn: [WriteID] = []
    ) -> Write {
        Write(table: table, operation: .custom(name), key: key, body: body, dependsOn: dependsOn)
    }

    /// The longest table, user or mutation name accepted, in UTF-8 bytes.
    public static let maxNameBytes = 256

    /// The most a write's key and body may hold together, as canonical JSON text (sorted keys, no
    /// spaces): 8 MiB. Whatever `enqueue` accepts can be read back, sent and audited.
    public static let maxJSONBytes = 8 << 20

    /// The most writes one write may name in `dependsOn`.
    public static let maxDependencies = 1024

    /// Checks what can be checked without the log (R2.4).
    func validate() throws {
        try Self.validateName(table, what: "the table name")
        if case .custom(let name) = operation { try Self.validateName(name, what: "the mutation name") }
        guard case .object(let members) = key, !members.isEmpty else {
            throw OutboxError.invalid("the key must be a non-empty JSON object")
        }
        guard case .object(let fields) = body else { throw OutboxError.invalid("the body must be a JSON object") }
        if operation == .delete, !fields.isEmpty { throw OutboxError.invalid("a delete carries no body") }
        // The row is the key merged with the body: a column the two give different values is a mistake
        // (a key typed by hand beside a model), never a row to guess at.
        for (column, value) in members.sorted(by: { $0.key < $1.key }) {
            if let other = fields[column], !Self.same(value, other) {
                throw OutboxError.invalid(
                    "the key and the body give column \(column) different values; to change a row's key, delete it and insert the new one"
                )
            }
        }
        guard key.isFinite, body.isFinite else { throw OutboxError.invalid("a number in the key or body is not finite") }
        guard key.fitsNestingLimit, body.fitsNestingLimit else {
            throw OutboxError.invalid("the key or body nests deeper than \(JSONText.maxDepth) levels")
        }
        guard dependsOn.count <= Self.maxDependencies else {
            throw OutboxError.invalid("dependsOn names \(dependsOn.count) writes; a write names at most \(Self.maxDependencies)")
        }
        let size = JSONText.renderedLength(key) + JSONText.renderedLength(body)
        guard size <= Self.maxJSONBytes else {
            throw OutboxError.invalid(
                "the key and body are \(size) bytes of JSON; a write holds at most \(Self.maxJSONBytes) (8 MiB)")
        }
    }

    /// Equal JSON values, numbers compared by value (`1` and `1.0`).
    private static func same(_ a: JSONValue, _ b: JSONValue) -> Bool {
        switch (a, b) {
        case (.int(let x), .double(let y)), (.double(let y), .int(let x)): return Double(x) == y && Int64(exactly: y) == x
        default: return a == b
        }
    }

    /// This write, its key taken from `columns` of its body when it was made without one (a write made
    /// from a model). A model without one of the columns, or a table whose key columns nobody knows, is
    /// `invalidWrite`.
    func keyedFromBody(columns: [String]?) throws -> Write {
        guard key == [:] else { return self }
        guard let columns, !columns.isEmpty else {
            throw OutboxError.invalid(
                "the write to \(table) has no key, and the transport does not know the table's key columns: pass key:")
        }
        guard case .object(let fields) = body else { throw OutboxError.invalid("the body must be a JSON object") }
        var key: [String: JSONValue] = [:]
        for column in columns {
            guard let value = fields[column], value != .null else {
                throw OutboxError.invalid("the model written to \(table) has no \(column), a key column of the table")
            }
            key[column] = value
        }
        var keyed = self
        keyed.key = .object(key)
        return keyed
    }

    /// C0 and C1 controls, DEL, and the bidirectional embeddings, overrides and isolates: what
    /// controls a terminal or the direction of text.
    package static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F, 0x202A...0x202E, 0x2066...0x2069: return true
        default: return false
        }
    }

    static func validateName(_ name: String, what: String) throws {
        if name.isEmpty { throw OutboxError.invalid("\(what) is empty") }
        if name.utf8.count > maxNameBytes { throw OutboxError.invalid("\(what) is longer than \(maxNameBytes) bytes") }
        if name.utf8.contains(0) { throw OutboxError.invalid("\(what) contains a NUL character") }
        // Names are identifiers: a control character in one (ESC, CR, a bidirectional override) can
        // only forge what a terminal or a log viewer shows.
        if name.unicodeScalars.contains(where: isControl) {
            throw OutboxError.invalid("\(what) contains a control character")
        }
    }
}

// MARK: - Keys and bodies from Swift values

extension Write {
    /// An insert whose key and body are made of Swift values: `["id": todo.id]`, `["title": title]`.
    public static func insert(into table: String, key: JSONObject, body: JSONObject, dependsOn: [WriteID] = []) -> Write {
        insert(into: table, key: JSONValue(object: key), body: JSONValue(object: body), dependsOn: dependsOn)
    }

    /// An update whose key and fields are made of Swift values.
    public static func update(
        _ table: String, key: JSONObject, set body: JSONObject, baseVersion: Int64? = nil, dependsOn: [WriteID] = []
    ) -> Write {
        update(table, key: JSONValue(object: key), set: JSONValue(object: body), baseVersion: baseVersion, dependsOn: dependsOn)
    }

    /// An upsert whose key and body are made of Swift values.
    public static func upsert(into table: String, key: JSONObject, body: JSONObject, dependsOn: [WriteID] = []) -> Write {
        upsert(into: table, key: JSONValue(object: key), body: JSONValue(object: body), dependsOn: dependsOn)
    }

    /// A delete whose key is made of Swift values.
    public static func delete(from table: String, key: JSONObject, baseVersion: Int64? = nil, dependsOn: [WriteID] = []) -> Write
    {
        delete(from: table, key: JSONValue(object: key), baseVersion: baseVersion, dependsOn: dependsOn)
    }

    /// A named mutation whose key and body are made of Swift values.
    public static func custom(
        _ name: String, table: String, key: JSONObject, body: JSONObject, dependsOn: [WriteID] = []
    ) -> Write {
        custom(name, table: table, key: JSONValue(object: key), body: JSONValue(object: body), dependsOn: dependsOn)
    }

    // MARK: Bodies from Encodable models

    /// An insert whose body is an `Encodable` model, encoded by `encoder` (it must encode as an
    /// object): `try .insert(into: "todos", key: ["id": todo.id], encoding: todo)`. Throws
    /// `invalidWrite` when it does not encode, or not as an object.
    public static func insert(
        into table: String, key: JSONObject, encoding model: some Encodable, with encoder: JSONEncoder = JSONEncoder(),
        dependsOn: [WriteID] = []
    ) throws -> Write {
        insert(into: table, key: JSONValue(object: key), body: try object(model, encoder), dependsOn: dependsOn)
    }

    /// An upsert whose body is an `Encodable` model; see `insert(into:key:encoding:with:dependsOn:)`.
    public static func upsert(
        into table: String, key: JSONObject, encoding model: some Encodable, with encoder: JSONEncoder = JSONEncoder(),
        dependsOn: [WriteID] = []
    ) throws -> Write {
        upsert(into: table, key: JSONValue(object: key), body: try object(model, encoder), dependsOn: dependsOn)
    }

    /// An update that sets the fields an `Encodable` model encodes (a struct of the changed fields, or
    /// the whole row); see `insert(into:key:encoding:with:dependsOn:)`.
    public static func update(
        _ table: String, key: JSONObject, encoding model: some Encodable, with encoder: JSONEncoder = JSONEncoder(),
        baseVersion: Int64? = nil, dependsOn: [WriteID] = []
    ) throws -> Write {
        update(
            table, key: JSONValue(object: key), set: try object(model, encoder), baseVersion: baseVersion, dependsOn: dependsOn)
    }

    /// An insert of an `Encodable` model whose key is in the model: at enqueue, the key is the model's
    /// members named by the transport's key columns of the table (`keyColumns(of:)`, PostgREST's
    /// `tables:`): `try .insert(into: "todos", encoding: todo)`. Throws `invalidWrite` when it does not
    /// encode as an object; `enqueue` throws it when the model lacks a key column or the transport does
    /// not know them.
    public static func insert(
        into table: String, encoding model: some Encodable, with encoder: JSONEncoder = JSONEncoder(), dependsOn: [WriteID] = []
    ) throws -> Write {
        insert(into: table, key: [:], body: try object(model, encoder), dependsOn: dependsOn)
    }

    /// An upsert of a model whose key is in the model; see `insert(into:encoding:with:dependsOn:)`.
    public static func upsert(
        into table: String, encoding model: some Encodable, with encoder: JSONEncoder = JSONEncoder(), dependsOn: [WriteID] = []
    ) throws -> Write {
        upsert(into: table, key: [:], body: try object(model, encoder), dependsOn: dependsOn)
    }

    /// An update setting what a model encodes, its key in the model (the key columns are set to the
    /// values they hold); see `insert(into:encoding:with:dependsOn:)`.
    public static func update(
        _ table: String, encoding model: some Encodable, with encoder: JSONEncoder = JSONEncoder(), baseVersion: Int64? = nil,
        dependsOn: [WriteID] = []
    ) throws -> Write {
        update(table, key: [:], set: try object(model, encoder), baseVersion: baseVersion, dependsOn: dependsOn)
    }

    private static func object(_ model: some Encodable, _ encoder: JSONEncoder) throws -> JSONValue {
        let value = try JSONValue(encoding: model, with: encoder)
        guard case .object = value else { throw OutboxError.invalid("the model must encode as a JSON object, not \(value)") }
        return value
    }
}
