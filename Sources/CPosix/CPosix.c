#define _GNU_SOURCE
#include <malloc.h>
#include <string.h>
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
