internal import Foundation
internal import Outbox
internal import OutboxSimulation

extension Commands {
    static func simulate(_ words: [String]) async throws -> Exit {
        let args = try Arguments(
            command: "simulate", words: words, options: ["seed", "seeds", "start", "steps", "seconds", "jobs", "regressions"],
            flags: ["journaled"])
        let journaled = args.flag("journaled")
        guard args.positionals.isEmpty else { throw UsageError(message: "simulate takes options only") }
        let suffix = journaled ? " --journaled" : ""
        let label = journaled ? " (journaled)" : ""
        let steps = Int(try args.unsigned("steps") ?? UInt64(Simulator.defaultSteps))
        guard steps >= 1 else { throw UsageError(message: "--steps takes a number from 1") }
        if let seed = try args.unsigned("seed") {
            let first = await Simulator.run(seed: seed, steps: steps, journaled: journaled)
            let second = await Simulator.run(seed: seed, steps: steps, journaled: journaled)
            say(
                "seed \(seed): \(first.steps) steps, \(first.enqueued) writes, \(first.requests) requests, \(first.applied) applied, \(first.crashes) crashes (\(first.powerLosses) power losses, \(first.journalCuts) of them taking back commits not flushed in the journal)"
            )
            say("faults: \(first.rates)")
            say("trace \(String(first.traceHash, radix: 16))")
            var failures = first.failures
            if first.traceHash != second.traceHash { failures.append("I11: the same seed gave another trace the second time") }
            for failure in failures { say("  " + failure) }
            if !failures.isEmpty { say("reproduce: outbox simulate --seed \(seed) --steps \(steps)\(suffix)") }
            say("sim\(label): 1 seeds, \(failures.isEmpty ? 0 : 1) failed")
            return failures.isEmpty ? .success : .notSo
        }
        var seeds: [(seed: UInt64, steps: Int)] = []
        if let file = args.option("regressions") {
            guard let text = try? String(contentsOfFile: file, encoding: .utf8) else {
                throw UsageError(message: "--regressions \(file): cannot read it")
            }
            do {
                seeds = try RegressionSeeds.parse(text)
            } catch {
                throw UsageError(message: "--regressions \(file): \(error)")
            }
        }
        let count = try args.unsigned("seeds") ?? (seeds.isEmpty ? 100 : 0)
        let start = try args.unsigned("start") ?? 1
        seeds += (0..<count).map { (start + $0, steps) }
        let deadline = Date().addingTimeInterval(Double(try args.unsigned("seconds") ?? 86_400))
        let jobs = max(1, Int(try args.unsigned("jobs") ?? 2))
        var ran = 0
        var crashes = 0
        var powerLosses = 0
        var journalCuts = 0
        var compactions = 0
        var failed: [SimulationResult] = []
        var next = seeds.startIndex
        await withTaskGroup(of: SimulationResult.self) { group in
            func launch() {
                guard next < seeds.endIndex, Date() < deadline else { return }
                let (seed, length) = seeds[next]
                next += 1
                group.addTask { await Simulator.run(seed: seed, steps: length, journaled: journaled) }
            }
            for _ in 0..<jobs { launch() }
            while let result = await group.next() {
                ran += 1
                crashes += result.crashes
                powerLosses += result.powerLosses
                journalCuts += result.journalCuts
                compactions += result.compactions
                if !result.passed {
                    failed.append(result)
                    say("seed \(result.seed) failed:")
                    for failure in result.failures { say("  " + failure) }
                    say("reproduce: outbox simulate --seed \(result.seed) --steps \(result.steps)\(suffix)")
                }
                launch()
            }
        }
        say(
            journaled
                ? "crashes: \(crashes), of which \(powerLosses) power losses (\(journalCuts) of them took back commits not flushed in the journal); \(compactions) compactions"
                : "crashes: \(crashes), of which \(powerLosses) power losses undid the last commit; \(compactions) compactions")
        say("sim\(label): \(ran) seeds, \(failed.count) failed")
        return failed.isEmpty ? .success : .notSo
    }
}
