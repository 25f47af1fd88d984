#include "CVipsShim.h"
#include <pthread.h>
#include <string.h>
#include <vips/vips.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int init_result = -1;

static void quiet(const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer data) {
    (void)domain; (void)level; (void)message; (void)data;
}

static void do_init(void) {
    if (VIPS_INIT("pushspool") != 0) return;
    vips_cache_set_max(0);
    vips_cache_set_max_mem(0);
    vips_cache_set_max_files(0);
    vips_concurrency_set(1);
    vips_block_untrusted_set(TRUE);
    g_log_set_handler("VIPS", G_LOG_LEVEL_WARNING | G_LOG_LEVEL_MESSAGE | G_LOG_LEVEL_INFO, quiet, NULL);
    init_result = 0;
}

int cvips_init(void) {
    pthread_once(&once, do_init);
    return init_result;
}

/* vips keeps its error text in one process-wide buffer; copy and clear it. */
static void take_error(char *error, size_t error_size) {
    if (error && error_size > 0) {
        const char *text = vips_error_buffer();
        strncpy(error, text ? text : "unknown libvips error", error_size - 1);
        error[error_size - 1] = 0;
    }
    vips_error_clear();
}

int cvips_header(const char *path, int *width, int *height, int *pages, int *has_alpha, char *error, size_t error_size) {
    VipsImage *image = vips_image_new_from_file(path, "access", VIPS_ACCESS_SEQUENTIAL, NULL);
    if (!image) {
        take_error(error, error_size);
        return -1;
    }
    *width = vips_image_get_width(image);
    *height = vips_image_get_height(image);
    *pages = vips_image_get_n_pages(image);
    *has_alpha = vips_image_hasalpha(image) ? 1 : 0;
    g_object_unref(image);
    return 0;
}

int cvips_thumbnail(const char *path, int max_edge, const char *out_path, int *out_width, int *out_height, char *error, size_t error_size) {
    VipsImage *thumbnail = NULL;
    if (vips_thumbnail(path, &thumbnail, max_edge,
                       "height", max_edge,
                       "size", VIPS_SIZE_DOWN,
                       "fail_on", VIPS_FAIL_ON_TRUNCATED,
                       NULL) != 0) {
        take_error(error, error_size);
        return -1;
    }
    int result;
    const char *dot = strrchr(out_path, '.');
    if (dot && strcmp(dot, ".png") == 0) {
        result = vips_pngsave(thumbnail, out_path, "strip", TRUE, NULL);
    } else {
        result = vips_jpegsave(thumbnail, out_path, "Q", 80, "strip", TRUE, NULL);
    }
    if (result != 0) {
        take_error(error, error_size);
        g_object_unref(thumbnail);
        return -1;
    }
    *out_width = vips_image_get_width(thumbnail);
    *out_height = vips_image_get_height(thumbnail);
    g_object_unref(thumbnail);
    return 0;
}
