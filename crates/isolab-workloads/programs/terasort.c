/*
 * isolab's terasort: a stand-in for Hadoop TeraSort (seed 001's data-parallel
 * application subject), written for isolab; not Hadoop.
 *
 *   terasort gen DIR RECORDS     writes DIR/input: RECORDS records of 100 bytes in
 *                                TeraGen's layout (10-byte random key, 2 bytes
 *                                00 11, 32-digit hex row id, 4 bytes 88 99 AA BB,
 *                                48 filler bytes, 4 bytes CC DD EE FF), the same
 *                                bytes on every machine (splitmix64 of the row).
 *   terasort sort DIR WORKERS    sorts DIR/input as TeraSort does, with WORKERS
 *                                threads: the keys sampled into WORKERS key
 *                                ranges; map, each worker reads its split of the
 *                                input and writes one intermediate file per range
 *                                (DIR/map/M-R); reduce, each worker reads its
 *                                range's files, sorts them by key and writes
 *                                DIR/output/part-R (fsync'd); then the output is
 *                                validated (TeraValidate: every part sorted, the
 *                                parts in order, as many records as the input and
 *                                the same checksum) and the times are printed as
 *                                isolab's JSON metrics. The intermediate files are
 *                                removed; the output is left for the cleanup step.
 *
 * Exit status 0 when the output validates, 1 otherwise (with the reason on stderr).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define RECORD 100
#define KEY 10
#define SAMPLES_PER_WORKER 1000
#define MAX_WORKERS 1024
#define CHUNK_RECORDS 4096

static void die(const char *what, const char *path) {
    fprintf(stderr, "terasort: %s %s: %s\n", what, path ? path : "", strerror(errno));
    exit(1);
}

static void fail(const char *why) {
    fprintf(stderr, "terasort: %s\n", why);
    exit(1);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* An order-independent checksum of a record: summed over a data set. */
static uint64_t record_hash(const unsigned char *r) {
    uint64_t h = 1469598103934665603ULL;
    for (int i = 0; i < RECORD; i++) {
        h ^= r[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static void make_record(uint64_t row, unsigned char *r) {
    uint64_t a = splitmix64(row * 3), b = splitmix64(row * 3 + 1), c = splitmix64(row * 3 + 2);
    /* Byte by byte, so that the key is the same on every machine, whatever its byte order. */
    for (int i = 0; i < 8; i++) r[i] = (unsigned char)(a >> (8 * i));
    r[8] = (unsigned char)b;
    r[9] = (unsigned char)(b >> 8);
    r[10] = 0x00;
    r[11] = 0x11;
    char hex[33];
    snprintf(hex, sizeof hex, "%032llX", (unsigned long long)row);
    memcpy(r + 12, hex, 32);
    r[44] = 0x88, r[45] = 0x99, r[46] = 0xAA, r[47] = 0xBB;
    for (int i = 0; i < 48; i++) {
        r[48 + i] = 'A' + (unsigned char)((c >> (i % 8 * 8)) + i) % 26;
    }
    r[96] = 0xCC, r[97] = 0xDD, r[98] = 0xEE, r[99] = 0xFF;
}

static void write_all(int fd, const void *buf, size_t n, const char *path) {
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            die("cannot write", path);
        }
        p += w;
        n -= (size_t)w;
    }
}

static size_t read_all(int fd, void *buf, size_t n, off_t at, const char *path) {
    char *p = buf;
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(fd, p + done, n - done, at + (off_t)done);
        if (r < 0) {
            if (errno == EINTR) continue;
            die("cannot read", path);
        }
        if (r == 0) break;
        done += (size_t)r;
    }
    return done;
}

static int gen(const char *dir, uint64_t records) {
    char path[4096];
    snprintf(path, sizeof path, "%s/input", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) die("cannot create", path);
    unsigned char *buf = malloc((size_t)CHUNK_RECORDS * RECORD);
    if (!buf) fail("out of memory");
    for (uint64_t row = 0; row < records;) {
        size_t n = 0;
        for (; n < CHUNK_RECORDS && row < records; n++, row++) make_record(row, buf + n * RECORD);
        write_all(fd, buf, n * RECORD, path);
    }
    if (fsync(fd) != 0 || close(fd) != 0) die("cannot write", path);
    free(buf);
    return 0;
}

/* The shared state of one sort. */
static const char *g_dir;
static int g_workers;
static uint64_t g_records;
static unsigned char *g_bounds; /* g_workers - 1 keys */
static uint64_t g_input_sum[MAX_WORKERS];
static uint64_t g_output_sum[MAX_WORKERS];
static uint64_t g_output_count[MAX_WORKERS];

static int range_of(const unsigned char *key) {
    int lo = 0, hi = g_workers - 1; /* the first range whose upper bound is above key */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (memcmp(key, g_bounds + (size_t)mid * KEY, KEY) < 0) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

static int compare_keys(const void *a, const void *b) {
    return memcmp(a, b, KEY);
}

static void *map(void *arg) {
    int m = (int)(intptr_t)arg;
    char path[4096];
    snprintf(path, sizeof path, "%s/input", g_dir);
    int in = open(path, O_RDONLY);
    if (in < 0) die("cannot open", path);
    int *out = malloc(sizeof(int) * (size_t)g_workers);
    unsigned char **bufs = malloc(sizeof(unsigned char *) * (size_t)g_workers);
    size_t *used = calloc((size_t)g_workers, sizeof(size_t));
    unsigned char *chunk = malloc((size_t)CHUNK_RECORDS * RECORD);
    if (!out || !bufs || !used || !chunk) fail("out of memory");
    for (int r = 0; r < g_workers; r++) {
        snprintf(path, sizeof path, "%s/map/%d-%d", g_dir, m, r);
        out[r] = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (out[r] < 0) die("cannot create", path);
        bufs[r] = malloc((size_t)CHUNK_RECORDS * RECORD);
        if (!bufs[r]) fail("out of memory");
    }
    uint64_t first = g_records * (uint64_t)m / (uint64_t)g_workers;
    uint64_t end = g_records * (uint64_t)(m + 1) / (uint64_t)g_workers;
    uint64_t sum = 0;
    for (uint64_t row = first; row < end;) {
        size_t want = end - row < CHUNK_RECORDS ? (size_t)(end - row) : CHUNK_RECORDS;
        size_t got = read_all(in, chunk, want * RECORD, (off_t)(row * RECORD), "input");
        if (got != want * RECORD) fail("the input is shorter than its records");
        for (size_t i = 0; i < want; i++) {
            unsigned char *rec = chunk + i * RECORD;
            sum += record_hash(rec);
            int r = range_of(rec);
            memcpy(bufs[r] + used[r] * RECORD, rec, RECORD);
            if (++used[r] == CHUNK_RECORDS) {
                write_all(out[r], bufs[r], used[r] * RECORD, "an intermediate file");
                used[r] = 0;
            }
        }
        row += want;
    }
    for (int r = 0; r < g_workers; r++) {
        write_all(out[r], bufs[r], used[r] * RECORD, "an intermediate file");
        if (close(out[r]) != 0) die("cannot close", "an intermediate file");
        free(bufs[r]);
    }
    g_input_sum[m] = sum;
    close(in);
    free(out), free(bufs), free(used), free(chunk);
    return NULL;
}

static void *reduce(void *arg) {
    int r = (int)(intptr_t)arg;
    char path[4096];
    size_t total = 0;
    for (int m = 0; m < g_workers; m++) {
        struct stat st;
        snprintf(path, sizeof path, "%s/map/%d-%d", g_dir, m, r);
        if (stat(path, &st) != 0) die("cannot stat", path);
        total += (size_t)st.st_size;
    }
    unsigned char *data = malloc(total ? total : 1);
    if (!data) fail("out of memory: the shape's memory is too small for its part of the data set");
    size_t at = 0;
    for (int m = 0; m < g_workers; m++) {
        snprintf(path, sizeof path, "%s/map/%d-%d", g_dir, m, r);
        int fd = open(path, O_RDONLY);
        if (fd < 0) die("cannot open", path);
        struct stat st;
        if (fstat(fd, &st) != 0) die("cannot stat", path);
        if (read_all(fd, data + at, (size_t)st.st_size, 0, path) != (size_t)st.st_size)
            fail("an intermediate file changed while it was read");
        at += (size_t)st.st_size;
        close(fd);
        unlink(path);
    }
    size_t n = total / RECORD;
    qsort(data, n, RECORD, compare_keys);
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) sum += record_hash(data + i * RECORD);
    snprintf(path, sizeof path, "%s/output/part-%05d", g_dir, r);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) die("cannot create", path);
    write_all(fd, data, total, path);
    if (fsync(fd) != 0 || close(fd) != 0) die("cannot write", path);
    g_output_sum[r] = sum;
    g_output_count[r] = n;
    free(data);
    return NULL;
}

static void run_workers(void *(*body)(void *)) {
    pthread_t *t = malloc(sizeof(pthread_t) * (size_t)g_workers);
    if (!t) fail("out of memory");
    for (int i = 0; i < g_workers; i++) {
        if (pthread_create(&t[i], NULL, body, (void *)(intptr_t)i) != 0) fail("cannot start a worker thread");
    }
    for (int i = 0; i < g_workers; i++) pthread_join(t[i], NULL);
    free(t);
}

/* TeraValidate: every part sorted, each part's first key not below the last key of
 * the part before. */
static uint64_t validate(void) {
    char path[4096];
    unsigned char last[KEY];
    int have_last = 0;
    uint64_t count = 0;
    unsigned char *chunk = malloc((size_t)CHUNK_RECORDS * RECORD);
    if (!chunk) fail("out of memory");
    for (int r = 0; r < g_workers; r++) {
        snprintf(path, sizeof path, "%s/output/part-%05d", g_dir, r);
        int fd = open(path, O_RDONLY);
        if (fd < 0) die("cannot open", path);
        off_t at = 0;
        for (;;) {
            size_t got = read_all(fd, chunk, (size_t)CHUNK_RECORDS * RECORD, at, path);
            if (got % RECORD != 0) fail("an output part is not whole records");
            for (size_t i = 0; i < got / RECORD; i++) {
                const unsigned char *key = chunk + i * RECORD;
                if (have_last && memcmp(last, key, KEY) > 0) {
                    fprintf(stderr, "terasort: the output is not sorted at record %llu (part %d)\n",
                            (unsigned long long)count, r);
                    exit(1);
                }
                memcpy(last, key, KEY);
                have_last = 1;
                count++;
            }
            if (got < (size_t)CHUNK_RECORDS * RECORD) break;
            at += (off_t)got;
        }
        close(fd);
    }
    free(chunk);
    return count;
}

static int sort(const char *dir, int workers) {
    char path[4096];
    g_dir = dir;
    g_workers = workers;
    snprintf(path, sizeof path, "%s/input", dir);
    struct stat st;
    if (stat(path, &st) != 0) die("cannot stat", path);
    if (st.st_size % RECORD != 0 || st.st_size == 0) fail("the input is not whole records: run `terasort gen` first");
    g_records = (uint64_t)st.st_size / RECORD;
    static const char *const subdirs[] = {"map", "output"};
    for (size_t i = 0; i < sizeof subdirs / sizeof *subdirs; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, subdirs[i]);
        if (mkdir(path, 0755) != 0 && errno != EEXIST) die("cannot create", path);
    }
    double t0 = now();
    /* Sample the keys evenly over the input, as TeraSort's partitioner does. */
    size_t samples = (size_t)workers * SAMPLES_PER_WORKER;
    if (samples > g_records) samples = (size_t)g_records;
    unsigned char *keys = malloc(samples * KEY);
    g_bounds = malloc((size_t)workers * KEY);
    if (!keys || !g_bounds) fail("out of memory");
    snprintf(path, sizeof path, "%s/input", dir);
    int in = open(path, O_RDONLY);
    if (in < 0) die("cannot open", path);
    for (size_t i = 0; i < samples; i++) {
        uint64_t row = g_records * i / samples;
        if (read_all(in, keys + i * KEY, KEY, (off_t)(row * RECORD), path) != KEY) fail("short input");
    }
    close(in);
    qsort(keys, samples, KEY, compare_keys);
    for (int b = 1; b < workers; b++) memcpy(g_bounds + (size_t)(b - 1) * KEY, keys + samples * (size_t)b / (size_t)workers * KEY, KEY);
    free(keys);
    run_workers(map);
    double t1 = now();
    run_workers(reduce);
    double t2 = now();
    uint64_t count = validate();
    double t3 = now();
    snprintf(path, sizeof path, "%s/map", dir);
    rmdir(path);
    uint64_t in_sum = 0, out_sum = 0, out_count = 0;
    for (int i = 0; i < workers; i++) {
        in_sum += g_input_sum[i];
        out_sum += g_output_sum[i];
        out_count += g_output_count[i];
    }
    if (count != g_records || out_count != g_records) {
        fprintf(stderr, "terasort: %llu records in, %llu out\n", (unsigned long long)g_records, (unsigned long long)count);
        return 1;
    }
    if (in_sum != out_sum) fail("the output's checksum differs from the input's");
    double mb = (double)g_records * RECORD / 1e6;
    printf("{\"metrics\": ["
           "{\"name\": \"execution_time\", \"unit\": \"s\", \"direction\": \"lower\", \"value\": %.6f}, "
           "{\"name\": \"map_time\", \"unit\": \"s\", \"direction\": \"lower\", \"value\": %.6f}, "
           "{\"name\": \"reduce_time\", \"unit\": \"s\", \"direction\": \"lower\", \"value\": %.6f}, "
           "{\"name\": \"sort_rate\", \"unit\": \"MB/s\", \"direction\": \"higher\", \"value\": %.3f}, "
           "{\"name\": \"validate_time\", \"unit\": \"s\", \"direction\": \"lower\", \"value\": %.6f}, "
           "{\"name\": \"records\", \"unit\": \"count\", \"direction\": \"higher\", \"value\": %llu}, "
           "{\"name\": \"workers\", \"unit\": \"count\", \"direction\": \"higher\", \"value\": %d}]}\n",
           t2 - t0, t1 - t0, t2 - t1, mb / (t2 - t0), t3 - t2, (unsigned long long)g_records, workers);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "gen") == 0) {
        char *end;
        unsigned long long records = strtoull(argv[3], &end, 10);
        if (*end || records == 0) fail("RECORDS must be a whole number above 0");
        return gen(argv[2], records);
    }
    if (argc == 4 && strcmp(argv[1], "sort") == 0) {
        char *end;
        long workers = strtol(argv[3], &end, 10);
        if (*end || workers < 1 || workers > MAX_WORKERS) fail("WORKERS must be a whole number from 1 to 1024");
        return sort(argv[2], (int)workers);
    }
    fprintf(stderr, "usage: terasort gen DIR RECORDS | terasort sort DIR WORKERS\n");
    return 2;
}
