internal import COutboxLMDB

/// A named database inside an environment, opened once when the environment opens.
public struct Database: Hashable, Sendable {
    let dbi: MDB_dbi
    /// Its name in the file.
    public let name: String
}
