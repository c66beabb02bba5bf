internal import Foundation

/// Progress of long work on standard error, one line rewritten in place: only when standard error is
/// a terminal and the command does not print JSON, so nothing of it reaches a pipe, a file or a
/// `--json` document.
final class ProgressLine {
    private let label: String
    private let total: UInt64?
    private let isShown: Bool
    private let write: (String) -> Void
    private let now: () -> UInt64
    private var lastShown: UInt64?
    private var widest = 0

    /// How often the line is rewritten at most: five times a second.
    static let interval: UInt64 = 200_000_000

    /// - Parameters:
    ///   - label: what is being done (`verify`, `replay`, `sync`).
    ///   - total: how many units the work has, when known.
    ///   - json: the command prints JSON: nothing is shown.
    ///   - isTerminal: whether standard error is a terminal (the default asks the system).
    ///   - write: where the text goes (standard error by default).
    ///   - now: a monotonic clock in nanoseconds.
    init(
        _ label: String, total: UInt64?, json: Bool, isTerminal: Bool = isatty(STDERR_FILENO) == 1,
        write: @escaping (String) -> Void = { FileHandle.standardError.write(Data($0.utf8)) },
        now: @escaping () -> UInt64 = { DispatchTime.now().uptimeNanoseconds }
    ) {
        self.label = label
        self.total = total
        isShown = isTerminal && !json && !Console.isSilent
        self.write = write
        self.now = now
    }

    /// Shows `done` units, with `detail` after them; at most every `interval`, the first at once.
    func update(_ done: UInt64, unit: String, detail: String = "") {
        guard isShown else { return }
        let time = now()
        if let lastShown, time &- lastShown < Self.interval { return }
        lastShown = time
        var text = "\(label): \(Self.grouped(done))"
        if let total, total > 0 {
            text += " of \(Self.grouped(total)) \(unit) (\(min(100, done * 100 / total)) %)"
        } else {
            text += " \(unit)"
        }
        text += detail
        widest = max(widest, text.count)
        write("\r" + text.padding(toLength: widest, withPad: " ", startingAt: 0))
    }

    /// Clears the line, if one was shown, before the command prints its result.
    func finish() {
        guard isShown, lastShown != nil else { return }
        write("\r" + String(repeating: " ", count: widest) + "\r")
        lastShown = nil
    }

    /// `1234567` as `1,234,567`.
    static func grouped(_ number: UInt64) -> String {
        let digits = Array(String(number))
        var text = ""
        for (index, digit) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { text += "," }
            text.append(digit)
        }
        return text
    }
}
