// The journal the floors can run behind: the engine's own (`Journal`, decision 016) in front of a raw
// environment opened `noSync`. No other engine code runs.

import COutboxLMDB
import Foundation
import Outbox

#if canImport(Glibc)
    import Glibc
#endif

/// The engine's `Journal` in front of `environment` (opened `noSync`): each commit's records appended
/// and flushed there, LMDB's commits flushing nothing; when a commit's records do not fit, a
/// checkpoint (LMDB flushed, its meta pages kept in the journal's head, that snapshot held by a
/// reader) and the commits start again after the head. LMDB's pages are 4 KB on this machine.
final class FloorJournal {
    private let journal: Journal
    private unowned let environment: RawEnvironment
    private let dataPath: String
    /// The last sequence appended.
    private var last: UInt64 = 0

    init(path: String, environment: RawEnvironment, dataPath: String) {
        self.environment = environment
        self.dataPath = dataPath
        journal = try! Journal(path: path, metaPagesSize: 2 * 4096)
    }

    /// Appends one commit's records, their sequences from `first`, and flushes them; checkpoints first
    /// when they do not fit.
    func append(_ records: some Sequence<[UInt8]>, first: UInt64) {
        let records = Array(records)
        if !journal.fits(records) { checkpoint() }
        try! journal.append(records, first: first)
        last = first + UInt64(records.count) - 1
    }

    /// Flushes the environment, keeps its meta pages in the head, and holds that snapshot.
    func checkpoint() {
        environment.flush()
        var metas = [UInt8](repeating: 0, count: 2 * 4096)
        let data = open(dataPath, O_RDONLY | O_CLOEXEC)
        precondition(data >= 0 && metas.withUnsafeMutableBytes { pread(data, $0.baseAddress, $0.count, 0) } == metas.count)
        close(data)
        try! journal.checkpoint(sequence: last, metaPages: metas)
        environment.pinSnapshot()
    }
}
