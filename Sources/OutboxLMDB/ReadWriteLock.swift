#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// A reader-writer lock: LMDB's map may be resized only while no transaction of this process is open,
/// so every transaction holds it shared and a resize holds it exclusively.
///
/// `Synchronization.Mutex` has no shared mode, hence pthreads.
final class ReadWriteLock: @unchecked Sendable {
    // @unchecked Sendable: the pthread lock is allocated once, never moved, and is itself thread-safe.
    private let lock: UnsafeMutablePointer<pthread_rwlock_t>

    init() {
        lock = .allocate(capacity: 1)
        lock.initialize(to: pthread_rwlock_t())
        pthread_rwlock_init(lock, nil)
    }

    deinit {
        pthread_rwlock_destroy(lock)
        lock.deallocate()
    }

    func withShared<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        pthread_rwlock_rdlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }

    func withExclusive<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        pthread_rwlock_wrlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }
}

/// A plain mutex whose closure may return a non-`Sendable` value (which `Mutex.withLock` would
/// require to be `sending`): it serializes the environment's writers, who hand results to their caller.
final class PlainLock: @unchecked Sendable {
    // @unchecked Sendable: the pthread mutex is allocated once, never moved, and is itself thread-safe.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func withLock<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}
