/// How the outbox reaches the instance. `SimulatedInstance` is one; an HTTP transport is another.
///
/// This part of the boundary is what the local queue needs: the row read of `withdraw` (R6.4).
public protocol OutboxTransport: Sendable {
    /// The row the instance holds for (`table`, `key`), or `nil` when it holds none (a successful read).
    /// Throws when the read fails; the caller then changes nothing.
    func readRow(table: String, key: JSONValue, accessToken: String?) async throws -> JSONValue?
}
