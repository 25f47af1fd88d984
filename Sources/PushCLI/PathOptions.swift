/// The options by which every pushspool program that reads the configuration finds its files:
/// `--config`, `--spool`, `--state-dir`, or `--instance NAME` (with `--root DIR`) for the
/// three paths the template unit `pushspoold@NAME` uses. One table entry and one resolution,
/// so pushspoold, pushspoolctl and pushspool-inbox agree. `Sendable`: plain values.
package struct PathOptions: Sendable, Equatable {
    package var spool: String?
    package var stateDir: String?
    package var config: String?
    /// The `pushspoold@NAME` instance; also names the export's host id (`<machine-id>.NAME`).
    package var instance: String?
    /// `--root DIR`: the instance's paths under DIR (an image, a container's root, a test's
    /// scratch tree) instead of /, like `systemctl --root=`.
    package var root: String?

    package init(spool: String? = nil, stateDir: String? = nil, config: String? = nil, instance: String? = nil,
                 root: String? = nil) {
        self.spool = spool
        self.stateDir = stateDir
        self.config = config
        self.instance = instance
        self.root = root
    }

    /// The table entries, in help order.
    package static let options: [Option] = [
        .value("--spool", placeholder: "DIR", help: "spool root (default from [Spool] Directory=, /var/spool/pushspool)",
               completion: .directory),
        .value("--state-dir", placeholder: "DIR",
               help: "state directory: journal, indexes, media (default from [Journal] StateDirectory=, /var/lib/pushspool)",
               completion: .directory),
        .value("--config", placeholder: "FILE",
               help: "configuration file (default /etc/pushspool/pushspool.conf, drop-ins from FILE.d/*.conf); "
                   + "a FILE given here must exist, only the default may be absent",
               completion: .file(suffix: "conf")),
        .value("--instance", placeholder: "NAME",
               help: "the pushspoold@NAME instance: /etc/pushspool/NAME.conf, /var/spool/pushspool/NAME, "
                   + "/var/lib/pushspool/NAME (not with --config, --spool, --state-dir)"),
        .value("--root", placeholder: "DIR", help: "with --instance: those paths under DIR (an image, a container)",
               completion: .directory),
    ]

    /// systemd's instance names allow more, but these are the ones that are safe as a path
    /// component and a file name without escaping.
    package static func isValidInstance(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 64 && !name.hasPrefix(".")
            && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "_.-".contains($0)) }
    }

    /// The paths given on `invocation`, with `--instance` resolved into the three of its unit.
    package static func resolve(_ invocation: Invocation) throws(CLIError) -> PathOptions {
        var paths = PathOptions(spool: invocation.value("--spool"), stateDir: invocation.value("--state-dir"),
                                config: invocation.value("--config"), instance: invocation.value("--instance"),
                                root: invocation.value("--root"))
        if let root = paths.root, !root.hasPrefix("/") {
            throw invocation.error("--root takes an absolute directory, not '\(root)'")
        }
        guard let instance = paths.instance else {
            if paths.root != nil { throw invocation.error("--root applies to --instance only", .conflict) }
            return paths
        }
        guard isValidInstance(instance) else {
            throw invocation.error("--instance takes a unit instance name of [A-Za-z0-9_.-] (not starting with '.'), not '\(instance)'")
        }
        // Given with any of them it would be ambiguous which one wins.
        guard paths.config == nil, paths.spool == nil, paths.stateDir == nil else {
            throw invocation.error("--instance sets --config, --spool and --state-dir; do not combine them", .conflict)
        }
        // "/" and "" both mean the real root; no doubled slash in what is printed.
        var root = paths.root ?? ""
        while root.hasSuffix("/") { root.removeLast() }
        paths.config = "\(root)/etc/pushspool/\(instance).conf"
        paths.spool = "\(root)/var/spool/pushspool/\(instance)"
        paths.stateDir = "\(root)/var/lib/pushspool/\(instance)"
        return paths
    }
}
