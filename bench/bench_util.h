/* What every benchmark needs: a monotonic clock and medians. */
#ifndef CN_BENCH_UTIL_H
#define CN_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>

static inline double bench_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Process CPU time, which a busy shared machine disturbs less than the
 * wall clock (meaningful at 1 thread only): the benchmarks' --cpu-time. */
static inline double bench_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v. */
static inline double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The options bench_elementwise and bench_fused take: --n ELEMENTS,
 * --repeats N, --json. Returns 0, or prints usage and returns 2. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
static inline int bench_size_args(int argc, char **argv, int64_t *n, int *repeats, bool *json) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) *json = true;
        else if (!strcmp(argv[i], "--n") && i + 1 < argc) *n = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--repeats") && i + 1 < argc) *repeats = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--n ELEMENTS] [--repeats N] [--json]\n", argv[0]);
            return 2;
        }
    }
    if (*repeats < 1) *repeats = 1;
    if (*n < 1) *n = 1;
    return 0;
}

#endif
