import Dispatch
import Foundation
import OutboxTool

guard let words = Commands.commandLineWords() else { exit(Exit.failure.rawValue) }
// The main thread waits for the command rather than ending itself, as top-level `await` would make it
// (dispatch_main's pthread_exit, which loads libgcc_s at that moment). Under the crash harness's
// fault injector (fiu-run wraps malloc), that load deadlocked with the injector's own lock at random.
let finished = DispatchSemaphore(value: 0)
nonisolated(unsafe) var status = Exit.failure
// Detached: top-level code is the main actor's, and the main thread is the one waiting.
Task.detached {
    status = await Commands.run(words)
    finished.signal()
}
finished.wait()
// Exits without closing the log on purpose (exit flushes standard output): an enqueue is durable when
// it returns (R2.3), and the tests rely on a process that ends this way.
exit(status.rawValue)
