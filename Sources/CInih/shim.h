#include <ini.h>

/// Debian's libinih exposes its options as process-wide globals, which Swift 6 refuses to
/// touch; set them here. systemd's INI dialect has neither inline comments nor indented
/// continuation lines, so both are turned off.
static inline void cinih_use_systemd_dialect(void) {
    ini_allow_inline_comments = 0;
    ini_allow_multiline = 0;
}
