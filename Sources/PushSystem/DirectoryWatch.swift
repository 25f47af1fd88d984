@preconcurrency import Glibc

/// Calls `onChange` when an entry is created in or moved into a directory, from a thread that
/// blocks in poll(2) on inotify until then: for work another process hands over by a rename
/// (`pushspoolctl outbox retry` moving dead letters into `retry/`), so the one who does the
/// work need not look on a timer.
///
/// `Sendable`: the fds are written once at init and closed after the thread is joined.
package final class DirectoryWatch: Sendable {
    private let inotify: Int32
    private let stopRead: Int32
    private let stopWrite: Int32
    private let thread: pthread_t

    /// Watches `path` (which must exist). Throws when inotify or the thread cannot be had.
    package init(path: String, onChange: @escaping @Sendable () -> Void) throws(SystemError) {
        let inotify = try Inotify.initialize()
        let pipe: (read: Int32, write: Int32)
        do {
            _ = try Inotify.addWatch(inotify, path: path, mask: UInt32(IN_CREATE) | UInt32(IN_MOVED_TO) | UInt32(IN_CLOSE_WRITE))
            pipe = try Posix.selfPipe()
        } catch {
            Posix.close(inotify)
            throw error
        }
        let stopRead = pipe.read
        self.inotify = inotify
        self.stopRead = stopRead
        stopWrite = pipe.write
        do {
            thread = try PosixThread.spawn(name: "dir-watch") {
                var fds = [pollfd(fd: inotify, events: Int16(POLLIN), revents: 0), pollfd(fd: stopRead, events: Int16(POLLIN), revents: 0)]
                while true {
                    let ready = poll(&fds, 2, -1)
                    if ready < 0 && errno == EINTR { continue }
                    if ready < 0 || fds[1].revents != 0 { return }
                    if fds[0].revents != 0 {
                        let events = (try? Inotify.readEvents(inotify)) ?? []
                        if !events.isEmpty { onChange() }
                    }
                }
            }
        } catch {
            Posix.close(inotify)
            Posix.close(stopRead)
            Posix.close(pipe.write)
            throw error
        }
    }

    /// Ends the thread and closes the watch. Call once.
    package func stop() {
        var one: UInt8 = 1
        _ = Glibc.write(stopWrite, &one, 1)
        pthread_join(thread, nil)
        Posix.close(inotify)
        Posix.close(stopRead)
        Posix.close(stopWrite)
    }
}
