@preconcurrency import Glibc
import PushSystem

/// What the watcher saw.
package enum WatchEvent: Sendable, Equatable {
    /// A file arrived in `incoming/` (`IN_MOVED_TO`) or a writer closed it (`IN_CLOSE_WRITE`).
    case file(String)
    /// The kernel's event queue overflowed (`IN_Q_OVERFLOW`): events were lost; rescan.
    case overflow
    /// `incoming/` itself was removed, moved or unmounted: the watch is dead. Recreate the
    /// layout, make a new watcher and rescan.
    case watchLost
    /// `Waker.wake()` was called (e.g. on SIGTERM) to end a wait early.
    case woken
}

/// Decodes the byte stream read from an inotify fd. Pure, so the overflow and lost-watch paths
/// are testable without filling the kernel's global queue.
package enum InotifyDecoder {
    package enum Decoded: Sendable, Equatable {
        case file(String)
        /// A name that is not valid UTF-8; the watcher renames it to an escaped form.
        case rawName([UInt8])
        case overflow
        case watchLost
    }

    /// Size of `struct inotify_event` without its name.
    package static let headerSize = 16

    /// Decodes all whole events in `buffer`, dropping dotfiles and `*.tmp`.
    package static func decode(_ buffer: UnsafeRawBufferPointer) -> [Decoded] {
        var events: [Decoded] = []
        var offset = 0
        while offset + headerSize <= buffer.count {
            let mask = buffer.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
            let length = Int(buffer.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
            let nameStart = offset + headerSize
            guard nameStart + length <= buffer.count else { break }
            offset = nameStart + length
            if mask & UInt32(IN_Q_OVERFLOW) != 0 {
                events.append(.overflow)
                continue
            }
            if mask & (UInt32(IN_IGNORED) | UInt32(IN_DELETE_SELF) | UInt32(IN_MOVE_SELF) | UInt32(IN_UNMOUNT)) != 0 {
                if events.last != .watchLost { events.append(.watchLost) }
                continue
            }
            guard mask & (UInt32(IN_MOVED_TO) | UInt32(IN_CLOSE_WRITE)) != 0, length > 0 else { continue }
            // The kernel pads the name with NULs to an alignment boundary.
            let nameBytes = UnsafeRawBufferPointer(rebasing: buffer[nameStart..<(nameStart + length)])
            let raw = Array(nameBytes.prefix(while: { $0 != 0 }))
            if let name = UTF8Text.string(raw) {
                if !SpoolName.isIgnored(name) { events.append(.file(name)) }
            } else if raw.first != UInt8(ascii: ".") {
                events.append(.rawName(raw))
            }
        }
        return events
    }

    /// Encodes one event as the kernel would (for tests).
    package static func encode(mask: UInt32, name: [UInt8], watch: Int32 = 1, cookie: UInt32 = 0) -> [UInt8] {
        let padded = name.isEmpty ? 0 : (name.count / 16 + 1) * 16
        var bytes: [UInt8] = []
        for value in [UInt32(bitPattern: watch), mask, cookie, UInt32(padded)] {
            withUnsafeBytes(of: value.littleEndian) { bytes += $0 }
        }
        bytes += name
        bytes += [UInt8](repeating: 0, count: padded - name.count)
        return bytes
    }
}

/// Ends an `IncomingWatcher.wait` early from any thread.
///
/// `Sendable`: writing to a pipe is thread-safe; it owns its own duplicates of both ends.
///
/// It keeps a duplicate of the read end too: a waker can outlive its watcher (a record that
/// fails after the ingest loop has returned still wakes it), and a write to a pipe nobody can
/// read raises SIGPIPE, which killed pushspoold in a CI run at a fatal journal error instead
/// of letting it exit 1. With the read end held, such a late wake-up lands in a buffer that
/// is never read (EAGAIN once full) and costs nothing.
package final class Waker: Sendable {
    private let fd: Int32
    private let readEnd: Int32

    init(fd: Int32, readEnd: Int32) {
        self.fd = fd
        self.readEnd = readEnd
    }

    deinit {
        Posix.close(fd)
        Posix.close(readEnd)
    }

    /// Makes the current or next `wait` return `.woken`.
    package func wake() {
        // EAGAIN (pipe full) means a wake-up is already pending: nothing to do.
        var one: UInt8 = 1
        _ = Glibc.write(fd, &one, 1)
    }
}

/// inotify on `incoming/` for `IN_MOVED_TO` and `IN_CLOSE_WRITE` (plus `IN_Q_OVERFLOW`).
///
/// Not `Sendable`: owns the inotify fd; use it from the ingest thread. `wait` blocks in
/// `poll(2)` at most `timeoutMillis`, so the caller's loop can also pet the watchdog and run
/// the periodic rescan. `makeWaker()` gives other threads a way to interrupt it.
package final class IncomingWatcher {
    private let inotifyFD: Int32
    private let wakeFD: Int32
    private let wakeWriteFD: Int32
    private let path: String
    private let buffer: UnsafeMutableRawBufferPointer

    /// Starts watching `layout.incoming`. Start the watch before the start-up rescan, so a file
    /// arriving during the scan is seen by at least one of them.
    package init(layout: SpoolLayout) throws(SpoolError) {
        path = layout.incoming
        let inotifyFD: Int32
        do {
            inotifyFD = try Inotify.initialize()
        } catch {
            throw SpoolError(error, while: "creating an inotify instance (raise fs.inotify.max_user_instances if EMFILE)")
        }
        let mask = UInt32(IN_MOVED_TO) | UInt32(IN_CLOSE_WRITE) | UInt32(IN_ONLYDIR) | UInt32(IN_DONT_FOLLOW)
            | UInt32(IN_EXCL_UNLINK) | UInt32(IN_DELETE_SELF) | UInt32(IN_MOVE_SELF)
        let incoming = layout.incoming
        do {
            _ = try Inotify.addWatch(inotifyFD, path: incoming, mask: mask)
        } catch {
            Posix.close(inotifyFD)
            throw SpoolError(error, while: "watching \(incoming) (raise fs.inotify.max_user_watches if ENOSPC)")
        }
        let pipeFDs: [Int32]
        do {
            let pipe = try Posix.selfPipe()
            pipeFDs = [pipe.read, pipe.write]
        } catch {
            Posix.close(inotifyFD)
            throw SpoolError(error, while: "creating the watcher's wake pipe")
        }
        let wakeFD = pipeFDs[0]
        let wakeWriteFD = pipeFDs[1]
        self.inotifyFD = inotifyFD
        self.wakeFD = wakeFD
        self.wakeWriteFD = wakeWriteFD
        // Room for thousands of events per read(2); the kernel never splits an event.
        buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 8)
    }

    deinit {
        buffer.deallocate()
        Posix.close(inotifyFD)
        Posix.close(wakeFD)
        Posix.close(wakeWriteFD)
    }

    /// The inotify fd, for callers that poll it together with other fds.
    package var fileDescriptor: Int32 { inotifyFD }

    /// A handle other threads can use to end a `wait` early.
    package func makeWaker() throws(SpoolError) -> Waker {
        let write: Int32
        do {
            write = try Posix.dupCloexec(wakeWriteFD)
        } catch {
            throw SpoolError(error, while: "duplicating the watcher's wake pipe")
        }
        do {
            return Waker(fd: write, readEnd: try Posix.dupCloexec(wakeFD))
        } catch {
            Posix.close(write)
            throw SpoolError(error, while: "duplicating the watcher's wake pipe")
        }
    }

    /// Waits up to `timeoutMillis` (`-1` = forever) for events and returns them, names
    /// deduplicated in arrival order. An empty array means the timeout passed. Reads at most
    /// 16 buffers per call so one call stays bounded under a flood; the rest waits for the next.
    package func wait(timeoutMillis: Int32) throws(SpoolError) -> [WatchEvent] {
        var fds = [pollfd(fd: inotifyFD, events: Int16(POLLIN), revents: 0), pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)]
        let ready: Int
        do {
            ready = try Posix.poll(&fds, timeoutMillis: timeoutMillis)
        } catch {
            throw SpoolError(error, while: "waiting for inotify events")
        }
        if ready == 0 { return [] }
        var events: [WatchEvent] = []
        if fds[1].revents != 0 {
            var drain = [UInt8](repeating: 0, count: 64)
            while Glibc.read(wakeFD, &drain, drain.count) > 0 {}
            events.append(.woken)
        }
        guard fds[0].revents != 0 else { return events }
        var seen = Set<String>()
        var overflowed = false
        var lost = false
        for _ in 0..<16 {
            let count: Int?
            do {
                count = try Posix.readNonBlocking(inotifyFD, buffer, subject: path)
            } catch {
                throw SpoolError(error, while: "reading inotify events for \(path)")
            }
            guard let count, count > 0 else { break }
            for decoded in InotifyDecoder.decode(UnsafeRawBufferPointer(rebasing: buffer[0..<count])) {
                switch decoded {
                case .file(let name):
                    if seen.insert(name).inserted { events.append(.file(name)) }
                case .rawName(let raw):
                    // The rename below fires IN_MOVED_TO for the escaped name as well; dedup
                    // within this call and a vanished claim absorb the repeat.
                    if let name = try repair(raw), seen.insert(name).inserted {
                        events.append(.file(name))
                    }
                case .overflow:
                    if !overflowed { events.append(.overflow) }
                    overflowed = true
                case .watchLost:
                    if !lost { events.append(.watchLost) }
                    lost = true
                }
            }
        }
        return events
    }

    /// Renames a non-UTF-8 entry to its escaped form. The directory is opened only for this
    /// (rare) case: an fd held open would keep a removed `incoming/` alive and suppress the
    /// `IN_DELETE_SELF` that reports it.
    private func repair(_ raw: [UInt8]) throws(SpoolError) -> String? {
        let fd: Int32
        do {
            fd = try Posix.openDirectory(path)
        } catch {
            throw SpoolError(error, while: "opening \(path)")
        }
        defer { Posix.close(fd) }
        return try Spool.repairName(directoryFD: fd, path: path, raw: raw, fileSystem: RealFileSystem())
    }
}
