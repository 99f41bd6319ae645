/* Released tensors through the C API: a double release or a use after
 * release is an error naming the tensor, not a write into a recycled struct
 * (docs/architecture.md, "Debug mode"). The program runs the normal-mode
 * checks, then itself again with CN_DEBUG_API=1 (debug mode is read once
 * per process) for the debug-mode ones.
 *
 * Under AddressSanitizer released structs are poisoned, all but the magic
 * the checks read first; every use of a dead tensor below goes through a
 * checked entry point, so the error comes before any poisoned access (an
 * unchecked access would be an ASan report, by design). */
#define _DEFAULT_SOURCE /* setenv */
#include "harness.h"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* A tensor the caller owns (RUN opens one scope: keep hands it over). */
static cn_tensor *owned(cn_tensor *t) { return cn_keep(t); }

#define CHECK_LAST_ERROR(needle)                                                                   \
    CHECK_MSG(strstr(cn_last_error(), needle) != NULL, "error \"%s\" does not contain \"%s\"",       \
              cn_last_error(), needle)

/* ---- normal mode: caught while the struct is still on the free list ---- */

static void test_normal_mode_works(void) {
    cn_tensor *a = owned(cn_full(CN_F32, CN_SHAPE(2, 3), 2.0)), *b = owned(cn_ones(CN_F32, CN_SHAPE(3)));
    cn_tensor *c = owned(cn_add(a, b));
    CHECK(c && cn_get(c, (int64_t[]){1, 2}) == 3.0);
    cn_release(c);
    c = owned(cn_mul(a, b)); /* likely the struct c had: reuse is fine */
    CHECK(c && cn_get(c, (int64_t[]){0, 0}) == 2.0);
    cn_clear_error();
    cn_release(c);
    cn_release(b);
    cn_release(a);
    CHECK_MSG(cn_last_error()[0] == '\0', "a plain release set \"%s\"", cn_last_error());
}

static void test_double_release(void) {
    cn_tensor *t = owned(cn_zeros(CN_F32, CN_SHAPE(2, 3)));
    cn_release(t);
    cn_clear_error();
    cn_release(t);
    CHECK_LAST_ERROR("release: tensor f32[2, 3] was already released");
    /* Nothing was corrupted: the free list still hands out good structs. */
    cn_tensor *u = owned(cn_ones(CN_I64, CN_SHAPE(4)));
    CHECK(u && cn_get_int(u, (int64_t[]){3}) == 1);
    cn_release(u);
}

static void test_use_after_release(void) {
    cn_tensor *x = owned(cn_ones(CN_F32, CN_SHAPE(5)));
    cn_tensor *t = owned(cn_full(CN_F64, CN_SHAPE(4, 1), 1.5));
    cn_release(t);
    CHECK_ERROR(cn_add(t, x), "add: tensor f64[4, 1] was already released");
    CHECK_ERROR(cn_data(t), "data: tensor f64[4, 1] was already released");
    CHECK_ERROR(cn_shape(t), "shape: tensor f64[4, 1]");
    cn_clear_error();
    CHECK(cn_numel(t) == -1);
    CHECK_LAST_ERROR("numel: tensor f64[4, 1] was already released");
    CHECK(isnan(cn_get(t, (int64_t[]){0, 0})));
    CHECK(cn_set(t, (int64_t[]){0, 0}, 1.0) == CN_EINVAL);
    CHECK_ERROR(cn_retain(t), "retain: tensor f64[4, 1]");
    cn_release(x);
}

/* ---- debug mode: cleared, quarantined, named ---- */

static void test_debug_use_long_after(void) {
    cn_tensor *w = owned(cn_ones(CN_F32, CN_SHAPE(3, 2)));
    cn_set_name(w, "encoder.weight");
    cn_set_requires_grad(w, true);
    cn_tensor *y = owned(cn_mul(w, w)); /* recorded: the op is known */
    cn_release(y);
    cn_release(w);
    /* Hundreds of tensors made and dropped since: without the quarantine
     * both structs would be live tensors again by now. */
    for (int i = 0; i < 500; i++) {
        cn_tensor *k = owned(cn_zeros(CN_F32, CN_SHAPE(3, 2)));
        cn_release(owned(cn_add(k, k)));
        cn_release(k);
    }
    CHECK_ERROR(cn_sum(y, NULL, 0, false), "sum: tensor f32[3, 2] made by mul was already released");
    CHECK_ERROR(cn_data(w), "data: tensor f32[3, 2] 'encoder.weight' was already released");
    cn_clear_error();
    cn_release(w);
    CHECK_LAST_ERROR("release: tensor f32[3, 2] 'encoder.weight' was already released");
    CHECK_MSG(!strstr(cn_last_error(), "CN_DEBUG_API=1"), "debug mode still suggests itself: %s",
              cn_last_error());
    CHECK_ERROR(cn_backward(y, NULL) == CN_OK, "backward: tensor f32[3, 2] made by mul");
}

/* One release too many of an input a recorded op still holds: the struct
 * is freed under the history, found when the history is released. */
static void test_debug_release_under_history(void) {
    cn_tensor *x = owned(cn_full(CN_F32, CN_SHAPE(2), 3.0));
    cn_set_requires_grad(x, true);
    cn_tensor *y = owned(cn_exp(x));
    cn_release(x);
    cn_release(x); /* the node's reference */
    cn_clear_error();
    cn_release(y);
    CHECK_LAST_ERROR("release: tensor f32[2] was already released");
}

static void test_debug_mode_works(void) {
    cn_tensor *x = owned(cn_full(CN_F32, CN_SHAPE(4), 2.0));
    cn_set_requires_grad(x, true);
    cn_tensor *y = owned(cn_sum(cn_mul(x, x), NULL, 0, false)); /* mul: the scope's */
    CHECK(y && cn_item(y) == 16.0);
    CHECK(cn_backward(y, NULL) == CN_OK);
    CHECK(cn_get_grad(x) && cn_get(cn_get_grad(x), (int64_t[]){2}) == 4.0);
    cn_release(y);
    cn_release(x);
    /* More releases than the quarantine holds: structs come back out of it. */
    for (int i = 0; i < 10000; i++) cn_release(owned(cn_zeros(CN_F32, CN_SHAPE(1))));
    cn_tensor *z = owned(cn_ones(CN_F32, CN_SHAPE(2)));
    CHECK(z && cn_item(cn_sum(z, NULL, 0, false)) == 2.0);
    cn_release(z);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--debug")) {
        RUN(test_debug_mode_works);
        RUN(test_debug_use_long_after);
        RUN(test_debug_release_under_history);
        RUN(test_double_release);
        RUN(test_use_after_release);
        return th_summary();
    }
    if (getenv("CN_DEBUG_API")) unsetenv("CN_DEBUG_API");
    RUN(test_normal_mode_works);
    RUN(test_double_release);
    RUN(test_use_after_release);
    int fails = th_summary();
    /* Debug mode, in a process of its own. */
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("CN_DEBUG_API", "1", 1);
        execl("/proc/self/exe", argv[0], "--debug", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "debug mode: the child failed (status %d)\n", status);
        return 1;
    }
    return fails;
}
