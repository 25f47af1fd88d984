#include "CICU.h"
#include <string.h>
#include <unicode/utrans.h>
#include <unicode/utypes.h>

void *cicu_transliterator_open(const uint16_t *id, int32_t length, int32_t *status) {
    UErrorCode code = U_ZERO_ERROR;
    UTransliterator *transliterator = utrans_openU((const UChar *)id, length, UTRANS_FORWARD, NULL, 0, NULL, &code);
    *status = (int32_t)code;
    if (U_FAILURE(code)) {
        if (transliterator != NULL) utrans_close(transliterator);
        return NULL;
    }
    return transliterator;
}

void cicu_transliterator_close(void *transliterator) {
    if (transliterator != NULL) utrans_close((UTransliterator *)transliterator);
}

int32_t cicu_transliterate(const void *transliterator, const uint16_t *source, int32_t length, uint16_t *buffer,
                           int32_t capacity, int32_t *status) {
    if (transliterator == NULL || source == NULL || buffer == NULL || length < 0 || capacity < length) {
        *status = (int32_t)U_ILLEGAL_ARGUMENT_ERROR;
        return 0;
    }
    /* utrans_transUChars works in place on a writable alias of `buffer` and may have changed
       part of it before it finds the result too long; hence a fresh copy on every call. */
    memcpy(buffer, source, (size_t)length * sizeof(uint16_t));
    UErrorCode code = U_ZERO_ERROR;
    int32_t textLength = length;
    int32_t limit = length;
    utrans_transUChars((const UTransliterator *)transliterator, (UChar *)buffer, &textLength, capacity, 0, &limit, &code);
    /* A result that exactly fills the buffer has no room for a terminator; we use lengths. */
    if (code == U_STRING_NOT_TERMINATED_WARNING) code = U_ZERO_ERROR;
    *status = (int32_t)code;
    return textLength;
}

const char *cicu_error_name(int32_t status) {
    return u_errorName((UErrorCode)status);
}
