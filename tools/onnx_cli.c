/* `chutney run` and `chutney info`: ONNX models from the command line.
 *
 *   chutney run MODEL.onnx --input NAME=FILE.npy [--input ...] --output-dir DIR
 *               [--threads T] [--bench N] [--device DEV]
 *   chutney info MODEL.onnx
 *   chutney info --supported-ops     (the op table of docs/onnx.md, Markdown)
 *   chutney graph MODEL.onnx [-O LEVEL | --optimized] [--text] [--output FILE]
 *
 * run loads the inputs first, so the model is imported with their concrete
 * shapes (shape computations fold), then writes DIR/<output name>.npy for
 * every graph output; --bench N times N runs after one warm-up run and
 * prints the median. --device runs it there: the inputs are copied to the
 * device (the program runs where its inputs are fed), the outputs back. */
#include "tools.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define MAX_INPUTS 64

static int cmp_op_name(const void *a, const void *b) {
    return strcmp(((const cn_onnx_op_info *)a)->name, ((const cn_onnx_op_info *)b)->name);
}

/* The importer's op table as the Markdown of docs/onnx.md, sorted by name.
 * Returns the number of ops listed: 0 without ONNX support, < 0 on error. */
static int supported_ops_markdown(FILE *f) {
    int n = cn_onnx_op_count();
    if (n <= 0) {
        fprintf(f, "(built without ONNX support)\n");
        return 0;
    }
    cn_onnx_op_info *all = malloc(sizeof *all * (size_t)n);
    if (!all) {
        fprintf(stderr, "chutney info: out of memory\n");
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (cn_onnx_get_op_info(i, &all[i]) < 0) {
            fprintf(stderr, "chutney info: %s\n", cn_last_error());
            free(all);
            return -1;
        }
    qsort(all, (size_t)n, sizeof *all, cmp_op_name);
    fprintf(f, "| ONNX op | attributes read | limits |\n|---|---|---|\n");
    for (int i = 0; i < n; i++) {
        fprintf(f, "| %s | ", all[i].name);
        /* Legacy attributes (consumed_inputs, is_test, ...) are listed too:
         * they are read, and refused where they ask for what is missing. */
        const char *a = all[i].attrs;
        if (!*a) fputc('-', f);
        for (; *a; a++) {
            if (*a == ',') fputs(", ", f);
            else fputc(*a, f);
        }
        fprintf(f, " | %s |\n", *all[i].limits ? all[i].limits : "-");
    }
    free(all);
    return n;
}

static int run_usage(FILE *f) {
    fprintf(f, "usage: chutney run MODEL.onnx --input NAME=FILE.npy [--input ...] --output-dir DIR\n"
               "                   [--threads T] [--bench N] [--device DEV]\n"
               "                   [--precision {f32,bf16,f16}]\n"
               "                   [--profile TRACE.json [--profile-steps N]]\n"
               "\n"
               "Runs the model on the .npy inputs (one --input per model input; `chutney info\n"
               "MODEL.onnx` lists them, and a wrong name lists them too) and writes\n"
               "DIR/<output name>.npy for every output. --bench N times N more runs.\n"
               "--device cpu (the default), opencl or opencl:N: where the model runs\n"
               "(`chutney devices` lists them).\n"
               "--precision bf16 or f16: the products in that type (autocast; default f32).\n"
               "--profile writes a Chrome trace of N more runs (default 10) after the first:\n"
               "`chutney profile TRACE.json` prints its table (docs/profiling.md).\n"
               "Exit status: 0 done, 1 a failure (files, the model), 2 a bad command line\n"
               "(an option, or an input name the model does not have).\n");
    return CN_TOOL_USAGE;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* An output name as a file name: path separators and odd characters
 * become '_', so a name cannot leave the output directory. */
static void file_name(const char *name, char *buf, size_t n) {
    size_t k = 0;
    for (const char *p = name; *p && k + 5 < n; p++) {
        char ch = *p;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                  ch == '_' || ch == '-' || ch == '.';
        buf[k++] = ok ? ch : '_';
    }
    if (k == 0 || buf[0] == '.') buf[k++] = '_';
    buf[k] = '\0';
}

/* One value of a model: name, dtype, shape ('?' where unknown). */
static void print_value(FILE *f, const char *name, cn_tensor *t) {
    if (!t) {
        fprintf(f, "  %-24s (declared without a shape: known when the model runs)\n", name);
        return;
    }
    fprintf(f, "  %-24s %-5s [", name, cn_dtype_name(cn_tensor_dtype(t)));
    for (int d = 0; d < cn_ndim(t); d++) {
        int64_t s = cn_dim(t, d);
        if (s < 0) fprintf(f, "%s?", d ? ", " : "");
        else fprintf(f, "%s%lld", d ? ", " : "", (long long)s);
    }
    fprintf(f, "]\n");
}

/* The model with its declared input shapes, or, when its shape computations
 * need them, with unknown sizes taken as 1 (*as_one says so). */
static cn_onnx_model *load_for_inspection(const char *path, bool *as_one) {
    cn_onnx_model *m = cn_onnx_load(path, NULL);
    *as_one = false;
    if (!m && strstr(cn_last_error(), "give concrete input shapes")) {
        m = cn_onnx_load(path, &(cn_onnx_load_opts){.unknown_size = 1});
        *as_one = m != NULL;
    }
    return m;
}

/* ---- run ---- */

typedef struct run_args {
    const char *model, *outdir, *device_name;
    const char *names[MAX_INPUTS], *files[MAX_INPUTS];
    int nin;
    long long threads, bench;
    const char *profile;
    long long profile_steps;
} run_args;

static const char *const run_options[] = {"--input", "--output-dir", "--threads", "--bench",
                                          "--device", "--profile", "--profile-steps", "--help"};
#define RUN_NOPTIONS (int)(sizeof run_options / sizeof run_options[0])

/* --input NAME=FILE.npy into r: 0, or the exit status after a message. */
static int add_input(run_args *r, char *v) {
    char *eq = strchr(v, '=');
    if (!eq || eq == v || !eq[1]) {
        fprintf(stderr, "chutney run: bad value '%s' for --input: expected NAME=FILE.npy\n", v);
        return CN_TOOL_USAGE;
    }
    if (r->nin == MAX_INPUTS) {
        fprintf(stderr, "chutney run: too many --input (at most %d)\n", MAX_INPUTS);
        return CN_TOOL_USAGE;
    }
    *eq = '\0';
    for (int k = 0; k < r->nin; k++)
        if (!strcmp(r->names[k], v)) {
            fprintf(stderr, "chutney run: input '%s' given twice\n", v);
            return CN_TOOL_USAGE;
        }
    r->names[r->nin] = v;
    r->files[r->nin++] = eq + 1;
    return 0;
}

static int run_option(run_args *r, const char *k, char *v) {
    if (!strcmp(k, "--input")) return add_input(r, v);
    if (!strcmp(k, "--output-dir")) r->outdir = v;
    else if (!strcmp(k, "--device")) r->device_name = v;
    else if (!strcmp(k, "--profile")) r->profile = v;
    else if (!strcmp(k, "--profile-steps")) {
        if (!cn_tool_int("run", k, v, 1, 1000000, &r->profile_steps)) return CN_TOOL_USAGE;
    }
    else if (!strcmp(k, "--threads")) {
        if (!cn_tool_int("run", k, v, 1, 256, &r->threads)) return CN_TOOL_USAGE;
    } else if (!cn_tool_int("run", k, v, 1, 1000000, &r->bench)) {
        return CN_TOOL_USAGE;
    }
    return 0;
}

/* An --output-dir that exists is a directory; one that does not can be
 * made (its parent exists and is writable): checked before any work. */
static bool output_dir_ok(const char *dir) {
    struct stat st;
    if (stat(dir, &st) == 0) return cn_tool_directory("run", "--output-dir", dir);
    return cn_tool_writable("run", "--output-dir", dir);
}

/* 0: go on; -1: --help was printed; else the exit status. */
static int run_parse(int argc, char **argv, run_args *r) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            run_usage(stdout);
            return -1;
        }
        if (a[0] != '-') {
            if (r->model) return cn_tool_unknown_option("run", a, run_options, RUN_NOPTIONS);
            r->model = a;
            continue;
        }
        bool known = false;
        for (int o = 0; o < RUN_NOPTIONS - 1; o++) known |= !strcmp(a, run_options[o]);
        if (!known) return cn_tool_unknown_option("run", a, run_options, RUN_NOPTIONS);
        if (i + 1 >= argc || !strncmp(argv[i + 1], "--", 2))
            return cn_tool_missing_value("run", a, !strcmp(a, "--input") ? "NAME=FILE.npy"
                                                   : !strcmp(a, "--output-dir") ? "a directory"
                                                   : !strcmp(a, "--device") ? "a device such as cpu or opencl:0"
                                                   : !strcmp(a, "--profile") ? "a trace file to write"
                                                                            : "a number");
        int rc = run_option(r, a, argv[++i]);
        if (rc) return rc;
    }
    if (!r->model || !r->outdir) {
        fprintf(stderr, "chutney run: %s\n", !r->model ? "no model given" : "--output-dir is required");
        return run_usage(stderr);
    }
    return 0;
}

/* The model's inputs, for a message about the ones given. */
static void list_inputs(const cn_onnx_model *m, const char *model) {
    fprintf(stderr, "%s has %d input%s:\n", model, cn_onnx_num_inputs(m),
            cn_onnx_num_inputs(m) == 1 ? "" : "s");
    for (int i = 0; i < cn_onnx_num_inputs(m); i++)
        print_value(stderr, cn_onnx_input_name(m, i), cn_onnx_input(m, i));
}

/* After the model failed to load with the inputs given: when it loads
 * without them, the failure was theirs (a name it lacks, a rank or size it
 * does not take): say which names are wrong and list its inputs. The exit
 * status: 2 for a wrong name, else 1. */
static int explain_inputs(const run_args *r, const char *why) {
    bool as_one;
    cn_onnx_model *m = load_for_inspection(r->model, &as_one);
    if (!m) {
        fprintf(stderr, "chutney run: %s\n", why); /* the model itself */
        return CN_TOOL_FAILED;
    }
    int n = cn_onnx_num_inputs(m), status = CN_TOOL_FAILED;
    const char **names = calloc((size_t)n + 1, sizeof *names);
    for (int i = 0; names && i < n; i++) names[i] = cn_onnx_input_name(m, i);
    for (int k = 0; names && k < r->nin; k++) {
        bool found = false;
        for (int i = 0; i < n; i++) found |= !strcmp(names[i], r->names[k]);
        if (found) continue;
        fprintf(stderr, "chutney run: '%s' is not an input of the model", r->names[k]);
        const char *s = cn_tool_suggest(r->names[k], names, n);
        if (s) fprintf(stderr, "; did you mean '%s'?", s);
        fputc('\n', stderr);
        status = CN_TOOL_USAGE;
    }
    /* A name the model lacks says it all; else the loader's message. */
    if (status != CN_TOOL_USAGE) fprintf(stderr, "chutney run: %s\n", why);
    list_inputs(m, r->model);
    free(names);
    cn_onnx_free(m);
    return status;
}

/* The .npy files, with their shapes for the import, on the device: false
 * after a message. */
static bool load_inputs(const run_args *r, cn_device dev, cn_tensor **vals,
                        cn_onnx_input_shape *shapes) {
    for (int i = 0; i < r->nin; i++) {
        vals[i] = cn_load_npy(r->files[i]);
        if (!vals[i]) {
            fprintf(stderr, "chutney run: input '%s': %s\n", r->names[i], cn_last_error());
            return false;
        }
        shapes[i].name = r->names[i];
        shapes[i].ndim = cn_ndim(vals[i]);
        for (int d = 0; d < shapes[i].ndim; d++) shapes[i].shape[d] = cn_dim(vals[i], d);
        if (dev.kind != CN_DEVICE_CPU && !(vals[i] = cn_to(vals[i], dev))) {
            fprintf(stderr, "chutney run: input '%s': %s\n", r->names[i], cn_last_error());
            return false;
        }
    }
    return true;
}

/* The model's inputs in its order from the values given: 0, or the exit
 * status after a message. */
static int match_inputs(const run_args *r, const cn_onnx_model *m, cn_tensor **vals, cn_tensor **feed) {
    int mi = cn_onnx_num_inputs(m);
    if (mi > MAX_INPUTS) {
        fprintf(stderr, "chutney run: the model has %d inputs (at most %d)\n", mi, MAX_INPUTS);
        return CN_TOOL_FAILED;
    }
    for (int i = 0; i < mi; i++) {
        const char *name = cn_onnx_input_name(m, i);
        cn_dtype want = cn_tensor_dtype(cn_onnx_input(m, i));
        feed[i] = NULL;
        for (int k = 0; k < r->nin; k++)
            if (!strcmp(r->names[k], name)) feed[i] = vals[k];
        if (!feed[i]) {
            fprintf(stderr, "chutney run: missing --input for the model's input '%s'\n", name);
            list_inputs(m, r->model);
            return CN_TOOL_USAGE;
        }
        if (cn_tensor_dtype(feed[i]) != want) {
            fprintf(stderr, "chutney run: input '%s' is %s in the model, the file holds %s\n", name,
                    cn_dtype_name(want), cn_dtype_name(cn_tensor_dtype(feed[i])));
            list_inputs(m, r->model);
            return CN_TOOL_FAILED;
        }
    }
    return 0;
}

/* DIR/<output>.npy for every output (copied back from the device). */
static bool write_outputs(const run_args *r, const cn_onnx_model *m, cn_tensor **outs) {
    if (mkdir(r->outdir, 0777) < 0 && errno != EEXIST) {
        fprintf(stderr, "chutney run: cannot create '%s': %s\n", r->outdir, strerror(errno));
        return false;
    }
    for (int o = 0; o < cn_onnx_num_outputs(m); o++) {
        char fn[256], path[4096], sb[160];
        file_name(cn_onnx_output_name(m, o), fn, sizeof fn);
        snprintf(path, sizeof path, "%s/%s.npy", r->outdir, fn);
        cn_tensor *t = cn_to(outs[o], CN_CPU);
        if (!t || cn_save_npy(path, t) < 0) {
            fprintf(stderr, "chutney run: %s\n", cn_last_error());
            return false;
        }
        printf("%s: %s -> %s\n", cn_onnx_output_name(m, o), cn_shape_str(t, sb, sizeof sb), path);
    }
    return true;
}

/* --bench: the median of n more runs. */
static bool bench(cn_onnx_model *m, cn_tensor **feed, cn_tensor **outs, long long n, cn_device dev) {
    double *t = malloc(sizeof *t * (size_t)n);
    if (!t) return false;
    bool ok = true;
    for (long long r = 0; r < n && ok; r++) {
        cn_scope_begin();
        double t0 = now_s();
        ok = cn_onnx_run(m, feed, outs) == 0 &&
             (dev.kind == CN_DEVICE_CPU || cn_device_synchronize(dev) == 0);
        t[r] = now_s() - t0;
        cn_scope_end();
    }
    if (ok) {
        qsort(t, (size_t)n, sizeof *t, cmp_double);
        printf("bench: %lld runs on %d threads: median %.3f ms (min %.3f, max %.3f)\n", n,
               cn_get_num_threads(), 1e3 * t[n / 2], 1e3 * t[0], 1e3 * t[n - 1]);
    } else {
        fprintf(stderr, "chutney run: %s\n", cn_last_error());
    }
    free(t);
    return ok;
}

/* --profile: n more runs recorded into the trace (the first run, which
 * compiled and planned, is not among them). */
static bool profile_runs(const run_args *r, cn_onnx_model *m, cn_tensor **feed, cn_tensor **outs,
                         cn_device dev) {
    cn_tool_prof prof;
    long long n = r->profile_steps ? r->profile_steps : 10;
    cn_tool_prof_init(&prof, r->profile, n, n + 1);
    prof.start = 0; /* the warm-up run is behind us */
    prof.range = "model_run";
    prof.stop = n;
    bool ok = true;
    for (long long k = 0; k < n && ok; k++) {
        cn_tool_prof_step_begin(&prof);
        cn_scope_begin();
        ok = cn_onnx_run(m, feed, outs) == 0 &&
             (dev.kind == CN_DEVICE_CPU || cn_device_synchronize(dev) == 0);
        cn_scope_end();
        if (!ok) fprintf(stderr, "chutney run: %s\n", cn_last_error());
        if (cn_tool_prof_step_end(&prof)) ok = false;
    }
    if (cn_tool_prof_finish(&prof)) ok = false;
    return ok;
}

/* The loaded model run once (and --bench times): the exit status. */
static int run_model(const run_args *r, cn_onnx_model *m, cn_tensor **vals, cn_device dev) {
    cn_tensor *feed[MAX_INPUTS];
    int status = match_inputs(r, m, vals, feed);
    if (status) return status;
    cn_tensor **outs = calloc((size_t)cn_onnx_num_outputs(m) + 1, sizeof *outs);
    if (!outs) return CN_TOOL_FAILED;
    status = CN_TOOL_FAILED;
    if (cn_onnx_run(m, feed, outs) < 0) fprintf(stderr, "chutney run: %s\n", cn_last_error());
    else if (write_outputs(r, m, outs) && (r->bench == 0 || bench(m, feed, outs, r->bench, dev)) &&
             (!r->profile || profile_runs(r, m, feed, outs, dev)))
        status = 0;
    free(outs);
    return status;
}

int cn_tool_run(int argc, char **argv) {
    run_args r = {0};
    int status = run_parse(argc, argv, &r);
    if (status) return status < 0 ? 0 : status;
    cn_device dev;
    if ((status = cn_tool_device("chutney run", r.device_name, &dev)) != 0) return status;
    /* The model is read by the loader, whose message names the file. */
    if (!output_dir_ok(r.outdir)) return CN_TOOL_FAILED;
    if (r.profile && !cn_tool_writable("run", "--profile", r.profile)) return CN_TOOL_FAILED;
    if (r.threads) cn_set_num_threads((int)r.threads);
    cn_scope_begin();
    cn_tensor *vals[MAX_INPUTS];
    cn_onnx_input_shape shapes[MAX_INPUTS];
    status = CN_TOOL_FAILED;
    if (load_inputs(&r, dev, vals, shapes)) {
        cn_onnx_load_opts opts = {.shapes = shapes, .nshapes = r.nin};
        cn_onnx_model *m = cn_onnx_load(r.model, &opts);
        if (m) {
            status = run_model(&r, m, vals, dev);
            cn_onnx_free(m);
        } else if (r.nin) {
            char why[1024]; /* the next load overwrites the library's message */
            snprintf(why, sizeof why, "%s", cn_last_error());
            status = explain_inputs(&r, why);
        } else {
            fprintf(stderr, "chutney run: %s\n", cn_last_error());
        }
    }
    cn_scope_end();
    return status;
}

/* ---- graph MODEL.onnx ---- */

static const char *const onnx_graph_options[] = {"-O", "--optimized", "--text", "--output", "--help"};

static void onnx_graph_usage(FILE *f) {
    fprintf(f, "usage: chutney graph MODEL.onnx [-O LEVEL | --optimized] [--text] [--output FILE]\n"
               "(`chutney graph --help` tells more)\n");
}

/* 0: go on; -1: --help was printed; else the exit status. */
static int onnx_graph_parse(int argc, char **argv, const char **out_path, bool *text, int *level) {
    for (int i = 2; i < argc; i++) {
        const char *k = argv[i];
        if (!strcmp(k, "--help") || !strcmp(k, "-h")) {
            onnx_graph_usage(stdout);
            return -1;
        }
        if (!strcmp(k, "--text")) *text = true;
        else if (!strcmp(k, "--optimized")) *level = 2;
        else if (strcmp(k, "-O") && strcmp(k, "--output"))
            return cn_tool_unknown_option("graph", k, onnx_graph_options, 5);
        else if (i + 1 >= argc || !strncmp(argv[i + 1], "--", 2))
            return cn_tool_missing_value("graph", k, !strcmp(k, "-O") ? "0, 1 or 2" : "a file name");
        else if (!strcmp(k, "-O")) {
            long long v;
            if (!cn_tool_int("graph", k, argv[++i], 0, 2, &v)) return CN_TOOL_USAGE;
            *level = (int)v;
        } else {
            *out_path = argv[++i];
            if (!cn_tool_writable("graph", "--output", *out_path)) return CN_TOOL_FAILED;
        }
    }
    return 0;
}

int cn_tool_onnx_graph(int argc, char **argv) {
    const char *path = argv[1], *out_path = NULL;
    bool text = false;
    int level = 0;
    int prc = onnx_graph_parse(argc, argv, &out_path, &text, &level);
    if (prc) return prc < 0 ? 0 : prc;
    bool as_one;
    cn_onnx_model *m = load_for_inspection(path, &as_one);
    if (!m) {
        fprintf(stderr, "chutney graph: %s\n", cn_last_error());
        return CN_TOOL_FAILED;
    }
    if (cn_onnx_eager_reason(m)) {
        fprintf(stderr, "chutney graph: %s has no static graph: it runs eagerly, node by node, because "
                        "its shapes depend on values (%s)\n", path, cn_onnx_eager_reason(m));
        cn_onnx_free(m);
        return CN_TOOL_FAILED;
    }
    int no = cn_onnx_num_outputs(m), rc = 1;
    cn_tensor *outs[64];
    for (int i = 0; i < no && i < 64; i++) outs[i] = cn_onnx_output(m, i);
    cn_program *p = no <= 64 ? cn_compile(cn_onnx_graph(m), outs, no, &(cn_compile_opts){.opt_level = level}) : NULL;
    FILE *f = p ? (out_path ? fopen(out_path, "w") : stdout) : NULL;
    if (!p) fprintf(stderr, "chutney graph: %s\n", no > 64 ? "more than 64 outputs" : cn_last_error());
    else if (!f) fprintf(stderr, "chutney graph: cannot write %s: %s\n", out_path, strerror(errno));
    else {
        rc = (text ? cn_program_dump(p, f) : cn_program_write_dot(p, f)) < 0;
        if (out_path && fclose(f) != 0) rc = 1;
        if (rc) fprintf(stderr, "chutney graph: %s\n", cn_last_error());
        else if (as_one) fprintf(stderr, "chutney graph: unknown input sizes taken as 1\n");
    }
    cn_program_free(p);
    cn_onnx_free(m);
    return rc;
}

/* ---- info ---- */

typedef struct op_count {
    const char *op;
    int n;
} op_count;

static int cmp_count(const void *a, const void *b) {
    const op_count *x = a, *y = b;
    return x->n != y->n ? y->n - x->n : strcmp(x->op, y->op);
}

static void info_usage(FILE *f) {
    fprintf(f, "usage: chutney info MODEL.onnx\n"
               "       chutney info --supported-ops   (the ONNX ops imported, as Markdown)\n"
               "\n"
               "An ONNX model's inputs and outputs (name, dtype, shape; ? where unknown),\n"
               "its parameters (the elements of its floating-point initializers: what\n"
               "`chutney export` counts; integer initializers, the shapes and indices,\n"
               "are counted apart) and a histogram of its ops.\n");
}

/* The ops of the file, most used first; -1 out of memory. */
static int print_ops(const cn_onnx_model *m) {
    int nn = cn_onnx_num_nodes(m), nk = 0;
    op_count *h = calloc((size_t)nn + 1, sizeof *h);
    if (!h) return -1;
    for (int i = 0; i < nn; i++) {
        const char *op = cn_onnx_node_op(m, i);
        int k = 0;
        while (k < nk && strcmp(h[k].op, op)) k++;
        if (k == nk) h[nk++] = (op_count){op, 0};
        h[k].n++;
    }
    qsort(h, (size_t)nk, sizeof *h, cmp_count);
    for (int k = 0; k < nk; k++) printf("  %-24s %d\n", h[k].op, h[k].n);
    free(h);
    return 0;
}

static int print_info(const char *path, const cn_onnx_model *m, bool as_one) {
    printf("%s: opset %d, %d nodes\ninputs:\n", path, cn_onnx_opset(m), cn_onnx_num_nodes(m));
    for (int i = 0; i < cn_onnx_num_inputs(m); i++)
        print_value(stdout, cn_onnx_input_name(m, i), cn_onnx_input(m, i));
    printf("outputs:\n");
    for (int i = 0; i < cn_onnx_num_outputs(m); i++)
        print_value(stdout, cn_onnx_output_name(m, i), cn_onnx_output(m, i));
    if (as_one) printf("(the model computes with its unknown input sizes: shown with them taken as 1)\n");
    if (cn_onnx_eager_reason(m))
        printf("runs eagerly, node by node (its shapes depend on values): %s\n", cn_onnx_eager_reason(m));
    /* Parameters as export and cn_module_num_params count them: the
     * weights; the integer constants are shapes and indices, not learnt. */
    int64_t weights = cn_onnx_num_weights(m), other = cn_onnx_num_params(m) - weights;
    printf("parameters: %lld", (long long)weights);
    if (other > 0) printf(" (and %lld elements of integer constants: shapes, indices)", (long long)other);
    printf("\nops:\n");
    return print_ops(m);
}

int cn_tool_info(int argc, char **argv) {
    static const char *const opts[] = {"--supported-ops", "--help"};
    if (argc == 2 && !strcmp(argv[1], "--supported-ops")) /* the table of docs/onnx.md */
        return supported_ops_markdown(stdout) > 0 ? 0 : 1;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            info_usage(stdout);
            return 0;
        }
    if (argc == 2 && argv[1][0] == '-') return cn_tool_unknown_option("info", argv[1], opts, 2);
    if (argc != 2) {
        if (argc > 2) fprintf(stderr, "chutney info: one model at a time\n");
        info_usage(stderr);
        return CN_TOOL_USAGE;
    }
    bool as_one;
    cn_onnx_model *m = load_for_inspection(argv[1], &as_one);
    if (!m) {
        fprintf(stderr, "chutney info: %s\n", cn_last_error());
        return CN_TOOL_FAILED;
    }
    int rc = print_info(argv[1], m, as_one);
    cn_onnx_free(m);
    if (rc < 0) {
        fprintf(stderr, "chutney info: out of memory\n");
        return CN_TOOL_FAILED;
    }
    return 0;
}
