@preconcurrency import Glibc

/// inotify(7): each call through `Posix.call`, so it retries `EINTR`, reads errno at once and
/// can be failed by the fault injector in tests. Case-less namespace (`Sendable`).
package enum Inotify {
    /// One decoded `struct inotify_event`. `Sendable` value.
    package struct Event: Sendable, Equatable {
        package var watch: Int32
        package var mask: UInt32
        /// The entry's name inside a watched directory, NUL padding removed; empty for an
        /// event about the watched object itself.
        package var name: [UInt8]

        package init(watch: Int32, mask: UInt32, name: [UInt8]) {
            self.watch = watch
            self.mask = mask
            self.name = name
        }

        /// `name` as text, when it is UTF-8.
        package var nameText: String? { String(validating: name, as: UTF8.self) }
        /// The watch is gone (`IN_IGNORED`: removed, its object deleted or unmounted).
        package var watchLost: Bool { mask & UInt32(IN_IGNORED) != 0 }
        /// The kernel dropped events (`IN_Q_OVERFLOW`).
        package var overflow: Bool { mask & UInt32(IN_Q_OVERFLOW) != 0 }
    }

    /// `struct inotify_event` without its name.
    package static let headerSize = 16

    /// `inotify_init1(2)` with `IN_NONBLOCK | IN_CLOEXEC`. See: man 2 inotify_init1 (EMFILE:
    /// fs.inotify.max_user_instances).
    package static func initialize() throws(SystemError) -> Int32 {
        try Posix.call("inotify_init1") { inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC)) }
    }

    /// `inotify_add_watch(2)`; returns the watch descriptor. See: man 2 inotify_add_watch
    /// (ENOENT: no such path; ENOSPC: fs.inotify.max_user_watches).
    package static func addWatch(_ fd: Int32, path: String, mask: UInt32) throws(SystemError) -> Int32 {
        try Posix.call("inotify_add_watch", path) { inotify_add_watch(fd, path, mask) }
    }

    /// Reads every queued event without blocking (the fd is `IN_NONBLOCK`); empty when none.
    /// At most `maxReads` reads, so a flood cannot keep the caller here.
    package static func readEvents(_ fd: Int32, maxReads: Int = 16) throws(SystemError) -> [Event] {
        var events: [Event] = []
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        for _ in 0..<maxReads {
            let result: Result<Int, SystemError> = buffer.withUnsafeMutableBytes { raw in
                Result { () throws(SystemError) in try Posix.read(fd, raw, subject: "inotify") }
            }
            let count: Int
            switch result {
            case .success(let n): count = n
            case .failure(let error) where error.errno == EAGAIN || error.errno == EWOULDBLOCK: return events
            case .failure(let error): throw error
            }
            if count <= 0 { break }
            buffer.withUnsafeBytes { events += decode(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
        }
        return events
    }

    /// Decodes the whole events in `buffer` (what `read(2)` on an inotify fd returned). Pure.
    package static func decode(_ buffer: UnsafeRawBufferPointer) -> [Event] {
        var events: [Event] = []
        var offset = 0
        while offset + headerSize <= buffer.count {
            let watch = buffer.loadUnaligned(fromByteOffset: offset, as: Int32.self)
            let mask = buffer.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
            let length = Int(buffer.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
            let nameStart = offset + headerSize
            guard nameStart + length <= buffer.count else { break }
            offset = nameStart + length
            // The kernel pads the name with NULs to an alignment boundary.
            let name = Array(UnsafeRawBufferPointer(rebasing: buffer[nameStart..<(nameStart + length)]).prefix { $0 != 0 })
            events.append(Event(watch: watch, mask: mask, name: name))
        }
        return events
    }
}

/// Lets a foreground command sleep until a directory's entries change, instead of looking
/// again on a timer: an entry created, renamed into it or closed after writing. When the
/// directory does not exist yet, its parent is watched for it to appear (a daemon that has not
/// started makes it later). Events queue from ``init(directory:)`` on, so a change between the
/// caller's look and its ``wait(timeout:)`` still wakes it.
///
/// Not `Sendable`: one thread owns the inotify fd.
package final class DirectoryChangeWaiter {
    private let fd: Int32
    private let directory: String
    private var attached = false

    package init(directory: String) throws(SystemError) {
        self.directory = directory
        fd = try Inotify.initialize()
        do {
            _ = try Inotify.addWatch(fd, path: PathText.parent(of: directory), mask: UInt32(IN_CREATE | IN_MOVED_TO))
        } catch {
            Posix.close(fd)
            throw error
        }
        attach()
    }

    deinit { Posix.close(fd) }

    private func attach() {
        guard !attached else { return }
        attached = (try? Inotify.addWatch(fd, path: directory, mask: UInt32(IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE | IN_DELETE))) != nil
    }

    /// Also wakes when a writer closes the file at `path` (`IN_CLOSE_WRITE`): a process that
    /// holds it open for writing closes it when it exits, however it ends (kill -9 included).
    /// Returns false when the watch cannot be added (the file is missing).
    @discardableResult
    package func watchClose(of path: String) -> Bool {
        (try? Inotify.addWatch(fd, path: path, mask: UInt32(IN_CLOSE_WRITE | IN_DELETE_SELF))) != nil
    }

    /// Also wakes when the file at `path` is written (`IN_MODIFY`, `IN_CLOSE_WRITE`): a mark
    /// its writer rewrites in place. Calling it again for the same file is cheap (the kernel
    /// keeps one watch per inode) and re-arms it after the file was replaced. Returns false
    /// when the watch cannot be added (the file is missing).
    @discardableResult
    package func watchWrites(of path: String) -> Bool {
        (try? Inotify.addWatch(fd, path: path, mask: UInt32(IN_MODIFY | IN_CLOSE_WRITE | IN_DELETE_SELF))) != nil
    }

    /// Returns once something changed (or may have: an overflow), or after `timeout` (`nil`:
    /// no limit). Spurious returns are allowed; callers look again.
    package func wait(timeout: Duration?) {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let milliseconds = timeout.map { Int32(clamping: max(0, $0.clampedMilliseconds)) } ?? -1
        _ = poll(&pfd, 1, milliseconds)
        _ = try? Inotify.readEvents(fd)
        attach()
    }
}
