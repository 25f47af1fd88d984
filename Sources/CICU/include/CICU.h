#ifndef CICU_H
#define CICU_H
#include <stdint.h>
/* ICU's transliterator (Debian's libicu) through typed functions with a `cicu_` prefix. Swift
   cannot call ICU's C API directly: every ICU function name is a macro that appends the
   library's version (utrans_openU -> utrans_openU_72), and Swift imports no such macro. The
   signatures use only fixed-width integers, so no ICU header reaches Swift. */

/* Opens the transliterator named by `id` (UTF-16, `length` units; an ICU transform id such as
   "Any-Latin; Latin-ASCII") in the forward direction. Returns NULL and sets *status to the
   ICU error code (> 0) when ICU has no such transliterator. */
void *cicu_transliterator_open(const uint16_t *id, int32_t length, int32_t *status);

/* Closes a transliterator from cicu_transliterator_open; NULL is ignored. */
void cicu_transliterator_close(void *transliterator);

/* Copies `source` (`length` UTF-16 units) into `buffer` and transliterates it there. Returns the
   length of the result in UTF-16 units. When the result needs more than `capacity` units it
   returns the length needed and sets *status to U_BUFFER_OVERFLOW_ERROR (15); `buffer` then
   holds nothing usable and the caller tries again with a larger one. Other failures set
   *status > 0. */
int32_t cicu_transliterate(const void *transliterator, const uint16_t *source, int32_t length, uint16_t *buffer,
                           int32_t capacity, int32_t *status);

/* ICU's name for an error code ("U_INVALID_ID"); a static string. */
const char *cicu_error_name(int32_t status);

/* U_BUFFER_OVERFLOW_ERROR, for callers that cannot see ICU's headers. */
#define CICU_BUFFER_OVERFLOW 15
#endif
