/// How a client behaves. The defaults are what most apps want.
public struct OutboxConfiguration: Sendable {
    /// How an enqueue reaches the disk.
    public enum Durability: Sendable {
        /// Enqueue returns only after its commit is flushed with LMDB's full sync: the write survives a
        /// crash of the app, of the OS, and a power loss. The default.
        case full
        /// `MDB_NOSYNC`: enqueue returns once committed, without waiting for the disk. The write survives
        /// the app being killed, but NOT an OS crash or power loss, which may lose the last writes.
        /// Choose it only when that loss is acceptable.
        case noSync
    }

    /// Whether the library starts passes by itself.
    public var autoSync = true
    /// Refusals after which a write is dead.
    public var maxRefusals = 5
    /// Writes per request.
    public var batchSize = 50
    /// How commits reach the disk: `.full` (every commit flushed) or `.noSync`.
    public var durability: Durability = .full
    /// The backoff's jitter fraction: 0 (the default) for none, at most 0.2 (±20 %).
    public var backoffJitter = 0.0
    /// When false, writes made with no signed-in user belong to an anonymous owner.
    public var requiresUser = true
    /// The initial LMDB map size; the map grows by itself.
    public var initialMapSize = 64 << 20
    /// How long, in seconds, a pass waits for another process's pass on the same log (an app
    /// extension, `outbox sync`) to end before it ends itself, sending nothing and reporting
    /// `stoppedBy` of kind `busy`.
    public var syncLockWait = 10.0
    /// When the library compacts the log by itself, between passes: never (the default), or once
    /// the log passes a size or a number of settled writes still in it.
    public var compaction: CompactionPolicy = .off
    /// The folder of the log's archive; beside the log when nil (`archive` in the log's folder).
    public var archiveFolder: String?
    /// Where time comes from.
    public var clock: any OutboxClock = SystemClock()
    /// Where randomness comes from.
    public var random: any RandomSource = SystemRandomSource()
    /// A crash point to arm: tests and the crash harness set it; nothing reads it from the environment.
    package var crashPlan: CrashPlan?
    /// The simulation keeps its logs `.noSync` for speed and makes its power losses as `.full`
    /// durability would meet them (`PowerLoss`: only a commit made without the meta sync is undone):
    /// the pass then works the acknowledged watermark out as with `.full`.
    package var powerLossIsSimulated = false
    /// The simulation's journaled logs: `.noSync` logs that commit through a journal (a small one)
    /// as `.full` logs do, without its flushes; the simulation's power losses then put LMDB back to
    /// the journal's head, and the next open recovers the commits after it.
    package var journalIsSimulated = false

    /// The settings an app usually sets; the others keep their defaults.
    public init(
        autoSync: Bool = true, maxRefusals: Int = 5, batchSize: Int = 50, durability: Durability = .full,
        requiresUser: Bool = true
    ) {
        self.autoSync = autoSync
        self.maxRefusals = maxRefusals
        self.batchSize = batchSize
        self.durability = durability
        self.requiresUser = requiresUser
    }

    /// When the library compacts the log by itself.
    public struct CompactionPolicy: Hashable, Sendable {
        /// Compact once the data file's pages in use hold more than this many bytes (the file itself
        /// runs a little ahead of them, written in advance).
        public var logBytes: Int?
        /// Compact once this many writes have left the queue since their history was last archived.
        public var settledWrites: Int?

        /// Never by itself: the app calls `compact(before:)`.
        public static let off = CompactionPolicy(logBytes: nil, settledWrites: nil)

        /// Compact when either limit is passed (each nil to ignore it).
        public static func when(logExceeds bytes: Int? = nil, settledWritesExceed writes: Int? = nil) -> CompactionPolicy {
            CompactionPolicy(logBytes: bytes, settledWrites: writes)
        }
    }

    /// The owner of writes made while no user is signed in, with `requiresUser: false`.
    public static let anonymousUser = ""
}
