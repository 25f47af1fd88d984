// swift-tools-version:6.0
import PackageDescription

// The libFuzzer binary, in its own package: an `LLVMFuzzerTestOneInput` entry point linked
// into the main package would break its plain `swift build` (libFuzzer brings its own
// `main`). Build only with the sanitizers:
//     swift build --package-path Fuzz --sanitize=fuzzer --sanitize=address -Xswiftc -sanitize=fuzzer,address
// (the last flag because swiftc keeps only the last of SwiftPM's two -sanitize flags; see
// run-long.sh, which builds it this way).
// The targets' logic lives in the main package (PushFuzzTargets), which `swift test` also
// runs over the saved crashes and these corpora.
let package = Package(
    name: "pushspool-fuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "pushspool", path: "..")],
    targets: [
        .executableTarget(name: "pushspool-fuzz", dependencies: [.product(name: "PushFuzzTargets", package: "pushspool")],
                          swiftSettings: [.swiftLanguageMode(.v6)]),
    ]
)
