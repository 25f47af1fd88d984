#if DEBUG
@preconcurrency import Glibc
import PushFetchClient
import PushSystem
internal import CSeccomp

/// TEST HOOK, debug builds only (release builds do not contain it): makes `pushspool-fetch`
/// attempt one system call its seccomp filter forbids, or one file write Landlock forbids,
/// right after installing the filter, so the tests can show both are in force. Armed only
/// when both variables are set:
///
///     PUSHSPOOL_ALLOW_FAULT_INJECTION=1
///     PUSHSPOOL_FETCH_TEST_SYSCALL=<execve|ptrace|mount|unshare|chdir|socket-netlink|clone-newuser|write-file:PATH>
///
/// `write-file:PATH` opens PATH for writing (created if missing, truncated) and writes a line.
/// A call on the kill list ends the process with SIGSYS inside the kernel. A call the filter
/// fails returns: the fetcher then exits with status `100 + errno` (101 for EPERM), or 99 if
/// the call succeeded (no filter).
struct SyscallProbe: Sendable, Equatable {
    enum Call: String, Sendable, CaseIterable {
        case execve, ptrace, mount, unshare, chdir
        case socketNetlink = "socket-netlink"
        case cloneNewuser = "clone-newuser"
        case writeFile = "write-file"
    }

    var call: Call
    /// The file `writeFile` writes.
    var path: String = ""

    /// CLONE_NEWUSER (linux/sched.h), which Glibc does not import.
    static let cloneNewUser = 0x1000_0000

    static let specVariable = "PUSHSPOOL_FETCH_TEST_SYSCALL"

    static func from(environment: (String) -> String?) throws(FetchProtocolError) -> SyscallProbe? {
        guard let spec = environment(specVariable), !spec.isEmpty,
              environment(FetchFault.allowVariable) == "1" else { return nil }
        let parts = spec.split(separator: ":", maxSplits: 1).map(String.init)
        guard let call = Call(rawValue: parts[0]), (call == .writeFile) == (parts.count == 2 && !parts[1].isEmpty) else {
            let known = Call.allCases.map { $0 == .writeFile ? "write-file:PATH" : $0.rawValue }.joined(separator: "|")
            throw FetchProtocolError(.invalidField, "\(specVariable)=\(spec): expected <\(known)>")
        }
        return SyscallProbe(call: call, path: parts.count == 2 ? parts[1] : "")
    }

    /// The call's number from libseccomp's table (Glibc does not import `SYS_*`).
    static func number(_ name: String) -> Int {
        Int(SyscallFilter.resolve(name) ?? -1)
    }

    /// Makes the call; returns only by exiting.
    func run() -> Never {
        let result: Int
        switch call {
        case .execve:
            let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/true"), nil]
            result = Int(execve("/bin/true", argv, [nil]))
        case .ptrace:
            result = cseccomp_raw_syscall(Self.number("ptrace"), 0 /* PTRACE_TRACEME */, 0, 0, 0, 0)
        case .mount:
            // A target that does not exist: should the filter be missing, the call fails with
            // ENOENT instead of mounting over a real directory (the test runs as root).
            result = Int(Glibc.mount("none", "/nonexistent/pushspool-fetch-probe", "tmpfs", 0, nil))
        case .unshare:
            result = cseccomp_raw_syscall(Self.number("unshare"), Self.cloneNewUser, 0, 0, 0, 0)
        case .chdir:
            result = Int(Glibc.chdir("/"))
        case .socketNetlink:
            let fd = socket(AF_NETLINK, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            result = fd >= 0 ? 0 : -1
        case .cloneNewuser:
            // The raw clone(2): a child in a new user namespace would exit at once.
            let pid = cseccomp_raw_syscall(Self.number("clone"), Self.cloneNewUser | Int(SIGCHLD), 0, 0, 0, 0)
            if pid == 0 { _exit(0) }
            result = pid > 0 ? 0 : -1
        case .writeFile:
            let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            if fd >= 0 {
                let line = Array("written by pushspool-fetch\n".utf8)
                result = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == line.count ? 0 : -1
            } else {
                result = -1
            }
        }
        let code = errno
        let text = result == -1 ? "failed with \(SystemError(call: call.rawValue, errno: code).errnoName)" : "succeeded"
        try? Posix.writeAll(2, Array("pushspool-fetch: test syscall \(call.rawValue) \(text)\n".utf8))
        _exit(result == -1 ? 100 + min(max(code, 0), 27) : 99)
    }
}
#endif
