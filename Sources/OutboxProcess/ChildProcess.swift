package import Foundation
internal import Synchronization

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// A child process of the tool, the benchmarks or the tests, waited for without
/// `Process.waitUntilExit()`. That call polls the calling thread's run loop for the child's end, and
/// on Linux a wait from a thread other than the one that started the child (any thread of the
/// concurrency pool, after a suspension) can miss it and wait forever: a suite that passes alone
/// hangs after some hundreds of children. Here the end comes from `terminationHandler`, set before the
/// child starts, and what the child prints is read on threads of their own, never on the pool's.
package final class ChildProcess: @unchecked Sendable {
    // @unchecked Sendable: `process` is configured before `run()` and only read after; the output and
    // the end are kept behind `state`'s mutex.

    /// Where one of the child's output streams goes.
    package enum Output: Sendable {
        /// Kept, and returned in `Ended`.
        case capture
        /// To `/dev/null`.
        case discard
        /// This process's own stream.
        case inherit
        /// A pipe or file of the caller's, which reads it (or closes it) itself.
        case handle(FileHandle)
        case pipe(Pipe)
    }

    /// How the child ended, and what it printed (for the streams captured).
    package struct Ended: Equatable, Sendable {
        /// The exit status, or the signal that ended it.
        package var status: Int32
        /// Whether a signal ended it (`status` is then the signal).
        package var signalled: Bool
        /// Its standard output; with `errors: .merged`, its standard error too.
        package var output: Data
        /// Its standard error, when captured apart.
        package var errors: Data

        package var text: String { String(decoding: output, as: UTF8.self) }
        package var errorText: String { String(decoding: errors, as: UTF8.self) }
        /// Exited with 0.
        package var succeeded: Bool { !signalled && status == 0 }
    }

    /// What the child reads on its standard input.
    package enum Input: Sendable {
        /// This process's own.
        case inherit
        /// These bytes, then the end.
        case data(Data)
        /// A pipe of the caller's, which writes it (or holds it open) itself.
        case pipe(Pipe)
    }

    /// How the child's standard error is kept.
    package enum Errors: Sendable {
        /// Into `output`, interleaved as printed.
        case merged
        case apart(Output)
    }

    private struct State {
        var output = Data()
        var errors = Data()
        var ended: (status: Int32, signalled: Bool)?
    }

    /// What the termination handler and the reader threads fill in.
    private final class Shared: Sendable {
        let state = Mutex(State())
        let finished = DispatchGroup()
    }

    private let process = Process()
    private let shared = Shared()

    /// This program's own executable (a harness runs itself as its workers).
    package static var currentProgram: URL { URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath() }

    /// The child's process id.
    package var pid: Int32 { process.processIdentifier }

    /// Starts `executable` with `arguments`; `environment` replaces this process's when given.
    package init(
        _ executable: URL, _ arguments: [String], environment: [String: String]? = nil, input: Input = .inherit,
        output: Output = .capture, errors: Errors = .merged
    ) throws {
        process.executableURL = executable
        process.arguments = arguments
        if let environment { process.environment = environment }
        var readers: [(handle: FileHandle, isErrors: Bool)] = []
        func target(_ output: Output, isErrors: Bool) -> Any? {
            switch output {
            case .inherit: return nil
            case .discard: return FileHandle.nullDevice
            case .handle(let handle): return handle
            case .pipe(let pipe): return pipe
            case .capture:
                let pipe = Pipe()
                readers.append((pipe.fileHandleForReading, isErrors))
                return pipe
            }
        }
        let out = target(output, isErrors: false)
        if let out { process.standardOutput = out }
        switch errors {
        case .merged: if let out { process.standardError = out }
        case .apart(let kind): if let err = target(kind, isErrors: true) { process.standardError = err }
        }
        var feed: (Pipe, Data)?
        switch input {
        case .inherit: break
        case .pipe(let pipe): process.standardInput = pipe
        case .data(let data):
            let pipe = Pipe()
            process.standardInput = pipe
            feed = (pipe, data)
        }
        shared.finished.enter()
        process.terminationHandler = { [shared] process in
            shared.state.withLock { $0.ended = (process.terminationStatus, process.terminationReason == .uncaughtSignal) }
            shared.finished.leave()
        }
        do {
            try process.run()
        } catch {
            shared.finished.leave()
            throw error
        }
        for (handle, isErrors) in readers {
            shared.finished.enter()
            Thread { [shared] in
                let data = handle.readDataToEndOfFile()
                shared.state.withLock { state in
                    if isErrors { state.errors = data } else { state.output = data }
                }
                shared.finished.leave()
            }.start()
        }
        if let (pipe, data) = feed {
            Thread {
                try? pipe.fileHandleForWriting.write(contentsOf: data)
                try? pipe.fileHandleForWriting.close()
            }.start()
        }
    }

    /// Whether the child has not ended yet.
    package var isRunning: Bool { shared.state.withLock { $0.ended == nil } }

    /// Sends `signal` to the child (SIGKILL unless told).
    package func send(_ signal: Int32 = SIGKILL) {
        #if canImport(Glibc)
            _ = Glibc.kill(pid, signal)
        #elseif canImport(Darwin)
            _ = Darwin.kill(pid, signal)
        #endif
    }

    /// Sends SIGKILL `seconds` from now, unless the child ended before.
    package func kill(after seconds: Double) {
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [self] in
            if isRunning { send(SIGKILL) }
        }
    }

    /// Blocks until the child ended and its captured streams closed; for threads that are not the
    /// concurrency pool's (a command-line harness, a benchmark), or `timeout` seconds (nil then).
    package func wait(timeout: Double? = nil) -> Ended? {
        if let timeout {
            guard shared.finished.wait(timeout: .now() + timeout) == .success else { return nil }
        } else {
            shared.finished.wait()
        }
        return shared.state.withLock { state in
            Ended(
                status: state.ended?.status ?? -1, signalled: state.ended?.signalled ?? false, output: state.output,
                errors: state.errors)
        }
    }

    /// Waits for the child's end without holding a thread of the concurrency pool.
    package func ended() async -> Ended {
        await withCheckedContinuation { (done: CheckedContinuation<Ended, Never>) in
            shared.finished.notify(queue: .global()) { [self] in done.resume(returning: wait()!) }
        }
    }

    /// Runs the child to its end: what `ended()` returns.
    package static func run(
        _ executable: URL, _ arguments: [String], environment: [String: String]? = nil, input: Input = .inherit,
        output: Output = .capture, errors: Errors = .merged
    ) async throws -> Ended {
        try await ChildProcess(executable, arguments, environment: environment, input: input, output: output, errors: errors)
            .ended()
    }

    /// Runs the child to its end, blocking this thread (never call it from a task).
    package static func runBlocking(
        _ executable: URL, _ arguments: [String], environment: [String: String]? = nil, input: Input = .inherit,
        output: Output = .capture, errors: Errors = .merged
    ) throws -> Ended {
        try ChildProcess(executable, arguments, environment: environment, input: input, output: output, errors: errors).wait()!
    }
}
