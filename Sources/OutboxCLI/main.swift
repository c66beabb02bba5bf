import Foundation
import OutboxTool

guard let words = Commands.commandLineWords() else { exit(Exit.failure.rawValue) }
let status = await Commands.run(words)
// Exits without closing the log on purpose (exit flushes standard output): an enqueue is durable when
// it returns (R2.3), and the tests rely on a process that ends this way.
exit(status.rawValue)
