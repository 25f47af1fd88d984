#ifndef CBENCHBASELINE_H
#define CBENCHBASELINE_H
/* The baseline the ingest benchmark compares pushspoold with: a plain C loop that only moves
 * each spool file into processing/, reads it, appends it to one log file, fdatasyncs every
 * `batch` files, then unlinks the originals. No parsing, no checksums, no index. */
long baseline_ingest(const char *incoming, const char *processing, const char *log_path, int batch);
#endif
