#ifndef CPOSIX_H
#define CPOSIX_H
/// Shims for libc facilities Swift cannot reach directly (GNU extensions behind _GNU_SOURCE).
const char *cposix_strerrorname(int errnum);
const char *cposix_strerrordesc(int errnum);
/// mallopt(M_MMAP_THRESHOLD, bytes); returns 1 on success.
int cposix_set_mmap_threshold(int bytes);
#endif
