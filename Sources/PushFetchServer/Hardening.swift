@preconcurrency import Glibc
internal import CFetchShim
import PushSystem

/// What `pushspool-fetch` does to itself before it reads its first message, so that a
/// compromised decoder inherits as little as possible. systemd's unit adds the file-system,
/// namespace and system-call restrictions (see systemd/pushspool-fetch@.service); these hold
/// also when pushspoold spawns the fetcher itself.
package enum Hardening {
    /// Limits for the fetcher process.
    ///
    /// `Sendable`: a plain value.
    package struct Limits: Sendable, Equatable {
        /// RLIMIT_AS: address space. Decoding a 40-megapixel image needs a few hundred MB;
        /// past this an allocation fails (or the kernel kills it) instead of the host swapping.
        package var addressSpaceBytes: UInt64 = 2 << 30
        /// RLIMIT_NOFILE: one fd per transfer plus files being stored.
        package var openFiles: UInt64 = 1024

        package init() {}
    }

    /// NO_NEW_PRIVS (no set-uid gain through exec), not dumpable (no core with image bytes, no
    /// ptrace by other processes of the same user), SIGKILL when the parent dies (a spawned
    /// fetcher never outlives pushspoold), no core files, and `limits`.
    package static func apply(_ limits: Limits, dieWithParent: Bool) throws(SystemError) {
        _ = try Posix.call("prctl", "PR_SET_NO_NEW_PRIVS") { cfetch_no_new_privs() }
        _ = try Posix.call("prctl", "PR_SET_DUMPABLE") { cfetch_set_dumpable(0) }
        if dieWithParent {
            _ = try Posix.call("prctl", "PR_SET_PDEATHSIG") { cfetch_parent_death_signal(SIGKILL) }
        }
        try setLimit(RLIMIT_CORE, 0, "RLIMIT_CORE")
        // A sanitizer build (the tests under scripts/sanitizers.sh) reserves terabytes of
        // shadow address space: RLIMIT_AS would fail its first allocation, so it goes without.
        if cfetch_sanitizer_runtime_present() == 0 {
            try setLimit(RLIMIT_AS, limits.addressSpaceBytes, "RLIMIT_AS")
        }
        try setLimit(RLIMIT_NOFILE, limits.openFiles, "RLIMIT_NOFILE")
    }

    /// RLIMIT_FSIZE once the largest download is known: no file the fetcher writes can grow
    /// past the body limit plus room for a thumbnail, whatever the downloader's own checks do.
    package static func limitFileSize(maxBytes: Int64) throws(SystemError) {
        let limit = UInt64(clamping: maxBytes).addingReportingOverflow(64 << 20)
        try setLimit(RLIMIT_FSIZE, limit.overflow ? UInt64.max : limit.partialValue, "RLIMIT_FSIZE")
    }

    private static func setLimit(_ resource: __rlimit_resource, _ value: UInt64, _ name: String) throws(SystemError) {
        let resource = __rlimit_resource_t(resource.rawValue)
        var current = rlimit()
        _ = try Posix.call("getrlimit", name) { getrlimit(resource, &current) }
        // Never raise: only an unprivileged lowering, and never above the hard limit.
        let wanted = min(rlim_t(value), current.rlim_max)
        var limit = rlimit(rlim_cur: wanted, rlim_max: wanted)
        _ = try Posix.call("setrlimit", name) { setrlimit(resource, &limit) }
    }
}
