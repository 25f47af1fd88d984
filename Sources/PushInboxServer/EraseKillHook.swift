@preconcurrency import Glibc

/// TEST HOOK, not an operator feature: `PUSHSPOOL_TEST_ERASE_KILL_AT=<step>` makes a
/// `Source=nats` pushspool-inbox SIGKILL itself when its stream follower reaches a named step
/// of an erasure record (`erasure-received`: everything before the record committed, nothing
/// erased; `erasure-applied`: erased, the index not yet past the record), so the crash tests
/// can stop it exactly there. Needs `PUSHSPOOL_ALLOW_FAULT_INJECTION=1` and a debug build,
/// like pushspoold's hook of the same name.
enum EraseKillHook {
    static let variable = "PUSHSPOOL_TEST_ERASE_KILL_AT"
    static let allowVariable = "PUSHSPOOL_ALLOW_FAULT_INJECTION"

    #if DEBUG
    static let compiledIn = true
    #else
    static let compiledIn = false
    #endif

    static func hook(environment: (String) -> String?) -> @Sendable (String) -> Void {
        guard compiledIn, environment(allowVariable) == "1", let spec = environment(variable), !spec.isEmpty else { return { _ in } }
        return { step in
            if step.hasPrefix(spec) { kill(getpid(), SIGKILL) }
        }
    }
}
