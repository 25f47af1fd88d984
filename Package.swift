// swift-tools-version:6.0
import PackageDescription

// Modules by concern (see docs/design/README.md, "Modules"). C libraries enter only through the
// `C*` system-library and shim targets; everything above them is Swift.
let package = Package(
    name: "pushspool",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "pushspoold", targets: ["pushspoold"]),
        .executable(name: "pushspoolctl", targets: ["pushspoolctl"]),
        .executable(name: "pushspool-bench", targets: ["pushspool-bench"]),
        .executable(name: "pushspool-inbox", targets: ["pushspool-inbox"]),
        .executable(name: "pushspool-fetch", targets: ["pushspool-fetch"]),
        // For the fuzz package in Fuzz/, which depends on this one by path.
        .library(name: "PushFuzzTargets", targets: ["PushFuzzTargets"]),
    ],
    targets: [
        // C: system libraries from Debian and tiny shims.
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        .systemLibrary(name: "CInih", pkgConfig: "inih", providers: [.apt(["libinih-dev"])]),
        .systemLibrary(name: "CIsal", pkgConfig: "libisal", providers: [.apt(["libisal-dev"])]),
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        // zstd (libzstd-dev) for archived journal segments.
        .systemLibrary(name: "CZstd", pkgConfig: "libzstd", providers: [.apt(["libzstd-dev"])]),
        .target(name: "CCurl", linkerSettings: [.linkedLibrary("curl")]),
        // libvips (libvips-dev) through fixed-argument wrappers. GLib's include paths come from
        // pkg-config through CGObject (gobject-2.0), not from vips.pc: vips.pc requires gio-2.0,
        // whose cflags carry -pthread, and SwiftPM warns "prohibited flag(s): -pthread" for a
        // pkgConfig "vips" system library on every build. gobject-2.0 yields the same -I flags
        // (gio's headers sit under glib-2.0/) without it. vips.h itself is in /usr/include.
        .systemLibrary(name: "CGObject", pkgConfig: "gobject-2.0", providers: [.apt(["libglib2.0-dev"])]),
        .target(name: "CVipsShim", dependencies: ["CGObject"], linkerSettings: [.linkedLibrary("vips")]),
        .target(name: "CPosix"),
        // libmicrohttpd (libmicrohttpd-dev) for pushspool-inbox; the shim wraps the variadic
        // MHD_start_daemon in a typed function.
        .systemLibrary(name: "CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        .target(name: "CMicroHTTPDShim", dependencies: ["CMicroHTTPD"]),
        .target(name: "CBenchBaseline", linkerSettings: [.linkedLibrary("isal")]),
        // prctl(2) for pushspool-fetch's self-hardening (prctl is variadic).
        .target(name: "CFetchShim"),
        // libseccomp (libseccomp-dev) for pushspool-fetch's own system-call filter.
        .systemLibrary(name: "CSeccomp", pkgConfig: "libseccomp", providers: [.apt(["libseccomp-dev"])]),
        // NATS C client (libnats-dev 3.4.1) for the JetStream exporter.
        .systemLibrary(name: "CNats", pkgConfig: "libnats", providers: [.apt(["libnats-dev"])]),
        // ICU's transliterator (libicu-dev) through typed wrappers: ICU's C names are
        // version-suffixing macros Swift cannot import.
        .target(name: "CICU", linkerSettings: [.linkedLibrary("icui18n"), .linkedLibrary("icuuc")]),

        // Swift libraries.
        .target(name: "PushSystem", dependencies: ["CPosix", "CCrypto"]),
        // The command-line model every executable shares: option tables from which parsing,
        // --help, the man pages' synopses and the bash completion are generated.
        .target(name: "PushCLI"),
        .target(name: "PushPayload", dependencies: ["PushSystem"]),
        .target(name: "PushJournal", dependencies: ["PushSystem", "CIsal", "CZstd"]),
        .target(name: "PushSpool", dependencies: ["PushSystem"]),
        // The media core: options, outcomes, types, the store's layout, stats and GC. No libcurl,
        // no libvips: pushspoolctl links it (ctlDoesNotLinkCurlOrVips).
        .target(name: "PushMediaCore", dependencies: ["PushSystem"]),
        // A media URL's scheme and host as libcurl's URL parser reads them (the fetcher's checks,
        // pushspoold's MEDIA_HOST=); apart from PushMediaCore because it links libcurl.
        .target(name: "PushMediaURL", dependencies: ["PushMediaCore", "CCurl"]),
        // Downloads, sniffing, storing, thumbnails: libcurl transfers and libvips. Linked only
        // into pushspool-fetch (and the tests and benchmark), never into pushspoold.
        .target(name: "PushMedia", dependencies: ["PushSystem", "PushMediaCore", "PushMediaURL", "CCurl", "CVipsShim"]),
        // Privilege separation for media, pushspoold's side: the protocol, the socket channel,
        // the supervisor and the spawn of pushspool-fetch. No PushMedia: scripts/test.sh fails
        // if pushspoold ever links libvips again.
        .target(name: "PushFetchClient", dependencies: ["PushSystem", "PushMediaCore", "CFetchShim"]),
        // pushspool-fetch's side: the server loop around MediaFetcher, its self-hardening
        // (limits, seccomp, Landlock) and the debug-only probes the tests drive.
        .target(name: "PushFetchServer", dependencies: [
            "PushCLI", "PushSystem", "PushPayload", "PushFetchClient", "PushMedia", "PushMediaCore", "CFetchShim", "CSeccomp",
        ]),
        .target(name: "PushSystemd", dependencies: ["PushSystem", "CSystemd"]),
        // The follower runtime: one runner (thread, stop, commit wait, backoff, status) for
        // every reader above the journal.
        .target(name: "PushFollow", dependencies: ["PushSystem", "PushJournal", "PushPayload"]),
        // The Notification Center's query index: a follower of the journal into SQLite.
        .target(name: "PushInbox", dependencies: ["PushSystem", "PushPayload", "PushJournal", "PushFollow", "CSQLite"]),
        // ICU transforms (Mindbox's transliterated push name), for the outbox and the
        // configuration check of MindboxTransliteration=.
        .target(name: "PushTransliteration", dependencies: ["PushSystem", "CICU"]),
        .target(name: "PushConfig", dependencies: ["PushSystem", "PushPayload", "PushJournal", "PushTransliteration", "CInih"]),
        // The one adapter from the INI schema to options: journal, media, export, outbox, inbox
        // index and stream follower options built from their settings, so those modules never
        // import PushConfig, and pushspool-fetch (PushMediaCore) never links it.
        .target(name: "PushModuleOptions", dependencies: [
            "PushSystem", "PushConfig", "PushJournal", "PushExport", "PushOutboxStore", "PushInbox",
            "PushInboxJetStream", "PushErasure",
        ]),
        // `[Media]` and `[Outbox]` as options; apart from PushModuleOptions so pushspoolctl links no libcurl.
        .target(name: "PushDaemonOptions", dependencies: ["PushConfig", "PushMediaCore", "PushOutbox", "PushOutboxStore"]),
        // Writes Notification Center event envelopes into the spool (pushspoolctl nc, pushspool-inbox).
        .target(name: "PushNcEvents", dependencies: ["PushSystem", "PushPayload", "PushSpool"]),
        // An inbox node's duties ([Inbox] Source=nats), without HTTP: the stream follower, the
        // event publisher and the fleet outbox, built from options as one follower group.
        .target(name: "PushInboxNode", dependencies: [
            "PushSystem", "PushSystemd", "PushJournal", "PushFollow", "PushInboxJetStream", "PushExport", "PushFleetOutbox", "PushOutbox",
            "PushOutboxStore", "PushErasure",
        ]),
        // The Notification Center over HTTP (libmicrohttpd), the HTTP layer only: routes, auth,
        // SSE, the API over any EventSink and the index. It knows nothing of the node.
        .target(name: "PushInboxServer", dependencies: [
            "PushSystem", "PushPayload", "PushSpool", "PushNcEvents", "PushInbox", "PushJournal", "PushMediaCore",
            "PushSystemd", "CMicroHTTPDShim", "CSystemd", "CCrypto", "PushFollow", "PushErasure",
        ]),
        // pushspool-inbox's composition: configuration to options, the node (PushInboxNode) and
        // the HTTP layer (PushInboxServer) with its hub and status in one service group, exit codes.
        .target(name: "PushInboxMain", dependencies: [
            "PushCLI", "PushSystem", "PushSystemd", "PushPayload", "PushJournal", "PushSpool", "PushNcEvents", "PushInbox", "PushConfig",
            "PushModuleOptions", "PushDaemonOptions", "PushExport", "PushInboxJetStream", "PushFleetOutbox", "PushOutbox", "PushOutboxStore", "PushErasure",
            "PushInboxNode", "PushInboxServer",
        ]),
        // The outbox's on-disk state (pending, parked, cursor), without libcurl, for pushspoolctl.
        .target(name: "PushOutboxStore", dependencies: ["PushSystem"]),
        // Delivers Notification Center events from the journal to the vendors (libcurl POSTs).
        .target(name: "PushOutbox", dependencies: [
            "PushSystem", "PushJournal", "PushOutboxStore", "PushFollow", "PushTransliteration", "CCurl",
        ]),
        // Exports journal records to NATS JetStream from a durable cursor (libnats).
        .target(name: "PushExport", dependencies: ["PushSystem", "PushJournal", "PushPayload", "PushFollow", "CNats"]),
        // The inbox index built from the export stream (a durable pull consumer) instead of
        // the local journal: pushspool-inbox with [Inbox] Source=nats, nc reindex --from-stream.
        .target(name: "PushInboxJetStream", dependencies: [
            "PushSystem", "PushJournal", "PushFollow", "PushInbox", "PushExport", "PushErasure",
        ]),
        // The outbox fleet-wide: inbox nodes deliver the events published to the stream through
        // one shared durable consumer, each event by one node.
        .target(name: "PushFleetOutbox", dependencies: ["PushSystem", "PushJournal", "PushFollow", "PushOutbox", "PushOutboxStore", "PushExport"]),
        .target(name: "PushspoolDaemon", dependencies: [
            "PushCLI", "PushSystem", "PushPayload", "PushJournal", "PushSpool", "PushMediaCore", "PushMediaURL", "PushSystemd", "PushConfig",
            "PushInbox", "PushOutbox", "PushOutboxStore", "PushFetchClient", "PushExport", "PushFollow", "PushModuleOptions", "PushDaemonOptions",
            "PushErasure",
        ]),
        // A user's or device's erasure from every store (user erase, pushspoold's eraser follower,
        // the fleet erasure listener), the export stream's copies included. It holds the export
        // too (pushspoolctl user export: journal and archives, inbox index, outbox, quarantine,
        // media): the erasure finds what to erase with the export's walk.
        .target(name: "PushErasure", dependencies: [
            "PushSystem", "PushJournal", "PushInbox", "PushOutboxStore", "PushSpool", "PushMediaCore", "PushExport", "PushFollow",
            "PushPayload",
        ]),
        .target(name: "PushspoolCtl", dependencies: [
            "PushCLI", "PushSystem", "PushPayload", "PushJournal", "PushSpool", "PushMediaCore", "PushConfig", "PushOutboxStore",
            "PushInbox", "PushNcEvents", "PushExport", "PushInboxJetStream", "PushErasure", "PushModuleOptions",
        ]),

        // The fuzz targets' logic, shared by the libFuzzer binary (Fuzz/, its own package) and
        // the replay of saved crashes in FuzzRegressionTests.
        .target(name: "PushFuzzTargets", dependencies: [
            "PushSystem", "PushPayload", "PushJournal", "PushSpool", "PushMedia", "PushMediaCore", "PushConfig", "PushNcEvents",
            "PushInbox", "PushInboxServer", "PushModuleOptions",
        ]),

        // Thin executables.
        .executableTarget(name: "pushspoold", dependencies: ["PushspoolDaemon"]),
        .executableTarget(name: "pushspoolctl", dependencies: ["PushspoolCtl"]),
        .executableTarget(name: "pushspool-inbox", dependencies: ["PushInboxMain"]),
        .executableTarget(name: "pushspool-fetch", dependencies: ["PushFetchServer"]),
        // The benchmark serves its media downloads from TestSupport's loopback server.
        .executableTarget(name: "pushspool-bench", dependencies: [
            "PushSystem", "PushPayload", "PushJournal", "PushSpool", "PushMedia", "PushMediaCore", "PushFetchServer",
            "PushspoolDaemon", "CBenchBaseline", "PushInbox", "TestSupport", "PushExport", "PushModuleOptions", "PushDaemonOptions", "PushConfig",
            "PushFleetOutbox", "PushOutbox", "PushFollow", "CNats",
        ]),

        // Tests: one target per library plus an integration target that drives the built binaries.
        // TestSupport: the kits every test target shares (temp dirs, processes, a loopback HTTP
        // server, a notify socket). A plain library so the benchmark can link it too; it must
        // not import Testing, and neither pushspoold nor pushspoolctl depends on it.
        .target(name: "TestSupport", dependencies: ["PushSystem", "PushJournal"], path: "Tests/TestSupport"),
        // An in-memory file system behind PushSystem's `FileSystem` seam that models power cuts
        // (unsynced data and directory entries) and injected I/O errors, for crash enumeration.
        // The tags that set slow, NATS and root-only suites apart (scripts/test-sets.py turns
        // them into the names scripts/test.sh runs after the fast set).
        .target(name: "TestTraits", path: "Tests/TestTraits"),
        .target(name: "SimulatedFS", dependencies: ["PushSystem"], path: "Tests/SimulatedFS"),
        .testTarget(name: "TestSupportTests", dependencies: ["TestSupport", "PushSystem"]),
        .testTarget(name: "PushSystemTests", dependencies: ["PushSystem"]),
        // The parser's rules, every program's help, and the generated man sections and
        // completion against the checked-in files.
        .testTarget(name: "PushCLITests", dependencies: [
            "PushCLI", "PushspoolCtl", "PushspoolDaemon", "PushInboxServer", "PushInboxMain", "PushFetchServer",
        ]),
        .testTarget(name: "PushPayloadTests", dependencies: ["PushPayload", "PushSystem", "TestSupport"]),
        .testTarget(name: "PushJournalTests", dependencies: ["TestTraits", "PushJournal", "PushSystem", "TestSupport", "SimulatedFS", "PushConfig", "PushModuleOptions"]),
        .testTarget(name: "PushSpoolTests", dependencies: ["PushSpool", "PushSystem", "TestSupport"]),
        .testTarget(name: "PushMediaTests", dependencies: ["PushMedia", "PushMediaCore", "PushSystem", "TestSupport", "PushConfig", "PushModuleOptions", "PushDaemonOptions"]),
        // Both sides of the fetcher split (PushFetchClient, PushFetchServer), against the real
        // pushspool-fetch: hence named after the split, not after one library.
        .testTarget(name: "PushFetchTests", dependencies: [
            "PushFetchClient", "PushFetchServer", "PushMedia", "PushMediaCore", "PushSystem", "TestSupport",
            "pushspool-fetch", "PushConfig", "PushModuleOptions", "PushDaemonOptions",
        ]),
        .testTarget(name: "PushSystemdTests", dependencies: ["PushSystemd", "PushSystem", "TestSupport"]),
        .testTarget(name: "PushConfigTests", dependencies: ["PushConfig"]),
        .testTarget(name: "PushTransliterationTests", dependencies: ["PushTransliteration"]),
        .testTarget(name: "PushFollowTests", dependencies: ["PushFollow", "PushJournal", "PushPayload", "PushSystem", "TestSupport"]),
        // The outbox in a child process the crash tests can SIGKILL.
        .executableTarget(name: "pushspool-outbox-child", dependencies: ["PushOutbox", "PushFollow", "PushJournal", "PushSystem"], path: "Tests/OutboxChild"),
        .testTarget(name: "PushOutboxTests", dependencies: ["TestTraits",
            "PushOutbox", "PushOutboxStore", "PushConfig", "PushJournal", "PushFollow", "PushSystem", "PushTransliteration", "TestSupport",
            "pushspool-outbox-child", "PushModuleOptions", "PushDaemonOptions", "PushErasure", "PushPayload", "PushFleetOutbox", "PushExport",
        ]),
        .testTarget(name: "PushInboxTests", dependencies: ["TestTraits", "PushInbox", "PushPayload", "PushJournal", "PushFollow", "PushSystem", "TestSupport", "PushConfig", "PushModuleOptions"]),
        .testTarget(name: "PushInboxServerTests", dependencies: [
            "PushInboxServer", "PushInbox", "PushJournal", "PushSpool", "PushSystem", "PushExport", "PushPayload", "PushConfig",
            "TestSupport", "PushModuleOptions", "PushErasure", "PushFollow", "PushOutbox", "PushInboxMain", "PushInboxNode",
            "PushInboxJetStream",
        ]),
        .testTarget(name: "PushspoolDaemonTests", dependencies: ["TestTraits",
            "PushspoolDaemon", "PushspoolCtl", "PushPayload", "PushJournal", "PushSpool", "PushConfig", "PushSystemd", "PushSystem",
            "PushMediaCore", "PushMediaURL", "SimulatedFS", "CBenchBaseline", "PushModuleOptions", "PushDaemonOptions",
        ]),
        .testTarget(name: "PushExportTests", dependencies: ["TestTraits", "PushExport", "PushFollow", "PushJournal", "PushSystem", "PushConfig", "PushPayload", "TestSupport", "PushModuleOptions"]),
        .testTarget(name: "PushErasureTests", dependencies: ["TestTraits",
            "PushErasure", "PushPayload", "PushInbox", "PushSpool", "PushJournal", "PushSystem", "PushOutboxStore", "PushExport", "PushConfig",
            "PushModuleOptions", "PushFollow", "TestSupport",
        ]),
        .testTarget(name: "FuzzRegressionTests", dependencies: ["PushFuzzTargets"], exclude: ["FuzzRegressions"]),
        // README.md and docs/: links and anchors resolve, nothing points outside the repository,
        // the module table, the MESSAGE_ID runbook and the architecture picture are complete.
        .testTarget(name: "DocsTests", dependencies: ["PushSystem"]),
        .testTarget(name: "IntegrationTests", dependencies: ["TestTraits",
            "PushPayload", "PushJournal", "PushSystem", "PushMedia", "PushMediaCore", "TestSupport", "PushInboxServer", "pushspool-fetch",
            "PushExport", "PushInbox", "PushInboxJetStream", "PushConfig", "PushModuleOptions",
        ]),
    ]
)

// Shared settings for every Swift target, applied in one place.
for target in package.targets where target.type != .system && !target.name.hasPrefix("C") {
    var settings = target.swiftSettings ?? []
    settings.append(.swiftLanguageMode(.v6))
    target.swiftSettings = settings
}
