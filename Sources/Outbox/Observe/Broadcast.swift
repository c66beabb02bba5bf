internal import Synchronization

/// Hands every value to every current subscriber's `AsyncStream`. Subscribers that stop listening are
/// dropped; `finish()` ends every stream (the client closed).
final class Broadcast<Value: Sendable>: Sendable {
    private struct State {
        var continuations: [Int: AsyncStream<Value>.Continuation] = [:]
        var nextId = 0
        var finished = false
    }

    private let state = Mutex(State())

    /// A new stream of the values sent from now on, starting with `initial` when given.
    func subscribe(initial: Value? = nil) -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream<Value>.makeStream(bufferingPolicy: .bufferingNewest(1024))
        if let initial { continuation.yield(initial) }
        let id = state.withLock { state -> Int? in
            guard !state.finished else { return nil }
            state.nextId += 1
            state.continuations[state.nextId] = continuation
            return state.nextId
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.continuations.removeValue(forKey: id) }
        }
        return stream
    }

    func send(_ value: Value) {
        let continuations = state.withLock { Array($0.continuations.values) }
        for continuation in continuations { continuation.yield(value) }
    }

    func finish() {
        let continuations = state.withLock { state -> [AsyncStream<Value>.Continuation] in
            state.finished = true
            defer { state.continuations = [:] }
            return Array(state.continuations.values)
        }
        for continuation in continuations { continuation.finish() }
    }
}
