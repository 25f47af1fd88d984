#ifndef CSECCOMP_H
#define CSECCOMP_H

#include <errno.h>
#include <stdint.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <seccomp.h>

/// SCMP_ACT_ERRNO and SCMP_ACT_KILL_PROCESS are macros Swift cannot import; these return
/// libseccomp's action values for them.
static inline uint32_t cseccomp_act_errno(uint16_t error) { return SCMP_ACT_ERRNO(error); }
static inline uint32_t cseccomp_act_kill_process(void) { return SCMP_ACT_KILL_PROCESS; }
static inline uint32_t cseccomp_act_allow(void) { return SCMP_ACT_ALLOW; }

/// syscall(2) is variadic; the fetcher's filter test hook makes raw calls through this.
static inline long cseccomp_raw_syscall(long number, long a, long b, long c, long d, long e) {
    return syscall(number, a, b, c, d, e);
}

/// prctl(PR_GET_SECCOMP) (prctl is variadic): 0 none, 2 a filter is in force; -1 with errno.
static inline int cseccomp_current_mode(void) { return prctl(PR_GET_SECCOMP, 0UL, 0UL, 0UL, 0UL); }

#endif
