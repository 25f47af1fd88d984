@preconcurrency import Glibc
import PushSystem

/// What a power cut does to data and directory entries that were not synced.
package enum DamageModel: String, Sendable, CaseIterable {
    /// Only synced data and committed directory operations survive.
    case drop
    /// Everything written survives (the page cache happened to reach the disk).
    case keep
    /// A file keeps its new length but its unsynced bytes read as zeros (ext4 writeback);
    /// a seeded prefix of the uncommitted directory operations survives.
    case zero
    /// A file's unsynced region is cut at a seeded length and partly filled with garbage;
    /// a seeded prefix of the uncommitted directory operations survives.
    case scramble
}

/// An in-memory file system behind the `FileSystem` seam that keeps unsynced data apart from
/// synced data, so a test can "crash" it at any point and see what a power cut would leave.
///
/// Data: each file has its current bytes and the bytes as of its last `fsync`/`fdatasync`.
/// Directory entries: creations, renames, unlinks and mkdirs go to an ordered log of
/// uncommitted operations; `fsync` of a directory commits the log up to the last operation
/// touching that directory (a journaling file system commits in order). A rename not followed
/// by an `fsync` of its directory can therefore be lost; a file `fsync` does not make its name
/// durable.
///
/// Faults: `FaultRule`s fail the N-th matching call with an errno (once or from then on) or
/// make a write short. `crashAfter(mutations:)` makes the machine "die" after the N-th
/// mutating call: that call and every later one fail with EIO and change nothing.
///
/// `Sendable`: all state is behind a lock.
package final class SimulatedFileSystem: FileSystem {
    /// One fault: the `nth` (0-based) call whose name is in `calls` (empty = any call) fails
    /// with `errno`; `persistent` = that call and every later matching one. `short` instead
    /// makes a matching write or pwrite write half its bytes (at least 1) and succeed.
    package struct FaultRule: Sendable {
        package var calls: Set<String>
        package var nth: Int
        package var errno: Int32
        package var persistent: Bool
        package var short: Bool

        package init(calls: Set<String> = [], nth: Int, errno: Int32 = EIO, persistent: Bool = false, short: Bool = false) {
            self.calls = calls
            self.nth = nth
            self.errno = errno
            self.persistent = persistent
            self.short = short
        }
    }

    struct Inode: Sendable {
        var isDirectory: Bool
        var data: [UInt8] = []
        var synced: [UInt8] = []
        /// Current entries (directories only).
        var entries: [String: Int] = [:]
        /// Entries as of the committed directory operations.
        var committedEntries: [String: Int] = [:]
    }

    enum MetaOp: Sendable {
        case link(dir: Int, name: String, inode: Int)
        case unlink(dir: Int, name: String)
        case rename(fromDir: Int, from: String, toDir: Int, to: String, inode: Int)

        func touches(_ dir: Int) -> Bool {
            switch self {
            case .link(let d, _, _), .unlink(let d, _): return d == dir
            case .rename(let a, _, let b, _, _): return a == dir || b == dir
            }
        }

        func apply(to inodes: inout [Int: Inode]) {
            switch self {
            case .link(let dir, let name, let inode): inodes[dir]?.committedEntries[name] = inode
            case .unlink(let dir, let name): inodes[dir]?.committedEntries[name] = nil
            case .rename(let fromDir, let from, let toDir, let to, let inode):
                inodes[fromDir]?.committedEntries[from] = nil
                inodes[toDir]?.committedEntries[to] = inode
            }
        }
    }

    /// The part of the state a crash image is made from (no open files).
    package struct Image: Sendable {
        var inodes: [Int: Inode] = [0: Inode(isDirectory: true)]
        var log: [MetaOp] = []
        var nextInode = 1
    }

    struct OpenFile {
        var inode: Int
        var offset: Int64 = 0
        var append: Bool
        var writable: Bool
    }

    struct State: ~Copyable {
        var image = Image()
        var files: [Int32: OpenFile] = [:]
        var nextFD: Int32 = 3
        var locks: [Int: Int32] = [:]
        var calls = 0
        var callsByName: [String: Int] = [:]
        /// Opens by the last component of the path (tests count reads of one file).
        var opensByName: [String: Int] = [:]
        var mutations = 0
        var crashAfter: Int?
        var dead = false
        var faults: [FaultRule] = []
        var persistentErrno: [Int: Int32] = [:]
        var recordImages = false
        var images: [Image] = []
    }

    private let state: Locked<State>

    package init() {
        state = Locked(State())
    }

    /// A fresh file system holding what a power cut at `image` leaves under `model`.
    package init(crashed image: Image, model: DamageModel, seed: UInt64) {
        var rng = SplitMix(seed: seed)
        var result = image
        let pending = image.log
        let keep: Int
        switch model {
        case .drop: keep = 0
        case .keep: keep = pending.count
        case .zero, .scramble: keep = pending.isEmpty ? 0 : Int(rng.next() % UInt64(pending.count + 1))
        }
        for op in pending.prefix(keep) { op.apply(to: &result.inodes) }
        result.log = []
        // Only what the committed tree reaches survives.
        var reachable: Set<Int> = [0]
        var queue = [0]
        while let dir = queue.popLast() {
            for child in (result.inodes[dir]?.committedEntries.values).map(Array.init) ?? [] where !reachable.contains(child) {
                reachable.insert(child)
                if result.inodes[child]?.isDirectory == true { queue.append(child) }
            }
        }
        for id in Array(result.inodes.keys) {
            guard reachable.contains(id), var inode = result.inodes[id] else { result.inodes[id] = nil; continue }
            if inode.isDirectory {
                inode.entries = inode.committedEntries
            } else {
                inode.data = Self.damage(synced: inode.synced, current: inode.data, model: model, rng: &rng)
                inode.synced = inode.data
            }
            result.inodes[id] = inode
        }
        state = Locked(State(image: result))
    }

    static func damage(synced: [UInt8], current: [UInt8], model: DamageModel, rng: inout SplitMix) -> [UInt8] {
        if synced == current { return current }
        var common = 0
        while common < synced.count && common < current.count && synced[common] == current[common] { common += 1 }
        switch model {
        case .drop: return synced
        case .keep: return current
        case .zero:
            if current.count <= common { return current }
            return Array(current[..<common]) + [UInt8](repeating: 0, count: current.count - common)
        case .scramble:
            let span = max(current.count, synced.count) - common
            let length = common + (span == 0 ? 0 : Int(rng.next() % UInt64(span + 1)))
            let kept = common + (length == common ? 0 : Int(rng.next() % UInt64(length - common + 1)))
            var out = Array(current[..<min(kept, current.count)])
            while out.count < length { out.append(UInt8(truncatingIfNeeded: rng.next())) }
            return out
        }
    }

    // MARK: Test controls

    /// Keeps an `Image` after every mutating call (for crash-point enumeration).
    package func recordImages(_ on: Bool) {
        state.withLock { $0.recordImages = on }
    }

    /// The images kept so far: `images[k]` is the state after mutating call `k + 1`.
    package var images: [Image] {
        state.withLock { $0.images }
    }

    /// The current state as an image (for a crash "now").
    package var image: Image {
        state.withLock { $0.image }
    }

    /// Mutating calls so far.
    package var mutations: Int {
        state.withLock { $0.mutations }
    }

    /// Calls so far (all kinds).
    package var calls: Int {
        state.withLock { $0.calls }
    }

    /// How many times a file named `name` (the last path component) was opened.
    package func opened(_ name: String) -> Int {
        state.withLock { $0.opensByName[name] ?? 0 }
    }

    package var openFileCount: Int {
        state.withLock { $0.files.count }
    }

    /// Makes the `n`-th mutating call from now and all later calls fail with EIO, changing nothing.
    package func crashAfter(mutations n: Int) {
        state.withLock { $0.crashAfter = $0.mutations + n }
    }

    package var isDead: Bool {
        state.withLock { $0.dead }
    }

    package func setFaults(_ rules: [FaultRule]) {
        state.withLock { state in
            state.faults = rules
            state.persistentErrno = [:]
            state.callsByName = [:]
            state.calls = 0
        }
    }

    /// Clears faults and counters (the fault "clears": space is freed, the disk is back).
    package func clearFaults() {
        setFaults([])
    }

    // MARK: Internals

    private enum Outcome { case proceed, short, fail(Int32) }

    private static func check(_ state: inout State, _ call: String, mutating: Bool) -> Outcome {
        if state.dead { return .fail(EIO) }
        let index = state.calls
        state.calls += 1
        let byName = state.callsByName[call, default: 0]
        state.callsByName[call] = byName + 1
        for (ruleIndex, rule) in state.faults.enumerated() {
            let n = rule.calls.isEmpty ? index : (rule.calls.contains(call) ? byName : -1)
            guard n >= 0 else { continue }
            if let code = state.persistentErrno[ruleIndex] { return .fail(code) }
            if n == rule.nth {
                if rule.short { if call == "write" || call == "pwrite" { return .short } else { continue } }
                if rule.persistent { state.persistentErrno[ruleIndex] = rule.errno }
                return .fail(rule.errno)
            }
        }
        if mutating {
            state.mutations += 1
            if let limit = state.crashAfter, state.mutations >= limit {
                state.dead = true
                return .fail(EIO)
            }
        }
        return .proceed
    }

    private static func record(_ state: inout State) {
        if state.recordImages { state.images.append(state.image) }
    }

    /// A rename's effect: the entry moves, and the move is logged (durable only once a
    /// directory fsync commits it).
    private static func move(_ state: inout State, inode: Int, fromDir sd: Int, from sn: String, toDir td: Int, to tn: String) {
        state.image.inodes[sd]?.entries[sn] = nil
        state.image.inodes[td]?.entries[tn] = inode
        state.image.log.append(.rename(fromDir: sd, from: sn, toDir: td, to: tn, inode: inode))
        record(&state)
    }

    private static func resolve(_ image: Image, _ path: String, base: Int = 0) -> Int? {
        var current = path.hasPrefix("/") ? 0 : base
        for component in path.split(separator: "/") where component != "." {
            guard let inode = image.inodes[current], inode.isDirectory, let next = inode.entries[String(component)] else { return nil }
            current = next
        }
        return current
    }

    /// Splits `path` into its parent directory's inode and the last name.
    private static func parent(_ image: Image, base: Int, _ path: String) -> (dir: Int, name: String)? {
        var parts = path.split(separator: "/").map(String.init)
        guard let name = parts.popLast() else { return nil }
        var current = path.hasPrefix("/") ? 0 : base
        for component in parts where component != "." {
            guard let inode = image.inodes[current], inode.isDirectory, let next = inode.entries[component] else { return nil }
            current = next
        }
        guard image.inodes[current]?.isDirectory == true else { return nil }
        return (current, name)
    }

    private static func error(_ call: String, _ code: Int32, _ subject: String) -> SystemError {
        SystemError(call: call, errno: code, subject: subject)
    }

    private func openCommon(_ call: String, base: Int32?, _ path: String, _ flags: Int32) throws(SystemError) -> Int32 {
        let creates = flags & O_CREAT != 0 || flags & O_TRUNC != 0
        return try state.withLock { (state) throws(SystemError) -> Int32 in
            state.opensByName[String(path.split(separator: "/").last ?? ""), default: 0] += 1
            var baseInode = 0
            if let base {
                guard let file = state.files[base] else { throw Self.error(call, EBADF, path) }
                baseInode = file.inode
            }
            let existing = Self.resolve(state.image, path, base: baseInode)
            if existing == nil && flags & O_CREAT == 0 {
                _ = Self.check(&state, call, mutating: false)
                throw Self.error(call, ENOENT, path)
            }
            if existing != nil && flags & O_CREAT != 0 && flags & O_EXCL != 0 {
                _ = Self.check(&state, call, mutating: false)
                throw Self.error(call, EEXIST, path)
            }
            switch Self.check(&state, call, mutating: creates) {
            case .fail(let code): throw Self.error(call, code, path)
            case .proceed, .short: break
            }
            let id: Int
            if let existing {
                id = existing
                if flags & O_DIRECTORY != 0 && state.image.inodes[id]?.isDirectory != true { throw Self.error(call, ENOTDIR, path) }
                if flags & O_TRUNC != 0 { state.image.inodes[id]?.data = [] }
            } else {
                guard let (dir, name) = Self.parent(state.image, base: baseInode, path) else { throw Self.error(call, ENOENT, path) }
                id = state.image.nextInode
                state.image.nextInode += 1
                state.image.inodes[id] = Inode(isDirectory: false)
                state.image.inodes[dir]?.entries[name] = id
                state.image.log.append(.link(dir: dir, name: name, inode: id))
            }
            if creates { Self.record(&state) }
            let fd = state.nextFD
            state.nextFD += 1
            let access = flags & O_ACCMODE
            state.files[fd] = OpenFile(inode: id, append: flags & O_APPEND != 0, writable: access == O_WRONLY || access == O_RDWR)
            return fd
        }
    }

    // MARK: FileSystem

    package func open(_ path: String, _ flags: Int32, mode: UInt32) throws(SystemError) -> Int32 {
        try openCommon("open", base: nil, path, flags)
    }

    package func openat(_ dirfd: Int32, _ name: String, _ flags: Int32, mode: UInt32) throws(SystemError) -> Int32 {
        try openCommon("openat", base: name.hasPrefix("/") ? nil : dirfd, name, flags)
    }

    package func close(_ fd: Int32) {
        state.withLock { state in
            state.files[fd] = nil
            for (inode, holder) in state.locks where holder == fd { state.locks[inode] = nil }
        }
    }

    private func writeCommon(_ call: String, _ fd: Int32, _ buffer: UnsafeRawBufferPointer, offset: Int64?, subject: String) throws(SystemError) -> Int {
        try state.withLock { (state) throws(SystemError) -> Int in
            guard let file = state.files[fd], file.writable else { throw Self.error(call, EBADF, subject) }
            var count = buffer.count
            switch Self.check(&state, call, mutating: true) {
            case .fail(let code): throw Self.error(call, code, subject)
            case .short: count = max(1, count / 2)
            case .proceed: break
            }
            guard var inode = state.image.inodes[file.inode] else { throw Self.error(call, EBADF, subject) }
            state.image.inodes[file.inode] = nil  // keep the array uniquely referenced while editing
            // Linux appends even a pwrite on an O_APPEND file (pwrite(2), BUGS).
            let at = file.append ? inode.data.count : Int(offset ?? file.offset)
            if inode.data.count < at { inode.data += [UInt8](repeating: 0, count: at - inode.data.count) }
            let overlap = min(count, inode.data.count - at)
            if overlap > 0 { inode.data.replaceSubrange(at..<(at + overlap), with: buffer[0..<overlap]) }
            if count > overlap { inode.data.append(contentsOf: buffer[overlap..<count]) }
            state.image.inodes[file.inode] = inode
            if offset == nil { state.files[fd]?.offset = Int64(at + count) }
            Self.record(&state)
            return count
        }
    }

    package func write(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, subject: String) throws(SystemError) -> Int {
        try writeCommon("write", fd, buffer, offset: nil, subject: subject)
    }

    package func pwrite(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, offset: Int64, subject: String) throws(SystemError) -> Int {
        try writeCommon("pwrite", fd, buffer, offset: offset, subject: subject)
    }

    private func readCommon(_ call: String, _ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer, offset: Int64?, subject: String) throws(SystemError) -> Int {
        try state.withLock { (state) throws(SystemError) -> Int in
            guard let file = state.files[fd], let inode = state.image.inodes[file.inode], !inode.isDirectory else {
                throw Self.error(call, EBADF, subject)
            }
            if case .fail(let code) = Self.check(&state, call, mutating: false) { throw Self.error(call, code, subject) }
            let at = Int(offset ?? file.offset)
            let count = max(0, min(buffer.count, inode.data.count - at))
            if count > 0 {
                inode.data.withUnsafeBytes { raw in
                    buffer.baseAddress!.copyMemory(from: raw.baseAddress! + at, byteCount: count)
                }
            }
            if offset == nil { state.files[fd]?.offset = Int64(at + count) }
            return count
        }
    }

    package func read(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer, subject: String) throws(SystemError) -> Int {
        try readCommon("read", fd, buffer, offset: nil, subject: subject)
    }

    package func pread(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer, offset: Int64, subject: String) throws(SystemError) -> Int {
        try readCommon("pread", fd, buffer, offset: offset, subject: subject)
    }

    private func sync(_ call: String, _ fd: Int32, subject: String) throws(SystemError) {
        try state.withLock { (state) throws(SystemError) in
            guard let file = state.files[fd], let inode = state.image.inodes[file.inode] else { throw Self.error(call, EBADF, subject) }
            if case .fail(let code) = Self.check(&state, call, mutating: true) { throw Self.error(call, code, subject) }
            if inode.isDirectory {
                if let last = state.image.log.lastIndex(where: { $0.touches(file.inode) }) {
                    for op in state.image.log[...last] { op.apply(to: &state.image.inodes) }
                    state.image.log.removeFirst(last + 1)
                }
            } else {
                state.image.inodes[file.inode]?.synced = inode.data
            }
            Self.record(&state)
        }
    }

    package func fdatasync(_ fd: Int32, subject: String) throws(SystemError) {
        try sync("fdatasync", fd, subject: subject)
    }

    package func fsync(_ fd: Int32, subject: String) throws(SystemError) {
        try sync("fsync", fd, subject: subject)
    }

    package func ftruncate(_ fd: Int32, _ length: Int64, subject: String) throws(SystemError) {
        try state.withLock { (state) throws(SystemError) in
            guard let file = state.files[fd], file.writable, var inode = state.image.inodes[file.inode] else {
                throw Self.error("ftruncate", EBADF, subject)
            }
            if case .fail(let code) = Self.check(&state, "ftruncate", mutating: true) { throw Self.error("ftruncate", code, subject) }
            let n = Int(clamping: length)
            if inode.data.count > n { inode.data.removeLast(inode.data.count - n) }
            else { inode.data += [UInt8](repeating: 0, count: n - inode.data.count) }
            state.image.inodes[file.inode] = inode
            Self.record(&state)
        }
    }

    package func fileSize(_ fd: Int32, subject: String) throws(SystemError) -> Int64 {
        try state.withLock { (state) throws(SystemError) -> Int64 in
            guard let file = state.files[fd], let inode = state.image.inodes[file.inode] else { throw Self.error("fstat", EBADF, subject) }
            if case .fail(let code) = Self.check(&state, "fstat", mutating: false) { throw Self.error("fstat", code, subject) }
            return Int64(inode.data.count)
        }
    }

    private func dirInode(_ state: borrowing State, _ fd: Int32) -> Int? {
        guard let file = state.files[fd], state.image.inodes[file.inode]?.isDirectory == true else { return nil }
        return file.inode
    }

    package func renameat(_ fromDir: Int32, _ from: String, _ toDir: Int32, _ to: String) throws(SystemError) {
        let subject = "\(from) -> \(to)"
        try state.withLock { (state) throws(SystemError) in
            guard let a = dirInode(state, fromDir), let b = dirInode(state, toDir),
                  let (sd, sn) = Self.parent(state.image, base: a, from), let (td, tn) = Self.parent(state.image, base: b, to),
                  let inode = state.image.inodes[sd]?.entries[sn] else { throw Self.error("renameat", ENOENT, subject) }
            if case .fail(let code) = Self.check(&state, "renameat", mutating: true) { throw Self.error("renameat", code, subject) }
            Self.move(&state, inode: inode, fromDir: sd, from: sn, toDir: td, to: tn)
        }
    }

    package func unlinkat(_ dirfd: Int32, _ name: String, flags: Int32) throws(SystemError) {
        try state.withLock { (state) throws(SystemError) in
            guard let base = dirInode(state, dirfd), let (dir, last) = Self.parent(state.image, base: base, name),
                  state.image.inodes[dir]?.entries[last] != nil else { throw Self.error("unlinkat", ENOENT, name) }
            if case .fail(let code) = Self.check(&state, "unlinkat", mutating: true) { throw Self.error("unlinkat", code, name) }
            state.image.inodes[dir]?.entries[last] = nil
            state.image.log.append(.unlink(dir: dir, name: last))
            Self.record(&state)
        }
    }

    package func mkdir(_ path: String, mode: UInt32) throws(SystemError) {
        try state.withLock { (state) throws(SystemError) in
            guard let (dir, name) = Self.parent(state.image, base: 0, path) else { throw Self.error("mkdir", ENOENT, path) }
            if state.image.inodes[dir]?.entries[name] != nil { throw Self.error("mkdir", EEXIST, path) }
            if case .fail(let code) = Self.check(&state, "mkdir", mutating: true) { throw Self.error("mkdir", code, path) }
            let id = state.image.nextInode
            state.image.nextInode += 1
            state.image.inodes[id] = Inode(isDirectory: true)
            state.image.inodes[dir]?.entries[name] = id
            state.image.log.append(.link(dir: dir, name: name, inode: id))
            Self.record(&state)
        }
    }

    package func listDirectory(_ path: String) throws(SystemError) -> [String] {
        try state.withLock { (state) throws(SystemError) -> [String] in
            guard let id = Self.resolve(state.image, path), let inode = state.image.inodes[id] else { throw Self.error("opendir", ENOENT, path) }
            guard inode.isDirectory else { throw Self.error("opendir", ENOTDIR, path) }
            if case .fail(let code) = Self.check(&state, "readdir", mutating: false) { throw Self.error("readdir", code, path) }
            return inode.entries.keys.sorted()
        }
    }

    package func tryLock(_ fd: Int32, subject: String) throws(SystemError) -> Bool {
        try state.withLock { (state) throws(SystemError) -> Bool in
            guard let file = state.files[fd] else { throw Self.error("flock", EBADF, subject) }
            if let holder = state.locks[file.inode], holder != fd, state.files[holder] != nil { return false }
            state.locks[file.inode] = fd
            return true
        }
    }

    package func exists(_ path: String) -> Bool {
        state.withLock { Self.resolve($0.image, path) != nil }
    }

    // MARK: The spool's calls

    private static func status(_ image: Image, _ id: Int) -> FileStatus {
        let inode = image.inodes[id]
        var links: UInt64 = id == 0 ? 1 : 0
        for other in image.inodes.values where other.isDirectory {
            for child in other.entries.values where child == id { links += 1 }
        }
        return FileStatus(type: UInt32(inode?.isDirectory == true ? S_IFDIR : S_IFREG), size: Int64(inode?.data.count ?? 0),
                          modifiedNanos: 0, inode: UInt64(id), device: 1, linkCount: links)
    }

    package func statusAt(_ dirfd: Int32, _ name: String) throws(SystemError) -> FileStatus {
        try state.withLock { (state) throws(SystemError) -> FileStatus in
            guard let base = dirInode(state, dirfd) else { throw Self.error("fstatat", EBADF, name) }
            if case .fail(let code) = Self.check(&state, "fstatat", mutating: false) { throw Self.error("fstatat", code, name) }
            guard let id = Self.resolve(state.image, name, base: base) else { throw Self.error("fstatat", ENOENT, name) }
            return Self.status(state.image, id)
        }
    }

    package func status(_ fd: Int32, subject: String) throws(SystemError) -> FileStatus {
        try state.withLock { (state) throws(SystemError) -> FileStatus in
            guard let file = state.files[fd] else { throw Self.error("fstat", EBADF, subject) }
            if case .fail(let code) = Self.check(&state, "fstat", mutating: false) { throw Self.error("fstat", code, subject) }
            return Self.status(state.image, file.inode)
        }
    }

    package func linkStatus(_ path: String) throws(SystemError) -> FileStatus {
        try state.withLock { (state) throws(SystemError) -> FileStatus in
            if case .fail(let code) = Self.check(&state, "lstat", mutating: false) { throw Self.error("lstat", code, path) }
            guard let id = Self.resolve(state.image, path) else { throw Self.error("lstat", ENOENT, path) }
            return Self.status(state.image, id)
        }
    }

    /// Names are `String`s here: raw bytes that are not UTF-8 are decoded with replacement.
    package func renameNoReplace(_ fromDir: Int32, raw from: [UInt8], _ toDir: Int32, _ to: String, subject: String) throws(SystemError) {
        let fromName = String(decoding: from, as: UTF8.self)
        let label = "\(subject) -> \(to)"
        try state.withLock { (state) throws(SystemError) in
            guard let a = dirInode(state, fromDir), let b = dirInode(state, toDir),
                  let (sd, sn) = Self.parent(state.image, base: a, fromName), let (td, tn) = Self.parent(state.image, base: b, to),
                  let inode = state.image.inodes[sd]?.entries[sn] else {
                _ = Self.check(&state, "renameat2", mutating: false)
                throw Self.error("renameat2", ENOENT, label)
            }
            if state.image.inodes[td]?.entries[tn] != nil {
                _ = Self.check(&state, "renameat2", mutating: false)
                throw Self.error("renameat2", EEXIST, label)
            }
            if case .fail(let code) = Self.check(&state, "renameat2", mutating: true) { throw Self.error("renameat2", code, label) }
            Self.move(&state, inode: inode, fromDir: sd, from: sn, toDir: td, to: tn)
        }
    }

    package func mkdirat(_ dirfd: Int32, _ name: String, mode: UInt32) throws(SystemError) {
        try state.withLock { (state) throws(SystemError) in
            guard let base = dirInode(state, dirfd), let (dir, last) = Self.parent(state.image, base: base, name) else {
                throw Self.error("mkdirat", ENOENT, name)
            }
            if state.image.inodes[dir]?.entries[last] != nil { throw Self.error("mkdirat", EEXIST, name) }
            if case .fail(let code) = Self.check(&state, "mkdirat", mutating: true) { throw Self.error("mkdirat", code, name) }
            let id = state.image.nextInode
            state.image.nextInode += 1
            state.image.inodes[id] = Inode(isDirectory: true)
            state.image.inodes[dir]?.entries[last] = id
            state.image.log.append(.link(dir: dir, name: last, inode: id))
            Self.record(&state)
        }
    }

    /// Modes are not modelled: only checks that the entry exists.
    package func chmodat(_ dirfd: Int32, _ name: String, mode: UInt32) throws(SystemError) {
        try state.withLock { (state) throws(SystemError) in
            guard let base = dirInode(state, dirfd) else { throw Self.error("fchmodat", EBADF, name) }
            if case .fail(let code) = Self.check(&state, "fchmodat", mutating: false) { throw Self.error("fchmodat", code, name) }
            if Self.resolve(state.image, name, base: base) == nil { throw Self.error("fchmodat", ENOENT, name) }
        }
    }

    package func duplicate(_ fd: Int32) throws(SystemError) -> Int32 {
        try state.withLock { (state) throws(SystemError) -> Int32 in
            guard let file = state.files[fd] else { throw Self.error("fcntl", EBADF, "") }
            if case .fail(let code) = Self.check(&state, "fcntl", mutating: false) { throw Self.error("fcntl", code, "") }
            let copy = state.nextFD
            state.nextFD += 1
            state.files[copy] = file
            return copy
        }
    }

    /// A listing of the names present when it is opened, in name order (a snapshot; POSIX
    /// leaves entries added or removed during a scan open either way). Holds a handle of its
    /// own until the end, so `openFileCount` sees a scan left open.
    package func openDirectoryStream(_ dirfd: Int32, subject: String) throws(SystemError) -> any DirectoryStream {
        let handle = try openat(dirfd, ".", O_RDONLY | O_DIRECTORY, mode: 0)
        let entries = try state.withLock { (state) throws(SystemError) -> [RawDirectoryEntry] in
            guard let id = dirInode(state, handle), let inode = state.image.inodes[id] else { throw Self.error("fdopendir", ENOTDIR, subject) }
            if case .fail(let code) = Self.check(&state, "readdir", mutating: false) { throw Self.error("readdir", code, subject) }
            return inode.entries.sorted { $0.key < $1.key }.map { name, child in
                RawDirectoryEntry(name: Array(name.utf8), type: UInt8(state.image.inodes[child]?.isDirectory == true ? DT_DIR : DT_REG))
            }
        }
        return SimulatedDirectoryStream(fs: self, handle: handle, entries: entries)
    }

    /// The bytes of the file at `path` as they are now (for assertions).
    package func contents(_ path: String) -> [UInt8]? {
        state.withLock { state in Self.resolve(state.image, path).flatMap { state.image.inodes[$0]?.data } }
    }
}

/// A small seeded generator (SplitMix64), so every crash state can be replayed from its seed.
package struct SplitMix: Sendable {
    private var state: UInt64

    package init(seed: UInt64) {
        state = seed
    }

    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A snapshot listing of a simulated directory; releases its handle at the end or when dropped.
final class SimulatedDirectoryStream: DirectoryStream {
    private let fs: SimulatedFileSystem
    private var handle: Int32?
    private var entries: [RawDirectoryEntry]
    private var index = 0

    init(fs: SimulatedFileSystem, handle: Int32, entries: [RawDirectoryEntry]) {
        self.fs = fs
        self.handle = handle
        self.entries = entries
    }

    deinit {
        if let handle { fs.close(handle) }
    }

    func next() throws(SystemError) -> RawDirectoryEntry? {
        guard index < entries.count else {
            if let handle { fs.close(handle) }
            handle = nil
            return nil
        }
        index += 1
        return entries[index - 1]
    }
}
