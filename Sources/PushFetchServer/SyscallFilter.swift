@preconcurrency import Glibc
internal import CSeccomp
import PushSystem

/// The fetcher's own seccomp filter (libseccomp): an allow-list of the system calls that
/// libcurl, OpenSSL, libvips/GLib, glibc's threads and resolver and the Swift runtime were
/// measured to make (`strace -f -c` on the PushFetchTests and FetcherTests fetchers; see
/// docs/media-sandbox.md, "Privilege separation"). Everything else fails with EPERM, and the calls
/// only an attacker would make (`killed`) end the process with SIGSYS at once.
///
/// It is installed on every thread (TSYNC) after libcurl and libvips are initialised and
/// before the first request, whether pushspoold spawned the fetcher or systemd started it
/// (the unit's `SystemCallFilter=` stays; the kernel applies both).
package enum SyscallFilter {
    /// A rule's argument condition, in terms the policy tests can read without libseccomp.
    ///
    /// `Sendable`: a plain value.
    package enum Condition: Sendable, Equatable {
        /// No condition: the call is allowed whatever its arguments.
        case any
        /// Allowed when argument `index` equals one of `values`.
        case argumentIn(index: UInt32, values: [UInt64])
        /// Allowed when argument `index` has none of the bits in `mask`.
        case argumentClear(index: UInt32, mask: UInt64)
        /// Allowed when argument `index` equals the fetcher's own pid (signals to itself only).
        case argumentIsOwnPID(index: UInt32)
    }

    /// Namespace-creating clone(2) flags (linux/sched.h; Glibc does not import them without
    /// _GNU_SOURCE): no thread or fork of the fetcher may leave its namespaces (an
    /// unprivileged user namespace is the first step of many kernel exploits).
    package static let namespaceFlags: UInt64 = 0x0002_0000 /* NEWNS */ | 0x0200_0000 /* NEWCGROUP */
        | 0x0400_0000 /* NEWUTS */ | 0x0800_0000 /* NEWIPC */ | 0x1000_0000 /* NEWUSER */ | 0x2000_0000 /* NEWPID */
        | 0x4000_0000 /* NEWNET */ | 0x80 /* NEWTIME */

    /// prctl(2) options (linux/prctl.h) for thread names, which glibc and GLib set.
    static let prSetName: UInt64 = 15, prGetName: UInt64 = 16

    /// The allow-list. Names the running architecture does not have (e.g. `open` on arm64)
    /// are skipped.
    package static let allowed: [(name: String, condition: Condition)] = {
        var rules: [(String, Condition)] = []
        func allow(_ names: String...) { for name in names { rules.append((name, .any)) } }
        // Files: reading libraries and certificates, writing the media store (temp file,
        // fsync, rename), listing it for stale temp files.
        allow("read", "write", "readv", "writev", "pread64", "pwrite64", "lseek", "close", "close_range",
              "open", "openat", "fstat", "newfstatat", "stat", "lstat", "statx", "statfs", "fstatfs",
              "access", "faccessat", "faccessat2", "readlink", "readlinkat", "getcwd", "getdents64",
              "fsync", "fdatasync", "ftruncate", "fallocate", "fadvise64", "flock", "fchmod", "umask",
              "rename", "renameat", "renameat2", "unlink", "unlinkat", "mkdir", "mkdirat",
              "fcntl", "dup", "dup2", "dup3", "pipe", "pipe2", "eventfd2")
        // Memory and threads (glibc's pthread_create, GLib's and Dispatch's workers).
        allow("brk", "mmap", "munmap", "mprotect", "mremap", "madvise", "membarrier",
              "futex", "set_robust_list", "get_robust_list", "rseq", "set_tid_address",
              "exit", "exit_group", "pause", "sched_yield", "sched_getaffinity", "gettid", "getpid", "getppid",
              "restart_syscall")
        // Signals: the Swift runtime's and libcurl's handlers; raise() is tgkill to itself.
        allow("rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack")
        rules.append(("tgkill", .argumentIsOwnPID(index: 0)))
        // Time, waiting and readiness.
        allow("clock_gettime", "clock_getres", "gettimeofday", "time", "nanosleep", "clock_nanosleep",
              "poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait",
              "epoll_pwait", "epoll_pwait2")
        // Sockets: the connection to pushspoold, journald, downloads over IPv4/IPv6. No
        // netlink, packet or other families (glibc's getaddrinfo copes with netlink refused).
        rules.append(("socket", .argumentIn(index: 0, values: [UInt64(AF_UNIX), UInt64(AF_INET), UInt64(AF_INET6)])))
        allow("socketpair", "connect", "getsockopt", "setsockopt", "getsockname", "getpeername", "shutdown",
              "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg")
        // Process facts libraries ask for; thread names (PR_SET_NAME/PR_GET_NAME) only.
        allow("getrandom", "uname", "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid",
              "getrusage", "sysinfo", "prlimit64", "getrlimit", "sched_getparam", "sched_getscheduler")
        rules.append(("prctl", .argumentIn(index: 0, values: [prSetName, prGetName])))
        // Threads without new namespaces; clone3 is answered ENOSYS (below) so glibc uses this.
        rules.append(("clone", .argumentClear(index: 0, mask: namespaceFlags)))
        return rules
    }()

    /// Calls that end the process with SIGSYS: running programs, debugging or injecting into
    /// other processes, kernel modules and BPF, mounts and namespaces, kexec, keyrings.
    package static let killed: [String] = [
        "execve", "execveat", "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
        "mount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree",
        "mount_setattr", "unshare", "setns", "kexec_load", "kexec_file_load", "init_module", "finit_module",
        "delete_module", "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
        "open_by_handle_at", "name_to_handle_at", "iopl", "ioperm", "reboot", "swapon", "swapoff", "acct",
        "quotactl", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "uselib", "personality",
    ]

    /// Answered ENOSYS rather than EPERM, so that glibc takes its fallback: clone3's
    /// arguments sit in memory a filter cannot inspect, so threads are made with clone(2),
    /// whose flags it can.
    package static let unsupported: [String] = ["clone3"]

    /// Installs the filter on every thread of the process (`seccomp_load` with TSYNC; sets
    /// NO_NEW_PRIVS too). Returns how many system calls the allow-list names on this
    /// architecture. Wraps libseccomp, whose calls return `-errno`.
    @discardableResult
    package static func install() throws(SystemError) -> Int {
        guard let context = seccomp_init(cseccomp_act_errno(UInt16(EPERM))) else {
            throw SystemError(call: "seccomp_init", errno: ENOMEM)
        }
        defer { seccomp_release(context) }
        // TSYNC needs seccomp(2) itself; libseccomp answers EOPNOTSUPP when an outer filter
        // refuses it (systemd's @system-service does not include it; our units allow it).
        try check("seccomp_attr_set", "SCMP_FLTATR_CTL_TSYNC") { seccomp_attr_set(context, SCMP_FLTATR_CTL_TSYNC, 1) }
        try check("seccomp_attr_set", "SCMP_FLTATR_CTL_NNP") { seccomp_attr_set(context, SCMP_FLTATR_CTL_NNP, 1) }
        var count = 0
        for (name, condition) in allowed {
            guard let number = resolve(name) else { continue }
            // One comparison list per rule; libseccomp ORs the rules of one call.
            var alternatives: [[scmp_arg_cmp]] = []
            switch condition {
            case .any:
                alternatives = [[]]
            case .argumentIn(let index, let values):
                alternatives = values.map { [scmp_arg_cmp(arg: index, op: SCMP_CMP_EQ, datum_a: $0, datum_b: 0)] }
            case .argumentClear(let index, let mask):
                alternatives = [[scmp_arg_cmp(arg: index, op: SCMP_CMP_MASKED_EQ, datum_a: mask, datum_b: 0)]]
            case .argumentIsOwnPID(let index):
                alternatives = [[scmp_arg_cmp(arg: index, op: SCMP_CMP_EQ, datum_a: UInt64(clamping: Int64(getpid())), datum_b: 0)]]
            }
            for comparisons in alternatives {
                let size = UInt32(comparisons.count)
                try check("seccomp_rule_add_array", name) {
                    comparisons.withUnsafeBufferPointer { seccomp_rule_add_array(context, cseccomp_act_allow(), number, size, $0.baseAddress) }
                }
            }
            count += 1
        }
        for name in killed {
            guard let number = resolve(name) else { continue }
            try check("seccomp_rule_add_array", name) { seccomp_rule_add_array(context, cseccomp_act_kill_process(), number, 0, nil) }
        }
        for name in unsupported {
            guard let number = resolve(name) else { continue }
            try check("seccomp_rule_add_array", name) {
                seccomp_rule_add_array(context, cseccomp_act_errno(UInt16(ENOSYS)), number, 0, nil)
            }
        }
        try check("seccomp_load", "") { seccomp_load(context) }
        return count
    }

    /// Whether some seccomp filter already confines this process (PR_GET_SECCOMP = 2), e.g. a
    /// unit's `SystemCallFilter=`.
    package static var alreadyFiltered: Bool { cseccomp_current_mode() == 2 }

    /// The call's number on this architecture, nil when it has no such call.
    package static func resolve(_ name: String) -> Int32? {
        let number = seccomp_syscall_resolve_name(name)
        return number >= 0 ? number : nil
    }

    /// libseccomp's convention: 0 or a negative errno.
    private static func check(_ call: String, _ subject: String, _ body: () -> Int32) throws(SystemError) {
        let result = body()
        if result < 0 { throw SystemError(call: call, errno: -result, subject: subject) }
    }
}
