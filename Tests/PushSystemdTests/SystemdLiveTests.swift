import Foundation
import Testing
@testable import PushSystemd

/// Runs as the main process of a Type=notify unit under a real systemd user manager:
/// scripts/systemd-integration/notifier-live.sh starts the test binary through the
/// user-mode variant of pushspoold.service (WatchdogSec=2s) with PUSHSPOOL_LIVE_SYSTEMD=1
/// and checks from outside what systemd saw. Skipped everywhere else.
@Suite(.enabled(if: ProcessInfo.processInfo.environment["PUSHSPOOL_LIVE_SYSTEMD"] == "1",
                "runs as a systemd unit; use scripts/systemd-integration/notifier-live.sh"))
struct SystemdLiveTests {
    @Test func behavesLikeTheDaemonTowardsSystemd() throws {
        let notifier = SystemdNotifier()
        #expect(notifier.isSupervised)
        #expect(notifier.watchdogInterval == .seconds(1))
        // Under the manager, stderr is a journal stream and $JOURNAL_STREAM says so.
        let log = EventLog(identifier: "pushspoold-live")
        #expect(log.destination == .journal)

        // Short: systemd applies EXTEND_TIMEOUT_USEC to the watchdog timer too, and a long
        // extension would hide missing pings.
        notifier.extendTimeout(microseconds: 1_000_000)
        Thread.sleep(forTimeInterval: 0.3) // why: the scenario: a start that takes a while under the extension
        notifier.ready(status: LiveCounts(ingested: 0).statusLine)
        log.log(.ready, "pushspoold live test is ready", fields: [(EventField.pushID, "live-ready")])

        // Four seconds of "ingest loop", twice WatchdogSec=2s: only the pings keep us alive.
        let end = Date().addingTimeInterval(4)
        var turn = 0
        while Date() < end {
            turn += 1
            notifier.watchdogPing()
            notifier.status(LiveCounts(ingested: turn).statusLine)
            Thread.sleep(forTimeInterval: 0.05) // why: the simulated loop's pace between watchdog pings
        }
        notifier.status("live: loop finished", force: true)
        Thread.sleep(forTimeInterval: 0.5)  // why: the harness outside reads the status; no signal back to this process
        notifier.stopping(status: "live: stopping")
    }
}
