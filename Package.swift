// swift-tools-version:6.0
import PackageDescription

/// Settings every target shares (STYLE.md: one loop, no unsafe flags).
let upcoming: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "swift-outbox",
    products: [
        .library(name: "Outbox", targets: ["Outbox"]),
        .library(name: "OutboxHTTP", targets: ["OutboxHTTP"]),
        .library(name: "OutboxTesting", targets: ["OutboxTesting"]),
        .executable(name: "outbox", targets: ["OutboxCLI"]),
        .executable(name: "outbox-benchmarks", targets: ["OutboxBenchmarks"]),
    ],
    targets: [
        // LMDB from the system (Debian: liblmdb-dev). Namespaced so it cannot clash with an app's own CLMDB.
        .systemLibrary(
            name: "COutboxLMDB",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"]), .brew(["lmdb"])]
        ),
        // SQLite from the system (Debian: libsqlite3-dev): the benchmarks' peer, an outbox as apps write it today.
        .systemLibrary(name: "COutboxSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]),
        // libcurl from the system (Debian: libcurl4-openssl-dev), on Linux only: the HTTP client that never
        // resends a request by itself, reads answers within a limit and asks for no compression (R9.6),
        // which FoundationNetworking's URLSession cannot promise.
        .systemLibrary(name: "COutboxCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        // CRC-32C by the processor's instruction where it has one (x86-64 with SSE 4.2): the checksum every
        // record and entry carries. Portable C, no flags: the instruction is enabled for one function.
        .target(name: "COutboxCRC"),
        // The safe LMDB layer: environments, closure-scoped transactions, cursors, typed errors.
        .target(name: "OutboxLMDB", dependencies: ["COutboxLMDB"]),
        // The engine apps import: events, codec, log, projections, queue API.
        .target(name: "Outbox", dependencies: ["OutboxLMDB", "COutboxCRC"]),
        // For an app's own tests, as swift-nio ships NIOEmbedded and NIOTestUtils: the simulated instance, the manual clock,
        // the seeded random source. Apart, so an app's shipping code links none of it.
        // It also ships the transport conformance checks and a scripted HTTP client, for an app that writes
        // its own transport.
        .target(name: "OutboxTesting", dependencies: ["Outbox", "OutboxHTTP"]),
        // Transports to real servers over HTTP (libcurl on Linux, URLSession on Apple platforms): PostgREST
        // and Supabase tables, and the reference instance. Apart, so an app that brings its own transport
        // links no HTTP code.
        .target(
            name: "OutboxHTTP", dependencies: ["Outbox", .target(name: "COutboxCurl", condition: .when(platforms: [.linux]))]),
        // `outbox scenario`: runs SCENARIOS.md documents against the simulated instance, which answers as
        // PostgREST does (its codes mean what OutboxHTTP maps them to).
        .target(name: "OutboxScenario", dependencies: ["Outbox", "OutboxHTTP", "OutboxTesting"]),
        // The bodies of the libFuzzer targets in Fuzz/ (a package of its own that builds these sources
        // again, with the fuzzer's coverage), so the test suite replays their crashers. Not a product.
        .target(name: "OutboxFuzzing", dependencies: ["Outbox", "OutboxScenario", "OutboxTesting", "OutboxTool"]),
        // `outbox simulate`: the deterministic simulation with faults (TESTING.md §1).
        .target(name: "OutboxSimulation", dependencies: ["Outbox", "OutboxLMDB", "OutboxTesting"]),
        // Child processes waited for safely from any thread or task (the tool's harnesses, the benchmarks,
        // the tests); no app links it.
        .target(name: "OutboxProcess"),
        // The commands of the `outbox` tool: arguments, the read-only commands, the harnesses.
        .target(
            name: "OutboxTool",
            dependencies: ["Outbox", "OutboxHTTP", "OutboxProcess", "OutboxScenario", "OutboxSimulation", "OutboxTesting"]),
        // The `outbox` command-line tool: `OutboxTool`'s commands run from the command line.
        .executableTarget(name: "OutboxCLI", dependencies: ["OutboxTool"]),
        // Benchmarks: each figure beside a raw LMDB baseline measured in the same run.
        .executableTarget(
            name: "OutboxBenchmarks",
            dependencies: [
                "Outbox", "OutboxHTTP", "OutboxLMDB", "OutboxProcess", "OutboxTesting", "COutboxLMDB", "COutboxSQLite",
            ],
            path: "Benchmarks"),
        .testTarget(name: "OutboxLMDBTests", dependencies: ["OutboxLMDB", "COutboxLMDB"]),
        .testTarget(
            name: "OutboxTests", dependencies: ["Outbox", "OutboxLMDB", "OutboxTesting"], exclude: ["Golden", "Fixtures"]),
        .testTarget(name: "OutboxHTTPTests", dependencies: ["OutboxHTTP", "Outbox", "OutboxProcess", "OutboxTesting"]),
        .testTarget(name: "OutboxCLITests", dependencies: ["Outbox", "OutboxProcess", "OutboxTesting"]),
        .testTarget(name: "OutboxScenarioTests", dependencies: ["Outbox", "OutboxScenario"]),
        .testTarget(name: "OutboxSimulationTests", dependencies: ["Outbox", "OutboxSimulation", "OutboxTesting"]),
        .testTarget(name: "OutboxFuzzingTests", dependencies: ["OutboxFuzzing"]),
    ],
    swiftLanguageModes: [.v6]
)

for target in package.targets where target.type != .system {
    target.swiftSettings = (target.swiftSettings ?? []) + upcoming
}
