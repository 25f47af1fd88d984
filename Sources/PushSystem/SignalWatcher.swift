@preconcurrency import Glibc
import Synchronization

/// SIGTERM, SIGINT and SIGHUP taken synchronously on a thread of their own with
/// `sigwaitinfo(2)`, while every other thread keeps them blocked. The one signal watcher of
/// pushspoold and pushspool-inbox.
///
/// Why not a dispatch signal source after `signal(SIG_IGN)`: the source is registered
/// asynchronously, and until it is, the signal is ignored — the kernel drops an ignored,
/// unblocked signal when it is generated, so a SIGTERM in that window was lost and the daemon
/// went on idling until a second one (seen twice in the benchmark). On Linux libdispatch also
/// forwards a signal that lands on an unblocked thread with `pthread_kill` to the thread that
/// registered the source, which need not exist any more. A blocked signal is never dropped: it
/// stays pending until this thread takes it, however early it came.
///
/// Why no timeout: the thread used to wake four times a second to look at a stop flag. It now
/// sleeps until a signal; `stop()` sends the thread itself `SIGUSR2` (blocked like the others,
/// so a stray one from outside is taken here and ignored).
///
/// `Sendable`: the stop flag is atomic; the thread handle is written once in `init`.
package final class SignalWatcher: Sendable {
    package static let handled: [Int32] = [SIGTERM, SIGINT, SIGHUP]
    /// Ends the wait when `stop()` is called.
    private static let stopSignal = SIGUSR2

    private let stopping: Stopping
    private let thread: pthread_t

    private final class Stopping: Sendable {
        let flag = Atomic<Bool>(false)
    }

    /// Blocks the handled signals in the calling thread; threads it creates afterwards inherit
    /// the mask. The executables call it first thing in `main`, before any other thread
    /// exists, so a signal that comes during start-up waits for the watcher instead of killing
    /// the process half-way through recovery or being lost.
    package static func blockInThisThread() {
        var set = signalSet()
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    private static func signalSet() -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for signalNumber in handled + [stopSignal] { sigaddset(&set, signalNumber) }
        return set
    }

    /// Starts the watching thread; `onSignal` runs on it for each signal taken.
    ///
    /// In a process whose other threads were made before `blockInThisThread` (a test host
    /// running the daemon in process), a signal may still land on a thread that has it
    /// unblocked: a handler blocks it there and raises it again for the whole process, so it
    /// ends pending for this thread rather than killing the process or vanishing.
    package init(onSignal: @escaping @Sendable (Int32) -> Void) throws(SystemError) {
        Self.blockInThisThread()
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { signalNumber in
            var set = sigset_t()
            sigemptyset(&set)
            sigaddset(&set, signalNumber)
            pthread_sigmask(SIG_BLOCK, &set, nil)
            kill(getpid(), signalNumber)
        }
        action.sa_flags = SA_RESTART
        for signalNumber in Self.handled { sigaction(signalNumber, &action, nil) }
        let stopping = Stopping()
        self.stopping = stopping
        thread = try PosixThread.spawn(name: "signals") {
            var set = Self.signalSet()
            while !stopping.flag.load(ordering: .acquiring) {
                var info = siginfo_t()
                let signalNumber = sigwaitinfo(&set, &info)
                if signalNumber > 0 && signalNumber != Self.stopSignal { onSignal(signalNumber) }
            }
        }
    }

    /// Ends the watching thread; signals that come later stay pending (blocked), as they were
    /// before the watcher started. Joins the thread: no `onSignal` runs after this returns.
    /// Call once.
    package func stop() {
        stopping.flag.store(true, ordering: .releasing)
        pthread_kill(thread, Self.stopSignal)
        pthread_join(thread, nil)
    }
}
