internal import Foundation
internal import OutboxProcess

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// LMDB 0.9 keeps no page checksums and may crash, or loop, on a damaged page. The read-only commands
/// therefore read an untrusted log in a child process (this same program), and turn its death into a
/// clear message and exit 2 (TESTING.md §3, R8.6).
enum UntrustedLogReader {
    /// Set in the child's environment: the child does the work itself.
    static let childVariable = "OUTBOX_UNTRUSTED_CHILD"
    /// How long the child may take, in seconds (default 600).
    static let timeoutVariable = "OUTBOX_READ_TIMEOUT"

    static var isChild: Bool { ProcessInfo.processInfo.environment[childVariable] == "1" }

    /// Runs `words` in a child and returns its exit status, or reports how it died.
    static func runInChild(_ command: String, _ words: [String]) -> Exit {
        var environment = ProcessInfo.processInfo.environment
        environment[childVariable] = "1"
        // A reader that crashes on a damaged page is reported below in one line, not with a backtrace.
        environment["SWIFT_BACKTRACE"] = "enable=no"
        let child: ChildProcess
        do {
            child = try ChildProcess(
                ChildProcess.currentProgram, words, environment: environment, output: .inherit, errors: .apart(.inherit))
        } catch {
            printError("outbox \(command): cannot start a reader process: \(error)")
            return .failure
        }
        let timeout = Double(ProcessInfo.processInfo.environment[timeoutVariable] ?? "") ?? 600
        // The log as the command reads it: options before it (`log --from 5 LOG`) are not the path.
        let path = (try? Commands.readOnlyArguments(command, Array(words.dropFirst())))?.positionals.first ?? "the log"
        guard let ended = child.wait(timeout: timeout) else {
            child.send(SIGKILL)
            _ = child.wait()
            printError(
                "outbox \(command): \(path): reading the log did not finish in \(Int(timeout)) s; its LMDB page structure may be damaged"
            )
            return .failure
        }
        // The reader of our output went away (`| head`): not damage, and nothing to say.
        if ended.signalled, ended.status == SIGPIPE { return .outputClosed }
        if ended.signalled {
            printError(
                "outbox \(command): \(path): the LMDB page structure is damaged (reading it crashed the reader, signal \(ended.status)); restore the log from a copy"
            )
            return .failure
        }
        return Exit(rawValue: ended.status) ?? .failure
    }
}
