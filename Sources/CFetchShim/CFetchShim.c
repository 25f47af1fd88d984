#define _GNU_SOURCE
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include <errno.h>
#include <unistd.h>
#include <linux/landlock.h>
#include "CFetchShim.h"

int cfetch_no_new_privs(void) { return prctl(PR_SET_NO_NEW_PRIVS, 1UL, 0UL, 0UL, 0UL); }
int cfetch_parent_death_signal(int signal) { return prctl(PR_SET_PDEATHSIG, (unsigned long)signal, 0UL, 0UL, 0UL); }
int cfetch_set_dumpable(int dumpable) { return prctl(PR_SET_DUMPABLE, (unsigned long)dumpable, 0UL, 0UL, 0UL); }
int cfetch_spawn_closefrom(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}
const char *cfetch_signal_name(int signal) { return sigabbrev_np(signal); }

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434 /* the same number on every architecture */
#endif
int cfetch_pidfd_open(int pid) { return (int)syscall(SYS_pidfd_open, (pid_t)pid, 0U); }

/* Weak references: non-null only when the sanitizer runtime is linked into this binary
   (statically, as swiftc links it) or loaded. */
extern void __asan_init(void) __attribute__((weak));
extern void __tsan_init(void) __attribute__((weak));
int cfetch_sanitizer_runtime_present(void) { return __asan_init != NULL || __tsan_init != NULL; }

int cfetch_landlock_abi(void) {
    return (int)syscall(SYS_landlock_create_ruleset, NULL, (size_t)0, (uint32_t)LANDLOCK_CREATE_RULESET_VERSION);
}

int cfetch_landlock_create_ruleset(uint64_t handled_access_fs) {
    struct landlock_ruleset_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.handled_access_fs = handled_access_fs;
    return (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, (uint32_t)0);
}

int cfetch_landlock_allow_path(int ruleset_fd, const char *path, uint64_t directory_access, uint64_t file_access) {
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    struct landlock_path_beneath_attr rule;
    memset(&rule, 0, sizeof rule);
    rule.allowed_access = S_ISDIR(st.st_mode) ? directory_access : file_access;
    rule.parent_fd = fd;
    int result = (int)syscall(SYS_landlock_add_rule, ruleset_fd, LANDLOCK_RULE_PATH_BENEATH, &rule, (uint32_t)0);
    int saved = errno;
    close(fd);
    errno = saved;
    return result;
}

int cfetch_landlock_restrict_self(int ruleset_fd) {
    return (int)syscall(SYS_landlock_restrict_self, ruleset_fd, (uint32_t)0);
}
