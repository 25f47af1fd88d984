#ifndef CFETCHSHIM_H
#define CFETCHSHIM_H

/// prctl(2) is variadic; these fixed-argument wrappers are what Swift can call.
/// Each returns 0 or -1 with errno set.
int cfetch_no_new_privs(void);
int cfetch_parent_death_signal(int signal);
int cfetch_set_dumpable(int dumpable);

#endif
