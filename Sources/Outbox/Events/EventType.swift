/// The stable name and code of each kind of event. Names are past participles and never change; the
/// code is the record's type byte; `currentVersion` is the payload layout this build writes.
public enum EventType: UInt8, CaseIterable, Sendable {
    /// The type of `Event.logCreated`.
    case logCreated = 1
    /// The type of `Event.writeQueued`.
    case writeQueued = 2
    /// The type of `Event.sessionSettled`.
    case sessionSettled = 3
    /// The type of `Event.networkSwitched`.
    case networkSwitched = 4
    /// The type of `Event.passStarted`.
    case passStarted = 5
    /// The type of `Event.attemptStarted`.
    case attemptStarted = 6
    /// The type of `Event.answerReceived`.
    case answerReceived = 7
    /// The type of `Event.verdictRecorded`.
    case verdictRecorded = 8
    /// The type of `Event.schemaRefusalCounted`.
    case schemaRefusalCounted = 9
    /// The type of `Event.writeFailed`.
    case writeFailed = 10
    /// The type of `Event.passEnded`.
    case passEnded = 11
    /// The type of `Event.batchAborted`.
    case batchAborted = 12
    /// The type of `Event.writeReleased`.
    case writeReleased = 13
    /// The type of `Event.writeWithdrawn`.
    case writeWithdrawn = 14
    /// The type of `Event.writeDiscarded`.
    case writeDiscarded = 15
    /// The type of `Event.answersTaken`.
    case answersTaken = 16
    /// The type of `Event.answersForgotten`.
    case answersForgotten = 17
    /// The type of `Event.localDataCleared`.
    case localDataCleared = 18
    /// The type of `Event.writeCancelled`.
    case writeCancelled = 19
    /// The type of `Event.verdictsRecorded`.
    case verdictsRecorded = 20
    /// The type of `Event.logCompacted`.
    case logCompacted = 21

    /// The stored name, as the tools print it.
    public var name: String { "\(self)" }

    /// The payload version this build writes. Older versions are upcast on read (`Upcasting.swift`).
    var currentVersion: UInt8 {
        switch self {
        case .answerReceived: return 4
        case .writeQueued, .attemptStarted: return 2
        default: return 1
        }
    }
}
