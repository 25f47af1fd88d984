@preconcurrency import Glibc
internal import CFetchShim
import PushSystem

/// The fetcher's Landlock self-restriction (landlock(7)): it runs as pushspoold's user, so
/// without it a compromised decoder could write the journal, the spool or the index by path.
/// Under Landlock it may write, create and remove only beneath the media store; it may read
/// (and map for execution) the system's libraries and configuration, and nothing else.
/// systemd's unit narrows the same view with its own mounts; this holds also when pushspoold
/// spawns the fetcher itself.
package enum Landlock {
    /// Filesystem access rights (linux/landlock.h). Debian 12's header stops at ABI 2, so the
    /// later ones are spelled out here.
    package struct Access: OptionSet, Sendable, Hashable {
        package var rawValue: UInt64
        package init(rawValue: UInt64) { self.rawValue = rawValue }

        package static let execute = Access(rawValue: 1 << 0)
        package static let writeFile = Access(rawValue: 1 << 1)
        package static let readFile = Access(rawValue: 1 << 2)
        package static let readDir = Access(rawValue: 1 << 3)
        package static let removeDir = Access(rawValue: 1 << 4)
        package static let removeFile = Access(rawValue: 1 << 5)
        package static let makeChar = Access(rawValue: 1 << 6)
        package static let makeDir = Access(rawValue: 1 << 7)
        package static let makeReg = Access(rawValue: 1 << 8)
        package static let makeSock = Access(rawValue: 1 << 9)
        package static let makeFifo = Access(rawValue: 1 << 10)
        package static let makeBlock = Access(rawValue: 1 << 11)
        package static let makeSym = Access(rawValue: 1 << 12)
        /// ABI 2: renaming or linking into another directory.
        package static let refer = Access(rawValue: 1 << 13)
        /// ABI 3: truncate(2), ftruncate(2), O_TRUNC.
        package static let truncate = Access(rawValue: 1 << 14)
        /// ABI 5: ioctl(2) on device files.
        package static let ioctlDev = Access(rawValue: 1 << 15)

        /// The rights that mean anything on a file (the rest apply to directories).
        package static let fileRights: Access = [.execute, .writeFile, .readFile, .truncate, .ioctlDev]

        /// Every filesystem right the kernel's Landlock `abi` knows. ABIs 4, 6 and 7 added
        /// network rules, scopes and logging flags, no filesystem rights.
        package static func handled(abi: Int) -> Access {
            var access = Access(rawValue: (1 << 13) - 1)
            if abi >= 2 { access.insert(.refer) }
            if abi >= 3 { access.insert(.truncate) }
            if abi >= 5 { access.insert(.ioctlDev) }
            return access
        }
    }

    /// One path and what may be done beneath it.
    ///
    /// `Sendable`: a plain value.
    package struct Rule: Sendable, Equatable {
        package var path: String
        package var access: Access

        package init(path: String, access: Access) {
            self.path = path
            self.access = access
        }
    }

    /// The fetcher's rules: read-only for the system's files, everything a store needs
    /// beneath `storeDirectory`. A path that does not exist here (`/lib32`, `/opt/swift` on a
    /// production host) is skipped when the rules are applied.
    package static func fetcherRules(storeDirectory: String, caFile: String?) -> [Rule] {
        let read: Access = [.readFile, .readDir, .execute]
        // Libraries (merged /usr or not), their modules (libvips's loaders, GLib's gconv, NSS),
        // /etc for resolv.conf, hosts, nsswitch.conf, the CA store and openssl.cnf, which
        // libraries read lazily on a first download.
        var rules = ["/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin", "/etc"].map { Rule(path: $0, access: read) }
        // The toolchain's runtime for a development build that is not linked statically (its
        // libraries are mapped at exec; nothing was seen to open them later, but a lazy load
        // must not fail only in development).
        rules.append(Rule(path: "/opt/swift", access: read))
        // Own process facts (/proc/self/status), the CPU count and NUMA nodes glibc, GLib and
        // libnuma (loaded with libvips's ImageMagick module) read.
        rules.append(Rule(path: "/proc/self", access: [.readFile, .readDir]))
        rules.append(Rule(path: "/sys/devices/system/cpu", access: [.readFile, .readDir]))
        rules.append(Rule(path: "/sys/devices/system/node", access: [.readFile, .readDir]))
        rules.append(Rule(path: "/dev/null", access: [.readFile, .writeFile]))
        rules.append(Rule(path: "/dev/urandom", access: .readFile))
        rules.append(Rule(path: "/dev/random", access: .readFile))
        if let caFile, !caFile.isEmpty { rules.append(Rule(path: caFile, access: .readFile)) }
        // The store: the temp file, fsync, the rename into a subdirectory (refer), thumbnails,
        // stale temp files removed. No devices, sockets, FIFOs, symlinks, execution.
        rules.append(Rule(path: storeDirectory, access: [.readFile, .readDir, .writeFile, .truncate, .removeFile, .removeDir,
                                                        .makeDir, .makeReg, .refer]))
        return rules
    }

    /// What `restrict` did.
    package enum Result: Sendable, Equatable {
        /// In force, with the kernel's ABI version.
        case restricted(abi: Int)
        /// The kernel has no Landlock, it is disabled, or an outer seccomp filter refuses it;
        /// the reason is for a warning.
        case unavailable(String)
    }

    /// Confines the calling thread, and every thread and process it creates afterwards, to
    /// `rules` (landlock_create_ruleset, landlock_add_rule, landlock_restrict_self). Must run
    /// while the process has one thread: Landlock applies to the calling thread only, unlike a
    /// seccomp filter with TSYNC; threads already running stay unconfined, so this throws
    /// `EBUSY` then. Must run before the seccomp filter, which does not allow these calls.
    package static func restrict(_ rules: [Rule]) throws(SystemError) -> Result {
        let abi = cfetch_landlock_abi()
        if abi < 0 {
            let code = errno
            if code == ENOSYS || code == EOPNOTSUPP || code == EPERM {
                return .unavailable(SystemError(call: "landlock_create_ruleset", errno: code).errnoName)
            }
            throw SystemError(call: "landlock_create_ruleset", errno: code, subject: "version")
        }
        let threads = threadCount()
        if threads != 1 && cfetch_sanitizer_runtime_present() == 0 {
            throw SystemError(call: "landlock_restrict_self", errno: EBUSY, subject: "\(threads) threads already run")
        }
        let handled = Access.handled(abi: Int(abi))
        let ruleset = try Posix.call("landlock_create_ruleset") { cfetch_landlock_create_ruleset(handled.rawValue) }
        defer { _ = Glibc.close(ruleset) }
        for rule in rules {
            let access = rule.access.intersection(handled)
            let result = cfetch_landlock_allow_path(ruleset, rule.path, access.rawValue, access.intersection(.fileRights).rawValue)
            if result < 0 {
                let code = errno
                // Not on this host (`/lib32`, `/opt/swift`): nothing there to allow.
                if code == ENOENT || code == ENOTDIR { continue }
                throw SystemError(call: "landlock_add_rule", errno: code, subject: rule.path)
            }
        }
        _ = try Posix.call("landlock_restrict_self") { cfetch_landlock_restrict_self(ruleset) }
        return .restricted(abi: Int(abi))
    }

    /// Entries in /proc/self/task; 0 when it cannot be read.
    static func threadCount() -> Int {
        guard let directory = opendir("/proc/self/task") else { return 0 }
        defer { closedir(directory) }
        var count = 0
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { count += 1 }
        }
        return count
    }
}
