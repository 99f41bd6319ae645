/* The profiler's hooks (profiler.c; docs/profiling.md). The dispatcher and
 * the program executor test cn_prof_on() once per op or step and take a
 * cold path that times and records it only when it is set, so a build with
 * the profiler off pays one predictable branch. */
#ifndef CN_PROFILER_H
#define CN_PROFILER_H

#include "core.h"

#include <stdio.h>

/* Set while a session records (cn_profiler_start .. stop). */
extern int cn_prof_active;
static inline bool cn_prof_on(void) {
    return __atomic_load_n(&cn_prof_active, __ATOMIC_RELAXED) != 0;
}

/* One recorded event. Names are static strings (op names) or interned
 * (cn_prof_intern), so an event is a few words and no copy. */
typedef struct cn_prof_ev {
    const char *name;
    int64_t t0, t1; /* ns */
    double flops, bytes;
    int64_t mem;    /* CPU bytes in tensors at t1; -1 unknown */
    int32_t tid;
    uint8_t kind;   /* cn_profile_kind */
    int8_t dev_kind;
    int16_t dev_index;
} cn_prof_ev;

/* The monotonic clock in ns. */
int64_t cn_prof_now(void);
/* Records an event on the calling thread's buffer (no lock), with the
 * CPU's bytes in tensors sampled now. name must outlive the session: a
 * static string or one from cn_prof_intern. */
void cn_prof_record(cn_profile_kind kind, const char *name, int64_t t0, int64_t t1, double flops,
                    double bytes, cn_device dev);
/* A copy of s that lives as long as the process (one per distinct s). */
const char *cn_prof_intern(const char *s);
/* cn_profiler_opts.sync_devices of the session. */
bool cn_prof_sync_devices(void);
/* A range named by a static string (no copy). */
void cn_prof_range_begin_static(const char *name);

/* The library's own ranges: nothing but the flag test while off. */
static inline void cn_prof_range_begin(const char *name) {
    if (CN_UNLIKELY(cn_prof_on())) cn_prof_range_begin_static(name);
}
static inline void cn_prof_range_end(void) {
    if (CN_UNLIKELY(cn_prof_on())) cn_profiler_range_end();
}

/* The table of cn_profiler_print_summary for any set of events (the io
 * layer's trace reader uses it too). ev is reordered. mem_start < 0: not
 * known. */
typedef struct cn_prof_totals {
    int nthreads;
    int64_t dropped;
    int64_t mem_start, mem_peak; /* -1: not known */
} cn_prof_totals;
int cn_prof_print_table(FILE *f, cn_prof_ev *ev, int64_t n, const cn_prof_totals *tot);

/* The pool's worker number on its threads (threads.c), 0 elsewhere: the
 * trace names threads after it. */
extern _Thread_local int cn_pool_worker;

/* Bytes in tensors on the CPU now (alloc.c): cheaper than
 * cn_cpu_memory_stats (no lock on the cache). */
int64_t cn_cpu_bytes_in_use(void);

#endif
