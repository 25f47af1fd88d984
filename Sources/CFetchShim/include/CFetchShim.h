#ifndef CFETCHSHIM_H
#define CFETCHSHIM_H

#include <spawn.h>

/// prctl(2) is variadic; these fixed-argument wrappers are what Swift can call.
/// Each returns 0 or -1 with errno set.
int cfetch_no_new_privs(void);
int cfetch_parent_death_signal(int signal);
int cfetch_set_dumpable(int dumpable);

/// posix_spawn_file_actions_addclosefrom_np (glibc 2.34, behind _GNU_SOURCE): close every fd
/// from `from` up in the child. Returns 0 or an errno value.
int cfetch_spawn_closefrom(posix_spawn_file_actions_t *actions, int from);

/// sigabbrev_np (glibc 2.32, behind _GNU_SOURCE): "SEGV" for 11; NULL when unknown. MT-safe.
const char *cfetch_signal_name(int signal);

/// 1 when this process carries AddressSanitizer's or ThreadSanitizer's runtime (a sanitizer
/// build of the tests): their shadow memory is terabytes of reserved address space, so an
/// RLIMIT_AS makes their first allocation fail.
int cfetch_sanitizer_runtime_present(void);

#endif
