/* A training step compiled into one program allocates nothing per step:
 * malloc, calloc, realloc and posix_memalign are counted (this executable
 * defines them over glibc's) during 10 steps after 6 warm-up steps.
 * The loss is bound to a tensor of the caller's, gradients go to the
 * optimiser's flat buffer, intermediates live in the planned arena.
 *
 * oneDNN (C++) allocates inside each convolution it runs (its memory
 * objects and argument lists): calls from libdnnl and libstdc++ are not
 * Chutney's and are not counted; Chutney, in C, never calls libstdc++.
 *
 * Needs glibc's __libc_* entry points and no sanitizer (which brings its
 * own allocator): the count is skipped otherwise. Also checks the step
 * trains: the loss goes down on a fixed batch. */
#define _GNU_SOURCE /* dladdr */
#include "harness.h"

#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define COUNTING 1
#include <dlfcn.h>
#include <stdatomic.h>

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t m);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);

static atomic_long n_allocs;
static atomic_bool counting;

static void count(void *caller) {
    if (!atomic_load_explicit(&counting, memory_order_relaxed)) return;
    Dl_info info;
    if (dladdr(caller, &info) && info.dli_fname &&
        (strstr(info.dli_fname, "libdnnl") || strstr(info.dli_fname, "libstdc++")))
        return;
    atomic_fetch_add(&n_allocs, 1);
}
void *malloc(size_t n) {
    count(__builtin_return_address(0));
    return __libc_malloc(n);
}
void *calloc(size_t n, size_t m) {
    count(__builtin_return_address(0));
    return __libc_calloc(n, m);
}
void *realloc(void *p, size_t n) {
    count(__builtin_return_address(0));
    return __libc_realloc(p, n);
}
int posix_memalign(void **out, size_t align, size_t n) {
    count(__builtin_return_address(0));
    void *p = __libc_memalign(align, n);
    if (!p) return 12; /* ENOMEM */
    *out = p;
    return 0;
}
#endif

static cn_module *make(const char *name) {
    if (!strcmp(name, "mlp")) {
        cn_module *l[] = {cn_nn_flatten(1, -1), cn_nn_linear(784, 64, true), cn_nn_relu(),
                          cn_nn_linear(64, 10, true)};
        return cn_nn_sequential(l, 4);
    }
    cn_conv_opts c = {.padding = {1, 1}};
    cn_pool_opts pool = {.kernel = {2, 2}};
    cn_module *l[] = {cn_nn_conv2d(1, 4, 3, 3, &c, true), cn_nn_relu(), cn_nn_max_pool2d(&pool),
                      cn_nn_flatten(1, -1), cn_nn_linear(4 * 14 * 14, 10, true)};
    return cn_nn_sequential(l, 5);
}

static void check_model(const char *name, int threads, bool adam) {
    cn_set_num_threads(threads);
    th_seed(3);
    cn_module *m = make(name);
    cn_tensor **params = NULL;
    int np = cn_module_parameters(m, &params, NULL);
    cn_optimizer *opt = adam ? cn_adam(params, np, &(cn_adam_opts){.lr = 1e-3})
                             : cn_sgd(params, np, &(cn_sgd_opts){.lr = 0.05, .momentum = 0.9});
    free(params);
    cn_graph *g = cn_graph_new();
    cn_tensor *ph[2] = {cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, 1, 28, 28)),
                        cn_placeholder(g, "y", CN_I64, CN_SHAPE(-1))};
    cn_tensor *loss = cn_cross_entropy(cn_module_forward(m, ph[0]), ph[1], CN_REDUCTION_MEAN, 0);
    cn_program *p = cn_compile_train_step(g, &loss, 1, opt, NULL);
    CHECK_MSG(p != NULL, "compile_train_step: %s", cn_last_error());
    cn_tensor *lbuf = cn_zeros(CN_F32, 0, NULL);
    CHECK_EQ_INT(cn_program_bind_output(p, 0, lbuf), 0);
    cn_tensor *vals[2] = {cn_rand(CN_F32, CN_SHAPE(32, 1, 28, 28)),
                          cn_randint(0, 10, CN_I64, CN_SHAPE(32))};
    cn_tensor *out;
    double first = 0, last = 0;
    long allocs = 0;
    for (int i = 0; i < 16; i++) {
#ifdef COUNTING
        if (i == 6) atomic_store(&counting, true);
#endif
        CHECK_EQ_INT(cn_run(p, ph, vals, 2, &out, 1), 0);
#ifdef COUNTING
        if (i == 15) {
            atomic_store(&counting, false);
            allocs = atomic_load(&n_allocs);
            atomic_store(&n_allocs, 0);
        }
#endif
        CHECK(out == lbuf);
        double v = cn_item(lbuf);
        if (i == 0) first = v;
        last = v;
    }
    CHECK_MSG(last < first, "%s: loss %g -> %g", name, first, last);
#ifdef COUNTING
    /* One thread: none at all. Two: small steps then run concurrently, and
     * a tensor struct a kernel makes on a worker thread comes from that
     * thread's free list, which releases on the main thread do not refill,
     * so now and then one is malloc'd (0 to 7 in 10 steps here, depending
     * on how the threads interleave). The bound still catches any per-step
     * allocation (the optimiser's work lists were 5 per step). */
    long bound = threads == 1 ? 0 : 20;
    CHECK_MSG(allocs <= bound, "%s (%d threads, %s): %ld allocations in 10 steps", name, threads,
              adam ? "adam" : "sgd", allocs);
#else
    (void)allocs;
#endif
    cn_program_free(p);
    cn_graph_free(g);
    cn_optimizer_free(opt);
    cn_module_free(m);
}

static void test_mlp(void) {
    check_model("mlp", 1, false);
    check_model("mlp", 2, true);
}

static void test_cnn(void) {
    check_model("cnn", 1, true);
    check_model("cnn", 2, false);
}

int main(void) {
    RUN(test_mlp);
    RUN(test_cnn);
    return th_summary();
}
