import Dispatch
import Foundation
import Synchronization
import Testing
@testable import PushSystem

@Suite struct SerialWorkerTests {
    /// The names of this process's threads, as the kernel shows them (`top -H`, gdb).
    static func threadNames() -> [String] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.compactMap { task in
            (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8))?
                .trimmingCharacters(in: .newlines)
        }
    }

    static func uniqueName() -> String {
        "sw-\(UInt16.random(in: .min ... .max))-\(UInt8.random(in: .min ... .max))"
    }

    @Test func jobsRunOneAtATimeInTheOrderGiven() {
        let worker = SerialWorker(name: Self.uniqueName())
        let seen = Locked<[Int]>([])
        let running = Atomic<Int>(0)
        let overlapped = Atomic<Bool>(false)
        for i in 0..<2_000 {
            worker.submit {
                if running.add(1, ordering: .relaxed).newValue > 1 { overlapped.store(true, ordering: .relaxed) }
                seen.withLock { $0.append(i) }
                running.subtract(1, ordering: .relaxed)
            }
        }
        worker.waitUntilIdle()
        #expect(seen.withLock { $0 } == Array(0..<2_000))
        let anyOverlap = overlapped.load(ordering: .relaxed)
        #expect(!anyOverlap)
        worker.stop()
    }

    @Test func theThreadCarriesItsNameAndStopJoinsIt() {
        let name = Self.uniqueName()
        let worker = SerialWorker(name: name)
        let inside = worker.sync { PosixThread.currentName() }
        #expect(inside == name)
        #expect(Self.threadNames().contains(name))
        worker.stop()
        // Joined: the kernel has no such thread any more when stop returns.
        #expect(!Self.threadNames().contains(name))
    }

    @Test func aLongNameIsCutToWholeCharactersWithinFifteenBytes() {
        let worker = SerialWorker(name: "ééééééééé-worker")
        let inside = worker.sync { PosixThread.currentName() }
        #expect(inside == "ééééééé")
        worker.stop()
    }

    @Test func stopRunsWhatWasQueuedFirst() {
        let worker = SerialWorker(name: Self.uniqueName())
        let gate = DispatchSemaphore(value: 0)
        let ran = Atomic<Int>(0)
        worker.submit { gate.wait() }
        for _ in 0..<100 { worker.submit { ran.add(1, ordering: .relaxed) } }
        gate.signal()
        worker.stop()
        let ranBeforeStop = ran.load(ordering: .relaxed)
        #expect(ranBeforeStop == 100)
        // After the stop nothing runs a submitted job, and sync runs on the caller.
        worker.submit { ran.add(1, ordering: .relaxed) }
        #expect(worker.sync { 7 } == 7)
        let ranAfterStop = ran.load(ordering: .relaxed)
        #expect(ranAfterStop == 100)
    }

    @Test func aDroppedWorkerEndsItsThread() {
        let name = Self.uniqueName()
        do {
            let worker = SerialWorker(name: name)
            worker.waitUntilIdle()
            #expect(Self.threadNames().contains(name))
        }
        #expect(!Self.threadNames().contains(name))
    }

    @Test func syncFromTheWorkersOwnJobDoesNotWaitForItself() {
        let worker = SerialWorker(name: Self.uniqueName())
        let answer = worker.sync { worker.sync { 42 } }
        #expect(answer == 42)
        worker.stop()
    }

    /// Blocking work runs on the worker's thread and its result comes back; once stopped, the
    /// worker runs no more, and `sync` runs the body on the caller instead of waiting forever.
    @Test func syncRunsTheBodyOnTheWorkerUntilItStops() {
        let worker = SerialWorker(name: Self.uniqueName())
        #expect(worker.sync { PosixThread.currentName() } == worker.name)
        worker.stop()
        let caller = PosixThread.currentName()
        #expect(worker.sync { PosixThread.currentName() } == caller)
    }
}
