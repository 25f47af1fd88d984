#ifndef CFETCHSHIM_H
#define CFETCHSHIM_H

#include <spawn.h>
#include <stdint.h>

/// prctl(2) is variadic; these fixed-argument wrappers are what Swift can call.
/// Each returns 0 or -1 with errno set.
int cfetch_no_new_privs(void);
int cfetch_parent_death_signal(int signal);
int cfetch_set_dumpable(int dumpable);

/// posix_spawn_file_actions_addclosefrom_np (glibc 2.34, behind _GNU_SOURCE): close every fd
/// from `from` up in the child. Returns 0 or an errno value.
int cfetch_spawn_closefrom(posix_spawn_file_actions_t *actions, int from);

/// pidfd_open(2) (Linux 5.3; no glibc wrapper before 2.36): an fd that polls readable once
/// process `pid` has exited. Returns the fd or -1 with errno set.
int cfetch_pidfd_open(int pid);

/// sigabbrev_np (glibc 2.32, behind _GNU_SOURCE): "SEGV" for 11; NULL when unknown. MT-safe.
const char *cfetch_signal_name(int signal);

/// 1 when this process carries AddressSanitizer's or ThreadSanitizer's runtime (a sanitizer
/// build of the tests): their shadow memory is terabytes of reserved address space, so an
/// RLIMIT_AS makes their first allocation fail.
int cfetch_sanitizer_runtime_present(void);

/// Landlock (landlock(7)) has no glibc wrappers; these make the raw system calls. Each
/// returns what the call returns (a value >= 0) or -1 with errno set.
///
/// landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION): the kernel's Landlock
/// ABI version (ENOSYS: kernel without Landlock; EOPNOTSUPP: built in but disabled at boot).
int cfetch_landlock_abi(void);
/// landlock_create_ruleset with `handled_access_fs` (filesystem rights only): a ruleset fd.
int cfetch_landlock_create_ruleset(uint64_t handled_access_fs);
/// landlock_add_rule(LANDLOCK_RULE_PATH_BENEATH) for `path`, opened with O_PATH here: grants
/// `directory_access` beneath it when it is a directory, `file_access` when it is not (the
/// kernel refuses directory rights on a file with EINVAL).
int cfetch_landlock_allow_path(int ruleset_fd, const char *path, uint64_t directory_access, uint64_t file_access);
/// landlock_restrict_self(ruleset_fd, 0): confines the calling thread and the threads and
/// processes it creates from now on (not threads that already run). Needs NO_NEW_PRIVS.
int cfetch_landlock_restrict_self(int ruleset_fd);

#endif
