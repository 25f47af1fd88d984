// Shows why scripts/tsan.supp exists: ThreadSanitizer does not see Synchronization.Mutex on
// Linux (it locks with futex calls TSan does not intercept), so two threads that only touch
// state inside withLock are reported as a "Swift access race".
//   swiftc -sanitize=thread scripts/tsan/mutex-false-positive.swift -o /tmp/mfp && /tmp/mfp
// reports the race (exit 66 with halt_on_error=1) and prints 40000: no update was lost.
import Foundation
import Synchronization

struct State: ~Copyable {
    var count = 0
    var items: [Int] = []
}

final class Box: Sendable {
    let mutex = Mutex(State())
}

let box = Box()
let thread = Thread {
    for i in 0..<20_000 { box.mutex.withLock { $0.count += 1; $0.items.append(i) } }
}
thread.start()
for i in 0..<20_000 { box.mutex.withLock { $0.count += 1; $0.items.append(i) } }
while box.mutex.withLock({ $0.count }) < 40_000 { usleep(1000) }
print(box.mutex.withLock { $0.count })
