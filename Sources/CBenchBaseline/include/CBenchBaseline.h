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
/* The two protocols the loops can follow. Loop (a), BASELINE_RENAME_CLAIM: each file is
 * renamed into processing/ before it is read, and unlinked there after its batch's
 * fdatasync. Loop (b), BASELINE_NO_CLAIM: the fewest operations that keep the same guarantee
 * for one reader per spool — open, read and close the file where it lies in incoming/, one
 * write + fdatasync per batch, then unlink it from incoming/; a crash before the unlink only
 * means the file is read again. */
#define BASELINE_RENAME_CLAIM 1
#define BASELINE_NO_CLAIM 0
/* Returns the number of files ingested, or -1 on an I/O error. Loop (a). */
long baseline_ingest(const char *incoming, const char *processing, const char *log_path);
/* baseline_ingest following either protocol (`claim`: one of the two above). */
long baseline_ingest_protocol(const char *incoming, const char *processing, const char *log_path, int claim);
/* The same loop following a live spool for the steady-latency bench: an inotify watch on
 * incoming/ (IN_MOVED_TO), and each read's worth of new files is one batch (at most
 * BASELINE_RECORDS_PER_SYNC) with one write and one fdatasync. baseline_watch arms the watch
 * before the producer starts; baseline_follow returns after `count` files, having stored in
 * durable_nanos[i] the CLOCK_MONOTONIC time file s<i>.json became durable. -1 on an error. */
#include <stdint.h>
int baseline_watch(const char *incoming);
long baseline_follow(int watch_fd, const char *incoming, const char *processing, const char *log_path,
                     long count, uint64_t *durable_nanos);
/* The burst loop the external benchmark times: takes what is already in incoming/, then
 * follows the watch (armed by baseline_watch before the producer starts) until `count` files
 * are durable, each read's worth of events one batch (at most BASELINE_RECORDS_PER_SYNC per
 * fdatasync). On IN_Q_OVERFLOW it flushes and rescans incoming/, as any loop that must not
 * lose a file does. Returns the files ingested, or -1 on an error. */
long baseline_burst(int watch_fd, const char *incoming, const char *processing, const char *log_path, int claim, long count);
#endif
