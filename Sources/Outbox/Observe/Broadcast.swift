internal import Synchronization

/// Hands every value to every current subscriber's stream, and to the listeners inside the package.
///
/// Each subscriber has a buffer of its own (`capacity` values); one that falls behind loses the oldest
/// values, and with `missed` its stream says so: the next value it reads is `missed(n)`, standing where
/// the lost values stood. Subscribers that stop listening are dropped; `finish()` ends every stream
/// (the client closed). Sending never waits for a subscriber.
final class Broadcast<Value: Sendable>: Sendable {
    private struct State {
        var subscribers: [Int: Subscriber] = [:]
        var listeners: [Callback<Value>] = []
        var nextId = 0
        var finished = false
    }

    private let state = Mutex(State())
    private let capacity: Int
    private let missed: (@Sendable (Int) -> Value)?

    /// `missed`: the value that tells a subscriber how many values it lost; nil to drop them silently
    /// (a status stream, where each value is the whole state).
    init(capacity: Int = 1024, missed: (@Sendable (Int) -> Value)? = nil) {
        self.capacity = max(1, capacity)
        self.missed = missed
    }

    /// A new stream of the values sent from now on, starting with `initial` when given.
    func subscribe(initial: Value? = nil) -> AsyncStream<Value> {
        let subscriber = Subscriber(capacity: capacity, missed: missed)
        if let initial { subscriber.push(initial) }
        let id = state.withLock { state -> Int? in
            guard !state.finished else { return nil }
            state.nextId += 1
            state.subscribers[state.nextId] = subscriber
            return state.nextId
        }
        if id == nil { subscriber.finish() }
        return AsyncStream(
            unfolding: { await subscriber.next() },
            onCancel: { [weak self] in
                subscriber.finish()
                if let id { _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) } }
            })
    }

    /// Calls `listener` with every value sent from now on, synchronously, on the sender's thread: for
    /// the package's own harnesses, which must see every value in step with what they drive.
    func listen(_ listener: @escaping @Sendable (Value) -> Void) {
        let callback = Callback(listener)
        state.withLock { $0.listeners.append(callback) }
    }

    /// Whether any subscriber or listener would receive a value sent now: a sender with values to
    /// build (a commit's verdicts) builds none for no one.
    var hasAudience: Bool { state.withLock { !$0.subscribers.isEmpty || !$0.listeners.isEmpty } }

    func send(_ value: Value) {
        let (subscribers, listeners) = state.withLock { (Array($0.subscribers.values), $0.listeners) }
        for listener in listeners { listener.call(value) }
        for subscriber in subscribers { subscriber.push(value) }
    }

    func finish() {
        let subscribers = state.withLock { state -> [Subscriber] in
            state.finished = true
            state.listeners = []
            defer { state.subscribers = [:] }
            return Array(state.subscribers.values)
        }
        for subscriber in subscribers { subscriber.finish() }
    }

    /// How many values the subscribers' buffers hold now (a client that runs for months must not grow).
    var bufferedCount: Int {
        state.withLock { state in state.subscribers.values.reduce(0) { $0 + $1.bufferedCount } }
    }

    /// One subscriber's buffer, and the reader waiting on it.
    private final class Subscriber: Sendable {
        private struct Buffer {
            var values: [Value] = []
            var head = 0
            var missed = 0
            var waiter: CheckedContinuation<Value?, Never>?
            var finished = false

            var count: Int { values.count - head }

            mutating func popFirst() -> Value? {
                guard head < values.count else { return nil }
                let value = values[head]
                head += 1
                if head >= 64 && head * 2 >= values.count {
                    values.removeFirst(head)
                    head = 0
                }
                return value
            }
        }

        private let buffer = Mutex(Buffer())
        private let capacity: Int
        private let missed: (@Sendable (Int) -> Value)?

        init(capacity: Int, missed: (@Sendable (Int) -> Value)?) {
            self.capacity = capacity
            self.missed = missed
        }

        var bufferedCount: Int { buffer.withLock { $0.count } }

        func push(_ value: Value) {
            let waiter = buffer.withLock { buffer -> CheckedContinuation<Value?, Never>? in
                guard !buffer.finished else { return nil }
                if let waiter = buffer.waiter {
                    buffer.waiter = nil
                    return waiter
                }
                if buffer.count >= capacity {
                    _ = buffer.popFirst()
                    if missed != nil { buffer.missed += 1 }
                }
                buffer.values.append(value)
                return nil
            }
            waiter?.resume(returning: value)
        }

        func finish() {
            let waiter = buffer.withLock { buffer -> CheckedContinuation<Value?, Never>? in
                buffer.finished = true
                defer { buffer.waiter = nil }
                return buffer.waiter
            }
            waiter?.resume(returning: nil)
        }

        /// The next value: `missed(n)` first when values were lost, then the oldest kept; nil once
        /// finished and read to the end.
        func next() async -> Value? {
            await withCheckedContinuation { (continuation: CheckedContinuation<Value?, Never>) in
                let ready = buffer.withLock { buffer -> Value?? in
                    if buffer.missed > 0, let missed {
                        defer { buffer.missed = 0 }
                        return .some(missed(buffer.missed))
                    }
                    if let value = buffer.popFirst() { return .some(value) }
                    if buffer.finished { return .some(nil) }
                    buffer.waiter = continuation
                    return .none
                }
                if let ready { continuation.resume(returning: ready) }
            }
        }
    }
}
