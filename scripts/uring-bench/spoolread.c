// Spool reader: plain system calls against io_uring, for issue 36's "batched system calls".
// Per round and variant, 20,000 files of about 600 bytes are renamed into a fresh directory
// (as a producer drops them) and written back (syncfs); then each is stat'ed, opened, read
// and closed, and stat'ed and unlinked, in chunks of 32:
//   A  plain system calls;
//   B  io_uring: statx, then openat_direct linked to a fixed-file read and close_direct,
//      then statx + unlinkat, one submission a chunk each;
//   B2 B with IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
//   B3 A's reads, only the unlinks through io_uring.
// Prints files/s, CPU a file (the whole process, io-wq workers included: they are its
// threads) and the io-wq share. Run by scripts/uring-bench.sh (installs liburing-dev).
// The directory is URING_BENCH_DIR or /tmp/uring-bench/work.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define N 20000
#define CH 32
#define BUFSZ 65536
#ifndef ROUNDS
#define ROUNDS 5
#endif
#define NV 4
static const char *BASE = "/tmp/uring-bench/work";

static const char *vname[NV] = {"A", "B", "B2", "B3"};
static char names[N][64];
static int nnames;
static char *bufs; /* CH * BUFSZ */
static long long rd_total, expect_total;

#define DIE(...) do { fprintf(stderr, __VA_ARGS__); fprintf(stderr, " (errno %d %s)\n", errno, strerror(errno)); exit(1); } while (0)

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static double tv(struct timeval t) { return t.tv_sec + t.tv_usec * 1e-6; }
static double cpu(int who) { struct rusage r; getrusage(who, &r); return tv(r.ru_utime) + tv(r.ru_stime); }

/* ---- io-wq worker observation ---- */
static int seen[4096], nseen, maxconc;
static void scan_workers(void) {
    DIR *d = opendir("/proc/self/task");
    struct dirent *e; int conc = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[128], comm[32] = {0};
        snprintf(p, sizeof p, "/proc/self/task/%s/comm", e->d_name);
        int fd = open(p, O_RDONLY); if (fd < 0) continue;
        ssize_t n = read(fd, comm, sizeof comm - 1); close(fd);
        if (n > 0 && !strncmp(comm, "iou-", 4)) {
            conc++;
            int tid = atoi(e->d_name), k;
            for (k = 0; k < nseen; k++) if (seen[k] == tid) break;
            if (k == nseen && nseen < 4096) seen[nseen++] = tid;
        }
    }
    closedir(d);
    if (conc > maxconc) maxconc = conc;
}

/* ---- producer ---- */
static void produce(const char *spool, const char *tmp, int tag) {
    char buf[1024], tp[256], sp[256];
    for (int i = 0; i < N; i++) {
        snprintf(tp, sizeof tp, "%s/m-%d-%06d.json", tmp, tag, i);
        snprintf(sp, sizeof sp, "%s/m-%d-%06d.json", spool, tag, i);
        int len = snprintf(buf, sizeof buf, "{\"id\":%d,\"tag\":%d,\"ts\":1700000000,\"host\":\"spool-bench\",\"pad\":\"", i, tag);
        int target = 560 + (i * 7) % 81; /* 560..640 bytes */
        while (len < target - 3) { buf[len] = 'a' + (i + len) % 26; len++; }
        len += snprintf(buf + len, sizeof buf - len, "\"}\n");
        int fd = open(tp, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd < 0) DIE("create %s", tp);
        if (write(fd, buf, len) != len) DIE("write");
        close(fd);
        if (rename(tp, sp)) DIE("rename");
    }
}

static void list_names(int dfd) {
    int fd = dup(dfd); DIR *d = fdopendir(fd); rewinddir(d);
    struct dirent *e; nnames = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (nnames >= N) DIE("too many");
        strcpy(names[nnames++], e->d_name);
    }
    closedir(d);
}

static int count_entries(int dfd) {
    int fd = dup(dfd); DIR *d = fdopendir(fd); rewinddir(d);
    struct dirent *e; int c = 0;
    while ((e = readdir(d))) if (e->d_name[0] != '.') c++;
    closedir(d);
    return c;
}

/* ---- A: plain syscalls ---- */
static void read_chunk_plain(int dfd, int s, int n) {
    struct stat st, st2;
    for (int j = 0; j < n; j++) {
        const char *nm = names[s + j];
        if (fstatat(dfd, nm, &st, AT_SYMLINK_NOFOLLOW)) DIE("fstatat");
        int fd = openat(dfd, nm, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
        if (fd < 0) DIE("openat");
        if (fstat(fd, &st2)) DIE("fstat");
        ssize_t tot = 0, r;
        while ((r = read(fd, bufs, BUFSZ)) > 0) tot += r;
        if (r < 0) DIE("read");
        close(fd);
        if (tot != st2.st_size || tot != st.st_size) DIE("size mismatch %zd vs %lld", tot, (long long)st.st_size);
        rd_total += tot; expect_total += st.st_size;
    }
}

static double ph_rd, ph_ul; static long vc_rd, vc_ul, ic_rd, ic_ul;
static void run_A(int dfd) {
    struct stat st; struct rusage a, b, c;
    for (int s = 0; s < nnames; s += CH) {
        int n = nnames - s < CH ? nnames - s : CH;
        double t0 = now(); getrusage(RUSAGE_THREAD, &a);
        read_chunk_plain(dfd, s, n);
        double t1 = now(); getrusage(RUSAGE_THREAD, &b);
        for (int j = 0; j < n; j++) {
            if (fstatat(dfd, names[s + j], &st, AT_SYMLINK_NOFOLLOW)) DIE("fstatat2");
            if (unlinkat(dfd, names[s + j], 0)) DIE("unlinkat");
        }
        double t2 = now(); getrusage(RUSAGE_THREAD, &c);
        ph_rd += t1 - t0; ph_ul += t2 - t1;
        vc_rd += b.ru_nvcsw - a.ru_nvcsw; ic_rd += b.ru_nivcsw - a.ru_nivcsw;
        vc_ul += c.ru_nvcsw - b.ru_nvcsw; ic_ul += c.ru_nivcsw - b.ru_nivcsw;
        if ((s / CH) % 25 == 0) scan_workers();
    }
}

/* ---- io_uring helpers ---- */
static struct io_uring_sqe *sqe_get(struct io_uring *r) {
    struct io_uring_sqe *q = io_uring_get_sqe(r);
    if (!q) DIE("no sqe");
    return q;
}
/* user_data = op<<32 | idx */
enum { OP_STATX = 1, OP_OPEN, OP_READ, OP_CLOSE, OP_STATX2, OP_UNLINK };

static int reap(struct io_uring *r, int want, int64_t res[][8]) {
    struct io_uring_cqe *cqes[256];
    int got = 0;
    while (got < want) {
        struct io_uring_cqe *c;
        int ret = io_uring_wait_cqe_nr(r, &c, want - got);
        if (ret) { errno = -ret; DIE("wait_cqe_nr"); }
        unsigned k = io_uring_peek_batch_cqe(r, cqes, 256);
        for (unsigned i = 0; i < k; i++) {
            uint64_t ud = cqes[i]->user_data;
            res[ud & 0xffffffff][ud >> 32] = cqes[i]->res;
        }
        io_uring_cq_advance(r, k);
        got += k;
    }
    return got;
}

static struct statx stx[CH], stx2[CH];

static void run_B(struct io_uring *r, int dfd) {
    static int64_t res[CH][8];
    for (int s = 0; s < nnames; s += CH) {
        int n = nnames - s < CH ? nnames - s : CH;
        struct io_uring_sqe *q;
        for (int j = 0; j < n; j++) {
            q = sqe_get(r);
            io_uring_prep_statx(q, dfd, names[s + j], AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &stx[j]);
            q->user_data = ((uint64_t)OP_STATX << 32) | j;
        }
        for (int j = 0; j < n; j++) {
            q = sqe_get(r);
            io_uring_prep_openat_direct(q, dfd, names[s + j], O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0, j);
            q->flags |= IOSQE_IO_HARDLINK;
            q->user_data = ((uint64_t)OP_OPEN << 32) | j;
            q = sqe_get(r);
            io_uring_prep_read(q, j, bufs + (size_t)j * BUFSZ, BUFSZ, 0);
            /* hardlink: a short read (always, file < 64K) would break a soft link */
            q->flags |= IOSQE_FIXED_FILE | IOSQE_IO_HARDLINK;
            q->user_data = ((uint64_t)OP_READ << 32) | j;
            q = sqe_get(r);
            io_uring_prep_close_direct(q, j);
            q->user_data = ((uint64_t)OP_CLOSE << 32) | j;
        }
        int sub = io_uring_submit(r);
        if (sub != 4 * n) { errno = -sub; DIE("submit1 %d", sub); }
        reap(r, 4 * n, res);
        for (int j = 0; j < n; j++) {
            if (res[j][OP_STATX] < 0 || res[j][OP_OPEN] < 0 || res[j][OP_READ] < 0 || res[j][OP_CLOSE] < 0)
                DIE("cqe err %s: %lld %lld %lld %lld", names[s + j], (long long)res[j][OP_STATX], (long long)res[j][OP_OPEN],
                    (long long)res[j][OP_READ], (long long)res[j][OP_CLOSE]);
            if ((uint64_t)res[j][OP_READ] != stx[j].stx_size) DIE("size mismatch");
            rd_total += res[j][OP_READ]; expect_total += stx[j].stx_size;
        }
        /* second submit: statx -> unlinkat (linked to keep stat-before-unlink order) */
        for (int j = 0; j < n; j++) {
            q = sqe_get(r);
            io_uring_prep_statx(q, dfd, names[s + j], AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &stx2[j]);
            q->flags |= IOSQE_IO_LINK;
            q->user_data = ((uint64_t)OP_STATX2 << 32) | j;
            q = sqe_get(r);
            io_uring_prep_unlinkat(q, dfd, names[s + j], 0);
            q->user_data = ((uint64_t)OP_UNLINK << 32) | j;
        }
        sub = io_uring_submit(r);
        if (sub != 2 * n) { errno = -sub; DIE("submit2 %d", sub); }
        reap(r, 2 * n, res);
        for (int j = 0; j < n; j++)
            if (res[j][OP_STATX2] < 0 || res[j][OP_UNLINK] < 0) DIE("cqe2 err %lld %lld", (long long)res[j][OP_STATX2], (long long)res[j][OP_UNLINK]);
        if ((s / CH) % 25 == 0) scan_workers();
    }
}

static void run_B3(struct io_uring *r, int dfd) {
    static int64_t res[CH][8];
    struct stat st;
    for (int s = 0; s < nnames; s += CH) {
        int n = nnames - s < CH ? nnames - s : CH;
        read_chunk_plain(dfd, s, n);
        for (int j = 0; j < n; j++) {
            if (fstatat(dfd, names[s + j], &st, AT_SYMLINK_NOFOLLOW)) DIE("fstatat2");
            struct io_uring_sqe *q = sqe_get(r);
            io_uring_prep_unlinkat(q, dfd, names[s + j], 0);
            q->user_data = ((uint64_t)OP_UNLINK << 32) | j;
        }
        int sub = io_uring_submit(r);
        if (sub != n) { errno = -sub; DIE("submit3"); }
        reap(r, n, res);
        for (int j = 0; j < n; j++) if (res[j][OP_UNLINK] < 0) DIE("unlink err %lld", (long long)res[j][OP_UNLINK]);
        if ((s / CH) % 25 == 0) scan_workers();
    }
}

static int cmpd(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }
static double med(double *v, int n) { double t[ROUNDS]; memcpy(t, v, n * sizeof *v); qsort(t, n, sizeof *t, cmpd); return t[n / 2]; }

int main(void) {
    if (getenv("URING_BENCH_DIR")) BASE = getenv("URING_BENCH_DIR");
    /* raw syscall cost */
    {
        double t0 = now(), c0 = cpu(RUSAGE_SELF);
        for (int i = 0; i < 1000000; i++) syscall(SYS_getppid);
        double t1 = now(), c1 = cpu(RUSAGE_SELF);
        printf("getppid via syscall(): %.1f ns wall, %.1f ns CPU per call\n", (t1 - t0) * 1e3, (c1 - c0) * 1e3);
    }
    if (posix_memalign((void **)&bufs, 4096, (size_t)CH * BUFSZ)) DIE("alloc");
    memset(bufs, 0, (size_t)CH * BUFSZ);
    mkdir(BASE, 0755);
    char tmp[256]; snprintf(tmp, sizeof tmp, "%s/tmp", BASE);
    mkdir(tmp, 0755);

    struct io_uring rB, rB2;
    int ret = io_uring_queue_init(256, &rB, 0);
    if (ret) { errno = -ret; DIE("init B"); }
    ret = io_uring_queue_init(256, &rB2, IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN);
    if (ret) { errno = -ret; DIE("init B2"); }
    if ((ret = io_uring_register_files_sparse(&rB, CH))) { errno = -ret; DIE("sparse B"); }
    if ((ret = io_uring_register_files_sparse(&rB2, CH))) { errno = -ret; DIE("sparse B2"); }

    double rate[NV][ROUNDS], cpuself[NV][ROUNDS], cpuwrk[NV][ROUNDS], rdt[NV][ROUNDS];
    int wmax[NV] = {0}, wuniq[NV] = {0};
    printf("%-3s %5s %10s %9s %9s %9s %8s %6s %6s\n", "var", "round", "files/s", "wall_us/f", "cpu_us/f", "wrkcpu/f", "ctxsw/f", "wconc", "wseen");
    for (int rd = 0; rd < ROUNDS; rd++) {
        for (int v = 0; v < NV; v++) {
            char spool[256]; snprintf(spool, sizeof spool, "%s/spool-%d-%s", BASE, rd, vname[v]);
            if (mkdir(spool, 0755)) DIE("mkdir spool");
            produce(spool, tmp, rd * NV + v);
            int dfd = open(spool, O_RDONLY | O_DIRECTORY);
            if (syncfs(dfd)) DIE("syncfs");
            double l0 = now();
            list_names(dfd);
            rdt[v][rd] = now() - l0;
            if (nnames != N) DIE("nnames %d", nnames);
            rd_total = expect_total = 0; nseen = 0; maxconc = 0;
            struct rusage rt0, rt1;
            getrusage(RUSAGE_THREAD, &rt0);
            double ct0 = tv(rt0.ru_utime) + tv(rt0.ru_stime);
            double t0 = now(), c0 = cpu(RUSAGE_SELF);
            switch (v) {
            case 0: run_A(dfd); break;
            case 1: run_B(&rB, dfd); break;
            case 2: run_B(&rB2, dfd); break;
            case 3: run_B3(&rB, dfd); break;
            }
            double t1 = now(), c1 = cpu(RUSAGE_SELF);
            getrusage(RUSAGE_THREAD, &rt1);
            double ct1 = tv(rt1.ru_utime) + tv(rt1.ru_stime);
            scan_workers();
            int left = count_entries(dfd);
            if (left) DIE("directory not empty: %d left", left);
            if (rd_total != expect_total || rd_total < (long long)N * 560) DIE("byte total mismatch");
            close(dfd);
            if (rmdir(spool)) DIE("rmdir");
            rate[v][rd] = N / (t1 - t0);
            cpuself[v][rd] = (c1 - c0) * 1e6 / N;
            cpuwrk[v][rd] = ((c1 - c0) - (ct1 - ct0)) * 1e6 / N; /* SELF - main thread = io-wq workers */
            long csw = (rt1.ru_nvcsw + rt1.ru_nivcsw) - (rt0.ru_nvcsw + rt0.ru_nivcsw);
            if (maxconc > wmax[v]) wmax[v] = maxconc;
            if (nseen > wuniq[v]) wuniq[v] = nseen;
            printf("%-3s %5d %10.0f %9.2f %9.2f %9.2f %8.2f %6d %6d\n", vname[v], rd, rate[v][rd], (t1 - t0) * 1e6 / N,
                   cpuself[v][rd], cpuwrk[v][rd], (double)csw / N, maxconc, nseen);
            if (v == 0) { printf("    A phases: read %.1f us/f (vcsw %.2f icsw %.2f)  stat+unlink %.1f us/f (vcsw %.2f icsw %.2f)\n",
                ph_rd * 1e6 / N, (double)vc_rd / N, (double)ic_rd / N, ph_ul * 1e6 / N, (double)vc_ul / N, (double)ic_ul / N);
                ph_rd = ph_ul = 0; vc_rd = vc_ul = ic_rd = ic_ul = 0; }
            fflush(stdout);
        }
    }
    printf("\nMEDIANS (N=%d, %d rounds)\n%-3s %10s %9s %12s %14s %10s %8s\n", N, ROUNDS, "var", "files/s", "cpu_us/f",
           "iowq_cpu_us/f", "readdir_ms", "maxconcW", "maxW/run");
    for (int v = 0; v < NV; v++)
        printf("%-3s %10.0f %9.2f %12.2f %14.2f %10d %8d\n", vname[v], med(rate[v], ROUNDS), med(cpuself[v], ROUNDS),
               med(cpuwrk[v], ROUNDS), med(rdt[v], ROUNDS) * 1e3, wmax[v], wuniq[v]);
    rmdir(tmp); rmdir(BASE);
    return 0;
}
