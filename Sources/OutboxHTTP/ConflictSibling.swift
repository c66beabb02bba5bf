public import Foundation
public import Outbox

/// The losing side of a conflict, as the reference instance keeps it (`conflicted(siblingId:fields:)`):
/// the write the instance did not apply, for the app to show beside the row or to apply again on top.
public struct ConflictSibling: Hashable, Sendable {
    /// The sibling's id, the write's `siblingId`.
    public var id: String
    /// The table of the row it was written to.
    public var table: String
    /// The key of the row it was written to.
    public var key: JSONValue
    /// What the write did: insert, update, upsert, delete or a custom mutation.
    public var operation: WriteOperation
    /// The fields it carried.
    public var body: JSONValue
    /// The row version it was made on.
    public var baseVersion: Int64?
    /// The row's version when it came.
    public var serverVersion: Int64?
    /// The fields changed since its base, to other values: what it conflicted on.
    public var fields: [String]
    /// Whether the row had been deleted since the write's base.
    public var deleted: Bool
    /// The id of the write it kept, in the log of the device that made it.
    public var writeId: WriteID?
    /// When the instance kept it, as it wrote the time (ISO 8601).
    public var createdAt: String?

    /// The body decoded as `type` (the app's model of the table).
    public func body<T: Decodable>(as type: T.Type, with decoder: JSONDecoder = JSONDecoder()) throws -> T {
        try body.decode(as: type, with: decoder)
    }

    /// The sibling an `outbox_sibling` answer describes, or nil when it lacks a field the contract gives.
    init?(_ answer: JSONValue) {
        guard case .object(let fields) = answer, case .string(let id)? = fields["id"], case .string(let table)? = fields["table"],
            let key = fields["key"], case .object = key, case .string(let op)? = fields["op"], let body = fields["body"],
            case .object = body
        else { return nil }
        func integer(_ name: String) -> Int64? {
            if case .int(let value)? = fields[name] { return value }
            return nil
        }
        self.id = id
        self.table = table
        self.key = key
        operation = WriteOperation(word: op)
        self.body = body
        baseVersion = integer("baseVersion")
        serverVersion = integer("serverVersion")
        if case .array(let names)? = fields["fields"] {
            self.fields = names.compactMap { if case .string(let name) = $0 { return name } else { return nil } }
        } else {
            self.fields = []
        }
        deleted = fields["deleted"] == .bool(true)
        writeId = integer("writeId").flatMap { $0 > 0 ? WriteID(UInt64($0)) : nil }
        if case .string(let at)? = fields["createdAt"] { createdAt = at } else { createdAt = nil }
    }
}

extension ContractTransport {
    /// The sibling a conflicted write went to (`POST /rpc/outbox_sibling`), read with the user's token;
    /// nil when the instance holds none for this user (another user's sibling reads as none). Throws
    /// `PostgRESTError` when the read fails or the answer is not a sibling.
    public func sibling(_ siblingId: String, accessToken: String?) async throws -> ConflictSibling? {
        let body = "{\"id\":" + JSONText.render(.string(siblingId)) + "}"
        let response = try await server.perform(
            HTTPRequest(
                method: "POST", url: try server.endpoint("rpc", "outbox_sibling"), headers: server.headers(token: accessToken),
                body: Data(body.utf8)))
        guard (200..<300).contains(response.status), let answer = try? JSONText.parse(response.text) else {
            throw PostgRESTError(status: response.status, code: PostgRESTAnswer(response).code)
        }
        if answer == .null { return nil }
        guard let sibling = ConflictSibling(answer) else { throw PostgRESTError(status: response.status, code: nil) }
        return sibling
    }
}
