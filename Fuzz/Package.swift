// swift-tools-version:5.4
// The libFuzzer targets (TESTING.md §3). A separate package, because `-sanitize=fuzzer` links only
// with a tools version of 5.4 or lower. It builds the engine itself, from the main package's sources
// (`Engine` is a link to ../Sources), so every module is compiled with the fuzzer's coverage and the
// main package ships no fuzzing product; each target's body is in OutboxFuzzing, which the main
// package's test suite also builds to replay the crashers in crashers/ with the same code.
// Build and run them with ../scripts/fuzz.
import PackageDescription

let fuzzTargets = ["record", "record-fixed", "replay", "classifier", "scenario", "json-roundtrip", "cli"]

/// What the main package's manifest sets with a newer tools version: the Swift 6 language mode, its
/// upcoming features, and one package name for the `package` declarations of every module.
let engineFlags: [SwiftSetting] = [
    .unsafeFlags([
        "-swift-version", "6", "-package-name", "swift_outbox",
        "-enable-upcoming-feature", "ExistentialAny",
        "-enable-upcoming-feature", "MemberImportVisibility",
        "-enable-upcoming-feature", "InternalImportsByDefault",
    ])
]

/// The main package's modules that OutboxFuzzing needs, with their dependencies there.
let engine: [(name: String, dependencies: [Target.Dependency])] = [
    ("OutboxLMDB", ["COutboxLMDB"]),
    ("Outbox", ["OutboxLMDB", "COutboxCRC"]),
    ("OutboxHTTP", ["Outbox", "COutboxCurl"]),
    ("OutboxTesting", ["Outbox", "OutboxHTTP"]),
    ("OutboxScenario", ["Outbox", "OutboxHTTP", "OutboxTesting"]),
    ("OutboxSimulation", ["Outbox", "OutboxTesting"]),
    ("OutboxProcess", []),
    ("OutboxTool", ["Outbox", "OutboxHTTP", "OutboxProcess", "OutboxScenario", "OutboxSimulation", "OutboxTesting"]),
    ("OutboxFuzzing", ["Outbox", "OutboxScenario", "OutboxTesting", "OutboxTool"]),
]

let package = Package(
    name: "swift-outbox-fuzz",
    targets: [
        .systemLibrary(name: "COutboxLMDB", path: "Engine/COutboxLMDB", pkgConfig: "lmdb"),
        .systemLibrary(name: "COutboxCurl", path: "Engine/COutboxCurl", pkgConfig: "libcurl"),
        .target(name: "COutboxCRC", path: "Engine/COutboxCRC"),
    ]
        + engine.map { module in
            .target(
                name: module.name, dependencies: module.dependencies, path: "Engine/\(module.name)",
                swiftSettings: engineFlags)
        }
        + fuzzTargets.map { name in
            .executableTarget(
                name: "fuzz-\(name)", dependencies: ["OutboxFuzzing"], path: "Sources/\(name)", swiftSettings: engineFlags)
        }
)
