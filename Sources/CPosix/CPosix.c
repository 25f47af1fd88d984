#define _GNU_SOURCE
#include <errno.h>
#include <linux/capability.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <string.h>
#include <unistd.h>
#include "CPosix.h"

const char *cposix_strerrorname(int errnum) {
    const char *name = strerrorname_np(errnum);
    return name ? name : "E?";
}

const char *cposix_strerrordesc(int errnum) {
    const char *desc = strerrordesc_np(errnum);
    return desc ? desc : "unknown error";
}

int cposix_set_mmap_threshold(int bytes) {
    return mallopt(M_MMAP_THRESHOLD, bytes);
}

int cposix_release_free_pages(void) {
    return malloc_trim(0);
}

static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGABRT};
#define CRASH_SIGNAL_COUNT (sizeof(crash_signals) / sizeof(crash_signals[0]))
static struct sigaction previous_actions[CRASH_SIGNAL_COUNT];
static volatile sig_atomic_t crash_fd = -1;
static long crash_offset;
static char crash_mark;

/* The crashing thread's tag (a follower's name), written beside the mark: a per-thread buffer
   set once when the thread starts, read only by the handler of a signal on that thread. The
   executable links this statically, so the TLS access needs no allocation in the handler. */
static __thread char crash_thread_tag[CPOSIX_CRASH_TAG_MAX];
static __thread size_t crash_thread_tag_length;

static void crash_mark_handler(int sig, siginfo_t *info, void *context) {
    (void)context;
    if (crash_fd >= 0) {
        ssize_t ignored = pwrite(crash_fd, &crash_mark, 1, crash_offset);
        (void)ignored;
        if (crash_thread_tag_length > 0) {
            ignored = pwrite(crash_fd, crash_thread_tag, crash_thread_tag_length, crash_offset + CPOSIX_CRASH_TAG_OFFSET);
            (void)ignored;
        }
    }
    for (unsigned i = 0; i < CRASH_SIGNAL_COUNT; i++) {
        if (crash_signals[i] == sig) {
            sigaction(sig, &previous_actions[i], NULL);
            break;
        }
    }
    // A fault (si_code > 0) repeats when the instruction runs again, now reaching the previous
    // handler with its original context; a signal sent by kill/abort must be raised again.
    if (info == NULL || info->si_code <= 0) raise(sig);
}

int cposix_install_crash_mark(int fd, long offset, char mark) {
    crash_offset = offset;
    crash_mark = mark;
    crash_fd = fd;
    for (unsigned i = 0; i < CRASH_SIGNAL_COUNT; i++) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_sigaction = crash_mark_handler;
        action.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&action.sa_mask);
        if (sigaction(crash_signals[i], &action, &previous_actions[i]) != 0) return -1;
    }
    return 0;
}

void cposix_set_crash_tag(const char *tag, size_t length) {
    if (length > CPOSIX_CRASH_TAG_MAX) length = CPOSIX_CRASH_TAG_MAX;
    memcpy(crash_thread_tag, tag, length);
    crash_thread_tag_length = length;
}

int cposix_set_thread_name(const char *name) {
    return pthread_setname_np(pthread_self(), name);
}

int cposix_get_thread_name(char *buffer, size_t size) {
    return pthread_getname_np(pthread_self(), buffer, size);
}

int cposix_set_thread_niceness(int niceness) {
    return setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), niceness);
}

int cposix_get_thread_niceness(int *niceness) {
    errno = 0;
    int value = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
    if (value == -1 && errno != 0) return -1;
    *niceness = value;
    return 0;
}

int cposix_may_lower_niceness_to(int niceness) {
    struct rlimit limit;
    // RLIMIT_NICE holds 20 - nice: the lowest nice value an unprivileged thread may set.
    if (getrlimit(RLIMIT_NICE, &limit) == 0 && (limit.rlim_cur == RLIM_INFINITY || (long long)limit.rlim_cur >= 20 - (long long)niceness)) {
        return 1;
    }
    struct __user_cap_header_struct header = { _LINUX_CAPABILITY_VERSION_3, 0 };
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capget, &header, data) != 0) return 0;
    return (data[CAP_SYS_NICE / 32].effective & (1u << (CAP_SYS_NICE % 32))) != 0;
}

// From linux/ioprio.h, spelt here: the values are kernel ABI, and the header's macros changed
// shape between kernel versions.
enum { CPOSIX_IOPRIO_CLASS_SHIFT = 13, CPOSIX_IOPRIO_WHO_PROCESS = 1 };

int cposix_set_thread_io_priority(int klass, int level) {
    if (klass < 0 || klass > 3 || level < 0 || level > 7) {
        errno = EINVAL;
        return -1;
    }
    int value = (klass << CPOSIX_IOPRIO_CLASS_SHIFT) | level;
    return (int)syscall(SYS_ioprio_set, CPOSIX_IOPRIO_WHO_PROCESS, (int)syscall(SYS_gettid), value);
}

int cposix_get_thread_io_priority(int *klass, int *level) {
    long value = syscall(SYS_ioprio_get, CPOSIX_IOPRIO_WHO_PROCESS, (int)syscall(SYS_gettid));
    if (value < 0) return -1;
    *klass = (int)(value >> CPOSIX_IOPRIO_CLASS_SHIFT);
    *level = (int)(value & ((1 << CPOSIX_IOPRIO_CLASS_SHIFT) - 1));
    return 0;
}

int cposix_usable_cpus(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
    return CPU_COUNT(&set);
}
