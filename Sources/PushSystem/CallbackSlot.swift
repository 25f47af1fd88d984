/// One replaceable callback, set by one component and called from any thread by another
/// (a follower's wake-up, a status observer, retention's floor).
///
/// Why not a `Locked` whose state is the closure: when a closure (or an optional one) is the
/// generic `State` itself, Swift (6.3 here) reabstracts it on the way into `withLock`'s
/// `inout` and again on the way back, and writes the wrapped closure back into the lock. Every
/// read adds two thunks: after n calls, one call runs 2n nested thunks, so the cost grows with
/// the number of calls and the thread's stack overflows in the end (the exporter's PubAck
/// handler spent 10 % of a core in them after 10,000 acks). Inside a struct field the closure
/// keeps its own abstraction and nothing is rewrapped: ``CallbackSlotTests`` check the depth.
///
/// `Sendable`: the closure is reached only under the lock, and called outside it.
package final class CallbackSlot<Output>: Sendable {
    private struct Box { var body: (@Sendable () -> Output)? }
    private let box = Locked<Box>(Box(body: nil))

    package init(_ body: (@Sendable () -> Output)? = nil) { box.withLock { $0.body = body } }

    /// Replaces the callback (`nil` clears it).
    package func set(_ body: (@Sendable () -> Output)?) { box.withLock { $0.body = body } }

    /// The callback now, to call outside any lock of the caller's or to hand on.
    package var current: (@Sendable () -> Output)? { box.withLock { $0.body } }

    /// Calls the callback outside the lock; `nil` when none is set.
    @discardableResult
    package func callAsFunction() -> Output? { current?() }
}
