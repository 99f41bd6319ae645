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
    fprintf(f, "usage: chutney run MODEL.onnx --input NAME=FILE.npy [--input ...] --output-dir DIR "
               "[--threads T] [--bench N] [--device DEV]\n"
               "--device cpu (the default), opencl or opencl:N: where the model runs "
               "(`chutney devices` lists them)\n");
    return 2;
}

static bool parse_int(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
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

int cn_tool_run(int argc, char **argv) {
    const char *model = NULL, *outdir = NULL, *device_name = NULL;
    const char *names[MAX_INPUTS], *files[MAX_INPUTS];
    int nin = 0;
    long threads = 0, bench = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            run_usage(stdout);
            return 0;
        }
        bool has_val = i + 1 < argc;
        if (!strcmp(a, "--input")) {
            if (!has_val) return fprintf(stderr, "chutney run: --input needs NAME=FILE.npy\n"), 2;
            char *v = argv[++i], *eq = strchr(v, '=');
            if (!eq || eq == v || !eq[1])
                return fprintf(stderr, "chutney run: bad --input '%s' (expected NAME=FILE.npy)\n", v), 2;
            if (nin == MAX_INPUTS) return fprintf(stderr, "chutney run: too many --input\n"), 2;
            *eq = '\0';
            for (int k = 0; k < nin; k++)
                if (!strcmp(names[k], v))
                    return fprintf(stderr, "chutney run: input '%s' given twice\n", v), 2;
            names[nin] = v;
            files[nin++] = eq + 1;
        } else if (!strcmp(a, "--output-dir")) {
            if (!has_val) return fprintf(stderr, "chutney run: --output-dir needs a directory\n"), 2;
            outdir = argv[++i];
        } else if (!strcmp(a, "--threads")) {
            if (!has_val || !parse_int(argv[++i], 1, 256, &threads))
                return fprintf(stderr, "chutney run: --threads needs a number from 1 to 256\n"), 2;
        } else if (!strcmp(a, "--device")) {
            if (!has_val) return fprintf(stderr, "chutney run: --device needs a device (cpu, opencl:0, ...)\n"), 2;
            device_name = argv[++i];
        } else if (!strcmp(a, "--bench")) {
            if (!has_val || !parse_int(argv[++i], 1, 1000000, &bench))
                return fprintf(stderr, "chutney run: --bench needs a positive number of runs\n"), 2;
        } else if (a[0] == '-') {
            fprintf(stderr, "chutney run: unknown option '%s'\n", a);
            return run_usage(stderr);
        } else if (!model) model = a;
        else return fprintf(stderr, "chutney run: unexpected argument '%s'\n", a), 2;
    }
    if (!model) {
        fprintf(stderr, "chutney run: no model given\n");
        return run_usage(stderr);
    }
    if (!outdir) {
        fprintf(stderr, "chutney run: --output-dir is required\n");
        return run_usage(stderr);
    }
    cn_device dev;
    int drc = cn_tool_device("chutney run", device_name, &dev);
    if (drc) return drc;
    bool on_device = dev.kind != CN_DEVICE_CPU;
    if (threads) cn_set_num_threads((int)threads);

    int status = 1;
    cn_scope_begin();
    cn_tensor *vals[MAX_INPUTS];
    cn_onnx_input_shape shapes[MAX_INPUTS];
    for (int i = 0; i < nin; i++) {
        vals[i] = cn_load_npy(files[i]);
        if (!vals[i]) {
            fprintf(stderr, "chutney run: input '%s': %s\n", names[i], cn_last_error());
            goto done;
        }
        shapes[i].name = names[i];
        shapes[i].ndim = cn_ndim(vals[i]);
        for (int d = 0; d < shapes[i].ndim; d++) shapes[i].shape[d] = cn_dim(vals[i], d);
        if (on_device && !(vals[i] = cn_to(vals[i], dev))) {
            fprintf(stderr, "chutney run: input '%s': %s\n", names[i], cn_last_error());
            goto done;
        }
    }
    cn_onnx_load_opts opts = {.shapes = shapes, .nshapes = nin};
    cn_onnx_model *m = cn_onnx_load(model, &opts);
    if (!m) {
        fprintf(stderr, "chutney run: %s\n", cn_last_error());
        goto done;
    }
    int mi = cn_onnx_num_inputs(m), mo = cn_onnx_num_outputs(m);
    cn_tensor *feed[MAX_INPUTS];
    if (mi > MAX_INPUTS) {
        fprintf(stderr, "chutney run: the model has %d inputs (at most %d)\n", mi, MAX_INPUTS);
        goto free_model;
    }
    for (int i = 0; i < mi; i++) {
        feed[i] = NULL;
        for (int k = 0; k < nin; k++)
            if (!strcmp(names[k], cn_onnx_input_name(m, i))) feed[i] = vals[k];
        if (!feed[i]) {
            fprintf(stderr, "chutney run: missing --input for the model's input '%s'\n",
                    cn_onnx_input_name(m, i));
            goto free_model;
        }
        if (cn_tensor_dtype(feed[i]) != cn_tensor_dtype(cn_onnx_input(m, i))) {
            fprintf(stderr, "chutney run: input '%s' is %s in the model, the file holds %s\n",
                    cn_onnx_input_name(m, i), cn_dtype_name(cn_tensor_dtype(cn_onnx_input(m, i))),
                    cn_dtype_name(cn_tensor_dtype(feed[i])));
            goto free_model;
        }
    }
    cn_tensor **outs = calloc((size_t)mo + 1, sizeof *outs);
    if (!outs) goto free_model;
    if (cn_onnx_run(m, feed, outs) < 0) {
        fprintf(stderr, "chutney run: %s\n", cn_last_error());
        goto free_outs;
    }
    if (mkdir(outdir, 0777) < 0 && errno != EEXIST) {
        fprintf(stderr, "chutney run: cannot create '%s': %s\n", outdir, strerror(errno));
        goto free_outs;
    }
    for (int o = 0; o < mo; o++) {
        char fn[256], path[4096];
        file_name(cn_onnx_output_name(m, o), fn, sizeof fn);
        snprintf(path, sizeof path, "%s/%s.npy", outdir, fn);
        if (on_device && !(outs[o] = cn_to(outs[o], CN_CPU))) {
            fprintf(stderr, "chutney run: %s\n", cn_last_error());
            goto free_outs;
        }
        if (cn_save_npy(path, outs[o]) < 0) {
            fprintf(stderr, "chutney run: %s\n", cn_last_error());
            goto free_outs;
        }
        char sb[160];
        printf("%s: %s -> %s\n", cn_onnx_output_name(m, o), cn_shape_str(outs[o], sb, sizeof sb), path);
    }
    if (bench > 0) {
        double *t = malloc(sizeof *t * (size_t)bench);
        if (!t) goto free_outs;
        bool ok = true;
        for (long r = 0; r < bench && ok; r++) {
            cn_scope_begin();
            double t0 = now_s();
            ok = cn_onnx_run(m, feed, outs) == 0 && (!on_device || cn_device_synchronize(dev) == 0);
            t[r] = now_s() - t0;
            cn_scope_end();
        }
        if (!ok) {
            fprintf(stderr, "chutney run: %s\n", cn_last_error());
            free(t);
            goto free_outs;
        }
        qsort(t, (size_t)bench, sizeof *t, cmp_double);
        printf("bench: %ld runs on %d threads: median %.3f ms (min %.3f, max %.3f)\n", bench,
               cn_get_num_threads(), 1e3 * t[bench / 2], 1e3 * t[0], 1e3 * t[bench - 1]);
        free(t);
    }
    status = 0;
free_outs:
    free(outs);
free_model:
    cn_onnx_free(m);
done:
    cn_scope_end();
    return status;
}

static void print_value(const char *name, cn_tensor *t) {
    printf("  %-24s %-5s [", name, cn_dtype_name(cn_tensor_dtype(t)));
    for (int d = 0; d < cn_ndim(t); d++) {
        int64_t s = cn_dim(t, d);
        if (s < 0) printf("%s?", d ? ", " : "");
        else printf("%s%lld", d ? ", " : "", (long long)s);
    }
    printf("]\n");
}

typedef struct op_count {
    const char *op;
    int n;
} op_count;

static int cmp_count(const void *a, const void *b) {
    const op_count *x = a, *y = b;
    return x->n != y->n ? y->n - x->n : strcmp(x->op, y->op);
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

int cn_tool_onnx_graph(int argc, char **argv) {
    const char *path = argv[1], *out_path = NULL;
    bool text = false;
    int level = 0;
    for (int i = 2; i < argc; i++) {
        const char *k = argv[i];
        if (!strcmp(k, "--output") && i + 1 < argc) out_path = argv[++i];
        else if (!strcmp(k, "--text")) text = true;
        else if (!strcmp(k, "--optimized")) level = 2;
        else if (!strcmp(k, "-O") && i + 1 < argc) {
            long v;
            if (!parse_int(argv[++i], 0, 2, &v)) return fprintf(stderr, "chutney: -O takes 0, 1 or 2\n"), 2;
            level = (int)v;
        } else {
            fprintf(stderr, "chutney graph: unknown option or missing value: '%s'\n"
                            "usage: chutney graph MODEL.onnx [-O LEVEL | --optimized] [--text] [--output FILE]\n", k);
            return 2;
        }
    }
    bool as_one;
    cn_onnx_model *m = load_for_inspection(path, &as_one);
    if (!m) {
        fprintf(stderr, "chutney graph: %s\n", cn_last_error());
        return 1;
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

int cn_tool_info(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "--supported-ops")) /* the table of docs/onnx.md */
        return supported_ops_markdown(stdout) > 0 ? 0 : 1;
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(argc == 2 && !strcmp(argv[1], "--help") ? stdout : stderr, "usage: chutney info MODEL.onnx\n");
        return argc == 2 && !strcmp(argv[1], "--help") ? 0 : 2;
    }
    bool as_one;
    cn_onnx_model *m = load_for_inspection(argv[1], &as_one);
    if (!m) {
        fprintf(stderr, "chutney info: %s\n", cn_last_error());
        return 1;
    }
    printf("%s: opset %d, %d nodes\ninputs:\n", argv[1], cn_onnx_opset(m), cn_onnx_num_nodes(m));
    for (int i = 0; i < cn_onnx_num_inputs(m); i++) print_value(cn_onnx_input_name(m, i), cn_onnx_input(m, i));
    printf("outputs:\n");
    for (int i = 0; i < cn_onnx_num_outputs(m); i++)
        print_value(cn_onnx_output_name(m, i), cn_onnx_output(m, i));
    if (as_one) printf("(the model computes with its unknown input sizes: shown with them taken as 1)\n");
    printf("parameters: %lld\nops:\n", (long long)cn_onnx_num_params(m));
    int nn = cn_onnx_num_nodes(m), nk = 0;
    op_count *h = calloc((size_t)nn + 1, sizeof *h);
    for (int i = 0; h && i < nn; i++) {
        const char *op = cn_onnx_node_op(m, i);
        int k = 0;
        while (k < nk && strcmp(h[k].op, op)) k++;
        if (k == nk) h[nk++] = (op_count){op, 0};
        h[k].n++;
    }
    if (h) qsort(h, (size_t)nk, sizeof *h, cmp_count);
    for (int k = 0; h && k < nk; k++) printf("  %-24s %d\n", h[k].op, h[k].n);
    free(h);
    cn_onnx_free(m);
    return 0;
}
