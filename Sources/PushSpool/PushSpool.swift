// PushSpool: the spool directories and the protocol around them (see
// docs/design/spool-protocol.md). Maildir and Postfix taught the rules this module keeps:
//
// - Every move is a rename(2) relative to a directory fd that never replaces an existing
//   entry, so two processes (daemon and pushspoolctl, or two daemons after a botched restart)
//   can share a spool without losing a file, and a swapped path component is never followed.
// - Writers stage in tmp/ and rename into incoming/ (SpoolDropper). A plain copy into
//   incoming/ is taken on IN_CLOSE_WRITE, or by a rescan once its mtime is `stableAge` old
//   (StableAgeFilter).
// - The daemon claims by renaming into processing/ (Spool.claim) and reads with lstat first,
//   then O_NOFOLLOW|O_NONBLOCK, so symlinks, FIFOs and devices are refused without being
//   followed, opened or blocked on (Spool.read).
// - Refused input is never dropped: the reason file is made durable before the entry moves
//   to failed/ (Spool.quarantine); operators list, show, retry and purge it (FailedQueue).
// - Directory reads stream in bounded batches (DirectoryScanner), so a backlog of a million
//   files costs a million readdir entries over time, never a million names at once.
// - IncomingWatcher + rescans (IncomingFeed ties them together) catch everything inotify
//   misses: events lost to IN_Q_OVERFLOW, files that raised no event, a replaced incoming/.
//
// Thread use: Spool, SpoolLayout, QuarantineReason, StableAgeFilter and the case-less enums
// are Sendable; IncomingWatcher, DirectoryScanner, SpoolScan and IncomingFeed belong to the
// one ingest thread (Waker is how other threads interrupt it).
