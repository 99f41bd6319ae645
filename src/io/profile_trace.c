/* `chutney profile TRACE.json`: the profiler's table from a Chrome trace
 * file. The trace is read back rather than a second format written, so the
 * table can be made from any trace the profiler wrote (or one edited by
 * hand), and the same code prints it as for a live session. */
#include "fileio.h"
#include "json.h"
#include "../core/profiler.h"

#include <math.h>
#include <stdlib.h>

static double num(const cn_json *o, const char *key, double dflt) {
    const cn_json *v = o ? cn_json_get(o, key) : NULL;
    return v && v->kind == CN_JSON_NUMBER ? v->number : dflt;
}

static const char *str(const cn_json *o, const char *key) {
    const cn_json *v = o ? cn_json_get(o, key) : NULL;
    return v && v->kind == CN_JSON_STRING ? v->str : NULL;
}

int cn_profile_trace_summary(const char *path, FILE *out) {
    if (!path || !out) return cn_failc(CN_EINVAL, "profile: NULL argument");
    FILE *f;
    int64_t size;
    int rc = cn_fopen_regular(path, "profile", &f, &size);
    if (rc < 0) return rc;
    char *text = malloc((size_t)size + 1);
    if (!text) {
        fclose(f);
        return cn_failc(CN_ENOMEM, "trace %s: out of memory (%lld bytes)", path, (long long)size);
    }
    size_t got = fread(text, 1, (size_t)size, f);
    fclose(f);
    if (got != (size_t)size) {
        free(text);
        return cn_failc(CN_EIO, "trace %s: read %zu of %lld bytes", path, got, (long long)size);
    }
    char err[256];
    cn_json *doc = cn_json_parse(text, (size_t)size, err, sizeof err);
    free(text);
    if (!doc) return cn_failc(CN_EINVAL, "trace %s is not JSON: %s", path, err);
    /* Both forms Chrome reads: {"traceEvents": [...]} and a bare array. */
    const cn_json *evs = doc->kind == CN_JSON_ARRAY ? doc : cn_json_get(doc, "traceEvents");
    if (!evs || evs->kind != CN_JSON_ARRAY) {
        cn_json_free(doc);
        return cn_failc(CN_EINVAL, "trace %s is not a Chrome trace (no traceEvents array)", path);
    }
    cn_prof_ev *ev = malloc(sizeof *ev * (evs->n ? evs->n : 1));
    if (!ev) {
        cn_json_free(doc);
        return cn_failc(CN_ENOMEM, "profile: out of memory");
    }
    int64_t n = 0, mem_peak = -1;
    int max_tid = -1;
    for (size_t i = 0; i < evs->n; i++) {
        const cn_json *e = &evs->items[i];
        const char *ph = str(e, "ph"), *name = str(e, "name");
        if (!ph || !name) continue;
        const cn_json *args = cn_json_get(e, "args");
        if (!strcmp(ph, "C")) { /* the memory counter */
            double m = num(args, "cpu_tensor_bytes", -1);
            if (m > (double)mem_peak) mem_peak = (int64_t)m;
            continue;
        }
        if (strcmp(ph, "X")) continue;
        double ts = num(e, "ts", NAN), dur = num(e, "dur", 0);
        if (!isfinite(ts) || !isfinite(dur) || dur < 0) continue;
        const char *cat = str(e, "cat");
        int tid = (int)num(e, "tid", 0);
        if (tid > max_tid) max_tid = tid;
        /* Microseconds with three decimals: the nanoseconds again. */
        int64_t t0 = llround(ts * 1e3), t1 = t0 + llround(dur * 1e3);
        ev[n++] = (cn_prof_ev){.name = name, .t0 = t0, .t1 = t1, .flops = num(args, "flops", 0),
                               .bytes = num(args, "bytes", 0), .mem = -1, .tid = tid,
                               .kind = (uint8_t)(cat && !strcmp(cat, "range") ? CN_PROFILE_RANGE
                                                 : cat && !strcmp(cat, "step") ? CN_PROFILE_STEP
                                                                               : CN_PROFILE_OP)};
    }
    const cn_json *other = doc->kind == CN_JSON_OBJECT ? cn_json_get(doc, "otherData") : NULL;
    double peak = num(other, "memory_peak_bytes", -1);
    if (peak > (double)mem_peak) mem_peak = (int64_t)peak;
    cn_prof_totals tot = {.nthreads = (int)num(other, "threads", max_tid + 1),
                          .dropped = (int64_t)num(other, "dropped_events", 0),
                          .mem_start = (int64_t)num(other, "memory_start_bytes", -1),
                          .mem_peak = mem_peak};
    fprintf(out, "%s: ", path);
    rc = cn_prof_print_table(out, ev, n, &tot);
    free(ev);
    cn_json_free(doc);
    return rc;
}
