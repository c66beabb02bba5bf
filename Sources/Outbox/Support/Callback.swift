/// A callback kept where it is read many times (in a `Mutex`, say): a final class holding the closure
/// as a `let`.
///
/// A bare closure read out of a `Mutex` (`withLock { $0 }`) is wrapped in one more reabstraction thunk
/// on every read, so after many reads each call goes through a chain of thunks as long as the number of
/// reads, and releasing the chain overflows the stack (swiftlang/swift #91348). Reading a class
/// reference copies a pointer and wraps nothing.
package final class Callback<Argument>: Sendable {
    package let call: @Sendable (Argument) -> Void

    package init(_ call: @escaping @Sendable (Argument) -> Void) { self.call = call }
}
