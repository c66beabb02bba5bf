/// Pure `vN → vN+1` functions over stored payload bytes (R8.1). The log is never rewritten: an old
/// record is upcast each time it is read, then decoded as the current version.
enum Upcasting {
    static func upcast(type: EventType, from version: UInt8, payload: [UInt8]) throws -> [UInt8] {
        var payload = payload
        var version = version
        while version < type.currentVersion {
            guard let step = steps[Step(type: type, from: version)] else {
                throw DecodeFailure("no upcaster for \(type.name) version \(version)")
            }
            payload = step(payload)
            version += 1
        }
        return payload
    }

    private struct Step: Hashable {
        let type: EventType
        let from: UInt8
    }

    private static let steps: [Step: @Sendable ([UInt8]) -> [UInt8]] = [
        // writeQueued v1 had no atomic group (groups arrived with bulk enqueue): v2 appends "none".
        Step(type: .writeQueued, from: 1): { $0 + [0] },
        // answerReceived v2 added the `notSent` verdict (code 7); a v1 record reads as it is, and a
        // build that knows only v1 refuses a v2 record as newer instead of calling it damaged.
        Step(type: .answerReceived, from: 1): { $0 },
        // answerReceived v3 added the `failed` verdict with a code (code 8), read as v2 is otherwise.
        Step(type: .answerReceived, from: 2): { $0 },
        // answerReceived v4: a failure carries what its transport mapped it to mean, and the fields it
        // names (answer code 3, verdicts 9 and 10). The codes of v3 (1, 3 and 7) still read, judged as
        // the library then judged them (`LegacyMeaning`).
        Step(type: .answerReceived, from: 3): { $0 },
        // attemptStarted v1 was a batch of one request (a transport's several requests went under one
        // attempt): v2 appends the batch's count, 0 read as the request's own, and "starts its batch".
        Step(type: .attemptStarted, from: 1): { $0 + [0, 0] },
    ]
}
