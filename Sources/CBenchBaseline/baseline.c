#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/inotify.h>
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

/* What every loop shares: the directory fds, the log, and the batch being built. `claim`
 * says which protocol it follows: rename each file into processing/ first (loop a), or read
 * it where it lies in incoming/ and unlink it there once its batch is durable (loop b). */
struct loop {
    int in_fd, proc_fd, log_fd;
    int claim;
    char *frames;
    size_t frame_bytes, capacity;
    char (*names)[256];
    int count;
    char *buffer;
    uint64_t seq;
};

enum { max_file = 65536 };

static int loop_open(struct loop *l, const char *incoming, const char *processing, const char *log_path, int claim) {
    memset(l, 0, sizeof *l);
    l->claim = claim;
    l->in_fd = open(incoming, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    l->proc_fd = open(processing, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    l->log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    l->capacity = (size_t)BASELINE_RECORDS_PER_SYNC * 2048;
    l->frames = malloc(l->capacity);
    l->names = calloc(BASELINE_RECORDS_PER_SYNC, 256);
    l->buffer = malloc(max_file);
    l->seq = 1;
    return (l->in_fd < 0 || l->proc_fd < 0 || l->log_fd < 0 || !l->frames || !l->names || !l->buffer) ? -1 : 0;
}

static void loop_close(struct loop *l) {
    free(l->frames);
    free(l->names);
    free(l->buffer);
    if (l->in_fd >= 0) close(l->in_fd);
    if (l->proc_fd >= 0) close(l->proc_fd);
    if (l->log_fd >= 0) close(l->log_fd);
}

/* The directory a taken file lies in until its batch is durable. */
static int loop_dir(const struct loop *l) {
    return l->claim ? l->proc_fd : l->in_fd;
}

/* Claims (loop a), reads and frames one file into the batch. 1 when added, 0 when it was gone
 * or unreadable, -1 on an allocation failure. */
static int loop_take(struct loop *l, const char *name) {
    if (l->claim && syscall(SYS_renameat2, l->in_fd, name, l->proc_fd, name, RENAME_NOREPLACE) != 0) return 0;
    int fd = openat(loop_dir(l), name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, l->buffer, max_file);
    close(fd);
    if (n < 0) n = 0;
    size_t need = sizeof(struct frame_header) + (((size_t)n + 7) & ~(size_t)7);
    if (l->frame_bytes + need > l->capacity) {
        l->capacity = (l->frame_bytes + need) * 2;
        l->frames = realloc(l->frames, l->capacity);
        if (!l->frames) return -1;
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct frame_header header = {
        .magic = 0x50534a52u, .length = (uint32_t)n, .seq = l->seq++,
        .ingest_millis = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000,
        .body_crc = crc32_iscsi((unsigned char *)l->buffer, (int)n, 0xffffffffu),
    };
    header.header_crc = crc32_iscsi((unsigned char *)&header, 24, 0xffffffffu);
    memcpy(l->frames + l->frame_bytes, &header, sizeof header);
    memcpy(l->frames + l->frame_bytes + sizeof header, l->buffer, (size_t)n);
    memset(l->frames + l->frame_bytes + sizeof header + n, 0, need - sizeof header - (size_t)n);
    l->frame_bytes += need;
    snprintf(l->names[l->count++], 256, "%s", name);
    return 1;
}

/* One write and one fdatasync for the batch, then its unlinks. */
static int loop_flush(struct loop *l) {
    size_t off = 0;
    while (off < l->frame_bytes) {
        ssize_t w = write(l->log_fd, l->frames + off, l->frame_bytes - off);
        if (w <= 0) return -1;
        off += (size_t)w;
    }
    if (fdatasync(l->log_fd) != 0) return -1;
    for (int i = 0; i < l->count; i++) unlinkat(loop_dir(l), l->names[i], 0);
    return 0;
}

static void loop_reset(struct loop *l) {
    l->count = 0;
    l->frame_bytes = 0;
}

long baseline_ingest(const char *incoming, const char *processing, const char *log_path) {
    return baseline_ingest_protocol(incoming, processing, log_path, BASELINE_RENAME_CLAIM);
}

long baseline_ingest_protocol(const char *incoming, const char *processing, const char *log_path, int claim) {
    struct loop l;
    long done = -1;
    if (loop_open(&l, incoming, processing, log_path, claim) != 0) goto out;
    DIR *dir = fdopendir(dup(l.in_fd));
    if (!dir) goto out;
    done = 0;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        if (entry->d_name[0] == '.') continue;
        int taken = loop_take(&l, entry->d_name);
        if (taken < 0) { done = -1; break; }
        if (taken == 1 && l.count == BASELINE_RECORDS_PER_SYNC) {
            if (loop_flush(&l) != 0) { done = -1; break; }
            done += l.count;
            loop_reset(&l);
        }
    }
    if (done >= 0 && l.count > 0) {
        if (loop_flush(&l) != 0) done = -1;
        else done += l.count;
    }
    closedir(dir);
out:
    loop_close(&l);
    return done;
}

int baseline_watch(const char *incoming) {
    int fd = inotify_init1(IN_CLOEXEC);
    if (fd < 0) return -1;
    if (inotify_add_watch(fd, incoming, IN_MOVED_TO) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static uint64_t monotonic_nanos(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Flushes the batch and stamps each of its files with the moment it became durable. */
static int follow_flush(struct loop *l, const long *indexes, long count, uint64_t *durable_nanos) {
    if (loop_flush(l) != 0) return -1;
    uint64_t now = monotonic_nanos();
    for (int i = 0; i < l->count; i++) {
        if (indexes[i] >= 0 && indexes[i] < count) durable_nanos[indexes[i]] = now;
    }
    return 0;
}

long baseline_follow(int watch_fd, const char *incoming, const char *processing, const char *log_path,
                     long count, uint64_t *durable_nanos) {
    struct loop l;
    long done = -1;
    char *events = malloc(65536);
    long *indexes = calloc(BASELINE_RECORDS_PER_SYNC, sizeof(long));
    if (loop_open(&l, incoming, processing, log_path, BASELINE_RENAME_CLAIM) != 0 || !events || !indexes) goto out;
    done = 0;
    while (done < count) {
        /* Everything that arrived since the last read is one batch: group commit, as a
         * competent loop does at any rate. */
        ssize_t n = read(watch_fd, events, 65536);
        if (n <= 0) { done = -1; break; }
        for (char *p = events; p < events + n;) {
            struct inotify_event *event = (struct inotify_event *)p;
            p += sizeof *event + event->len;
            if (event->len == 0) continue;
            int taken = loop_take(&l, event->name);
            if (taken < 0) { done = -1; goto out; }
            if (taken == 0) continue;
            /* The bench names its files s<index>.json. */
            indexes[l.count - 1] = event->name[0] == 's' ? strtol(event->name + 1, NULL, 10) : -1;
            if (l.count == BASELINE_RECORDS_PER_SYNC) {
                if (follow_flush(&l, indexes, count, durable_nanos) != 0) { done = -1; goto out; }
                done += l.count;
                loop_reset(&l);
            }
        }
        if (l.count > 0) {
            if (follow_flush(&l, indexes, count, durable_nanos) != 0) { done = -1; break; }
            done += l.count;
            loop_reset(&l);
        }
    }
out:
    loop_close(&l);
    free(events);
    free(indexes);
    return done;
}

/* Takes every file a fresh directory read finds, flushing full batches, then flushes the rest:
 * once it returns, nothing it took is still in a batch, so a late event naming one of those
 * files finds it gone instead of framing it twice. -1 on an error, else the files taken. */
static long burst_rescan(struct loop *l) {
    DIR *dir = fdopendir(dup(l->in_fd));
    if (!dir) return -1;
    long done = 0;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        if (entry->d_name[0] == '.') continue;
        int taken = loop_take(l, entry->d_name);
        if (taken < 0) { done = -1; break; }
        if (taken == 1 && l->count == BASELINE_RECORDS_PER_SYNC) {
            if (loop_flush(l) != 0) { done = -1; break; }
            done += l->count;
            loop_reset(l);
        }
    }
    closedir(dir);
    if (done >= 0 && l->count > 0) {
        if (loop_flush(l) != 0) return -1;
        done += l->count;
        loop_reset(l);
    }
    return done;
}

long baseline_burst(int watch_fd, const char *incoming, const char *processing, const char *log_path, int claim, long count) {
    struct loop l;
    long done = -1;
    char *events = malloc(65536);
    if (loop_open(&l, incoming, processing, log_path, claim) != 0 || !events) goto out;
    /* Whatever arrived before the watch was armed. */
    done = burst_rescan(&l);
    while (done >= 0 && done < count) {
        ssize_t n = read(watch_fd, events, 65536);
        if (n <= 0) { done = -1; break; }
        int overflowed = 0;
        for (char *p = events; p < events + n;) {
            struct inotify_event *event = (struct inotify_event *)p;
            p += sizeof *event + event->len;
            if (event->mask & IN_Q_OVERFLOW) { overflowed = 1; continue; }
            if (event->len == 0 || event->name[0] == '.') continue;
            int taken = loop_take(&l, event->name);
            if (taken < 0) { done = -1; goto out; }
            if (taken == 1 && l.count == BASELINE_RECORDS_PER_SYNC) {
                if (loop_flush(&l) != 0) { done = -1; goto out; }
                done += l.count;
                loop_reset(&l);
            }
        }
        if (l.count > 0) {
            if (loop_flush(&l) != 0) { done = -1; break; }
            done += l.count;
            loop_reset(&l);
        }
        if (overflowed) {
            /* Events were lost: the directory itself says what is left. */
            long found = burst_rescan(&l);
            if (found < 0) { done = -1; break; }
            done += found;
        }
    }
out:
    loop_close(&l);
    free(events);
    return done;
}
