internal import Foundation
internal import Outbox

/// `outbox report --html`: one self-contained page (no network, no outside script or style) of a
/// `LogReport`, for a support engineer: the passes as a timeline, the queue's size over time, and the
/// writes by state, each with its history a click away and a search box over ids and keys. Every
/// text from the log is escaped: a hostile log cannot put markup or script in the page.
enum HTMLReport {
    static func page(_ report: LogReport) -> String {
        var html = """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8">
            <meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
            <title>outbox report: \(escape(report.path))</title>
            <style>\(style)</style></head><body>
            <h1>outbox report</h1>
            <p class="meta">\(escape(report.path)): \(report.events) events, \(escape(report.first?.description ?? "-")) to \(escape(report.last?.description ?? "-"))</p>

            """
        html += states(report)
        html += chart(report.points)
        html += passes(report)
        html += writes(report)
        html += "<script>\(script)</script>\n</body></html>\n"
        return html
    }

    private static func states(_ report: LogReport) -> String {
        var html = "<section id=\"states\"><h2>The queue now: \(report.writeCount) writes</h2><p>"
        for (state, count) in report.states.sorted(by: { $0.key < $1.key }) {
            html += "<span class=\"state \(escape(state))\">\(escape(state)) \(count)</span> "
        }
        return html + "</p></section>\n"
    }

    /// The pending count over the log's events, as an inline SVG polyline.
    private static func chart(_ points: [LogReport.Point]) -> String {
        let width = 900.0
        let height = 160.0
        let highest = max(1, points.map(\.pending).max() ?? 0)
        let lastSequence = Double(max(1, points.last?.sequence ?? 1))
        let line = points.map { point in
            let x = Double(point.sequence) / lastSequence * width
            let y = height - Double(point.pending) / Double(highest) * (height - 10)
            return String(format: "%.1f,%.1f", x, y)
        }.joined(separator: " ")
        return """
            <section id="size"><h2>Pending writes over time</h2>
            <svg id="chart" viewBox="0 0 \(Int(width)) \(Int(height))" width="\(Int(width))" height="\(Int(height))" role="img" aria-label="pending writes over time">
            <rect x="0" y="0" width="\(Int(width))" height="\(Int(height))" fill="#fafafa" stroke="#ccc"/>
            <polyline fill="none" stroke="#2a6fdb" stroke-width="2" points="\(line)"/>
            <text x="4" y="14" font-size="12">\(highest) pending</text></svg>
            <p class="meta">from \(escape(points.first?.at.description ?? "-")) (sequence \(points.first?.sequence ?? 0)) to \(escape(points.last?.at.description ?? "-")) (sequence \(points.last?.sequence ?? 0))</p>
            </section>

            """
    }

    private static func passes(_ report: LogReport) -> String {
        var html = "<section id=\"passes\"><h2>Passes: \(report.passCount)</h2>"
        if report.passCount > report.passes.count {
            html += "<p class=\"meta\">the latest \(report.passes.count) shown</p>"
        }
        html += "<table><thead><tr><th>pass</th><th>started</th><th>ended</th><th>user</th><th>requests</th>"
        html += "<th>sent</th><th>answered</th><th>refused</th><th>failures</th><th>stopped by</th></tr></thead><tbody>\n"
        for pass in report.passes.reversed() {
            let kind = pass.stoppedBy == nil ? "" : " class=\"stopped\""
            html += "<tr\(kind)><td>\(pass.id)\(pass.automatic ? " (auto)" : "")</td><td>\(escape(pass.started.description))</td>"
            html += "<td>\(escape(pass.ended?.description ?? "cut short"))</td><td>\(escape(pass.user))</td>"
            html += "<td>\(pass.requests)</td><td>\(pass.sent)</td><td>\(pass.answered)</td><td>\(pass.refused)</td>"
            html +=
                "<td>\(escape(pass.failures.joined(separator: ", ")))</td><td>\(escape(pass.stoppedBy?.description ?? ""))</td></tr>\n"
        }
        return html + "</tbody></table></section>\n"
    }

    private static func writes(_ report: LogReport) -> String {
        var html = "<section id=\"writes\"><h2>Writes: \(report.rows.count + report.writesLeftOut)</h2>"
        if report.writesLeftOut > 0 {
            html += "<p class=\"meta\">the first \(report.rows.count) shown, \(report.writesLeftOut) left out</p>"
        }
        html +=
            "<p><input id=\"search\" type=\"search\" placeholder=\"search an id, a key, a table, an operation, a state\" size=\"50\">"
        html += " <span id=\"found\"></span> <span class=\"meta\">click a write for its history</span></p>"
        html += "<table id=\"rows\"><thead><tr><th>id</th><th>user</th><th>table</th><th>op</th><th>key</th><th>state</th>"
        html += "<th>refusals</th></tr></thead><tbody>\n"
        for row in report.rows {
            let search = "\(row.id) \(row.table) \(row.operation) \(row.key) \(row.detail) \(row.user)".lowercased()
            html += "<tr class=\"write\" data-search=\"\(escape(search))\"><td>\(row.id)</td><td>\(escape(row.user))</td>"
            html += "<td>\(escape(row.table))</td><td>\(escape(row.operation))</td><td>\(escape(row.key))</td>"
            html += "<td class=\"state \(escape(row.state))\">\(escape(row.detail))</td><td>\(row.refusals)</td></tr>\n"
            html += "<tr class=\"history\" hidden><td colspan=\"7\"><ol>"
            for line in row.history { html += "<li>\(escape(line))</li>" }
            html += "</ol></td></tr>\n"
        }
        return html + "</tbody></table></section>\n"
    }

    /// `text` with `&`, `<`, `>`, `"` and `'` escaped, and every control character but tabs and line
    /// breaks as a code point, for an element's text or an attribute's quoted value.
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            case "\t", "\n": out.unicodeScalars.append(scalar)
            default:
                if Write.isControl(scalar) {
                    out += "\\u{\(String(scalar.value, radix: 16))}"
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out
    }

    private static let style = """
        body{font:14px system-ui,sans-serif;margin:24px;color:#222}h1{font-size:20px}h2{font-size:16px;margin-top:28px}
        table{border-collapse:collapse;width:100%}th,td{border-bottom:1px solid #e4e4e4;padding:3px 6px;text-align:left;vertical-align:top}
        th{background:#f2f2f2}tr.write{cursor:pointer}tr.write:hover{background:#f6f9ff}tr.stopped td{color:#a33}
        .meta{color:#666}.state{padding:1px 6px;border-radius:3px;background:#eee}.accepted,.merged{background:#dff3e0}
        .conflicted{background:#fdf1d6}.taken,.forgotten,.discarded,.withdrawn,.cancelled,.cleared{background:#f0f0f0;color:#666}.refused,.dead{background:#fbe0e0}.blocked{background:#e8e0fb}.pending{background:#e0ecfb}
        ol{margin:4px 0;font:12px ui-monospace,monospace}
        """

    /// Clicking a write shows its history; the search box (filled from a `#search=` in the link) keeps
    /// the rows whose id, table, operation, key, state or user hold the text. When set up, the body says how many writes it shows (`data-rows`).
    private static let script = """
        (function () {
          var rows = Array.prototype.slice.call(document.querySelectorAll('tr.write'));
          rows.forEach(function (row) {
            row.addEventListener('click', function () {
              var history = row.nextElementSibling;
              history.hidden = !history.hidden;
            });
          });
          var search = document.getElementById('search');
          var found = document.getElementById('found');
          function filter() {
            var text = search.value.trim().toLowerCase();
            var shown = 0;
            rows.forEach(function (row) {
              var keep = text === '' || row.getAttribute('data-search').indexOf(text) >= 0;
              row.hidden = !keep;
              if (!keep) { row.nextElementSibling.hidden = true; }
              if (keep) { shown += 1; }
            });
            found.textContent = shown + ' of ' + rows.length + ' writes';
          }
          search.addEventListener('input', filter);
          // A link may carry a search: report.html#search=42
          if (location.hash.indexOf('#search=') === 0) {
            search.value = decodeURIComponent(location.hash.slice(8));
          }
          filter();
          document.body.setAttribute('data-rows', String(rows.length));
        })();
        """
}
