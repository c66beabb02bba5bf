package import Foundation
internal import Synchronization

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// A child process of the tool, the benchmarks or the tests, started with `posix_spawn` and waited for
/// with `waitpid` on a thread of its own. Foundation's `Process` is not used: on Linux its
/// `waitUntilExit()` polls a run loop and, from a thread other than the one that started the child
/// (any task of the concurrency pool), can miss the end and wait forever; and under many children at
/// once its spawn failed with EBADF. Here every descriptor but the three standard ones is closed in
/// the child, what the child prints is read on threads of their own, and the end is the kernel's word.
package final class ChildProcess: Sendable {
    /// Where one of the child's output streams goes.
    package enum Output: Sendable {
        /// Kept, and returned in `Ended`.
        case capture
        /// To `/dev/null`.
        case discard
        /// This process's own stream.
        case inherit
        /// A file of the caller's, or the writing end of its pipe, which it reads (or closes) itself.
        case handle(FileHandle)
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

    /// A spawn that failed: the call and its errno.
    package struct SpawnError: Error, CustomStringConvertible {
        package let executable: String
        package let call: String
        package let code: Int32
        package var description: String { "\(call) \(executable): \(String(cString: strerror(code)))" }
    }

    private struct State {
        var output = Data()
        var errors = Data()
        var ended: (status: Int32, signalled: Bool)?
    }

    /// What the waiting and reading threads fill in.
    private final class Shared: Sendable {
        let state = Mutex(State())
        let finished = DispatchGroup()
    }

    private let shared = Shared()

    /// The child's process id.
    package let pid: pid_t

    /// This program's own executable (a harness runs itself as its workers).
    package static var currentProgram: URL { URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath() }

    /// Starts `executable` with `arguments`; `environment` replaces this process's when given.
    package init(
        _ executable: URL, _ arguments: [String], environment: [String: String]? = nil, input: Input = .inherit,
        output: Output = .capture, errors: Errors = .merged
    ) throws {
        let path = executable.path
        var plan = SpawnPlan()
        defer { plan.closeParentCopies() }
        switch input {
        case .inherit: break
        case .pipe(let pipe): plan.give(pipe.fileHandleForReading, as: STDIN_FILENO)
        case .data(let data): try plan.feed(data, path: path)
        }
        let outputReader = try plan.route(output, to: STDOUT_FILENO, path: path)
        var errorReader: Int32?
        switch errors {
        case .merged:
            // Into output, wherever it goes (an inherited output leaves both streams as they are).
            // The child's dup2s run in order: its standard output is already the target here.
            if case .inherit = output {} else { plan.moves.append((STDOUT_FILENO, STDERR_FILENO)) }
        case .apart(let kind): errorReader = try plan.route(kind, to: STDERR_FILENO, path: path)
        }
        do {
            pid = try plan.spawn(path, arguments, environment: environment)
        } catch {
            for fd in [outputReader, errorReader, plan.feeding?.0].compactMap({ $0 }) { close(fd) }
            throw error
        }

        let shared = self.shared
        shared.finished.enter()
        let pid = self.pid
        Thread {
            // Waited for without reaping it first: until the end is recorded, under the lock `send`
            // takes, the pid stays the child's (a zombie at worst), never another process's.
            var info = siginfo_t()
            while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR {}
            shared.state.withLock { state in
                var status: Int32 = 0
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                let signal = status & 0x7f
                state.ended = signal == 0 ? (status >> 8 & 0xff, false) : (signal, true)
            }
            shared.finished.leave()
        }.start()
        for (fd, isErrors) in [(outputReader, false), (errorReader, true)] {
            guard let fd else { continue }
            shared.finished.enter()
            Thread {
                let data = Self.readToEnd(fd)
                shared.state.withLock { state in
                    if isErrors { state.errors = data } else { state.output = data }
                }
                shared.finished.leave()
            }.start()
        }
        if let (fd, data) = plan.feeding {
            plan.feeding = nil
            Thread { Self.write(data, to: fd) }.start()
        }
    }

    /// Whether the child has not ended yet.
    package var isRunning: Bool { shared.state.withLock { $0.ended == nil } }

    /// Sends `signal` to the child (SIGKILL unless told), unless it already ended.
    package func send(_ signal: Int32 = SIGKILL) {
        shared.state.withLock { state in
            // Under the lock the end is recorded in: not reaped yet, the pid is still the child's.
            if state.ended == nil { _ = Glibc.kill(pid, signal) }
        }
    }

    /// Sends SIGKILL `seconds` from now, unless the child ended before.
    package func kill(after seconds: Double) {
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [self] in send(SIGKILL) }
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

    private static func readToEnd(_ fd: Int32) -> Data {
        defer { close(fd) }
        var data = Data()
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count > 0 {
                data.append(contentsOf: chunk[0..<count])
            } else if count == 0 || errno != EINTR {
                return data
            }
        }
    }

    /// Writes `data` to a socket and closes it; a child that stops reading is no signal to this process.
    private static func write(_ data: Data, to fd: Int32) {
        defer { close(fd) }
        data.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let sent = Glibc.send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
                if sent > 0 {
                    offset += sent
                } else if errno != EINTR {
                    return
                }
            }
        }
    }
}

/// The descriptors a spawn gives its child, and the parent's copies to close once it has started.
private struct SpawnPlan {
    /// (descriptor in this process, standard descriptor in the child)
    var moves: [(Int32, Int32)] = []
    var parentCopies: [Int32] = []
    var handles: [FileHandle] = []
    var feeding: (Int32, Data)?

    /// `posix_spawn_file_actions_addclosefrom_np` (glibc 2.34), which Swift's Glibc module does not show.
    typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    static let closeFrom: CloseFrom? = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np").map {
        unsafeBitCast($0, to: CloseFrom.self)
    }

    mutating func give(_ handle: FileHandle, as target: Int32) {
        moves.append((handle.fileDescriptor, target))
        handles.append(handle)
    }

    /// Routes a stream; returns the descriptor to read for `.capture`.
    mutating func route(_ output: ChildProcess.Output, to target: Int32, path: String) throws -> Int32? {
        switch output {
        case .inherit: return nil
        case .handle(let handle):
            give(handle, as: target)
            return nil
        case .discard:
            let fd = open("/dev/null", O_WRONLY | O_CLOEXEC)
            guard fd >= 0 else { throw ChildProcess.SpawnError(executable: path, call: "open /dev/null for", code: errno) }
            moves.append((fd, target))
            parentCopies.append(fd)
            return nil
        case .capture:
            var fds: [Int32] = [0, 0]
            guard pipe(&fds) == 0 else { throw ChildProcess.SpawnError(executable: path, call: "pipe for", code: errno) }
            for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
            moves.append((fds[1], target))
            parentCopies.append(fds[1])
            return fds[0]
        }
    }

    /// Standard input from a socket this process writes `data` to (a socket, so that a child that
    /// exits unread raises no SIGPIPE here).
    mutating func feed(_ data: Data, path: String) throws {
        var fds: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0 else {
            throw ChildProcess.SpawnError(executable: path, call: "socketpair for", code: errno)
        }
        moves.append((fds[0], STDIN_FILENO))
        parentCopies.append(fds[0])
        feeding = (fds[1], data)
    }

    func spawn(_ path: String, _ arguments: [String], environment: [String: String]?) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (source, target) in moves { posix_spawn_file_actions_adddup2(&actions, source, target) }
        // Nothing of this process's but the three standard descriptors reaches the child: no pipe of
        // another child's held open by this one, keeping its reader from the end.
        if let closeFrom = Self.closeFrom { _ = closeFrom(&actions, 3) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // The child starts with every signal at its default and none blocked, whatever this process set.
        var defaults = sigset_t()
        sigfillset(&defaults)
        sigdelset(&defaults, SIGKILL)
        sigdelset(&defaults, SIGSTOP)
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?]? = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp ?? [] { free(pointer) }
        }
        var pid: pid_t = 0
        let rc = argv.withUnsafeBufferPointer { argv in
            if let envp {
                return envp.withUnsafeBufferPointer {
                    posix_spawn(&pid, path, &actions, &attributes, argv.baseAddress!, $0.baseAddress!)
                }
            }
            return posix_spawn(&pid, path, &actions, &attributes, argv.baseAddress!, environ)
        }
        guard rc == 0 else { throw ChildProcess.SpawnError(executable: path, call: "posix_spawn", code: rc) }
        return pid
    }

    /// After the spawn (or a failure before it): this process lets go of the child's ends.
    mutating func closeParentCopies() {
        for fd in parentCopies { close(fd) }
        parentCopies = []
        for handle in handles where handle !== FileHandle.standardInput && handle !== FileHandle.standardOutput {
            // A caller's pipe end given to the child: this process's copy goes, so the end is seen.
            if handle.fileDescriptor > STDERR_FILENO { try? handle.close() }
        }
        handles = []
    }
}
