// swift-tools-version:5.4
// The libFuzzer targets (TESTING.md §3). A separate package, because `-sanitize=fuzzer` links only
// with a tools version of 5.4 or lower; each target's body is in the main package's OutboxFuzzing
// library, so the normal test suite replays the crashers in crashers/ with the same code.
// Build and run them with ../scripts/fuzz.
import PackageDescription

let targets = ["record", "record-fixed", "replay", "classifier", "scenario", "json-roundtrip", "cli"]

let package = Package(
    name: "swift-outbox-fuzz",
    dependencies: [.package(name: "swift-outbox", path: "..")],
    targets: targets.map { name in
        .executableTarget(
            name: "fuzz-\(name)",
            dependencies: [.product(name: "OutboxFuzzing", package: "swift-outbox")],
            path: "Sources/\(name)")
    }
)
