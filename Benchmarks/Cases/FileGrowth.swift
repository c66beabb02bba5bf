import COutboxLMDB
import Foundation
import Outbox

/// What a commit that lengthens the data file costs on this machine's file system, which is why the
/// engine writes the file ahead of LMDB's pages (`Environment.writeAhead`): raw LMDB appends, 1000 a
/// commit, into a fresh file (each commit lengthens it) against the same into a file already written
/// with zeros past where they end (written before the clock starts). Only when named:
///   .build/release/outbox-benchmarks --size 1000000 --runs 3 file-growth
enum FileGrowthCase: BenchmarkCase {
    static func isSelected() -> Bool { options.filter == "file-growth" }

    static func run() throws {
        let records = sampleRecords(bulkSize)
        let bytes = records.reduce(0) { $0 + $1.count + 16 } * 2
        let measured = try interleaved([
            MeasuredSide(
                { temporaryPath() }, { rawAppend(path: $0, records: records, perTransaction: 1000) }, tearDown: removing),
            MeasuredSide(
                { () -> (String, RawEnvironment) in
                    let path = temporaryPath()
                    let env = RawEnvironment(path: path, tables: [.log])
                    let file = FileHandle(forWritingAtPath: path + "/data.mdb")!
                    file.seekToEndOfFile()
                    let zeros = Data(count: 1 << 20)
                    for _ in 0..<(bytes >> 20) + 1 { file.write(zeros) }
                    file.synchronizeFile()
                    file.closeFile()
                    return (path, env)
                },
                { path, env in
                    env.write(records.count, perTransaction: 1000) { txn, range in
                        for offset in range { txn.put(.log, id: UInt64(offset + 1), records[offset]) }
                    }
                }, tearDown: { removing($0.0) }),
        ])
        report(
            "raw LMDB append, 1000 a commit, into a file written ahead", size: bulkSize, measured[1].figure,
            baseline: "the same, each commit lengthening the file", measured[0].figure, ratio: 1 / measured[1].ratio)
    }
}
