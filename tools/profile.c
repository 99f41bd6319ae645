/* `chutney profile TRACE.json`, and the --profile option of `train` and
 * `run`: a few steps after the warm-up recorded into a Chrome trace
 * (docs/profiling.md). */
#include "tools.h"

#include <stdio.h>
#include <string.h>

static void profile_usage(FILE *f) {
    fprintf(f,
            "usage: chutney profile TRACE.json\n"
            "\n"
            "The table of a trace written by `chutney train --profile TRACE.json` or\n"
            "`chutney run MODEL.onnx ... --profile TRACE.json` (or cn_profiler_write_chrome_trace):\n"
            "one row per op or program step name, slowest first, with its calls, total and\n"
            "mean time, its share of the time, GFLOP/s and GB/s (from the estimated FLOPs\n"
            "and bytes), then the high-water mark of the CPU's bytes in tensors. Times are\n"
            "self times: a range (train_step, run, backward, optimizer.step) counts only\n"
            "what the ops inside it did not take. Open the trace itself in\n"
            "https://ui.perfetto.dev or chrome://tracing for the timeline.\n"
            "Exit status: 0 done, 1 a failure (the file), 2 a bad command line.\n");
}

int cn_tool_profile(int argc, char **argv) {
    const char *path = NULL;
    static const char *const opts[] = {"--help"};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            profile_usage(stdout);
            return 0;
        }
        if (argv[i][0] == '-' || path) return cn_tool_unknown_option("profile", argv[i], opts, 1);
        path = argv[i];
    }
    if (!path) {
        fprintf(stderr, "chutney profile: no trace given\n");
        profile_usage(stderr);
        return CN_TOOL_USAGE;
    }
    if (!cn_tool_readable("profile", "TRACE", path)) return CN_TOOL_FAILED;
    if (cn_profile_trace_summary(path, stdout) < 0) {
        fprintf(stderr, "chutney profile: %s\n", cn_last_error());
        return CN_TOOL_FAILED;
    }
    return 0;
}

/* ---- --profile FILE for train and run ---- */

void cn_tool_prof_init(cn_tool_prof *p, const char *path, int64_t steps, int64_t total) {
    *p = (cn_tool_prof){.path = path, .range = "train_step"};
    if (!path || total <= 0) return;
    /* The first steps compile, plan and fill the allocator's cache: not
     * what a step costs. Short runs keep at least one step to record. */
    p->start = total > 2 ? 2 : total - 1;
    p->stop = p->start + (steps > 0 ? steps : 10);
    if (p->stop > total) p->stop = total;
}

void cn_tool_prof_step_begin(cn_tool_prof *p) {
    if (!p->path) return;
    if (p->step == p->start && !p->on) {
        cn_profiler_start(NULL);
        p->on = true;
    }
    if (p->on) cn_profiler_range_begin(p->range);
}

/* Stops the session and writes the trace: 0, or 1 after a message. */
static int finish(cn_tool_prof *p) {
    p->on = false;
    p->done = true;
    cn_profiler_stop();
    if (cn_profiler_write_chrome_trace(p->path) < 0) {
        fprintf(stderr, "chutney: --profile: %s\n", cn_last_error());
        return 1;
    }
    char which[64];
    if (p->stop - p->start == 1) snprintf(which, sizeof which, "step %lld", (long long)p->stop);
    else snprintf(which, sizeof which, "steps %lld to %lld", (long long)p->start + 1, (long long)p->stop);
    fprintf(stderr, "profile: %s recorded in %s; `chutney profile %s` prints the table\n", which,
            p->path, p->path);
    return 0;
}

int cn_tool_prof_step_end(cn_tool_prof *p) {
    if (!p->path) return 0;
    p->step++;
    if (!p->on) return 0;
    cn_profiler_range_end();
    return p->step >= p->stop ? finish(p) : 0;
}

int cn_tool_prof_finish(cn_tool_prof *p) {
    /* A run that ended early (an error, a signal) still leaves what it
     * recorded. */
    if (!p->path || !p->on) return 0;
    p->stop = p->step;
    return finish(p);
}
