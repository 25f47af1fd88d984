/// One name waiting for the ingest loop.
enum WorkItem: Sendable, Equatable {
    /// A file in `incoming/`, still to be claimed.
    case incoming(String)
    /// A file already in `processing/` (left by a previous run or handed back after ENOSPC).
    case processing(String)
}

/// A bounded FIFO of names. When it is full, inotify events are dropped and a rescan is
/// scheduled instead, so a million-file burst never becomes a million names in memory.
struct WorkQueue {
    static let limit = 65_536

    private var items: [WorkItem] = []
    private var head = 0

    var count: Int { items.count - head }
    var isEmpty: Bool { head == items.count }

    /// Appends `item`; false when the queue is full (the caller rescans later instead).
    mutating func push(_ item: WorkItem, force: Bool = false) -> Bool {
        guard force || count < Self.limit else { return false }
        items.append(item)
        return true
    }

    mutating func pop() -> WorkItem? {
        guard head < items.count else { return nil }
        let item = items[head]
        head += 1
        if head > 4096, head * 2 > items.count {
            items.removeFirst(head)
            head = 0
        }
        return item
    }
}
