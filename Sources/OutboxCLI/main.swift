import Foundation

/// Writes a line to standard error.
func printError(_ text: String) {
    var line = text
    if !line.hasSuffix("\n") { line += "\n" }
    FileHandle.standardError.write(Data(line.utf8))
}

let status = await Commands.run(Array(CommandLine.arguments.dropFirst()))
// Exits without closing the log on purpose (exit flushes standard output): an enqueue is durable when
// it returns (R2.3), and the tests rely on a process that ends this way.
exit(status.rawValue)
