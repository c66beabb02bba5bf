/// Folds events into projections held in memory, with no log file: what a whole log replays to
/// (R8.4). Public for tools and fuzzers: every sequence of decodable events must fold without a crash,
/// and anything it cannot fold is a thrown error.
package enum LogReplay {
    /// The queue and verdict table after `events`, folded in the order given.
    package static func snapshot(of events: [RecordedEvent]) throws -> QueueSnapshot {
        var projector = Projector(store: MemoryProjections())
        for event in events { try projector.apply(event) }
        let bySequence = Dictionary(events.map { ($0.sequence, $0) }, uniquingKeysWith: { first, _ in first })
        let reader = projector.store.reader(record: { bySequence[$0] })
        return QueueSnapshot(
            sequence: events.last?.sequence ?? 0, user: try reader.session()?.user,
            writes: try QueuedWrite.all(user: nil, reader: reader))
    }
}
