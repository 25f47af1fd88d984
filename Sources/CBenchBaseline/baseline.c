#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <isa-l/crc.h>
#include "CBenchBaseline.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE 1
#endif

struct frame_header {
    uint32_t magic;
    uint32_t length;
    uint64_t seq;
    int64_t ingest_millis;
    uint32_t header_crc;
    uint32_t body_crc;
    uint64_t reserved;
};

static int flush_batch(int log_fd, int proc_fd, char *frames, size_t frame_bytes, char (*names)[256], int count) {
    size_t off = 0;
    while (off < frame_bytes) {
        ssize_t w = write(log_fd, frames + off, frame_bytes - off);
        if (w <= 0) return -1;
        off += (size_t)w;
    }
    if (fdatasync(log_fd) != 0) return -1;
    for (int i = 0; i < count; i++) unlinkat(proc_fd, names[i], 0);
    return 0;
}

long baseline_ingest(const char *incoming, const char *processing, const char *log_path) {
    int in_fd = open(incoming, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int proc_fd = open(processing, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (in_fd < 0 || proc_fd < 0 || log_fd < 0) return -1;
    DIR *dir = fdopendir(dup(in_fd));
    if (!dir) return -1;
    enum { max_file = 65536 };
    size_t capacity = (size_t)BASELINE_RECORDS_PER_SYNC * 2048;
    char *frames = malloc(capacity);
    char (*names)[256] = calloc(BASELINE_RECORDS_PER_SYNC, 256);
    char *buffer = malloc(max_file);
    if (!frames || !names || !buffer) return -1;
    size_t frame_bytes = 0;
    int count = 0;
    long done = 0;
    uint64_t seq = 1;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        if (entry->d_name[0] == '.') continue;
        if (syscall(SYS_renameat2, in_fd, entry->d_name, proc_fd, entry->d_name, RENAME_NOREPLACE) != 0) continue;
        int fd = openat(proc_fd, entry->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t n = read(fd, buffer, max_file);
        close(fd);
        if (n < 0) n = 0;
        size_t need = sizeof(struct frame_header) + (((size_t)n + 7) & ~(size_t)7);
        if (frame_bytes + need > capacity) {
            capacity = (frame_bytes + need) * 2;
            frames = realloc(frames, capacity);
            if (!frames) return -1;
        }
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        struct frame_header header = {
            .magic = 0x50534a52u, .length = (uint32_t)n, .seq = seq++,
            .ingest_millis = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000,
            .body_crc = crc32_iscsi((unsigned char *)buffer, (int)n, 0xffffffffu),
        };
        header.header_crc = crc32_iscsi((unsigned char *)&header, 24, 0xffffffffu);
        memcpy(frames + frame_bytes, &header, sizeof header);
        memcpy(frames + frame_bytes + sizeof header, buffer, (size_t)n);
        memset(frames + frame_bytes + sizeof header + n, 0, need - sizeof header - (size_t)n);
        frame_bytes += need;
        snprintf(names[count++], 256, "%s", entry->d_name);
        if (count == BASELINE_RECORDS_PER_SYNC) {
            if (flush_batch(log_fd, proc_fd, frames, frame_bytes, names, count) != 0) return -1;
            done += count;
            count = 0;
            frame_bytes = 0;
        }
    }
    if (count > 0) {
        if (flush_batch(log_fd, proc_fd, frames, frame_bytes, names, count) != 0) return -1;
        done += count;
    }
    free(frames);
    free(names);
    free(buffer);
    closedir(dir);
    close(in_fd);
    close(proc_fd);
    close(log_fd);
    return done;
}
