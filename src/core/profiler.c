/* The profiler (docs/profiling.md): per-thread event buffers, the Chrome
 * trace writer and the table by op.
 *
 * Recording must not serialise the threads it watches: each thread appends
 * to chunks of its own buffer, found through a thread-local pointer, and
 * takes the lock only for its first event of a session. The buffers are
 * read once recording has stopped (or by the thread that drives the work,
 * between ops), so they need no lock either. */
#define _GNU_SOURCE
#include "profiler.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int cn_prof_active;

#define CHUNK_EVENTS 1024
#define MAX_DEPTH 64
#define DEFAULT_MAX_EVENTS 1000000

typedef struct chunk {
    struct chunk *next;
    int n;
    cn_prof_ev ev[CHUNK_EVENTS];
} chunk;

typedef struct tbuf {
    struct tbuf *next; /* every buffer of the session */
    int tid;
    char label[32];
    chunk *head, *tail;
    int depth;
    int64_t open_t0[MAX_DEPTH];
    const char *open_name[MAX_DEPTH];
} tbuf;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t session;       /* bumped by every start: old thread buffers are stale */
static tbuf *buffers;          /* this session's, newest first */
static int nthreads;
static int64_t t_base;         /* session start, ns */
static int64_t max_events = DEFAULT_MAX_EVENTS;
static int64_t nrecorded, ndropped; /* __atomic */
static bool sync_devices;
static int64_t mem_start = -1;
static cn_prof_ev *snap;       /* every event, sorted: built on demand */
static int64_t nsnap;
static bool snap_valid;

static _Thread_local tbuf *my_buf;
static _Thread_local uint32_t my_session;

int64_t cn_prof_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

bool cn_prof_sync_devices(void) { return sync_devices; }

bool cn_profiler_enabled(void) { return cn_prof_on(); }

/* ---- names ---- */

/* Interned strings: an open-addressed set that only grows. Names are few
 * (ops, fused groups, ranges), and a pointer handed out stays valid for
 * the process, so a program may cache its steps' names across sessions. */
static const char **names;
static size_t names_cap, names_n;
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t hash_str(const char *s) {
    size_t h = 1469598103934665603u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

const char *cn_prof_intern(const char *s) {
    if (!s) s = "";
    pthread_mutex_lock(&names_lock);
    if (2 * (names_n + 1) > names_cap) {
        size_t cap = names_cap ? 2 * names_cap : 256;
        const char **t = calloc(cap, sizeof *t);
        if (!t) {
            pthread_mutex_unlock(&names_lock);
            return "?";
        }
        for (size_t i = 0; i < names_cap; i++)
            if (names[i]) {
                size_t j = hash_str(names[i]) & (cap - 1);
                while (t[j]) j = (j + 1) & (cap - 1);
                t[j] = names[i];
            }
        free(names);
        names = t;
        names_cap = cap;
    }
    size_t j = hash_str(s) & (names_cap - 1);
    while (names[j] && strcmp(names[j], s)) j = (j + 1) & (names_cap - 1);
    if (!names[j]) {
        char *c = strdup(s);
        if (!c) {
            pthread_mutex_unlock(&names_lock);
            return "?";
        }
        names[j] = c;
        names_n++;
    }
    const char *r = names[j];
    pthread_mutex_unlock(&names_lock);
    return r;
}

/* ---- recording ---- */

static void free_buffers(void) {
    for (tbuf *b = buffers; b;) {
        tbuf *next = b->next;
        for (chunk *c = b->head; c;) {
            chunk *cn = c->next;
            free(c);
            c = cn;
        }
        free(b);
        b = next;
    }
    buffers = NULL;
    nthreads = 0;
    free(snap);
    snap = NULL;
    nsnap = 0;
    snap_valid = false;
}

/* The calling thread's buffer for this session (made on first use). */
static tbuf *thread_buf(void) {
    uint32_t s = __atomic_load_n(&session, __ATOMIC_ACQUIRE);
    if (CN_LIKELY(my_buf && my_session == s)) return my_buf;
    tbuf *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    pthread_mutex_lock(&lock);
    b->tid = nthreads++;
    if (b->tid == 0) snprintf(b->label, sizeof b->label, "main");
    else if (cn_pool_worker > 0) snprintf(b->label, sizeof b->label, "worker %d", cn_pool_worker);
    else snprintf(b->label, sizeof b->label, "thread %d", b->tid);
    b->next = buffers;
    buffers = b;
    snap_valid = false;
    pthread_mutex_unlock(&lock);
    my_buf = b;
    my_session = s;
    return b;
}

static cn_prof_ev *new_event(tbuf *b) {
    if (__atomic_fetch_add(&nrecorded, 1, __ATOMIC_RELAXED) >= max_events) {
        __atomic_fetch_add(&ndropped, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    if (!b->tail || b->tail->n == CHUNK_EVENTS) {
        chunk *c = malloc(sizeof *c);
        if (!c) return NULL;
        c->next = NULL;
        c->n = 0;
        if (b->tail) b->tail->next = c;
        else b->head = c;
        b->tail = c;
    }
    return &b->tail->ev[b->tail->n];
}

static void push(tbuf *b, cn_profile_kind kind, const char *name, int64_t t0, int64_t t1,
                 double flops, double bytes, cn_device dev) {
    cn_prof_ev *e = new_event(b);
    if (!e) return;
    *e = (cn_prof_ev){.name = name, .t0 = t0, .t1 = t1, .flops = flops, .bytes = bytes,
                      .mem = cn_cpu_bytes_in_use(), .tid = b->tid, .kind = (uint8_t)kind,
                      .dev_kind = (int8_t)dev.kind, .dev_index = (int16_t)dev.index};
    /* Published after it is written: a reader on another thread counts it
     * only once it is whole. */
    __atomic_store_n(&b->tail->n, b->tail->n + 1, __ATOMIC_RELEASE);
}

void cn_prof_record(cn_profile_kind kind, const char *name, int64_t t0, int64_t t1, double flops,
                    double bytes, cn_device dev) {
    tbuf *b = thread_buf();
    if (b) push(b, kind, name, t0, t1, flops, bytes, dev);
}

void cn_prof_range_begin_static(const char *name) {
    tbuf *b = thread_buf();
    if (!b) return;
    if (b->depth < MAX_DEPTH) {
        b->open_name[b->depth] = name;
        b->open_t0[b->depth] = cn_prof_now();
    }
    b->depth++; /* past MAX_DEPTH only counted, so the ends still pair up */
}

void cn_profiler_range_begin(const char *name) {
    if (CN_UNLIKELY(cn_prof_on())) cn_prof_range_begin_static(cn_prof_intern(name));
}

void cn_profiler_range_end(void) {
    if (!cn_prof_on()) return;
    tbuf *b = thread_buf();
    /* A range begun before the session started ends with nothing open. */
    if (!b || b->depth == 0) return;
    b->depth--;
    if (b->depth < MAX_DEPTH)
        push(b, CN_PROFILE_RANGE, b->open_name[b->depth], b->open_t0[b->depth], cn_prof_now(), 0, 0,
             CN_CPU);
}

/* ---- sessions ---- */

int cn_profiler_start(const cn_profiler_opts *opts) {
    if (opts && opts->max_events < 0)
        return cn_failc(CN_EINVAL, "profiler_start: max_events %lld is negative",
                        (long long)opts->max_events);
    __atomic_store_n(&cn_prof_active, 0, __ATOMIC_RELAXED);
    pthread_mutex_lock(&lock);
    free_buffers();
    max_events = opts && opts->max_events ? opts->max_events : DEFAULT_MAX_EVENTS;
    sync_devices = opts && opts->sync_devices;
    __atomic_store_n(&nrecorded, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&ndropped, 0, __ATOMIC_RELAXED);
    __atomic_add_fetch(&session, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&lock);
    thread_buf(); /* the caller is thread 0 */
    mem_start = cn_cpu_bytes_in_use();
    t_base = cn_prof_now();
    __atomic_store_n(&cn_prof_active, 1, __ATOMIC_RELEASE);
    return 0;
}

int cn_profiler_stop(void) {
    if (!cn_prof_on()) return 0;
    /* Ranges still open end here, so the trace has no event without an end. */
    tbuf *b = thread_buf();
    while (b && b->depth > 0) cn_profiler_range_end();
    __atomic_store_n(&cn_prof_active, 0, __ATOMIC_RELEASE);
    return 0;
}

static int cmp_ev(const void *pa, const void *pb) {
    const cn_prof_ev *a = pa, *b = pb;
    if (a->t0 != b->t0) return a->t0 < b->t0 ? -1 : 1;
    if (a->t1 != b->t1) return a->t1 > b->t1 ? -1 : 1; /* the enclosing one first */
    if (a->tid != b->tid) return a->tid < b->tid ? -1 : 1;
    return a->kind > b->kind ? -1 : a->kind < b->kind; /* a range before an op it equals */
}

/* Every event, times from the session start, sorted. */
static int snapshot(void) {
    if (snap_valid) return 0;
    pthread_mutex_lock(&lock);
    int64_t n = 0;
    for (tbuf *b = buffers; b; b = b->next)
        for (chunk *c = b->head; c; c = c->next) n += __atomic_load_n(&c->n, __ATOMIC_ACQUIRE);
    cn_prof_ev *s = malloc(sizeof *s * (size_t)(n ? n : 1));
    if (!s) {
        pthread_mutex_unlock(&lock);
        return cn_failc(CN_ENOMEM, "profiler: out of memory");
    }
    int64_t k = 0;
    for (tbuf *b = buffers; b; b = b->next)
        for (chunk *c = b->head; c; c = c->next) {
            int m = __atomic_load_n(&c->n, __ATOMIC_ACQUIRE);
            for (int i = 0; i < m && k < n; i++) {
                s[k] = c->ev[i];
                s[k].t0 -= t_base;
                s[k].t1 -= t_base;
                k++;
            }
        }
    qsort(s, (size_t)k, sizeof *s, cmp_ev);
    free(snap);
    snap = s;
    nsnap = k;
    /* Recording goes on while active: then the next read looks again. */
    snap_valid = !cn_prof_on();
    pthread_mutex_unlock(&lock);
    return 0;
}

int64_t cn_profiler_num_events(void) { return snapshot() < 0 ? -1 : nsnap; }

int64_t cn_profiler_dropped_events(void) { return __atomic_load_n(&ndropped, __ATOMIC_RELAXED); }

int cn_profiler_get_event(int64_t i, cn_profile_event *e) {
    if (!e) return cn_failc(CN_EINVAL, "profiler_get_event: e is NULL");
    if (snapshot() < 0) return CN_ENOMEM;
    if (i < 0 || i >= nsnap)
        return cn_failc(CN_EINVAL, "profiler_get_event: event %lld out of range (%lld events)",
                        (long long)i, (long long)nsnap);
    const cn_prof_ev *s = &snap[i];
    *e = (cn_profile_event){.name = s->name, .kind = (cn_profile_kind)s->kind, .thread = s->tid,
                            .start_ns = s->t0, .end_ns = s->t1, .flops = s->flops,
                            .bytes = s->bytes, .memory_bytes = s->mem,
                            .device = CN_DEVICE(s->dev_kind, s->dev_index)};
    return 0;
}

/* ---- the Chrome trace ---- */

static void put_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

static const char *const kind_names[] = {"op", "step", "range"};

typedef struct mem_sample {
    int64_t t, mem;
} mem_sample;

static int cmp_sample(const void *pa, const void *pb) {
    const mem_sample *a = pa, *b = pb;
    return (a->t > b->t) - (a->t < b->t);
}

static int64_t mem_peak_of(const cn_prof_ev *ev, int64_t n) {
    int64_t peak = -1;
    for (int64_t i = 0; i < n; i++)
        if (ev[i].mem > peak) peak = ev[i].mem;
    return peak;
}

int cn_profiler_write_chrome_trace(const char *path) {
    if (!path) return cn_failc(CN_EINVAL, "profiler_write_chrome_trace: path is NULL");
    if (snapshot() < 0) return CN_ENOMEM;
    FILE *f = fopen(path, "w");
    if (!f) return cn_failc(CN_EIO, "profiler: cannot write %s: %s", path, strerror(errno));
    int pid = (int)getpid();
    fprintf(f, "{\"traceEvents\":[\n");
    fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
               "\"args\":{\"name\":\"chutney\"}}",
            pid);
    pthread_mutex_lock(&lock);
    for (tbuf *b = buffers; b; b = b->next)
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                   "\"args\":{\"name\":\"%s\"}}",
                pid, b->tid, b->label);
    int nth = nthreads;
    pthread_mutex_unlock(&lock);
    for (int64_t i = 0; i < nsnap; i++) {
        const cn_prof_ev *e = &snap[i];
        fprintf(f, ",\n{\"name\":");
        put_json_string(f, e->name);
        /* Microseconds with the nanoseconds kept as decimals. */
        fprintf(f, ",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d",
                kind_names[e->kind < 3 ? e->kind : 2], (double)e->t0 / 1e3,
                (double)(e->t1 - e->t0) / 1e3, pid, e->tid);
        if (e->kind != CN_PROFILE_RANGE) {
            fprintf(f, ",\"args\":{\"flops\":%.0f,\"bytes\":%.0f", e->flops, e->bytes);
            if (e->dev_kind != CN_DEVICE_CPU)
                fprintf(f, ",\"device\":\"%s\",\"timing\":\"%s\"",
                        cn_dev_name(CN_DEVICE(e->dev_kind, e->dev_index)),
                        sync_devices ? "synchronized" : "host enqueue");
            fputc('}', f);
        }
        fputc('}', f);
    }
    /* The memory counter, in the order of the samples (each event's end),
     * written where it changes. */
    mem_sample *ms = malloc(sizeof *ms * (size_t)(nsnap ? nsnap : 1));
    int64_t nms = 0;
    for (int64_t i = 0; ms && i < nsnap; i++)
        if (snap[i].mem >= 0) ms[nms++] = (mem_sample){snap[i].t1, snap[i].mem};
    if (ms) qsort(ms, (size_t)nms, sizeof *ms, cmp_sample);
    int64_t last = -1;
    if (mem_start >= 0) {
        fprintf(f, ",\n{\"name\":\"memory\",\"ph\":\"C\",\"ts\":0.000,\"pid\":%d,\"tid\":0,"
                   "\"args\":{\"cpu_tensor_bytes\":%lld}}",
                pid, (long long)mem_start);
        last = mem_start;
    }
    for (int64_t i = 0; i < nms; i++) {
        if (ms[i].mem == last) continue;
        last = ms[i].mem;
        fprintf(f, ",\n{\"name\":\"memory\",\"ph\":\"C\",\"ts\":%.3f,\"pid\":%d,\"tid\":0,"
                   "\"args\":{\"cpu_tensor_bytes\":%lld}}",
                (double)ms[i].t / 1e3, pid, (long long)last);
    }
    free(ms);
    int64_t peak = mem_peak_of(snap, nsnap);
    if (mem_start > peak) peak = mem_start;
    fprintf(f, "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"producer\":\"chutney %s\","
               "\"threads\":%d,\"dropped_events\":%lld,\"memory_start_bytes\":%lld,"
               "\"memory_peak_bytes\":%lld,\"device_timing\":\"%s\"}}\n",
            cn_version(), nth, (long long)cn_profiler_dropped_events(), (long long)mem_start,
            (long long)peak, sync_devices ? "synchronized" : "host enqueue");
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0 || bad)
        return cn_failc(CN_EIO, "profiler: cannot write %s: %s", path, strerror(errno));
    return 0;
}

/* ---- the table ---- */

typedef struct row {
    const char *name;
    int kind;
    int64_t calls;
    double self_ns, flops, bytes;
} row;

static int cmp_thread_time(const void *pa, const void *pb) {
    const cn_prof_ev *a = pa, *b = pb;
    if (a->tid != b->tid) return a->tid < b->tid ? -1 : 1;
    return cmp_ev(pa, pb);
}

static int cmp_name(const void *pa, const void *pb) {
    const cn_prof_ev *a = *(const cn_prof_ev *const *)pa, *b = *(const cn_prof_ev *const *)pb;
    int c = strcmp(a->name, b->name);
    return c ? c : a->kind - b->kind;
}

static int cmp_row(const void *pa, const void *pb) {
    const row *a = pa, *b = pb;
    if (a->self_ns != b->self_ns) return a->self_ns > b->self_ns ? -1 : 1;
    return strcmp(a->name, b->name);
}

static void rate(char *buf, size_t n, double amount, double ns) {
    if (amount > 0 && ns > 0) snprintf(buf, n, "%.2f", amount / ns); /* per ns = giga per s */
    else snprintf(buf, n, "-");
}

int cn_prof_print_table(FILE *f, cn_prof_ev *ev, int64_t n, const cn_prof_totals *tot) {
    if (!f) return cn_failc(CN_EINVAL, "profiler: no file to print to");
    /* Self time: an event's duration less that of the events directly
     * inside it on its thread, so nested events (an op inside a range, a
     * cast inside the op that promoted its input) are counted once. */
    qsort(ev, (size_t)n, sizeof *ev, cmp_thread_time);
    double *self = malloc(sizeof *self * (size_t)(n ? n : 1));
    int64_t *stack = malloc(sizeof *stack * (size_t)(n ? n : 1));
    const cn_prof_ev **byname = malloc(sizeof *byname * (size_t)(n ? n : 1));
    row *rows = malloc(sizeof *rows * (size_t)(n ? n : 1));
    if (!self || !stack || !byname || !rows) {
        free(self), free(stack), free(byname), free(rows);
        return cn_failc(CN_ENOMEM, "profiler: out of memory");
    }
    int64_t top = 0, t_min = 0, t_max = 0;
    for (int64_t i = 0; i < n; i++) {
        const cn_prof_ev *e = &ev[i];
        self[i] = (double)(e->t1 - e->t0);
        if (i == 0 || e->t0 < t_min) t_min = e->t0;
        if (i == 0 || e->t1 > t_max) t_max = e->t1;
        while (top > 0 && (ev[stack[top - 1]].tid != e->tid || ev[stack[top - 1]].t1 < e->t1))
            top--;
        if (top > 0) self[stack[top - 1]] -= (double)(e->t1 - e->t0);
        stack[top++] = i;
    }
    /* (self[] follows ev's order; byname points into ev, so its index gives self.) */
    for (int64_t i = 0; i < n; i++) byname[i] = &ev[i];
    qsort(byname, (size_t)n, sizeof *byname, cmp_name);
    int64_t nrows = 0;
    double total = 0;
    for (int64_t i = 0; i < n; i++) {
        const cn_prof_ev *e = byname[i];
        double s = self[e - ev] > 0 ? self[e - ev] : 0;
        if (nrows == 0 || strcmp(rows[nrows - 1].name, e->name) || rows[nrows - 1].kind != e->kind)
            rows[nrows++] = (row){.name = e->name, .kind = e->kind};
        row *r = &rows[nrows - 1];
        r->calls++;
        r->self_ns += s;
        r->flops += e->flops;
        r->bytes += e->bytes;
        total += s;
    }
    qsort(rows, (size_t)nrows, sizeof *rows, cmp_row);
    fprintf(f, "%lld events on %d thread%s over %.3f ms\n", (long long)n, tot->nthreads,
            tot->nthreads == 1 ? "" : "s", (double)(t_max - t_min) / 1e6);
    if (tot->dropped)
        fprintf(f, "(%lld more events were dropped: max_events was reached)\n",
                (long long)tot->dropped);
    fprintf(f, "%-44s %7s %10s %10s %7s %8s %8s\n", "op", "calls", "total ms", "mean us",
            "share %", "GFLOP/s", "GB/s");
    for (int64_t i = 0; i < nrows; i++) {
        const row *r = &rows[i];
        char name[64], gf[32], gb[32];
        /* Ranges list the time spent in them outside the ops they hold. */
        const char *suffix = r->kind == CN_PROFILE_RANGE ? " (outside ops)" : "";
        size_t room = 44 - strlen(suffix);
        if (strlen(r->name) > room) snprintf(name, sizeof name, "%.*s...%s", (int)room - 3, r->name, suffix);
        else snprintf(name, sizeof name, "%s%s", r->name, suffix);
        rate(gf, sizeof gf, r->flops, r->self_ns);
        rate(gb, sizeof gb, r->bytes, r->self_ns);
        fprintf(f, "%-44s %7lld %10.3f %10.1f %7.1f %8s %8s\n", name, (long long)r->calls,
                r->self_ns / 1e6, r->self_ns / 1e3 / (double)r->calls,
                total > 0 ? 100.0 * r->self_ns / total : 0.0, gf, gb);
    }
    fprintf(f, "%-44s %7lld %10.3f %10s %7.1f\n", "total", (long long)n, total / 1e6, "",
            total > 0 ? 100.0 : 0.0);
    int64_t peak = mem_peak_of(ev, n);
    if (tot->mem_peak > peak) peak = tot->mem_peak;
    if (peak >= 0) {
        fprintf(f, "memory: high-water %.3f MB in CPU tensors", (double)peak / 1e6);
        if (tot->mem_start >= 0)
            fprintf(f, " (%.3f MB at the start, +%.3f MB)", (double)tot->mem_start / 1e6,
                    (double)(peak - tot->mem_start) / 1e6);
        fputc('\n', f);
    }
    free(self), free(stack), free(byname), free(rows);
    return 0;
}

int cn_profiler_print_summary(FILE *f) {
    if (snapshot() < 0) return CN_ENOMEM;
    cn_prof_ev *copy = malloc(sizeof *copy * (size_t)(nsnap ? nsnap : 1));
    if (!copy) return cn_failc(CN_ENOMEM, "profiler: out of memory");
    memcpy(copy, snap, sizeof *copy * (size_t)nsnap);
    pthread_mutex_lock(&lock);
    cn_prof_totals t = {.nthreads = nthreads, .dropped = cn_profiler_dropped_events(),
                        .mem_start = mem_start, .mem_peak = -1};
    pthread_mutex_unlock(&lock);
    int rc = cn_prof_print_table(f, copy, nsnap, &t);
    free(copy);
    return rc;
}
