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
    /// The row's primary key: a non-empty JSON object. Built from the canonical bytes when asked.
    public var key: JSONValue {
        get { canonicalKey.value }
        set { canonicalKey = CanonicalJSON(newValue) }
    }
    /// A JSON object; empty for a delete. Built from the canonical bytes when asked.
    public var body: JSONValue {
        get { canonicalBody.value }
        set { canonicalBody = CanonicalJSON(newValue) }
    }
    /// The key as canonical JSON text in UTF-8 (object keys sorted by their bytes, no white space): the
    /// bytes an HTTP transport sends, the same on every send. Rendered when asked, straight from the
    /// canonical bytes, without building the value.
    public var keyJSON: [UInt8] { canonicalKey.text }
    /// The body as canonical JSON text in UTF-8, as `keyJSON`.
    public var bodyJSON: [UInt8] { canonicalBody.text }
    /// Whether the key is a JSON object, told without building it.
    public var keyIsObject: Bool { canonicalKey.isObject }
    /// Whether the body is a JSON object, told without building it.
    public var bodyIsObject: Bool { canonicalBody.isObject }
    /// The key and body as the log stores them: made canonical once, when the write is made.
    package var canonicalKey: CanonicalJSON
    package var canonicalBody: CanonicalJSON
    /// The row version the edit was made on.
    public var baseVersion: Int64?
    /// Ids of earlier writes of the same user this one must follow (earlier writes to the same row are
    /// followed by themselves). In an `OutgoingWrite`, every write it must follow.
    public var dependsOn: [WriteID]

    /// A write of any operation; the static functions below read better.
    public init(
        table: String, operation: WriteOperation, key: JSONValue, body: JSONValue = [:], baseVersion: Int64? = nil,
        dependsOn: [WriteID] = []
    ) {
        self.init(
            table: table, operation: operation, key: CanonicalJSON(key), body: CanonicalJSON(body), baseVersion: baseVersion,
            dependsOn: dependsOn)
    }

    /// A write whose key and body are canonical already (read from the log).
    package init(
        table: String, operation: WriteOperation, key: CanonicalJSON, body: CanonicalJSON, baseVersion: Int64?,
        dependsOn: [WriteID]
    ) {
        self.table = table
        self.operation = operation
        canonicalKey = key
        canonicalBody = body
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

    /// Checks what can be checked without the log (R2.4), on the canonical bytes the log will keep.
    func validate() throws {
        try Self.validateName(table, what: "the table name")
        if case .custom(let name) = operation { try Self.validateName(name, what: "the mutation name") }
        guard let keyColumns = canonicalKey.memberCount, keyColumns > 0 else {
            throw OutboxError.invalid("the key must be a non-empty JSON object")
        }
        guard let fields = canonicalBody.memberCount else { throw OutboxError.invalid("the body must be a JSON object") }
        if operation == .delete, fields > 0 { throw OutboxError.invalid("a delete carries no body") }
        // The JSON text is measured only when the lengths of the bytes do not already bound it, or to
        // find what a log cannot hold.
        var size = 0
        if !canonicalKey.isHoldable || !canonicalBody.isHoldable
            || canonicalKey.textLengthBound + canonicalBody.textLengthBound > Self.maxJSONBytes
        {
            do {
                size = try canonicalKey.checkedTextLength() + canonicalBody.checkedTextLength()
            } catch {
                throw OutboxError.invalid("the key or body cannot be stored: \(error.reason)")
            }
        }
        if let column = columnGivenTwoValues() {
            throw OutboxError.invalid(
                "the key and the body give column \(column) different values; to change a row's key, delete it and insert the new one"
            )
        }
        guard dependsOn.count <= Self.maxDependencies else {
            throw OutboxError.invalid("dependsOn names \(dependsOn.count) writes; a write names at most \(Self.maxDependencies)")
        }
        guard size <= Self.maxJSONBytes else {
            throw OutboxError.invalid(
                "the key and body are \(size) bytes of JSON; a write holds at most \(Self.maxJSONBytes) (8 MiB)")
        }
    }

    /// The first column (in canonical order) that the key and the body give different values: the row
    /// is the key merged with the body, so such a column is a mistake (a key typed by hand beside a
    /// model), never a row to guess at.
    private func columnGivenTwoValues() -> String? {
        var found: String?
        // The closure takes the two values, not the write (which it would copy whole).
        let (key, body) = (canonicalKey, canonicalBody)
        key.forEachSharedMember(with: body) { name, mine, theirs in
            if key.bytes[mine].elementsEqual(body.bytes[theirs]) || Self.same(key.value(at: mine), body.value(at: theirs)) {
                return true
            }
            found = String(decoding: key.bytes[name], as: UTF8.self)
            return false
        }
        return found
    }

    /// Equal JSON values, numbers compared by value (`1` and `1.0`).
    private static func same(_ a: JSONValue, _ b: JSONValue) -> Bool {
        switch (a, b) {
        case (.int(let x), .double(let y)), (.double(let y), .int(let x)): return Double(x) == y && Int64(exactly: y) == x
        default: return a == b
        }
    }

    /// Whether it was made without a key (`[:]`): from a model, its key in its body.
    var isKeyless: Bool { canonicalKey.memberCount == 0 }

    /// This write, its key taken from `columns` of its body when it was made without one (a write made
    /// from a model). A model without one of the columns, or a table whose key columns nobody knows, is
    /// `invalidWrite`.
    func keyedFromBody(columns: [String]?) throws -> Write {
        guard isKeyless else { return self }
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
        // Most names are short printable ASCII: one pass tells them apart.
        if name.utf8.count <= maxNameBytes, name.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) { return }
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

    /// The body decoded as `type`: the model an `Encodable` write was made from
    /// (`try item.write.body(as: Todo.self)`). Throws `invalidWrite` when it does not decode.
    public func body<T: Decodable>(as type: T.Type, with decoder: JSONDecoder = JSONDecoder()) throws -> T {
        try canonicalBody.value.decode(as: type, with: decoder)
    }

    private static func object(_ model: some Encodable, _ encoder: JSONEncoder) throws -> JSONValue {
        let value = try JSONValue(encoding: model, with: encoder)
        guard case .object = value else { throw OutboxError.invalid("the model must encode as a JSON object, not \(value)") }
        return value
    }
}
