/// Every fact the log records. Each case's payload is its own type, in its own file.
public enum Event: Hashable, Sendable {
    /// The log was made, with its origin.
    case logCreated(LogCreated)
    /// The app queued a write.
    case writeQueued(WriteQueued)
    /// The session's user changed, or its token named another user.
    case sessionSettled(SessionSettled)
    /// The app switched the library's network access on or off.
    case networkSwitched(NetworkSwitched)
    /// A pass began, with the settings it runs under.
    case passStarted(PassStarted)
    /// A request is about to be sent, with the writes it carries and their keys.
    case attemptStarted(AttemptStarted)
    /// An answer came back, exactly as received.
    case answerReceived(AnswerReceived)
    /// A write's state changed on an answer, a refusal or an app's action.
    case verdictRecorded(VerdictRecorded)
    /// Several writes' states changed on one answer (`verdicts` lists them).
    case verdictsRecorded(VerdictsRecorded)
    /// The server's schema cache did not know a write's table or column.
    case schemaRefusalCounted(SchemaRefusalCounted)
    /// A write failed alone with a failure that may pass.
    case writeFailed(WriteFailed)
    /// A pass ended, and what stopped it, if anything did.
    case passEnded(PassEnded)
    /// An atomic group was aborted: nothing of it was applied.
    case batchAborted(BatchAborted)
    /// The app released a write: it goes again under a new key.
    case writeReleased(WriteReleased)
    /// The app withdrew a write, with the row the instance held.
    case writeWithdrawn(WriteWithdrawn)
    /// The app discarded a refused or dead write.
    case writeDiscarded(WriteDiscarded)
    /// The app took the answered writes out of the queue.
    case answersTaken(AnswersCleared)
    /// The library forgot answered writes the app had not taken.
    case answersForgotten(AnswersCleared)
    /// A user's local data was cleared.
    case localDataCleared(LocalDataCleared)
    /// The app cancelled a write nothing had sent.
    case writeCancelled(WriteCancelled)
    /// The log was compacted here: what came before is in the archive.
    case logCompacted(LogCompacted)

    /// The kind of event, as the log stores it.
    public var type: EventType {
        switch self {
        case .logCreated: return .logCreated
        case .writeQueued: return .writeQueued
        case .sessionSettled: return .sessionSettled
        case .networkSwitched: return .networkSwitched
        case .passStarted: return .passStarted
        case .attemptStarted: return .attemptStarted
        case .answerReceived: return .answerReceived
        case .verdictRecorded: return .verdictRecorded
        case .verdictsRecorded: return .verdictsRecorded
        case .schemaRefusalCounted: return .schemaRefusalCounted
        case .writeFailed: return .writeFailed
        case .passEnded: return .passEnded
        case .batchAborted: return .batchAborted
        case .writeReleased: return .writeReleased
        case .writeWithdrawn: return .writeWithdrawn
        case .writeDiscarded: return .writeDiscarded
        case .answersTaken: return .answersTaken
        case .answersForgotten: return .answersForgotten
        case .localDataCleared: return .localDataCleared
        case .writeCancelled: return .writeCancelled
        case .logCompacted: return .logCompacted
        }
    }

    /// The payload, seen through what every payload can do.
    private var payload: any EventPayload {
        switch self {
        case .logCreated(let p): return p
        case .writeQueued(let p): return p
        case .sessionSettled(let p): return p
        case .networkSwitched(let p): return p
        case .passStarted(let p): return p
        case .attemptStarted(let p): return p
        case .answerReceived(let p): return p
        case .verdictRecorded(let p): return p
        case .verdictsRecorded(let p): return p
        case .schemaRefusalCounted(let p): return p
        case .writeFailed(let p): return p
        case .passEnded(let p): return p
        case .batchAborted(let p): return p
        case .writeReleased(let p): return p
        case .writeWithdrawn(let p): return p
        case .writeDiscarded(let p): return p
        case .localDataCleared(let p): return p
        case .writeCancelled(let p): return p
        case .logCompacted(let p): return p
        case .answersTaken(let p), .answersForgotten(let p): return ClearedPayload(cleared: p)
        }
    }

    /// The writes whose history this event belongs to.
    public var writeIDs: [WriteID] { payload.writeIDs }

    /// The verdicts the event records, one per write, in the order they apply: one for a
    /// `verdictRecorded`, each of a `verdictsRecorded`'s, none for any other event. An app following the
    /// log reads verdicts through this, whichever of the two events holds them.
    public var verdicts: [VerdictRecorded] {
        switch self {
        case .verdictRecorded(let verdict): return [verdict]
        case .verdictsRecorded(let batch): return batch.verdicts
        default: return []
        }
    }

    /// The event with every `verdictsRecorded` read as its run of `verdictRecorded` events.
    var asSingleEvents: [Event] {
        if case .verdictsRecorded(let batch) = self { return batch.verdicts.map { .verdictRecorded($0) } }
        return [self]
    }

    /// The payload's fields for the JSON view (server texts included: this view is for audits).
    public var jsonFields: [String: JSONValue] { payload.jsonFields }

    /// Writes the payload. Each case calls its payload's own encoder, so the encoder is specialized for
    /// the sink (through `payload`, every byte would go through the protocol's generic witness).
    func encodePayload(into writer: inout some ByteSink) {
        switch self {
        case .logCreated(let p): p.encode(into: &writer)
        case .writeQueued(let p): p.encode(into: &writer)
        case .sessionSettled(let p): p.encode(into: &writer)
        case .networkSwitched(let p): p.encode(into: &writer)
        case .passStarted(let p): p.encode(into: &writer)
        case .attemptStarted(let p): p.encode(into: &writer)
        case .answerReceived(let p): p.encode(into: &writer)
        case .verdictRecorded(let p): p.encode(into: &writer)
        case .verdictsRecorded(let p): p.encode(into: &writer)
        case .schemaRefusalCounted(let p): p.encode(into: &writer)
        case .writeFailed(let p): p.encode(into: &writer)
        case .passEnded(let p): p.encode(into: &writer)
        case .batchAborted(let p): p.encode(into: &writer)
        case .writeReleased(let p): p.encode(into: &writer)
        case .writeWithdrawn(let p): p.encode(into: &writer)
        case .writeDiscarded(let p): p.encode(into: &writer)
        case .localDataCleared(let p): p.encode(into: &writer)
        case .writeCancelled(let p): p.encode(into: &writer)
        case .logCompacted(let p): p.encode(into: &writer)
        case .answersTaken(let p), .answersForgotten(let p): p.encode(into: &writer)
        }
    }

    static func decodePayload(type: EventType, from reader: inout ByteReader) throws -> Event {
        switch type {
        case .logCreated: return .logCreated(try .decode(from: &reader))
        case .writeQueued: return .writeQueued(try .decode(from: &reader))
        case .sessionSettled: return .sessionSettled(try .decode(from: &reader))
        case .networkSwitched: return .networkSwitched(try .decode(from: &reader))
        case .passStarted: return .passStarted(try .decode(from: &reader))
        case .attemptStarted: return .attemptStarted(try .decode(from: &reader))
        case .answerReceived: return .answerReceived(try .decode(from: &reader))
        case .verdictRecorded: return .verdictRecorded(try .decode(from: &reader))
        case .verdictsRecorded: return .verdictsRecorded(try .decode(from: &reader))
        case .schemaRefusalCounted: return .schemaRefusalCounted(try .decode(from: &reader))
        case .writeFailed: return .writeFailed(try .decode(from: &reader))
        case .passEnded: return .passEnded(try .decode(from: &reader))
        case .batchAborted: return .batchAborted(try .decode(from: &reader))
        case .writeReleased: return .writeReleased(try .decode(from: &reader))
        case .writeWithdrawn: return .writeWithdrawn(try .decode(from: &reader))
        case .writeDiscarded: return .writeDiscarded(try .decode(from: &reader))
        case .answersTaken: return .answersTaken(try .decode(from: &reader))
        case .answersForgotten: return .answersForgotten(try .decode(from: &reader))
        case .localDataCleared: return .localDataCleared(try .decode(from: &reader))
        case .writeCancelled: return .writeCancelled(try .decode(from: &reader))
        case .logCompacted: return .logCompacted(try .decode(from: &reader))
        }
    }
}

/// `answersTaken` and `answersForgotten` share one payload type; this gives it the payload protocol.
private struct ClearedPayload: EventPayload {
    static let type = EventType.answersForgotten
    let cleared: AnswersCleared
    func encode(into writer: inout some ByteSink) { cleared.encode(into: &writer) }
    static func decode(from reader: inout ByteReader) throws -> ClearedPayload {
        ClearedPayload(cleared: try .decode(from: &reader))
    }
    var writeIDs: [WriteID] { cleared.writes }
    var jsonFields: [String: JSONValue] { cleared.jsonFields }
}

/// An event as the log holds it: its sequence number and the time it was recorded.
public struct RecordedEvent: Hashable, Sendable {
    /// Its place in the log: 1 for the first event, one more for each after it.
    public let sequence: UInt64
    /// When it was recorded, by the client's clock.
    public let at: Timestamp
    /// What happened.
    public let event: Event

    package init(sequence: UInt64, at: Timestamp, event: Event) {
        self.sequence = sequence
        self.at = at
        self.event = event
    }

    /// The event as one JSON object: `seq`, `at`, `type`, then the payload's fields.
    public var json: JSONValue {
        var fields = event.jsonFields
        fields["seq"] = .int(Int64(bitPattern: sequence))
        fields["at"] = .string(at.description)
        fields["type"] = .string(event.type.name)
        return .object(fields)
    }
}
