internal import CPosix

/// Process-wide allocator policy for a long-running daemon.
package enum MemoryPolicy {
    /// Serves every allocation of 1 MiB or more with its own mapping, so the dedup table's
    /// old arrays and checkpoint snapshots go back to the kernel when freed. glibc's default
    /// raises this threshold after the first such free, after which large arrays come from
    /// the heap and RSS keeps every peak: memory then grows with the journal even though the
    /// live data barely does. Wraps `mallopt(M_MMAP_THRESHOLD)`.
    package static func apply() {
        _ = cposix_set_mmap_threshold(1 << 20)
    }
}
