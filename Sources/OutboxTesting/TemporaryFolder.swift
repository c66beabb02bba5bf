internal import Foundation

/// A fresh place under the system's temporary directory for a test's log or files, removed when the
/// test is done with it.
///
/// ```swift
/// try await TemporaryFolder.with { path in
///     let outbox = try await OutboxClient.open(at: URL(filePath: path))
///     …
/// }
/// ```
public struct TemporaryFolder: Sendable {
    /// The folder's path.
    public let path: String

    /// A path no one uses, made as a folder when `created` (an outbox log's own open makes it).
    public init(prefix: String = "outbox-test", created: Bool = false) {
        path = NSTemporaryDirectory() + prefix + "-" + UUID().uuidString
        if created { try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) }
    }

    /// Removes the folder and everything in it.
    public func remove() { try? FileManager.default.removeItem(atPath: path) }

    /// Runs `body` with a fresh folder's path, removed when `body` returns or throws.
    public static func with<R>(
        prefix: String = "outbox-test", created: Bool = false, _ body: (String) async throws -> R
    ) async rethrows -> R {
        let folder = TemporaryFolder(prefix: prefix, created: created)
        defer { folder.remove() }
        return try await body(folder.path)
    }

    /// Runs `body` with a fresh folder's path, removed when `body` returns or throws.
    public static func with<R>(prefix: String = "outbox-test", created: Bool = false, _ body: (String) throws -> R) rethrows -> R
    {
        let folder = TemporaryFolder(prefix: prefix, created: created)
        defer { folder.remove() }
        return try body(folder.path)
    }
}
