internal import Foundation
internal import Outbox

/// What `outbox report` shows of a log: its passes, the queue's size over time, and the writes the
/// queue holds with their histories. Read in one pass over the events and one over the queue.
struct LogReport {
    /// One pass, from its `passStarted` to its `passEnded` (or the log's end, when it was cut short).
    struct Pass {
        var id: UInt64
        var user: String
        var table: String?
        var automatic: Bool
        var started: Timestamp
        var ended: Timestamp?
        var requests = 0
        var sent = 0
        var answered = 0
        var refused = 0
        var failures: [String] = []
        var stoppedBy: PassFailure?
    }

    /// The pending count after an event, sampled.
    struct Point {
        var sequence: UInt64
        var at: Timestamp
        var pending: Int
    }

    /// One write of the log, and its history as timeline lines.
    struct WriteRow {
        var id: WriteID
        var user: String
        var table: String
        var operation: String
        var key: String
        /// Its state's word (pending, accepted, …) while the queue holds it; else how it left: taken,
        /// forgotten, discarded, withdrawn, cancelled, cleared.
        var state: String
        /// The state with its reason and whether it waits: `blocked (keySpent)`, `pending, waiting`.
        var detail: String
        var refusals = 0
        var history: [String] = []
    }

    var path: String
    var events: UInt64 = 0
    var first: Timestamp?
    var last: Timestamp?
    var passes: [Pass] = []
    var passCount = 0
    var points: [Point] = []
    var rows: [WriteRow] = []
    var writeCount = 0
    var states: [String: Int] = [:]

    /// The most passes, points and writes a page shows; a larger log shows the latest passes and the
    /// first writes, and says how many it left out.
    static let maxPasses = 1000
    static let maxPoints = 600
    static let maxRows = 10_000

    init(path: String, inspector: LogInspector, progress: ProgressLine? = nil) throws {
        self.path = path
        let lastSequence = try inspector.lastSequence()
        let step = max(1, lastSequence / UInt64(Self.maxPoints))
        var pending = Set<WriteID>()
        var open: [UInt64: Int] = [:]
        try inspector.forEachEvent(from: 1, to: .max) { recorded in
            events += 1
            keep(recorded)
            if first == nil { first = recorded.at }
            last = recorded.at
            note(recorded, pending: &pending, open: &open)
            if recorded.sequence % step == 0 || recorded.sequence == lastSequence {
                points.append(Point(sequence: recorded.sequence, at: recorded.at, pending: pending.count))
            }
            if events % 4096 == 0 { progress?.update(events, unit: "events") }
            return true
        }
        try inspector.forEachWrite(user: nil) { write in
            writeCount += 1
            states[write.state.name, default: 0] += 1
            guard let at = index[write.id] else { return }
            var detail = write.state.name
            if case .blocked(let reason, _) = write.state { detail += " (\(reason.rawValue))" }
            if write.waiting { detail += ", waiting" }
            rows[at].state = write.state.name
            rows[at].detail = detail
            rows[at].refusals = write.refusals
        }
    }

    /// Where each write shown is in `rows`.
    private var index: [WriteID: Int] = [:]
    /// Writes the log held beyond `maxRows`.
    var writesLeftOut = 0

    /// A new write gets a row (while there is room); an event naming rows' writes joins their
    /// histories; a write leaving the queue says how.
    private mutating func keep(_ recorded: RecordedEvent) {
        if case .writeQueued(let queued) = recorded.event, index[queued.id] == nil {
            guard rows.count < Self.maxRows else {
                writesLeftOut += 1
                return
            }
            index[queued.id] = rows.count
            rows.append(
                WriteRow(
                    id: queued.id, user: queued.user, table: queued.table, operation: queued.operation.description,
                    key: JSONText.render(queued.key), state: "pending", detail: "pending"))
        }
        var seen = Set<WriteID>()
        for id in recorded.event.writeIDs where seen.insert(id).inserted {
            guard let at = index[id] else { continue }
            rows[at].history.append(Render.timeline(recorded, of: id))
        }
        let left: (String, [WriteID])?
        switch recorded.event {
        case .answersTaken(let cleared): left = ("taken", cleared.writes)
        case .answersForgotten(let cleared): left = ("forgotten", cleared.writes)
        case .writeDiscarded(let discarded): left = ("discarded", [discarded.writeId])
        case .writeWithdrawn(let withdrawn): left = ("withdrawn", [withdrawn.writeId])
        case .writeCancelled(let cancelled): left = ("cancelled", [cancelled.writeId])
        case .localDataCleared(let cleared): left = ("cleared", cleared.writes)
        default: left = nil
        }
        for id in left?.1 ?? [] {
            guard let at = index[id] else { continue }
            rows[at].state = left!.0
            rows[at].detail = left!.0
        }
    }

    private mutating func note(_ recorded: RecordedEvent, pending: inout Set<WriteID>, open: inout [UInt64: Int]) {
        switch recorded.event {
        case .writeQueued(let queued): pending.insert(queued.id)
        case .writeReleased(let released): pending.insert(released.writeId)
        case .writeWithdrawn(let withdrawn): pending.remove(withdrawn.writeId)
        case .writeDiscarded(let discarded): pending.remove(discarded.writeId)
        case .writeCancelled(let cancelled): pending.remove(cancelled.writeId)
        case .localDataCleared(let cleared): pending.subtract(cleared.writes)
        case .verdictRecorded, .verdictsRecorded:
            for verdict in recorded.event.verdicts where verdict.state != .pending { pending.remove(verdict.writeId) }
        case .passStarted(let started):
            passCount += 1
            if passes.count == Self.maxPasses {
                passes.removeFirst(Self.maxPasses / 10)
                open = Dictionary(uniqueKeysWithValues: passes.enumerated().map { ($1.id, $0) })
            }
            open[started.passId] = passes.count
            passes.append(
                Pass(
                    id: started.passId, user: started.user, table: started.table, automatic: started.automatic,
                    started: recorded.at))
        case .attemptStarted(let attempt):
            guard let at = open[attempt.passId] else { return }
            passes[at].requests += 1
            passes[at].sent += attempt.writes.count
        case .answerReceived(let received):
            guard let at = open[received.passId] else { return }
            switch received.answer {
            case .answered(let answers):
                for answer in answers {
                    switch answer.verdict {
                    case .accepted, .merged, .conflicted: passes[at].answered += 1
                    case .refused: passes[at].refused += 1
                    default: break
                    }
                }
            case .failed(let failure):
                passes[at].failures.append(failure.status.map { "HTTP \($0)" } ?? failure.kind.rawValue)
            case .contractBroken: passes[at].failures.append("broken answer")
            }
        case .passEnded(let ended):
            guard let at = open[ended.passId] else { return }
            passes[at].ended = recorded.at
            passes[at].stoppedBy = ended.stoppedBy
        default: break
        }
    }

    /// A few lines for a terminal: the counts, the passes, how the last one ended.
    var summary: String {
        var lines = ["\(path): \(events) events, \(first.map(\.description) ?? "-") to \(last.map(\.description) ?? "-")"]
        let counts = states.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        lines.append("the queue holds \(writeCount) writes" + (counts.isEmpty ? "" : ": " + counts))
        lines.append("passes: \(passCount)")
        if let pass = passes.last {
            lines.append(
                "the last, pass \(pass.id) at \(pass.started): \(pass.sent) sent in \(pass.requests) requests, "
                    + "\(pass.answered) answered, \(pass.refused) refused"
                    + (pass.stoppedBy.map { "; stopped by \($0)" } ?? ""))
        }
        return lines.joined(separator: "\n")
    }
}
