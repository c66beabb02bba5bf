internal import Outbox
internal import OutboxScenario

/// The bodies of the libFuzzer targets (Fuzz/), here so the normal test suite replays their crashers
/// with the same code. Each must return normally for any input: a crash is a bug.
public enum FuzzTargets {
    /// Every target by name.
    public static let all: [String: @Sendable ([UInt8]) -> Void] = [
        "record": record, "record-fixed": recordWithFixedChecksum, "replay": replay, "classifier": classifier,
        "scenario": scenario, "json-roundtrip": jsonRoundTrip,
    ]

    /// The record decoder on raw bytes.
    public static func record(_ bytes: [UInt8]) {
        _ = try? RecordCodec.decode(bytes, sequence: 1)
    }

    /// The record decoder with the checksum fixed up, so mutations reach the payload decoders.
    public static func recordWithFixedChecksum(_ bytes: [UInt8]) {
        let fixed = RecordCodec.fixingChecksum(bytes, sequence: 7)
        guard let event = try? RecordCodec.decode(fixed, sequence: 7) else { return }
        // A record that decodes encodes back to bytes that decode to the same event.
        let again = RecordCodec.encode(event.event, at: event.at, sequence: 7)
        guard let second = try? RecordCodec.decode(again, sequence: 7), second == event else {
            fatalError("a decoded record does not survive an encode/decode round trip")
        }
    }

    /// A whole log: the input cut into records (a length byte each), decoded with fixed checksums, and
    /// folded into projections.
    public static func replay(_ bytes: [UInt8]) {
        var events: [RecordedEvent] = []
        var index = 0
        while index < bytes.count, events.count < 256 {
            let length = Int(bytes[index])
            index += 1
            let end = min(bytes.count, index + length)
            let sequence = UInt64(events.count + 1)
            if let event = try? RecordCodec.decode(RecordCodec.fixingChecksum(Array(bytes[index..<end]), sequence: sequence), sequence: sequence) {
                events.append(event)
            }
            index = end
        }
        _ = try? LogReplay.snapshot(of: events)
    }

    /// The response classifier on an answer built from the bytes: it must be total.
    public static func classifier(_ bytes: [UInt8]) {
        guard bytes.count >= 4 else { return }
        let status = 100 + (Int(bytes[0]) << 8 | Int(bytes[1])) % 500
        let text = String(decoding: bytes[4...], as: UTF8.self)
        let parts = text.split(separator: "|", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
        let code = parts.first.flatMap { $0.isEmpty ? nil : $0 }
        let retryAfter = parts.count > 1 ? parts[1] : nil
        let answer = RequestAnswer.failed(RequestFailure(kind: .http, status: status, code: code, retryAfter: retryAfter, text: parts.last))
        let outcome = AnswerClassifier.outcome(
            of: answer, writes: 1 + Int(bytes[2] % 4), refusals: Int(bytes[3] % 6), at: Timestamp(milliseconds: 1_767_225_600_000))
        if outcome == "no decision" { fatalError("the classifier is not total") }
    }

    /// The scenario parser: what `outbox scenario` reads from a file.
    public static func scenario(_ bytes: [UInt8]) {
        _ = try? Scenario.parse(String(decoding: bytes, as: UTF8.self))
    }

    /// JSON text parses, renders canonically, and parses back to the same value.
    public static func jsonRoundTrip(_ bytes: [UInt8]) {
        guard let value = try? JSONText.parse(String(decoding: bytes, as: UTF8.self)) else { return }
        let rendered = JSONText.render(value)
        guard let again = try? JSONText.parse(rendered), again == value || !value.isFinite else {
            fatalError("canonical JSON does not parse back to the same value")
        }
    }
}
