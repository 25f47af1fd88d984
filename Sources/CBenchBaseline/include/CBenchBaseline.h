#ifndef CBENCHBASELINE_H
#define CBENCHBASELINE_H
/* The baseline the ingest benchmark compares pushspoold with: a competent single-threaded C
 * loop doing only the unavoidable work. It moves each spool file into processing/
 * (renameat2 RENAME_NOREPLACE, directory fds reused), reads it, frames it (a 40-byte header
 * with a CRC32C from ISA-L, like a journal record), appends the frames of a batch with one
 * write, fdatasyncs once per BASELINE_RECORDS_PER_SYNC records, then unlinks the batch.
 * No parsing, no dedup index. Its batching is fixed, as a C programmer would pick it; it is
 * never matched to the daemon's own batch size (a flattering comparison on slow disks). */
#define BASELINE_RECORDS_PER_SYNC 256
/* Returns the number of files ingested, or -1 on an I/O error. */
long baseline_ingest(const char *incoming, const char *processing, const char *log_path);
#endif
