extension SyncReport {
    /// A report's verdicts, in order: a collection of `Verdict` like an array, which holds each run of
    /// like verdicts on consecutive writes (the accepted writes of a drain, say) as one, so that a pass
    /// over millions of writes reports each of them in a few bytes.
    public struct Verdicts: RandomAccessCollection, RangeReplaceableCollection, Hashable, Sendable,
        ExpressibleByArrayLiteral, CustomStringConvertible
    {
        /// Verdicts equal but for their ids, which ascend by one from `first`'s.
        private struct Run: Hashable, Sendable {
            var first: Verdict
            var count: Int

            /// Whether `verdict` is the run's next.
            func isFollowed(by verdict: Verdict) -> Bool {
                var next = first
                next.id = WriteID(first.id.rawValue &+ UInt64(count))
                return next == verdict && verdict.id.rawValue > first.id.rawValue
            }
        }

        /// The runs, in order, each as long as it can be: equal collections hold equal runs.
        private var runs: [Run] = []
        /// The position past each run's last verdict.
        private var ends: [Int] = []

        public init() {}

        public init(arrayLiteral verdicts: Verdict...) {
            self.init()
            for verdict in verdicts { append(verdict) }
        }

        public var startIndex: Int { 0 }
        public var endIndex: Int { ends.last ?? 0 }

        public subscript(position: Int) -> Verdict {
            precondition(position >= 0 && position < endIndex, "verdict index \(position) out of range")
            // The first run that ends past `position`.
            var low = 0
            var high = ends.count - 1
            while low < high {
                let middle = (low + high) / 2
                if ends[middle] > position { high = middle } else { low = middle + 1 }
            }
            let start = low == 0 ? 0 : ends[low - 1]
            var verdict = runs[low].first
            verdict.id = WriteID(verdict.id.rawValue + UInt64(position - start))
            return verdict
        }

        public mutating func append(_ verdict: Verdict) {
            let end = endIndex
            if let last = runs.indices.last, runs[last].isFollowed(by: verdict) {
                runs[last].count += 1
                ends[last] = end + 1
            } else {
                runs.append(Run(first: verdict, count: 1))
                ends.append(end + 1)
            }
        }

        public mutating func replaceSubrange<C: Collection>(_ subrange: Range<Int>, with verdicts: C)
        where C.Element == Verdict {
            precondition(subrange.lowerBound >= 0 && subrange.upperBound <= endIndex, "verdict range out of range")
            if subrange.isEmpty, subrange.lowerBound == endIndex {
                for verdict in verdicts { append(verdict) }
                return
            }
            var replaced = Verdicts()
            for verdict in self[..<subrange.lowerBound] { replaced.append(verdict) }
            for verdict in verdicts { replaced.append(verdict) }
            for verdict in self[subrange.upperBound...] { replaced.append(verdict) }
            self = replaced
        }

        /// How many runs it holds (what its memory grows with).
        var runCount: Int { runs.count }

        /// As an array of the verdicts prints.
        public var description: String { Array(self).description }
    }
}
