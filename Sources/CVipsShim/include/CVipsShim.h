#ifndef CVIPSSHIM_H
#define CVIPSSHIM_H
#include <stddef.h>
/* Fixed-argument wrappers over libvips' variadic API, with only C types in the interface so
   Swift never imports the GLib headers. Errors are copied into the caller's buffer. */

/* vips_init once, operation cache off, one worker thread per pipeline, untrusted loaders
   (ImageMagick, PDF, ...) blocked, GLib warnings from VIPS silenced. 0 on success. */
int cvips_init(void);

/* Header only (vips_image_new_from_file with access=sequential; no pixels decoded).
   0 on success, -1 with `error` filled. */
int cvips_header(const char *path, int *width, int *height, int *pages, int *has_alpha, char *error, size_t error_size);

/* vips_thumbnail of the first page to fit max_edge (never enlarging), failing on truncated
   input, saved with vips_image_write_to_file to out_path (format from its extension, e.g.
   ".jpg[Q=80,strip]" is not needed: quality and strip are applied here). 0 or -1. */
int cvips_thumbnail(const char *path, int max_edge, const char *out_path, int *out_width, int *out_height, char *error, size_t error_size);
#endif
