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

    /// Returns the whole free pages inside the heap to the kernel (`malloc_trim(0)`, which
    /// walks every arena). Arrays below the mmap threshold — the dedup table's shards, a
    /// checkpoint's chunks — are freed into the middle of the heap, where glibc keeps them
    /// resident: through a million-file backlog every growth wave of the table left the old
    /// shards' pages counted in RSS beside the new ones. Costs well under a millisecond;
    /// callers do it after freeing a megabyte or more, not per allocation.
    package static func releaseFreePages() {
        _ = cposix_release_free_pages()
    }
}
