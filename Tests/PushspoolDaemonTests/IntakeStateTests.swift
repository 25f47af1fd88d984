import Testing
@testable import PushspoolDaemon

/// The lifecycle and intake decisions, without a process, a spool or a clock.
@Suite struct IntakeStateTests {
    @Test func readyComesOnceWhenIntakeIsArmedNotWhenTheBacklogIsDone() {
        var state = IntakeState(capacityLimit: 4)
        #expect(state.stage == .recovering)
        let result1 = state.intakeArmed()
        #expect(result1)
        #expect(state.stage == .running)
        #expect(!state.startupScanComplete)
        #expect(state.statusPrefix == "draining start-up backlog: ")
        // A rebuilt feed (incoming/ replaced) arms intake again: READY is not sent twice.
        let result2 = state.intakeArmed()
        #expect(!result2)
        state.feedDelivered(scanCompleted: true)
        #expect(state.statusPrefix == "")
    }

    @Test func aFailedOrUnfinishedFeedIsNotAFinishedScan() {
        var state = IntakeState(capacityLimit: 4)
        _ = state.intakeArmed()
        state.feedDelivered(scanCompleted: false)
        #expect(!state.startupScanComplete)
        #expect(state.statusPrefix.hasPrefix("draining start-up backlog"))
    }

    @Test func capacityIsBoundedAndAFinishWakesAWaitingAdmitter() {
        var state = IntakeState(capacityLimit: 2)
        _ = state.intakeArmed()
        let result3 = state.admit()
        #expect(result3 == .granted)
        let result4 = state.admit()
        #expect(result4 == .granted)
        let result5 = state.admit()
        #expect(result5 == .full)
        #expect(state.inFlight == 2)
        let result6 = state.finish()
        #expect(result6 == .wakeAdmitter)          // the admitter waits: wake it
        let result7 = state.finish()
        #expect(result7.isEmpty)         // nobody waits any more
        #expect(state.inFlight == 0)
    }

    @Test func aFullAdmitterIsWokenOnceHalfTheSlotsAreFreeNotForEachSlot() {
        var state = IntakeState(capacityLimit: 8)
        _ = state.intakeArmed()
        for _ in 0..<8 { #expect(state.admit() == .granted) }
        #expect(state.admit() == .full)
        // Woken per slot, a burst cost one wake-up, one hand-off and one chunk of one file each.
        for inFlight in stride(from: 7, to: 4, by: -1) {
            #expect(state.finish().isEmpty, "no wake-up at \(inFlight) in flight")
        }
        #expect(state.finish() == .wakeAdmitter)
        #expect(state.inFlight == 4)  // half of 8
        #expect(state.finish().isEmpty, "woken once")
    }

    @Test func aWaitForAnyEndIsWokenByTheNextFinishEvenWhenTheSlotsAreFull() {
        // The drain and a leftover processed alone wait for one end, not for room.
        var state = IntakeState(capacityLimit: 8)
        _ = state.intakeArmed()
        for _ in 0..<8 { #expect(state.admit() == .granted) }
        #expect(state.admit() == .full)
        state.awaitFinish()
        #expect(state.finish() == .wakeAdmitter)
        #expect(state.finish().isEmpty)
    }

    @Test func stoppingOrFailedAdmitsNothingAndTakesNoSlot() {
        var state = IntakeState(capacityLimit: 2)
        _ = state.intakeArmed()
        let result8 = state.requestStop()
        #expect(result8 == .wakeLoop)
        let result9 = state.requestStop()
        #expect(result9.isEmpty)
        let result10 = state.admit()
        #expect(result10 == .refused)
        let result11 = state.admitLeftover()
        #expect(!result11)
        #expect(state.inFlight == 0)

        var failed = IntakeState(capacityLimit: 2)
        _ = failed.intakeArmed()
        let result12 = failed.admit()
        #expect(result12 == .granted)
        _ = failed.journalFailed(.init(errno: 5, message: "EIO"))
        _ = failed.journalFailed(.init(errno: 28, message: "later"))
        #expect(failed.failure == .init(errno: 5, message: "EIO"))
        let result13 = failed.admit()
        #expect(result13 == .refused)
        #expect(failed.inFlight == 1)
    }

    @Test func aFullDiskDoesNotStopAStopFromClosing() {
        // Regression: the old loop broke out of its wait on `isFatal || stop && paused` and
        // then released a slot it never took. Here a refusal never takes a slot, and a drain
        // with a paused journal closes instead of waiting for files that cannot finish.
        var state = IntakeState(capacityLimit: 1)
        _ = state.intakeArmed()
        let result14 = state.admit()
        #expect(result14 == .granted)
        state.journalPausedChanged(true)
        _ = state.requestStop()
        let result15 = state.admit()
        #expect(result15 == .refused)
        #expect(state.inFlight == 1)
        let result16 = state.drainStep(deadlinePassed: false)
        #expect(result16 == .close(leftInFlight: 1))
        #expect(state.stage == .stopped)
    }

    @Test func drainWaitsForInFlightFilesUntilTheDeadline() {
        var state = IntakeState(capacityLimit: 4)
        _ = state.intakeArmed()
        let result17 = state.admit()
        #expect(result17 == .granted)
        _ = state.requestStop()
        let result18 = state.drainStep(deadlinePassed: false)
        #expect(result18 == .wait)
        let result19 = state.drainStep(deadlinePassed: true)
        #expect(result19 == .close(leftInFlight: 1))

        var clean = IntakeState(capacityLimit: 4)
        _ = clean.intakeArmed()
        let result20 = clean.admit()
        #expect(result20 == .granted)
        _ = clean.requestStop()
        _ = clean.finish()
        let result21 = clean.drainStep(deadlinePassed: false)
        #expect(result21 == .close(leftInFlight: 0))

        var failing = IntakeState(capacityLimit: 4)
        _ = failing.intakeArmed()
        _ = failing.requestStop()
        _ = failing.journalFailed(.init(errno: 5, message: "EIO"))
        let result22 = failing.drainStep(deadlinePassed: false)
        #expect(result22 == .fail(.init(errno: 5, message: "EIO")))
    }

    @Test func handedBackFilesWaitWhileTheJournalIsPaused() {
        var state = IntakeState(capacityLimit: 4)
        _ = state.intakeArmed()
        let result30 = state.admit()
        #expect(result30 == .granted)
        let result31 = state.handBack("f1")
        // Nobody waits for a slot; the loop is woken to take the file again.
        #expect(result31 == .wakeLoop)
        #expect(state.inFlight == 0)
        state.journalPausedChanged(true)
        let result32 = state.takeHandedBack()
        #expect(result32.isEmpty)
        state.journalPausedChanged(false)
        let result33 = state.takeHandedBack()
        #expect(result33 == ["f1"])
        let result34 = state.takeHandedBack()
        #expect(result34.isEmpty)
    }

    @Test func reloadIsTakenOnceAndOnlyWhileRunning() {
        var state = IntakeState(capacityLimit: 4)
        _ = state.intakeArmed()
        _ = state.requestReload()
        let result35 = state.takeReload()
        #expect(result35)
        let result36 = state.takeReload()
        #expect(!result36)
        _ = state.requestStop()
        _ = state.requestReload()
        let result37 = state.takeReload()
        #expect(!result37)
    }
}

/// Which leftovers are processed alone, and which are proven to have crashed the daemon.
@Suite struct CrashTriageTests {
    @Test func afterACleanExitLeftoversAreProcessedAsUsual() {
        let plan = CrashTriage(uncleanEnds: [Array("a".utf8): 5]).plan(previous: .clean, leftovers: ["a", "b"])
        #expect(plan.normal == ["a", "b"])
        #expect(plan.isolate.isEmpty && plan.quarantine.isEmpty)
        #expect(plan.next.uncleanEnds.isEmpty)
    }

    @Test func aKillIsCountedAndASecondOneIsolates() {
        let first = CrashTriage().plan(previous: .killed, leftovers: ["a", "b"])
        #expect(first.normal == ["a", "b"])
        #expect(first.next.uncleanEnds[Array("a".utf8)] == 1)
        let second = first.next.plan(previous: .killed, leftovers: ["b", "c"])
        #expect(second.isolate == ["b"])
        #expect(second.normal == ["c"])
        #expect(second.next.uncleanEnds[Array("a".utf8)] == nil)   // finished: forgotten
    }

    @Test func aCrashSignalIsolatesAtOnceAndBlamesOnlyTheFileThatWasAlone() {
        let afterCrash = CrashTriage().plan(previous: .crashed(isolated: nil), leftovers: ["a", "b"])
        #expect(afterCrash.isolate == ["a", "b"])
        #expect(afterCrash.quarantine.isEmpty)
        let afterIsolatedCrash = afterCrash.next.plan(previous: .crashed(isolated: "b"), leftovers: ["a", "b"])
        #expect(afterIsolatedCrash.quarantine == ["b"])
        #expect(afterIsolatedCrash.isolate == ["a"])
        // A kill while a file was alone blames nobody.
        let killed = afterCrash.next.plan(previous: .killed, leftovers: ["b"])
        #expect(killed.quarantine.isEmpty)
        #expect(killed.isolate == ["b"])
    }

    @Test func namesAreComparedAsBytes() {
        let nfc = "caf\u{E9}", nfd = "cafe\u{301}"
        let plan = CrashTriage().plan(previous: .crashed(isolated: nfc), leftovers: [nfd, nfc])
        #expect(plan.quarantine == [nfc])
        #expect(plan.isolate == [nfd])
    }

    @Test func theRunFileAndTheSuspectsFileReadBackWithoutTrapping() {
        #expect(CrashGuard.previousEnd(runFile: nil) == .clean)
        #expect(CrashGuard.previousEnd(runFile: []) == .killed)
        #expect(CrashGuard.previousEnd(runFile: Array("R".utf8)) == .killed)
        #expect(CrashGuard.previousEnd(runFile: Array("Rx.json".utf8)) == .killed)
        #expect(CrashGuard.previousEnd(runFile: Array("C".utf8)) == .crashed(isolated: nil))
        #expect(CrashGuard.previousEnd(runFile: Array("Cx.json".utf8)) == .crashed(isolated: "x.json"))
        let triage = CrashTriage(uncleanEnds: [Array("a\"b".utf8): 2, Array("c".utf8): 1])
        #expect(CrashGuard.decodeSuspects(CrashGuard.encodeSuspects(triage)) == triage)
        for hostile in ["", "{", "[]", "{\"suspects\":[{\"name\":\"a\",\"uncleanEnds\":99999999999999999999999}]}",
                        "{\"suspects\":[{\"name\":\"a\",\"uncleanEnds\":-1}]}", "{\"suspects\":7}"] {
            #expect(CrashGuard.decodeSuspects(Array(hostile.utf8)).uncleanEnds.isEmpty)
        }
    }

    /// Each phase carries its own data: a failure exists only in the failed phase, a pending
    /// reload only while running, and both go with the phase they belonged to.
    @Test func phasesCarryTheirOwnData() {
        var state = IntakeState(capacityLimit: 2)
        let step1 = state.requestReload()
        #expect(step1.isEmpty)    // recovering: no loop to wake yet, the request is kept
        #expect(state.phase == .recovering(reloadPending: true))
        _ = state.intakeArmed()
        #expect(state.phase == .running(startupScanComplete: false, reloadPending: true))
        let step2 = state.requestReload()
        #expect(step2 == .wakeLoop)
        #expect(state.phase == .running(startupScanComplete: false, reloadPending: true))
        state.feedDelivered(scanCompleted: true)
        #expect(state.phase == .running(startupScanComplete: true, reloadPending: true))
        let step3 = state.takeReload()
        #expect(step3)
        let again = state.takeReload()
        #expect(!again)
        let step4 = state.requestStop()
        #expect(step4 == .wakeLoop)
        let step5 = state.requestReload()
        #expect(step5.isEmpty)    // draining: a reload has nowhere to go
        #expect(!state.startupScanComplete)
        let failure = IntakeState.Failure(errno: 5, message: "EIO")
        let step6 = state.journalFailed(failure)
        #expect(step6 == .wakeLoop)
        #expect(state.phase == .failed(failure))
        let step7 = state.journalFailed(.init(errno: 28, message: "later"))
        #expect(step7.isEmpty)
        #expect(state.failure == failure)          // the first failure wins
    }
}

/// A follower that crashes the process is counted by its crash tag and parked after two
/// crashes; a deliberate exit forgets the counts.
@Suite struct FollowerCrashCountsTests {
    /// The run file as the crash handler leaves it: the mark, the isolated file's name, zeros
    /// up to the tag's offset, the crashing thread's tag.
    static func runFile(isolated: String = "", tag: String?) -> [UInt8] {
        var bytes = Array("C".utf8) + Array(isolated.utf8)
        guard let tag else { return bytes }
        bytes += [UInt8](repeating: 0, count: 4096 - bytes.count)
        return bytes + Array(tag.utf8)
    }

    @Test func theCrashingThreadsTagIsReadBesideTheIsolatedName() {
        let file = Self.runFile(isolated: "a.json", tag: "follower erase")
        #expect(CrashGuard.previousEnd(runFile: file) == .crashed(isolated: "a.json"))
        #expect(CrashGuard.crashedThread(runFile: file) == "follower erase")
        #expect(CrashGuard.crashedThread(runFile: Self.runFile(tag: nil)) == nil)
        #expect(CrashGuard.previousEnd(runFile: Self.runFile(tag: "follower inbox")) == .crashed(isolated: nil))
        // A killed run's file never names a crashing thread.
        #expect(CrashGuard.crashedThread(runFile: Array("R".utf8) + [UInt8](repeating: 0, count: 4095) + Array("follower erase".utf8)) == nil)
    }

    @Test func twoCrashesParkAFollowerAndACleanExitForgets() {
        var counts = FollowerCrashCounts()
        counts = counts.next(previous: .crashed(isolated: nil), crashedThread: "follower erase")
        #expect(counts.parked.isEmpty)
        // A kill (OOM, SIGKILL) says nothing about a follower: the count stays.
        counts = counts.next(previous: .killed, crashedThread: nil)
        #expect(counts.crashes == ["erase": 1])
        // A crash on an untagged thread (ingest) counts for no follower.
        counts = counts.next(previous: .crashed(isolated: "x.json"), crashedThread: nil)
        counts = counts.next(previous: .crashed(isolated: nil), crashedThread: "follower erase")
        #expect(counts.parked == ["erase"])
        #expect(FollowerCrashCounts.decode(counts.encoded()) == counts)
        #expect(counts.next(previous: .clean, crashedThread: nil) == FollowerCrashCounts())
        #expect(FollowerCrashCounts.decode(Array(#"{"crashes":{"erase":-3,"x":"2","y":1e99}}"#.utf8)) == FollowerCrashCounts())
    }
}
