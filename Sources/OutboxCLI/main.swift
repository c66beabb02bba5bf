import Foundation
import OutboxTool

let status = await Commands.run(Array(CommandLine.arguments.dropFirst()))
// Exits without closing the log on purpose (exit flushes standard output): an enqueue is durable when
// it returns (R2.3), and the tests rely on a process that ends this way.
exit(status.rawValue)
