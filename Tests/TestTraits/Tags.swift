import Testing

/// The test sets `scripts/test.sh` runs apart. A suite carrying one of these tags is left out of
/// the fast `unit` stage and runs in `unit-slow` after it (`scripts/test-sets.py` finds the
/// suites by their `@Suite(... .tags(...))` line, since `swift test` cannot filter by tag on
/// Linux). Tag the suite, not a single test: the sets are chosen per suite.
extension Tag {
    /// Seconds or more of wall time on two cores: crash enumerations that fork and kill a child
    /// per state, fault loops, large scans.
    @Tag package static var slow: Self
    /// Starts a real `nats-server` on 127.0.0.1 (Debian's package must be installed).
    @Tag package static var nats: Self
    /// Needs root: mounts, loop devices or another user's files.
    @Tag package static var root: Self
}
