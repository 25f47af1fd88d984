#define _GNU_SOURCE
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/prctl.h>
#include "CFetchShim.h"

int cfetch_no_new_privs(void) { return prctl(PR_SET_NO_NEW_PRIVS, 1UL, 0UL, 0UL, 0UL); }
int cfetch_parent_death_signal(int signal) { return prctl(PR_SET_PDEATHSIG, (unsigned long)signal, 0UL, 0UL, 0UL); }
int cfetch_set_dumpable(int dumpable) { return prctl(PR_SET_DUMPABLE, (unsigned long)dumpable, 0UL, 0UL, 0UL); }
int cfetch_spawn_closefrom(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}
const char *cfetch_signal_name(int signal) { return sigabbrev_np(signal); }

/* Weak references: non-null only when the sanitizer runtime is linked into this binary
   (statically, as swiftc links it) or loaded. */
extern void __asan_init(void) __attribute__((weak));
extern void __tsan_init(void) __attribute__((weak));
int cfetch_sanitizer_runtime_present(void) { return __asan_init != NULL || __tsan_init != NULL; }
