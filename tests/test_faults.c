/* Fault injection (docs/reliability.md): each scenario runs twice for its
 * reference result, once more to count its allocations (or writes), then
 * again for every N with the Nth failing (fault_inject.c). Every run must
 * either return an error with a message or give the reference result
 * exactly, and never crash; the asan stage's LeakSanitizer checks that the
 * failed runs leak nothing. Writes fail three ways (ENOSPC, EIO, a short
 * write); a file whose write fails must keep its previous contents, with
 * no temporary file left beside it.
 *
 * One thread and no block cache (CN_ALLOC_CACHE_MB=0, cn_empty_cache
 * before each run, which also empties this thread's tensor and node
 * struct lists), so the Nth allocation of a run is the same call every
 * time and the library's own allocations reach malloc. */
#include "fault_inject.h"
#include "harness.h"

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

/* What runs now, for the message of a crash. */
static const char *now_name = "";
static long now_n;
static int now_kind;

static void on_crash(int sig) {
    char msg[256];
    int n = snprintf(msg, sizeof msg, "CRASH (signal %d): %s with call %ld failing (kind %d)\n", sig,
                     now_name, now_n, now_kind);
    if (write(STDERR_FILENO, msg, (size_t)n) < 0) _exit(128 + sig);
    signal(sig, SIG_DFL);
    raise(sig);
}

#define MAXV 4096
typedef struct result {
    double v[MAXV];
    int n;
} result;

/* Appends t's values to r (as doubles); < 0 on failure. */
static int put(result *r, cn_tensor *t) {
    if (!t) return -1;
    int64_t n = cn_numel(t);
    if (r->n + n > MAXV) return fprintf(stderr, "test: result too large\n"), -1;
    if (cn_copy_to_buffer(t, CN_F64, r->v + r->n, (size_t)n * sizeof(double)) < 0) return -1;
    r->n += (int)n;
    return 0;
}

static cn_module *mlp(void) {
    cn_module *l[3] = {cn_nn_linear(6, 8, true), cn_nn_relu(), cn_nn_linear(8, 3, true)};
    if (!l[0] || !l[1] || !l[2]) {
        for (int i = 0; i < 3; i++) cn_module_free(l[i]);
        return NULL;
    }
    return cn_nn_sequential(l, 3);
}

static cn_tensor *input(void) {
    double v[4 * 6];
    for (int i = 0; i < 24; i++) v[i] = (i * 7 % 11) / 5.0 - 1.0;
    return cn_cast(cn_from_data(CN_F64, CN_SHAPE(4, 6), v), CN_F32);
}

/* ---- the allocation scenarios ---- */

/* A graph of a module and a softmax, compiled (fusion, planning) and run twice. */
static int sc_program(result *r) {
    cn_manual_seed(1);
    int rc = -1;
    cn_module *m = mlp();
    cn_graph *g = cn_graph_new();
    cn_program *p = NULL;
    if (!m || !g) goto out;
    cn_tensor *x = cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, 6));
    cn_tensor *y = cn_softmax(cn_mul(cn_module_forward(m, x), cn_scalar(CN_F32, 2.0)), 1);
    if (!y || !(p = cn_compile(g, &y, 1, NULL))) goto out;
    cn_tensor *in = input(), *out = NULL;
    for (int k = 0; k < 2; k++) {
        if (!in || cn_run(p, &x, &in, 1, &out, 1) < 0 || put(r, out) < 0) goto out;
    }
    rc = 0;
out:
    cn_program_free(p);
    cn_graph_free(g);
    cn_module_free(m);
    return rc;
}

/* Eager steps of Adam, then the same model's compiled training step. */
static int sc_train(result *r) {
    cn_manual_seed(2);
    int rc = -1;
    cn_module *m = mlp();
    cn_tensor **params = NULL;
    cn_optimizer *opt = NULL;
    cn_graph *g = NULL;
    cn_program *p = NULL;
    int np = m ? cn_module_parameters(m, &params, NULL) : -1;
    if (np < 0 || !(opt = cn_adam(params, np, &(cn_adam_opts){.lr = 0.01}))) goto out;
    int64_t tv[4] = {0, 2, 1, 2};
    cn_tensor *target = cn_from_data(CN_I64, CN_SHAPE(4), tv);
    for (int k = 0; k < 2; k++) {
        if (cn_optimizer_zero_grad(opt) < 0) goto out;
        cn_tensor *loss = cn_cross_entropy(cn_module_forward(m, input()), target, CN_REDUCTION_MEAN, 0);
        if (!loss || cn_backward(loss, NULL) < 0 || cn_optimizer_step(opt) < 0 || put(r, loss) < 0)
            goto out;
    }
    if (!(g = cn_graph_new())) goto out;
    cn_tensor *ph[2] = {cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, 6)),
                        cn_placeholder(g, "y", CN_I64, CN_SHAPE(-1))};
    cn_tensor *loss = cn_cross_entropy(cn_module_forward(m, ph[0]), ph[1], CN_REDUCTION_MEAN, 0);
    if (!loss || !(p = cn_compile_train_step(g, &loss, 1, opt, NULL))) goto out;
    cn_tensor *vals[2] = {input(), target}, *out = NULL;
    if (!vals[0] || cn_run(p, ph, vals, 2, &out, 1) < 0 || put(r, out) < 0) goto out;
    for (int i = 0; i < np; i++)
        if (put(r, params[i]) < 0) goto out;
    rc = 0;
out:
    cn_program_free(p);
    cn_graph_free(g);
    cn_optimizer_free(opt);
    free(params);
    cn_module_free(m);
    return rc;
}

/* A small CNN: SGD with momentum and a step schedule, an eager step and a
 * compiled one. */
static int sc_cnn(result *r) {
    cn_manual_seed(6);
    int rc = -1;
    cn_conv_opts c = {.padding = {1, 1}};
    cn_pool_opts pool = {.kernel = {2, 2}};
    cn_module *l[5] = {cn_nn_conv2d(1, 2, 3, 3, &c, true), cn_nn_relu(), cn_nn_max_pool2d(&pool),
                       cn_nn_flatten(1, -1), cn_nn_linear(2 * 4 * 4, 3, true)};
    cn_module *m = NULL;
    if (l[0] && l[1] && l[2] && l[3] && l[4]) m = cn_nn_sequential(l, 5);
    else
        for (int i = 0; i < 5; i++) cn_module_free(l[i]);
    cn_tensor **params = NULL;
    cn_optimizer *opt = NULL;
    cn_lr_scheduler *sched = NULL;
    cn_graph *g = NULL;
    cn_program *p = NULL;
    int np = m ? cn_module_parameters(m, &params, NULL) : -1;
    if (np < 0 || !(opt = cn_sgd(params, np, &(cn_sgd_opts){.lr = 0.1, .momentum = 0.9})) ||
        !(sched = cn_step_lr(opt, 1, 0.5)))
        goto out;
    cn_tensor *x = cn_reshape(cn_cos(cn_arange(0, 128, 1, CN_F32)), CN_SHAPE(2, 1, 8, 8));
    int64_t tv[2] = {1, 2};
    cn_tensor *target = cn_from_data(CN_I64, CN_SHAPE(2), tv);
    if (cn_optimizer_zero_grad(opt) < 0) goto out;
    cn_tensor *loss = cn_cross_entropy(cn_module_forward(m, x), target, CN_REDUCTION_MEAN, 0);
    if (!loss || cn_backward(loss, NULL) < 0 || cn_optimizer_step(opt) < 0 ||
        cn_lr_scheduler_step(sched) < 0 || put(r, loss) < 0)
        goto out;
    if (!(g = cn_graph_new())) goto out;
    cn_tensor *ph[2] = {cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, 1, 8, 8)),
                        cn_placeholder(g, "y", CN_I64, CN_SHAPE(-1))};
    loss = cn_cross_entropy(cn_module_forward(m, ph[0]), ph[1], CN_REDUCTION_MEAN, 0);
    if (!loss || !(p = cn_compile_train_step(g, &loss, 1, opt, NULL))) goto out;
    cn_tensor *vals[2] = {x, target}, *out = NULL;
    if (cn_run(p, ph, vals, 2, &out, 1) < 0 || put(r, out) < 0) goto out;
    for (int i = 0; i < np; i++)
        if (put(r, params[i]) < 0) goto out;
    rc = 0;
out:
    cn_program_free(p);
    cn_graph_free(g);
    cn_lr_scheduler_free(sched);
    cn_optimizer_free(opt);
    free(params);
    cn_module_free(m);
    return rc;
}

/* A one-layer GPT with rotary embeddings: a step of AdamW on next-token
 * cross-entropy. */
static int sc_gpt(result *r) {
    cn_manual_seed(8);
    int rc = -1;
    cn_module *m = cn_nn_gpt(&(cn_gpt_config){.vocab_size = 11, .context_length = 8, .n_layer = 1,
                                              .n_head = 2, .n_embd = 8, .rope = true});
    cn_tensor **params = NULL;
    cn_optimizer *opt = NULL;
    int np = m ? cn_module_parameters(m, &params, NULL) : -1;
    if (np < 0 || !(opt = cn_adamw(params, np, &(cn_adam_opts){.lr = 0.01}))) goto out;
    int64_t ids[2 * 6], next[2 * 6];
    for (int i = 0; i < 12; i++) ids[i] = i * 7 % 11, next[i] = (i * 7 + 3) % 11;
    cn_tensor *logits = cn_module_forward(m, cn_from_data(CN_I64, CN_SHAPE(2, 6), ids));
    cn_tensor *loss = cn_cross_entropy(cn_reshape(logits, CN_SHAPE(12, 11)),
                                       cn_from_data(CN_I64, CN_SHAPE(12), next), CN_REDUCTION_MEAN, 0);
    if (!loss || cn_backward(loss, NULL) < 0 || cn_optimizer_step(opt) < 0 || put(r, loss) < 0) goto out;
    if (put(r, params[0]) < 0) goto out;
    rc = 0;
out:
    cn_optimizer_free(opt);
    free(params);
    cn_module_free(m);
    return rc;
}

/* An epoch of a shuffling loader with transforms, then the next epoch's
 * first batch. */
static int sc_loader(result *r) {
    cn_tensor *t[2] = {cn_reshape(cn_arange(0, 10 * 36, 1, CN_F32), CN_SHAPE(10, 1, 6, 6)),
                       cn_arange(0, 10, 1, CN_I64)};
    cn_loader *l = t[0] && t[1] ? cn_loader_new(t, 2, &(cn_loader_opts){.batch_size = 4, .shuffle = true,
                                                                         .seed = 3})
                                : NULL;
    int rc = -1;
    double mean = 100, std = 50;
    if (!l || cn_loader_random_crop(l, 0, 6, 6, 1) < 0 || cn_loader_random_hflip(l, 0, 0.5) < 0 ||
        cn_loader_normalize(l, 0, &mean, &std, 1) < 0)
        goto out;
    cn_tensor *b[2];
    for (int k = 0; k < 4; k++) {
        int got = cn_loader_next(l, b);
        if (got < 0) goto out;
        r->v[r->n++] = got;
        if (got && (put(r, b[0]) < 0 || put(r, b[1]) < 0)) goto out;
    }
    rc = 0;
out:
    cn_loader_free(l);
    return rc;
}

/* A graph exported to ONNX in memory, loaded back and run. */
static int sc_onnx(result *r) {
    cn_manual_seed(3);
    int rc = -1;
    cn_module *m = mlp();
    cn_graph *g = cn_graph_new();
    cn_onnx_model *om = NULL;
    void *buf = NULL;
    size_t size = 0;
    if (!m || !g) goto out;
    cn_tensor *x = cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, 6));
    cn_tensor *y = cn_tanh(cn_module_forward(m, x));
    if (!y || cn_onnx_export_buffer(g, &y, 1, &buf, &size, NULL) < 0) goto out;
    if (!(om = cn_onnx_load_buffer(buf, size, NULL, NULL))) goto out;
    cn_tensor *in = input(), *out = NULL;
    if (!in || cn_onnx_run(om, &in, &out) < 0 || put(r, out) < 0) goto out;
    r->v[r->n++] = (double)cn_onnx_num_params(om);
    rc = 0;
out:
    cn_onnx_free(om);
    free(buf);
    cn_graph_free(g);
    cn_module_free(m);
    return rc;
}

static char dir[256];
static char path_of[512];
static const char *file(const char *name) {
    snprintf(path_of, sizeof path_of, "%s/%s", dir, name);
    return path_of;
}

/* A module's state saved, then loaded into another module. */
static int sc_checkpoint(result *r) {
    int rc = -1;
    cn_manual_seed(4);
    cn_module *a = mlp();
    cn_manual_seed(5);
    cn_module *b = mlp();
    cn_tensor **ta = NULL, **tb = NULL;
    const char **names = NULL;
    char path[512];
    snprintf(path, sizeof path, "%s", file("state.safetensors"));
    int n = a ? cn_module_state(a, &ta, &names) : -1;
    if (n < 0 || !b || cn_module_state(b, &tb, NULL) != n) goto out;
    const char *mk[1] = {"model"}, *mv[1] = {"mlp"};
    if (cn_save_safetensors(path, names, ta, n, mk, mv, 1) < 0) goto out;
    if (cn_load_safetensors_into(path, names, tb, n, 0) < 0) goto out;
    cn_checkpoint *c = cn_load_safetensors(path);
    if (!c) goto out;
    const char *meta = cn_checkpoint_metadata(c, "model");
    r->v[r->n++] = meta && !strcmp(meta, "mlp");
    r->v[r->n++] = cn_checkpoint_count(c);
    cn_checkpoint_free(c);
    for (int i = 0; i < n; i++)
        if (put(r, tb[i]) < 0) goto out;
    rc = 0;
out:
    free(ta);
    free(tb);
    free(names);
    cn_module_free(a);
    cn_module_free(b);
    return rc;
}

/* ---- the sweep ---- */

typedef int (*scenario)(result *r);
static long total_runs, total_faults, total_errors;

static bool same(const result *a, const result *b) {
    return a->n == b->n && !memcmp(a->v, b->v, (size_t)a->n * sizeof(double));
}

static result ref, got;

/* Runs fn with the nth call of class c failing; checks the outcome. */
static void one_run(const char *name, scenario fn, fi_class c, long nth, fi_write_kind kind) {
    cn_empty_cache();
    memset(&got, 0, sizeof got);
    cn_clear_error();
    cn_scope_begin();
    now_name = name, now_n = nth, now_kind = (int)kind;
    char here[128];
    snprintf(here, sizeof here, "%s:%ld", name, nth);
    fi_trap = getenv("CN_FAULT_TRAP") && !strcmp(getenv("CN_FAULT_TRAP"), here);
    fi_arm(c, nth, kind);
    int rc = fn(&got);
    fi_disarm();
    cn_scope_end();
    total_runs++;
    total_faults += fi_fired();
    if (rc < 0) {
        total_errors++;
        CHECK_MSG(fi_fired(), "%s: failed with no fault injected: %s", name, cn_last_error());
        CHECK_MSG(cn_last_error()[0] != '\0', "%s, call %ld failing: an error without a message", name,
                  nth);
    } else {
        CHECK_MSG(same(&got, &ref), "%s, call %ld failing: succeeded with a wrong result", name, nth);
    }
}

/* The reference, the count, then every N; returns the count. */
static long sweep(const char *name, scenario fn, fi_class c, fi_write_kind kind) {
    for (int k = 0; k < 2; k++) { /* twice: lazily made state (op tables, ...) exists after */
        memset(&ref, 0, sizeof ref);
        cn_empty_cache();
        cn_scope_begin();
        int rc = fn(&ref);
        cn_scope_end();
        CHECK_MSG(rc == 0, "%s: %s", name, cn_last_error());
        if (rc) return 0;
    }
    cn_empty_cache();
    cn_scope_begin();
    fi_arm(c, 0, kind);
    fn(&got);
    long count = fi_disarm();
    cn_scope_end();
    for (long n = 1; n <= count; n++) one_run(name, fn, c, n, kind);
    return count;
}

static bool have_onnx, have_stb;

static void test_alloc_sweep(void) {
    struct {
        const char *name;
        scenario fn;
    } s[] = {{"program", sc_program}, {"train", sc_train}, {"cnn", sc_cnn},
             {"gpt", sc_gpt},         {"loader", sc_loader},
             {"onnx", sc_onnx},       {"checkpoint", sc_checkpoint}};
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
        if (s[i].fn == sc_onnx && !have_onnx) continue;
        long err = total_errors;
        long n = sweep(s[i].name, s[i].fn, FI_ALLOC, FI_ENOSPC);
        printf("  alloc %-10s %5ld allocations swept, %ld runs failed cleanly\n", s[i].name, n,
               total_errors - err);
    }
}

/* ---- writes: every file the library writes, over a previous version ---- */

/* Each writer writes version v (0 or 1: different contents) of its file. */
typedef int (*writer)(const char *path, int v);

static int w_checkpoint(const char *path, int v) {
    cn_manual_seed(10 + (uint64_t)v);
    cn_module *m = mlp();
    cn_tensor **t = NULL;
    const char **names = NULL;
    int n = m ? cn_module_state(m, &t, &names) : -1;
    int rc = n < 0 ? -1 : cn_save_safetensors(path, names, t, n, NULL, NULL, 0);
    free(t);
    free(names);
    cn_module_free(m);
    return rc;
}

static int w_npy(const char *path, int v) {
    cn_tensor *t = cn_add(cn_arange(0, 300, 1, CN_F32), cn_scalar(CN_F32, v));
    return t ? cn_save_npy(path, t) : -1;
}

static int w_onnx(const char *path, int v) {
    cn_manual_seed(20 + (uint64_t)v);
    cn_module *m = mlp();
    cn_graph *g = cn_graph_new();
    int rc = -1;
    if (m && g) {
        cn_tensor *x = cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, 6));
        cn_tensor *y = cn_module_forward(m, x);
        if (y) rc = cn_onnx_export(g, &y, 1, path, NULL);
    }
    cn_graph_free(g);
    cn_module_free(m);
    return rc;
}

static int w_tokenizer(const char *path, int v) {
    const char *text = v ? "the cat sat on the mat; the cat sat." : "a rose is a rose is a rose.";
    cn_tokenizer *tok = cn_bpe_train(text, strlen(text), 270, NULL);
    int rc = tok ? cn_tokenizer_save(tok, path) : -1;
    cn_tokenizer_free(tok);
    return rc;
}

static int w_trace(const char *path, int v) {
    if (cn_profiler_start(NULL) < 0) return -1;
    cn_tensor *t = cn_sum(cn_mul(cn_arange(0, 10 + v, 1, CN_F32), cn_scalar(CN_F32, 2)), NULL, 0, false);
    cn_profiler_stop();
    return t ? cn_profiler_write_chrome_trace(path) : -1;
}

static int w_image(const char *path, int v) {
    cn_tensor *ramp = cn_add(cn_mul(cn_arange(0, 48, 1, CN_F32), cn_scalar(CN_F32, 5)),
                             cn_scalar(CN_F32, 7 * v)); /* 0 .. 242 */
    cn_tensor *img = cn_cast(cn_reshape(ramp, CN_SHAPE(4, 4, 3)), CN_U8);
    return img ? cn_save_image(path, img, CN_IMAGE_HWC, 0) : -1;
}

static char *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *b = NULL;
    size_t cap = 0, len = 0, k;
    char tmp[4096];
    while ((k = fread(tmp, 1, sizeof tmp, f)) > 0) {
        if (len + k > cap) b = realloc(b, cap = 2 * (len + k));
        memcpy(b + len, tmp, k);
        len += k;
    }
    fclose(f);
    *n = len;
    return b ? b : calloc(1, 1);
}

static int files_in_dir(void) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

/* atomic: a failed write leaves the previous file (else only an error). */
static void write_sweep(const char *name, writer w, bool atomic) {
    const char *path = file(name);
    char p[512];
    snprintf(p, sizeof p, "%s", path);
    size_t na = 0, nb = 0;
    cn_scope_begin();
    CHECK_MSG(w(p, 1) == 0, "%s: %s", name, cn_last_error());
    char *b = read_file(p, &nb);
    CHECK_MSG(w(p, 0) == 0, "%s: %s", name, cn_last_error());
    char *a = read_file(p, &na);
    fi_arm(FI_WRITE, 0, FI_ENOSPC);
    w(p, 1);
    long count = fi_disarm();
    cn_scope_end();
    CHECK(a && b && (na != nb || memcmp(a, b, na)));
    long errs = 0;
    for (int kind = FI_ENOSPC; kind <= FI_SHORT; kind++)
        for (long n = 1; n <= count; n++) {
            cn_scope_begin();
            int r0 = w(p, 0);
            cn_clear_error();
            now_name = name, now_n = n, now_kind = kind;
            fi_arm(FI_WRITE, n, (fi_write_kind)kind);
            int rc = w(p, 1);
            fi_disarm();
            cn_scope_end();
            size_t nf = 0;
            char *f = read_file(p, &nf);
            total_runs++;
            total_faults += fi_fired();
            CHECK(r0 == 0);
            if (rc < 0) {
                errs++;
                total_errors++;
                CHECK_MSG(cn_last_error()[0], "%s, write %ld failing: no message", name, n);
                if (atomic)
                    CHECK_MSG(f && nf == na && !memcmp(f, a, na),
                              "%s, write %ld failing (kind %d): the previous file was not kept", name, n,
                              kind);
            } else {
                CHECK_MSG(f && nf == nb && !memcmp(f, b, nb),
                          "%s, write %ld failing (kind %d): succeeded with different contents", name, n,
                          kind);
            }
            CHECK_MSG(files_in_dir() == 1, "%s, write %ld failing (kind %d): %d files left", name, n,
                      kind, files_in_dir());
            free(f);
        }
    printf("  write %-18s %3ld writes x 3 ways, %ld runs failed cleanly\n", name, count, errs);
    unlink(p);
    free(a);
    free(b);
}

static void test_write_sweep(void) {
    write_sweep("ckpt.safetensors", w_checkpoint, true);
    write_sweep("a.npy", w_npy, true);
    if (have_onnx) write_sweep("model.onnx", w_onnx, true);
    write_sweep("tok.json", w_tokenizer, true);
    if (have_stb) write_sweep("img.png", w_image, true);
    write_sweep("trace.json", w_trace, false);
}

int main(void) {
    setenv("CN_ALLOC_CACHE_MB", "0", 1);
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGSEGV, on_crash);
    signal(SIGBUS, on_crash);
    signal(SIGABRT, on_crash);
    signal(SIGFPE, on_crash);
    cn_set_num_threads(1);
    snprintf(dir, sizeof dir, "%s/cn_faults_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) return perror("mkdtemp"), 1;
    cn_onnx_model *probe = cn_onnx_load_buffer("", 0, NULL, NULL);
    have_onnx = probe || !strstr(cn_last_error(), "built without ONNX");
    cn_onnx_free(probe);
    cn_build_feature f;
    for (int i = 0; i < cn_build_feature_count(); i++)
        if (cn_build_feature_get(i, &f) == 0 && !strcmp(f.name, "stb")) have_stb = f.enabled;
    RUN(test_alloc_sweep);
    unlink(file("state.safetensors"));
    RUN(test_write_sweep);
    rmdir(dir);
    printf("%ld runs, %ld faults injected, %ld clean errors\n", total_runs, total_faults, total_errors);
    return th_summary();
}
