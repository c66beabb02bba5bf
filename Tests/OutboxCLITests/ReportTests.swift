import Foundation
import Outbox
import OutboxProcess
import OutboxTesting
import Testing

/// `outbox report --html`: one self-contained page of the demo's log, checked in a real
/// browser, Debian's headless Chromium: it renders, its title names the log, it lists every write, its
/// search works, it logs nothing to the console, and a hostile write's markup stays text.
@Suite struct ReportTests {
    static let chromium = URL(fileURLWithPath: "/usr/bin/chromium")

    /// Chromium, headless, on `page` with `arguments`; what it printed and logged.
    static func browse(_ page: String, _ arguments: [String], profile: String) throws -> ChildProcess.Ended {
        let child = try ChildProcess(
            chromium,
            [
                "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=" + profile,
                "--enable-logging=stderr", "--v=0",
            ] + arguments + [page], errors: .apart(.capture))
        child.kill(after: 120)
        return try #require(try child.wait())
    }

    @Test func theReportOfTheDemosLogRendersInChromium() throws {
        guard FileManager.default.isExecutableFile(atPath: Self.chromium.path) else {
            Issue.record("Debian's chromium is not installed: scripts/setup installs it")
            return
        }
        try TemporaryFolder.with(created: true) { folder in
            let log = folder + "/log"
            let demo = try outbox("demo", "--keep", log)
            #expect(demo.status == 0, "\(demo.stderr)")
            // A hostile write: markup and a script in its body and key, which the page must show as text.
            let hostile = try outbox(
                "enqueue", log, "--user", "alice", "--table", "todos", "--op", "insert", "--key", #"{"id":"\"><b>x"}"#,
                "--body", #"{"title":"</td><script>document.title='pwned'</script>"}"#)
            #expect(hostile.status == 0, "\(hostile.stderr)")
            let page = folder + "/report.html"
            let report = try outbox("report", log, "--html", page)
            #expect(report.status == 0, "\(report.stderr)")
            let html = try String(contentsOfFile: page, encoding: .utf8)
            #expect(!html.contains("http://") && !html.contains("https://") && !html.contains("src="), "self-contained")
            #expect(!html.contains("<script>document.title"), "the hostile body is escaped")
            let writes = html.components(separatedBy: "<tr class=\"write\"").count - 1
            #expect(writes == 8, "the demo's seven writes and the hostile one")

            let url = URL(fileURLWithPath: page).absoluteString
            let dom = try Self.browse(url, ["--dump-dom"], profile: folder + "/profile-dom")
            #expect(dom.status == 0, "\(dom.errorText)")
            #expect(dom.text.contains("<title>outbox report: \(log)</title>"), "\(dom.text.prefix(400))")
            #expect(dom.text.contains("data-rows=\"8\""), "the script ran and counted the rows")
            #expect(dom.text.contains("8 of 8 writes"))
            #expect(!dom.errorText.contains(":CONSOLE"), "the page logged: \(dom.errorText)")

            let searched = try Self.browse(url + "#search=archive_list", ["--dump-dom"], profile: folder + "/profile-search")
            #expect(searched.text.contains("1 of 8 writes"), "the search keeps the one archive_list write")

            let shot = folder + "/report.png"
            let screenshot = try Self.browse(
                url, ["--screenshot=" + shot, "--window-size=1200,900", "--hide-scrollbars"], profile: folder + "/profile-shot")
            #expect(screenshot.status == 0, "\(screenshot.errorText)")
            let png = try Data(contentsOf: URL(fileURLWithPath: shot))
            // A PNG of the window's size: its signature, then IHDR's width and height, big-endian.
            #expect(png.prefix(8) == Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]))
            let size =
                png.count >= 24
                ? (png[16..<20].reduce(0) { $0 << 8 | Int($1) }, png[20..<24].reduce(0) { $0 << 8 | Int($1) }) : (0, 0)
            #expect(size == (1200, 900), "\(size)")
            #expect(png.count > 10_000, "a page with text and a chart, not a blank one: \(png.count) bytes")
        }
    }
}
