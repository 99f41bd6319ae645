/* The CPU as a backend: host memory from core's caching allocator, copies
 * as memcpy, the kernel table (kernels.c), the fused register machine
 * (fused.c), the optimiser loops (optim_rules.c) and the Philox draws
 * (random.c). Work runs at once on the caller's thread and the pool, so the
 * queue is always empty. */
#include "../backend.h"
#include "kernels.h"
#include "iter.h"

/* optim_rules.c */
int cn_cpu_optim_update(const cn_optim_update *u, int n);

#include <stdio.h>
#include <unistd.h>

static int cpu_count(void) { return 1; }

static int cpu_info(int index, cn_device_info *info) {
    (void)index;
    snprintf(info->name, sizeof info->name, "%s", "CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "model name", 10) != 0) continue;
            const char *c = strchr(line, ':');
            if (!c) break;
            c++;
            while (*c == ' ' || *c == '\t') c++;
            snprintf(info->name, sizeof info->name, "%s", c);
            info->name[strcspn(info->name, "\n")] = 0;
            break;
        }
        fclose(f);
    }
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    info->memory_bytes = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
    info->max_alloc_bytes = info->memory_bytes;
    info->compute_units = cn_get_num_threads();
    snprintf(info->vendor, sizeof info->vendor, "%s", "host");
    snprintf(info->driver, sizeof info->driver, "%s", cn_build_info());
    return CN_OK;
}

static cn_storage *cpu_storage_new(int index, size_t nbytes) {
    (void)index;
    cn_storage *s = cn_storage_new(nbytes);
    if (!s) cn_fail("alloc: out of memory for %zu bytes on cpu:0", nbytes);
    return s;
}

static int cpu_memory_stats(int index, cn_memory_stats *s) {
    (void)index;
    cn_cpu_memory_stats(s);
    return CN_OK;
}

static size_t cpu_empty_cache(int index) {
    (void)index;
    return cn_empty_cache();
}

static int cpu_write(cn_storage *dst, size_t off, const void *src, size_t n, bool async) {
    (void)async;
    if (n) memcpy((char *)dst->data + off, src, n);
    return CN_OK;
}

static int cpu_read(const cn_storage *src, size_t off, void *dst, size_t n) {
    if (n) memcpy(dst, (const char *)src->data + off, n);
    return CN_OK;
}

static int cpu_copy_bytes(cn_storage *dst, size_t doff, const cn_storage *src, size_t soff,
                          size_t n) {
    if (n) memmove((char *)dst->data + doff, (const char *)src->data + soff, n);
    return CN_OK;
}

static int cpu_fill(cn_tensor *t, double v) {
    /* A one-element source broadcast over t. */
    _Alignas(8) unsigned char one[8];
    cn_store_f64(one, (cn_dtype)t->dtype, 0, v);
    cn_storage s = {.data = one, .nbytes = sizeof one, .refcount = 1};
    cn_tensor src = {.refcount = 1, .magic = CN_T_LIVE, .dtype = t->dtype, .ndim = 0, .storage = &s};
    return cn_copy_strided(t, &src);
}

static int cpu_sync(int index) {
    (void)index;
    return CN_OK;
}

/* Everything issued has finished when the call returns: an event is a
 * token that is always complete. */
static char cpu_event_token;
static void *cpu_event_record(int index) {
    (void)index;
    return &cpu_event_token;
}
static int cpu_event_sync(void *ev) {
    (void)ev;
    return CN_OK;
}
static bool cpu_event_query(void *ev) {
    (void)ev;
    return true;
}
static void cpu_event_free(void *ev) { (void)ev; }

const cn_backend cn_backend_cpu = {
    .name = "cpu",
    .kind = CN_DEVICE_CPU,
    .device_count = cpu_count,
    .device_info = cpu_info,
    .storage_new = cpu_storage_new,
    .memory_stats = cpu_memory_stats,
    .empty_cache = cpu_empty_cache,
    .write = cpu_write,
    .read = cpu_read,
    .copy_bytes = cpu_copy_bytes,
    .copy = cn_copy_strided,
    .fill = cpu_fill,
    .random_fill = cn_cpu_random_fill,
    .synchronize = cpu_sync,
    .event_record = cpu_event_record,
    .event_synchronize = cpu_event_sync,
    .event_query = cpu_event_query,
    .event_free = cpu_event_free,
    .kernels = cn_cpu_kernels,
    .fused_run = cn_fused_run,
    .optim_update = cn_cpu_optim_update,
};
