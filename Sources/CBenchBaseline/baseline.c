#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "CBenchBaseline.h"

long baseline_ingest(const char *incoming, const char *processing, const char *log_path, int batch) {
    int in_fd = open(incoming, O_RDONLY | O_DIRECTORY);
    int proc_fd = open(processing, O_RDONLY | O_DIRECTORY);
    int log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (in_fd < 0 || proc_fd < 0 || log_fd < 0) return -1;
    DIR *dir = fdopendir(dup(in_fd));
    if (!dir) return -1;
    char buffer[65536];
    char (*pending)[256] = calloc((size_t)batch, 256);
    int pending_count = 0;
    long done = 0;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        if (entry->d_name[0] == '.') continue;
        if (renameat(in_fd, entry->d_name, proc_fd, entry->d_name) != 0) continue;
        int fd = openat(proc_fd, entry->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t n = read(fd, buffer, sizeof buffer);
        close(fd);
        if (n > 0 && write(log_fd, buffer, (size_t)n) != n) return -1;
        snprintf(pending[pending_count++], 256, "%s", entry->d_name);
        if (pending_count == batch) {
            if (fdatasync(log_fd) != 0) return -1;
            for (int i = 0; i < pending_count; i++) unlinkat(proc_fd, pending[i], 0);
            done += pending_count;
            pending_count = 0;
        }
    }
    if (pending_count > 0) {
        if (fdatasync(log_fd) != 0) return -1;
        for (int i = 0; i < pending_count; i++) unlinkat(proc_fd, pending[i], 0);
        done += pending_count;
    }
    free(pending);
    closedir(dir);
    close(in_fd);
    close(proc_fd);
    close(log_fd);
    return done;
}
