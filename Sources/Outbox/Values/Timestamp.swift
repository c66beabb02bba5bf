public import Foundation

/// A moment, in milliseconds since 1970-01-01T00:00:00Z: what the log stores.
public struct Timestamp: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    public let rawValue: Int64
    public init(rawValue: Int64) { self.rawValue = rawValue }
    /// The instant `milliseconds` after 1970-01-01T00:00:00Z.
    public init(milliseconds: Int64) { rawValue = milliseconds }
    /// `date`, to the millisecond.
    public init(_ date: Date) { rawValue = Int64((date.timeIntervalSince1970 * 1000).rounded()) }

    /// The instant as a `Date`.
    public var date: Date { Date(timeIntervalSince1970: Double(rawValue) / 1000) }
    public static func < (a: Timestamp, b: Timestamp) -> Bool { a.rawValue < b.rawValue }

    /// This moment plus `seconds`.
    /// The time `seconds` later (earlier when negative), saturating at the ends of the range: a time
    /// read from a damaged or hostile record never traps.
    public func adding(seconds: Double) -> Timestamp {
        let milliseconds = (seconds * 1000).rounded()
        guard milliseconds.isFinite else { return self }
        let delta = Int64(max(min(milliseconds, 9e18), -9e18))
        let (sum, overflow) = rawValue.addingReportingOverflow(delta)
        return Timestamp(rawValue: overflow ? (delta > 0 ? .max : .min) : sum)
    }

    /// ISO 8601 with milliseconds, in UTC: `2026-01-01T00:00:00.000Z`.
    public var description: String {
        var seconds = rawValue / 1000
        var millis = rawValue % 1000
        if millis < 0 {
            millis += 1000
            seconds -= 1
        }
        var days = seconds / 86_400
        var rest = seconds % 86_400
        if rest < 0 {
            rest += 86_400
            days -= 1
        }
        // Civil-from-days (Howard Hinnant).
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        func pad(_ value: Int64, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return
            "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(rest / 3600, 2)):\(pad(rest / 60 % 60, 2)):\(pad(rest % 60, 2)).\(pad(millis, 3))Z"
    }
}
