/// The fields of a value type kept behind one reference and never changed, for a value copied far more
/// often than it changes (a queue entry, a write on its way out): a copy is one retain, not a retain
/// of each string, array and payload. A change makes a new box, since the old one may be shared.
final class FrozenFields<Fields: Hashable & Sendable>: Sendable {
    let fields: Fields

    init(_ fields: Fields) { self.fields = fields }

    /// A box of these fields with `change` made to them.
    func changed(_ change: (inout Fields) throws -> Void) rethrows -> FrozenFields {
        var fields = self.fields
        try change(&fields)
        return FrozenFields(fields)
    }

    /// Whether the two hold equal fields (the same box holds them without comparing).
    static func equal(_ a: FrozenFields, _ b: FrozenFields) -> Bool { a === b || a.fields == b.fields }
}
