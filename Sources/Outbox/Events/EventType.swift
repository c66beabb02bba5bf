/// The stable name and code of each kind of event. Names are past participles and never change; the
/// code is the record's type byte; `currentVersion` is the payload layout this build writes.
public enum EventType: UInt8, CaseIterable, Sendable {
    case logCreated = 1
    case writeQueued = 2
    case sessionSettled = 3
    case networkSwitched = 4
    case passStarted = 5
    case attemptStarted = 6
    case answerReceived = 7
    case verdictRecorded = 8
    case schemaRefusalCounted = 9
    case writeFailed = 10
    case passEnded = 11
    case batchAborted = 12
    case writeReleased = 13
    case writeWithdrawn = 14
    case writeDiscarded = 15
    case answersTaken = 16
    case answersForgotten = 17
    case localDataCleared = 18
    case writeCancelled = 19

    /// The stored name, as the tools print it.
    public var name: String { "\(self)" }

    /// The payload version this build writes. Older versions are upcast on read (`Upcasting.swift`).
    var currentVersion: UInt8 {
        switch self {
        case .writeQueued, .answerReceived: return 2
        default: return 1
        }
    }
}
