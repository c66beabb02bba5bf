/// `Retry-After` as received: delay-seconds or an HTTP-date (RFC 9110 §10.2.3), as seconds from `now`,
/// capped at one hour (R5.3). A date in the past is 0; anything else unreadable is nil.
enum RetryAfter {
    static let cap = 3600.0

    static func seconds(_ text: String?, now: Timestamp) -> Double? {
        guard let text = text?.trimmingSpaces, !text.isEmpty else { return nil }
        if text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) {
            guard text.utf8.count <= 10, let value = Double(text) else { return cap }
            return min(value, cap)
        }
        guard let date = httpDate(text) else { return nil }
        let delta = Double(date.rawValue - now.rawValue) / 1000
        return min(max(delta, 0), cap)
    }

    /// IMF-fixdate, the form HTTP senders must use: `Sun, 06 Nov 1994 08:49:37 GMT`.
    static func httpDate(_ text: String) -> Timestamp? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[0].hasSuffix(","), parts[5] == "GMT",
            let day = Int(parts[1]), let year = Int(parts[3]), (1...31).contains(day), (1970...9999).contains(year),
            let month = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"].firstIndex(
                of: String(parts[2]))
        else { return nil }
        let clock = parts[4].split(separator: ":")
        guard clock.count == 3, let h = Int(clock[0]), let m = Int(clock[1]), let s = Int(clock[2]),
            (0..<24).contains(h), (0..<60).contains(m), (0..<61).contains(s)
        else { return nil }
        let days = daysFromCivil(year: year, month: month + 1, day: day)
        return Timestamp(milliseconds: Int64(((days * 24 + h) * 60 + m) * 60 + s) * 1000)
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}

extension String {
    var trimmingSpaces: String {
        String(self.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}
