#ifndef CPOSIX_H
#define CPOSIX_H
#include <stddef.h>
/// Shims for libc facilities Swift cannot reach directly (GNU extensions behind _GNU_SOURCE).
const char *cposix_strerrorname(int errnum);
const char *cposix_strerrordesc(int errnum);
/// mallopt(M_MMAP_THRESHOLD, bytes); returns 1 on success.
int cposix_set_mmap_threshold(int bytes);
/// malloc_trim(0): gives whole free pages inside the heap (every arena) back to the kernel.
/// Returns 1 if memory was released.
int cposix_release_free_pages(void);
/// Installs handlers for the signals a crash raises (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP,
/// SIGABRT) that write `mark` at `offset` of `fd` with pwrite(2) — async-signal-safe, no
/// allocation — then hand the signal to the handler that was installed before (the Swift
/// runtime's backtracer, or the default action). Returns 0, or -1 with errno set.
int cposix_install_crash_mark(int fd, long offset, char mark);
/// Where, past the mark's offset, the crash handler writes the crashing thread's tag.
#define CPOSIX_CRASH_TAG_OFFSET 4096
#define CPOSIX_CRASH_TAG_MAX 128
/// Names the calling thread for the crash handler (at most CPOSIX_CRASH_TAG_MAX bytes kept):
/// a crash signal on this thread also writes `tag` at the mark's offset + CPOSIX_CRASH_TAG_OFFSET.
void cposix_set_crash_tag(const char *tag, size_t length);
/// pthread_setname_np(pthread_self(), name): `name` at most 15 bytes and a NUL. Returns 0 or an
/// error number (ERANGE when too long).
int cposix_set_thread_name(const char *name);
/// pthread_getname_np(pthread_self(), buffer, size). Returns 0 or an error number.
int cposix_get_thread_name(char *buffer, size_t size);
/// setpriority(PRIO_PROCESS, gettid(), niceness): Linux applies it to the calling thread only.
/// Returns 0, or -1 with errno set.
int cposix_set_thread_niceness(int niceness);
/// getpriority(PRIO_PROCESS, gettid()) into `*niceness`. Returns 0, or -1 with errno set.
int cposix_get_thread_niceness(int *niceness);
/// 1 when the calling thread may lower its nice value to `niceness` again after raising it:
/// RLIMIT_NICE allows it (systemd's LimitNICE=) or CAP_SYS_NICE is effective; else 0.
int cposix_may_lower_niceness_to(int niceness);
/// ioprio_set(IOPRIO_WHO_PROCESS, gettid(), IOPRIO_PRIO_VALUE(klass, level)) through syscall(2)
/// (glibc has no wrapper): the calling thread's I/O scheduling class (0 none, 1 realtime,
/// 2 best-effort, 3 idle) and level (0 highest to 7). Returns 0, or -1 with errno set.
int cposix_set_thread_io_priority(int klass, int level);
/// ioprio_get(IOPRIO_WHO_PROCESS, gettid()) split into `*klass` and `*level`. Returns 0, or -1
/// with errno set.
int cposix_get_thread_io_priority(int *klass, int *level);
/// CPUs in the calling thread's affinity mask (sched_getaffinity, CPU_COUNT), or -1 with errno set.
int cposix_usable_cpus(void);
#endif
