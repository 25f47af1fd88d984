@preconcurrency import Glibc

/// TEST HOOK, not an operator feature: `PUSHSPOOL_TEST_ERASE_KILL_AT=<step>` makes the process
/// SIGKILL itself when an erasure reaches a named step, so the crash tests can stop it exactly
/// there. pushspoold's eraser names `started`, `planned`, `journal segment-temp NAME`, `journal
/// segment-renamed NAME`, `journal before-checkpoint`, `journal-done`, `inbox-done`,
/// `outbox-done`, `quarantine-done`, `status-done`, `media-done`, `stream-done`,
/// `subject-removed`; a `Source=nats` pushspool-inbox's stream follower names
/// `erasure-received` (everything before the record committed, nothing erased) and
/// `erasure-applied` (erased, the index not yet past the record). A step matches when it
/// starts with the text given. Needs `PUSHSPOOL_ALLOW_FAULT_INJECTION=1` and a debug build:
/// a release build ignores both variables.
package enum EraseKillHook {
    package static let variable = "PUSHSPOOL_TEST_ERASE_KILL_AT"
    package static let allowVariable = "PUSHSPOOL_ALLOW_FAULT_INJECTION"

    #if DEBUG
    static let compiledIn = true
    #else
    static let compiledIn = false
    #endif

    package static func hook(environment: (String) -> String?) -> @Sendable (String) -> Void {
        guard compiledIn, environment(allowVariable) == "1", let spec = environment(variable), !spec.isEmpty else { return { _ in } }
        return { step in
            if step.hasPrefix(spec) { kill(getpid(), SIGKILL) }
        }
    }
}
