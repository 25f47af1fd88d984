@preconcurrency import Glibc
import PushSystem

/// Whether some process holds the journal's `LOCK` (pushspoold's writer, or an offline
/// `pushspoolctl` command), read from `/proc/locks`. Asking takes no lock itself: a probe with
/// `flock(2)` could make a pushspoold that is starting at that instant find the journal busy.
package enum JournalLockProbe {
    /// `true` while a process holds an `flock` on `directory/LOCK`; `false` when none does (or
    /// the journal has no `LOCK` yet); `nil` when it cannot be told (`/proc` not mounted).
    package static func isHeld(directory: String) -> Bool? {
        var info = stat()
        guard stat(directory + "/" + JournalFiles.lock, &info) == 0 else { return errno == ENOENT ? false : nil }
        guard let table = try? Posix.readFile("/proc/locks", limit: 64 << 20) else { return nil }
        return holds(table: table, device: info.st_dev, inode: info.st_ino)
    }

    /// Whether `/proc/locks` text names an active `FLOCK` on the file `device`/`inode`. Lines
    /// look like `3: FLOCK  ADVISORY  WRITE 4711 08:01:1234567 0 EOF`; those with `->` are
    /// processes waiting for the lock, not holding it.
    static func holds(table: [UInt8], device: dev_t, inode: ino_t) -> Bool {
        // glibc's major()/minor() are macros Swift does not import; this is their encoding.
        let dev = UInt64(device)
        let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & ~UInt64(0xfff))
        let minor = (dev & 0xff) | ((dev >> 12) & ~UInt64(0xff))
        let file = hex2(major) + ":" + hex2(minor) + ":" + String(inode)
        for line in table.split(separator: UInt8(ascii: "\n")) {
            let fields = line.split(separator: UInt8(ascii: " ")).map { String(decoding: $0, as: UTF8.self) }
            guard fields.count > 5, fields[1] == "FLOCK", fields.contains(file) else { continue }
            return true
        }
        return false
    }

    /// The kernel prints device numbers with `%02x`.
    private static func hex2(_ value: UInt64) -> String {
        let text = String(value, radix: 16)
        return text.count < 2 ? "0" + text : text
    }
}
