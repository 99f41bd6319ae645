/* Eager autograd: recording, backward, accumulation, the errors, no-grad,
 * detach, higher order, forward mode. References are derivatives worked out
 * by hand. */
#include "harness.h"
#include "core/core.h" /* cn_node_arena_chunks */

#include <pthread.h>

static cn_tensor *param(int ndim, const int64_t *shape, const double *v) {
    cn_tensor *t = th_make(CN_F64, ndim, shape, v, TH_CONTIG);
    cn_set_requires_grad(t, true);
    return t;
}

static void test_square_sum(void) {
    double xv[] = {1, -2, 3.5};
    cn_tensor *x = param(CN_SHAPE(3), xv);
    cn_tensor *y = cn_sum(cn_mul(x, x), NULL, 0, false);
    CHECK(cn_requires_grad(y));
    CHECK(!cn_is_leaf(y));
    CHECK_EQ_INT(cn_backward(y, NULL), 0);
    cn_tensor *g = cn_get_grad(x);
    CHECK(g != NULL);
    for (int i = 0; i < 3; i++) CHECK_CLOSE(th_at(g, i), 2 * xv[i], 1e-12, 0);
}

/* The seed material's F(x, y, z) = (x + y) * z. */
static void test_seed_example(void) {
    cn_tensor *x = param(0, NULL, (double[]){1});
    cn_tensor *y = param(0, NULL, (double[]){2});
    cn_tensor *z = param(0, NULL, (double[]){-4});
    cn_tensor *f = cn_mul(cn_add(x, y), z);
    CHECK_CLOSE(cn_item(f), -12, 0, 0);
    CHECK_EQ_INT(cn_backward(f, NULL), 0);
    CHECK_CLOSE(cn_item(cn_get_grad(x)), -4, 0, 0);
    CHECK_CLOSE(cn_item(cn_get_grad(y)), -4, 0, 0);
    CHECK_CLOSE(cn_item(cn_get_grad(z)), 3, 0, 0);
}

static void test_accumulate_and_zero(void) {
    cn_tensor *x = param(CN_SHAPE(2), (double[]){1, 2});
    for (int k = 0; k < 3; k++) {
        cn_tensor *y = cn_sum(cn_mul_scalar(x, 3), NULL, 0, false);
        CHECK_EQ_INT(cn_backward(y, NULL), 0);
    }
    CHECK_CLOSE(th_at(cn_get_grad(x), 1), 9, 0, 0);
    cn_zero_grad(x);
    CHECK(cn_get_grad(x) == NULL);
}

static void test_broadcast_grad(void) {
    cn_tensor *a = param(CN_SHAPE(2, 3), (double[]){1, 2, 3, 4, 5, 6});
    cn_tensor *b = param(CN_SHAPE(3), (double[]){1, 1, 1});
    cn_tensor *y = cn_sum(cn_mul(a, b), NULL, 0, false);
    CHECK_EQ_INT(cn_backward(y, NULL), 0);
    CHECK_SHAPE(cn_get_grad(b), 3);
    CHECK_CLOSE(th_at(cn_get_grad(b), 0), 5, 0, 0);
    CHECK_CLOSE(th_at(cn_get_grad(b), 2), 9, 0, 0);
    CHECK_SHAPE(cn_get_grad(a), 2, 3);
}

static void test_errors(void) {
    cn_tensor *x = param(CN_SHAPE(2), (double[]){1, 2});
    cn_tensor *y = cn_mul(x, x);
    CHECK_STATUS_ERROR(cn_backward(y, NULL), "not a single value");
    cn_tensor *s = cn_sum(y, NULL, 0, false);
    CHECK_EQ_INT(cn_backward(s, NULL), 0);
    CHECK_STATUS_ERROR(cn_backward(s, NULL), "already freed");

    cn_tensor *c = cn_ones(CN_F64, CN_SHAPE(2));
    CHECK_STATUS_ERROR(cn_backward(cn_sum(c, NULL, 0, false), NULL), "does not require a gradient");
    cn_tensor *i = cn_zeros(CN_I64, CN_SHAPE(2));
    CHECK_STATUS_ERROR(cn_set_requires_grad(i, true), "only float tensors");
    CHECK_STATUS_ERROR(cn_set_requires_grad(y, true), "only leaves");

    /* Modifying a value a recorded node reads. */
    cn_tensor *t = cn_mul_scalar(x, 2);
    cn_tensor *u = cn_sum(cn_mul(t, t), NULL, 0, false);
    cn_no_grad_begin();
    cn_fill_(t, 5);
    cn_no_grad_end();
    CHECK_STATUS_ERROR(cn_backward(u, NULL), "modified in place");

    /* A seed of the wrong shape. */
    cn_tensor *v = cn_mul(x, x);
    CHECK_STATUS_ERROR(cn_backward(v, cn_ones(CN_F64, CN_SHAPE(3))), "does not match");
}

static void test_retain_graph(void) {
    cn_tensor *x = param(0, NULL, (double[]){3});
    cn_tensor *y = cn_mul(x, x);
    CHECK_EQ_INT(cn_backward_ex(y, NULL, CN_GRAD_RETAIN_GRAPH), 0);
    CHECK_EQ_INT(cn_backward(y, NULL), 0);
    CHECK_CLOSE(cn_item(cn_get_grad(x)), 12, 0, 0);
}

static void test_no_grad_and_detach(void) {
    cn_tensor *x = param(CN_SHAPE(2), (double[]){1, 2});
    cn_no_grad_begin();
    cn_tensor *y = cn_mul(x, x);
    cn_no_grad_end();
    CHECK(!cn_requires_grad(y));
    CHECK(cn_is_grad_enabled());
    cn_tensor *d = cn_detach(x);
    CHECK(!cn_requires_grad(d));
    CHECK(cn_shares_storage(d, x));
    /* Gradient flows through x but not through the detached copy. */
    cn_tensor *z = cn_sum(cn_mul(x, d), NULL, 0, false);
    CHECK_EQ_INT(cn_backward(z, NULL), 0);
    CHECK_CLOSE(th_at(cn_get_grad(x), 1), 2, 0, 0);
    bool prev = cn_set_grad_enabled(false);
    CHECK(prev);
    CHECK(!cn_requires_grad(cn_mul(x, x)));
    cn_set_grad_enabled(true);
}

static void test_grad_function(void) {
    cn_tensor *x = param(CN_SHAPE(2), (double[]){0.5, -1});
    cn_tensor *y = cn_sum(cn_mul(x, cn_mul(x, x)), NULL, 0, false); /* sum x^3 */
    cn_tensor *g;
    CHECK_EQ_INT(cn_grad(&y, NULL, 1, &x, 1, &g, 0), 0);
    CHECK_CLOSE(th_at(g, 0), 0.75, 1e-12, 0);
    CHECK_CLOSE(th_at(g, 1), 3, 1e-12, 0);
    CHECK(cn_get_grad(x) == NULL); /* .grad untouched */
    cn_tensor *unused = param(CN_SHAPE(1), (double[]){1});
    cn_tensor *y2 = cn_sum(cn_mul(x, x), NULL, 0, false);
    cn_tensor *two[2] = {x, unused}, *g2[2];
    CHECK_STATUS_ERROR(cn_grad(&y2, NULL, 1, two, 2, g2, CN_GRAD_RETAIN_GRAPH), "was not used");
    CHECK_EQ_INT(cn_grad(&y2, NULL, 1, two, 2, g2, CN_GRAD_ALLOW_UNUSED), 0);
    CHECK(g2[1] == NULL);
}

/* d2/dx2 tanh(x) = -2 tanh(x) (1 - tanh(x)^2). */
static void test_second_order(void) {
    double xs[] = {-1.3, 0.2, 0.9};
    cn_tensor *x = param(CN_SHAPE(3), xs);
    cn_tensor *y = cn_sum(cn_tanh(x), NULL, 0, false);
    cn_tensor *g;
    CHECK_EQ_INT(cn_grad(&y, NULL, 1, &x, 1, &g, CN_GRAD_CREATE_GRAPH), 0);
    CHECK(cn_requires_grad(g));
    cn_tensor *gs = cn_sum(g, NULL, 0, false), *h;
    CHECK_EQ_INT(cn_grad(&gs, NULL, 1, &x, 1, &h, 0), 0);
    for (int i = 0; i < 3; i++) {
        double t = tanh(xs[i]);
        CHECK_CLOSE(th_at(g, i), 1 - t * t, 1e-12, 0);
        CHECK_CLOSE(th_at(h, i), -2 * t * (1 - t * t), 1e-10, 0);
    }
}

/* d2/dx2 of sin and sigmoid, and a third derivative of sin, through
 * repeated cn_grad with CN_GRAD_CREATE_GRAPH. */
static void test_second_order_sin_sigmoid(void) {
    double xs[] = {-2.1, -0.4, 0.3, 1.7};
    for (int f = 0; f < 2; f++) {
        cn_tensor *x = param(CN_SHAPE(4), xs);
        cn_tensor *y = cn_sum(f == 0 ? cn_sin(x) : cn_sigmoid(x), NULL, 0, false);
        cn_tensor *g, *h, *h3;
        CHECK_EQ_INT(cn_grad(&y, NULL, 1, &x, 1, &g, CN_GRAD_CREATE_GRAPH), 0);
        cn_tensor *gs = cn_sum(g, NULL, 0, false);
        CHECK_EQ_INT(cn_grad(&gs, NULL, 1, &x, 1, &h, CN_GRAD_CREATE_GRAPH), 0);
        cn_tensor *hs = cn_sum(h, NULL, 0, false);
        CHECK_EQ_INT(cn_grad(&hs, NULL, 1, &x, 1, &h3, 0), 0);
        for (int i = 0; i < 4; i++) {
            double v = xs[i];
            if (f == 0) {
                CHECK_CLOSE(th_at(g, i), cos(v), 1e-12, 1e-15);
                CHECK_CLOSE(th_at(h, i), -sin(v), 1e-12, 1e-15);
                CHECK_CLOSE(th_at(h3, i), -cos(v), 1e-12, 1e-15);
            } else {
                double sg = 1 / (1 + exp(-v));
                CHECK_CLOSE(th_at(g, i), sg * (1 - sg), 1e-12, 1e-15);
                CHECK_CLOSE(th_at(h, i), sg * (1 - sg) * (1 - 2 * sg), 1e-10, 1e-15);
                CHECK_CLOSE(th_at(h3, i), sg * (1 - sg) * (1 - 6 * sg + 6 * sg * sg), 1e-10, 1e-15);
            }
        }
    }
}

/* L(w1, w2) = mean((tanh(x w1) w2 - t)^2) over a fixed batch, params flat. */
static cn_tensor *mlp_loss(cn_tensor *w1, cn_tensor *w2, cn_tensor *x, cn_tensor *t) {
    cn_tensor *h = cn_tanh(cn_matmul(x, w1));
    cn_tensor *d = cn_sub(cn_matmul(h, w2), t);
    return cn_mean(cn_square(d), NULL, 0, false);
}

/* Hessian-vector product (grad of <grad L, v>) against central differences
 * of the gradient along v, in f64. */
static void test_hessian_vector_product(void) {
    th_seed(77);
    cn_tensor *x = th_random(CN_F64, CN_SHAPE(6, 3), -1, 1, TH_CONTIG, NULL);
    cn_tensor *t = th_random(CN_F64, CN_SHAPE(6, 2), -1, 1, TH_CONTIG, NULL);
    cn_tensor *w[2] = {th_random(CN_F64, CN_SHAPE(3, 4), -1, 1, TH_CONTIG, NULL),
                       th_random(CN_F64, CN_SHAPE(4, 2), -1, 1, TH_CONTIG, NULL)};
    cn_tensor *v[2] = {th_random(CN_F64, CN_SHAPE(3, 4), -1, 1, TH_CONTIG, NULL),
                       th_random(CN_F64, CN_SHAPE(4, 2), -1, 1, TH_CONTIG, NULL)};
    for (int i = 0; i < 2; i++) cn_set_requires_grad(w[i], true);
    cn_tensor *loss = mlp_loss(w[0], w[1], x, t), *g[2], *hv[2];
    CHECK_EQ_INT(cn_grad(&loss, NULL, 1, w, 2, g, CN_GRAD_CREATE_GRAPH), 0);
    cn_tensor *gv = cn_add(cn_sum(cn_mul(g[0], v[0]), NULL, 0, false),
                           cn_sum(cn_mul(g[1], v[1]), NULL, 0, false));
    CHECK_EQ_INT(cn_grad(&gv, NULL, 1, w, 2, hv, 0), 0);
    /* numeric: (grad L(w + eps v) - grad L(w - eps v)) / 2 eps */
    const double eps = 1e-5;
    cn_tensor *gp[2], *gm[2];
    for (int sgn = 0; sgn < 2; sgn++) {
        cn_tensor *ws[2];
        for (int i = 0; i < 2; i++) {
            ws[i] = cn_detach(cn_add(cn_detach(w[i]), cn_mul_scalar(v[i], sgn ? -eps : eps)));
            cn_set_requires_grad(ws[i], true);
        }
        cn_tensor *l = mlp_loss(ws[0], ws[1], x, t);
        CHECK_EQ_INT(cn_grad(&l, NULL, 1, ws, 2, sgn ? gm : gp, 0), 0);
    }
    for (int i = 0; i < 2; i++) {
        cn_tensor *num = cn_div_scalar(cn_sub(gp[i], gm[i]), 2 * eps);
        for (int64_t k = 0; k < cn_numel(num); k++)
            CHECK_CLOSE(th_at(hv[i], k), th_at(num, k), 1e-6, 1e-8);
    }
}

/* A .grad set to a view of a larger buffer (as optimisers lay gradients
 * out) is accumulated into in place: same tensor, buffer updated. */
static void test_accumulate_into_view(void) {
    double xv[] = {1, 2, 3};
    cn_tensor *x = param(CN_SHAPE(3), xv);
    cn_tensor *buf = cn_zeros(CN_F64, CN_SHAPE(5));
    cn_tensor *view = cn_slice(buf, 0, 1, 4, 1);
    CHECK_EQ_INT(cn_set_grad(x, view), 0);
    for (int r = 0; r < 2; r++) {
        cn_tensor *y = cn_sum(cn_square(x), NULL, 0, false);
        CHECK_EQ_INT(cn_backward(y, NULL), 0);
    }
    CHECK(cn_get_grad(x) == view);
    for (int i = 0; i < 3; i++) CHECK_CLOSE(th_at(buf, i + 1), 4 * xv[i], 0, 0);
    CHECK_CLOSE(th_at(buf, 0), 0, 0, 0);
    CHECK_CLOSE(th_at(buf, 4), 0, 0, 0);
    /* create_graph gradients stay out of place (differentiable). */
    cn_tensor *y = cn_sum(cn_square(x), NULL, 0, false);
    CHECK_EQ_INT(cn_backward_ex(y, NULL, CN_GRAD_CREATE_GRAPH), 0);
    CHECK(cn_get_grad(x) != view);
    CHECK(cn_requires_grad(cn_get_grad(x)));
    CHECK_CLOSE(th_at(cn_get_grad(x), 2), 6 * xv[2], 1e-12, 0);
    /* That gradient's history holds x, which holds it: a cycle, as in
     * PyTorch, that dropping the gradient breaks. */
    cn_zero_grad(x);
}

static int cube_fn(void *ctx, cn_tensor *const *in, int nin, cn_tensor **out, int nout) {
    (void)ctx;
    (void)nin;
    (void)nout;
    out[0] = cn_mul(in[0], cn_mul(in[0], in[1]));
    return out[0] ? 0 : -1;
}

static void test_forward_mode(void) {
    cn_tensor *x = th_make(CN_F64, CN_SHAPE(2), (double[]){2, 3}, TH_CONTIG);
    cn_tensor *w = th_make(CN_F64, CN_SHAPE(2), (double[]){5, 7}, TH_CONTIG);
    cn_tensor *tx = th_make(CN_F64, CN_SHAPE(2), (double[]){1, 0}, TH_CONTIG);
    cn_tensor *primals[2] = {x, w}, *tangents[2] = {tx, NULL}, *out, *out_t;
    CHECK_EQ_INT(cn_jvp(cube_fn, NULL, primals, tangents, 2, &out, &out_t, 1), 0);
    /* d(x^2 w) = 2 x w dx */
    CHECK_CLOSE(th_at(out, 0), 20, 0, 0);
    CHECK_CLOSE(th_at(out_t, 0), 20, 1e-12, 0);
    CHECK_CLOSE(th_at(out_t, 1), 0, 0, 0);
    CHECK(cn_get_tangent(x) == NULL); /* caller's tensors untouched */
}

static void test_long_chain(void) {
    /* A long recorded chain: backward and release must not recurse. */
    cn_tensor *x = param(0, NULL, (double[]){1});
    cn_scope_begin();
    cn_tensor *y = x;
    for (int i = 0; i < 20000; i++) y = cn_mul_scalar(y, 1.0001);
    cn_keep(y);
    cn_scope_end();
    CHECK_EQ_INT(cn_backward(y, NULL), 0);
    CHECK_CLOSE(cn_item(cn_get_grad(x)), pow(1.0001, 20000), 1e-9, 0);
}

/* A chain recorded on one thread and continued on a fresh one (whose own
 * count of nodes is still 0): creation numbers stay a topological order
 * (each node after its inputs' nodes), so the walk reaches every node once
 * its gradient is complete. */
typedef struct chain_job {
    cn_tensor *x, *y;
} chain_job;

static void *record_chain(void *p) {
    chain_job *j = p;
    cn_tensor *y = j->x;
    for (int i = 0; i < 50; i++) {
        cn_tensor *n = cn_mul_scalar(y, 2.0);
        if (y != j->x) cn_release(y);
        y = n;
    }
    j->y = y;
    return NULL;
}

/* y = 3 x + x: x's two uses sum before the walk goes past x. */
static void *continue_chain(void *p) {
    chain_job *j = p;
    cn_tensor *t = cn_mul_scalar(j->x, 3.0);
    j->y = cn_add(t, j->x);
    cn_release(t);
    return NULL;
}

static void test_chain_across_threads(void) {
    cn_tensor *x = param(CN_SHAPE(2), (double[]){1, -3});
    chain_job first = {x, NULL}, second = {NULL, NULL};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, record_chain, &first) == 0);
    pthread_join(t, NULL);
    second.x = first.y;
    CHECK(pthread_create(&t, NULL, continue_chain, &second) == 0);
    pthread_join(t, NULL);
    CHECK(second.y != NULL);
    CHECK_EQ_INT(cn_backward(cn_sum(second.y, NULL, 0, false), NULL), 0);
    cn_tensor *g = cn_get_grad(x);
    CHECK(g != NULL);
    if (g) {
        CHECK_CLOSE(cn_get(g, (int64_t[]){0}), 4 * pow(2, 50), 0, 0);
        CHECK_CLOSE(cn_get(g, (int64_t[]){1}), 4 * pow(2, 50), 0, 0);
    }
    cn_release(first.y);
    cn_release(second.y);
}


/* A tape's nodes come from per-thread chunks (node.c): they must outlive
 * the thread that recorded them, be freed on other threads, several at once
 * from the same chunk, and every chunk must go back to the system once its
 * nodes are freed and the threads holding it exit or empty their caches.
 * Each node has a leaf of its own (reference counts are not atomic: the
 * threads share no tensor). */
#define ARENA_N 3000
typedef struct arena_job {
    cn_tensor **out, *last_leaf;
    int first, step;
} arena_job;

static void *arena_record(void *p) {
    arena_job *j = p;
    for (int i = 0; i < ARENA_N; i++) {
        cn_tensor *x = cn_full(CN_F64, CN_SHAPE(2), 1.0);
        cn_set_requires_grad(x, true);
        j->out[i] = cn_mul_scalar(x, 1.0 + i);
        if (i < ARENA_N - 1) cn_release(x);
        else j->last_leaf = x;
    }
    return NULL; /* exits with its last chunk partly carved */
}

static void *arena_release(void *p) {
    arena_job *j = p;
    for (int i = j->first; i < ARENA_N; i += j->step) {
        cn_release(j->out[i]);
        j->out[i] = NULL;
    }
    return NULL; /* exits holding frees not yet handed to their chunk */
}

static void test_nodes_across_threads(void) {
    cn_empty_cache();
    int64_t base = cn_node_arena_chunks();
    static cn_tensor *out[ARENA_N];
    for (int round = 0; round < 3; round++) {
        arena_job rec = {out, NULL, 0, 1};
        pthread_t t, u;
        CHECK(pthread_create(&t, NULL, arena_record, &rec) == 0);
        pthread_join(t, NULL);
        bool all = rec.last_leaf != NULL;
        for (int i = 0; i < ARENA_N; i++) all = all && out[i];
        CHECK(all);
        if (!all) break;
        /* The recording thread is gone; its nodes still work. */
        cn_scope_begin(); /* frees the loss and its node before the count below */
        CHECK_EQ_INT(cn_backward(cn_sum(out[ARENA_N - 1], NULL, 0, false), NULL), 0);
        cn_scope_end();
        cn_tensor *g = cn_get_grad(rec.last_leaf);
        CHECK(g && cn_get(g, (int64_t[]){1}) == ARENA_N);
        cn_release(rec.last_leaf);
        /* Freed by three threads at once, neighbours by different ones. */
        arena_job odd = {out, NULL, 1, 2}, even = {out, NULL, 0, 4}, rest = {out, NULL, 2, 4};
        CHECK(pthread_create(&t, NULL, arena_release, &odd) == 0);
        CHECK(pthread_create(&u, NULL, arena_release, &even) == 0);
        arena_release(&rest);
        pthread_join(t, NULL);
        pthread_join(u, NULL);
    }
    cn_empty_cache();
    CHECK_EQ_INT(cn_node_arena_chunks(), base);
}

/* Gradient hooks (Tensor.register_hook): seen once complete, replaced,
 * in order, on leaves and intermediates, in cn_backward and cn_grad; freed
 * with their tensor or when removed. */
typedef struct hook_log {
    int calls, freed;
    double seen, scale;
} hook_log;

static int scale_hook(cn_tensor *g, cn_tensor **replace, void *ctx) {
    hook_log *l = ctx;
    l->calls++;
    l->seen = cn_get(g, (int64_t[]){0});
    if (l->scale != 1) *replace = cn_mul_scalar(g, l->scale);
    return 0;
}
static int failing_hook(cn_tensor *g, cn_tensor **replace, void *ctx) {
    (void)g, (void)replace, (void)ctx;
    return cn_failc(CN_EINVAL, "the hook says no");
}
static int wrong_shape_hook(cn_tensor *g, cn_tensor **replace, void *ctx) {
    (void)g, (void)ctx;
    *replace = cn_zeros(CN_F32, CN_SHAPE(3));
    return 0;
}
static void count_free(void *ctx) { ((hook_log *)ctx)->freed++; }

static void test_grad_hooks(void) {
    cn_scope_begin();
    cn_tensor *x = cn_full(CN_F32, CN_SHAPE(2), 3.0);
    cn_set_requires_grad(x, true);
    cn_tensor *y = cn_mul(x, x);   /* dy/dx = 2x = 6 */
    cn_tensor *z = cn_sum(cn_mul_scalar(y, 5), NULL, 0, false);
    hook_log ly = {.scale = 10}, lx = {.scale = 1}, lx2 = {.scale = 0.5};
    int hy = cn_add_grad_hook(y, scale_hook, &ly, count_free);
    CHECK(hy > 0);
    CHECK(cn_add_grad_hook(x, scale_hook, &lx, count_free) > 0);
    int hx2 = cn_add_grad_hook(x, scale_hook, &lx2, count_free);
    CHECK_EQ_INT(cn_backward_ex(z, NULL, CN_GRAD_RETAIN_GRAPH), 0);
    /* y's gradient 5 is seen, then made 50; x's 50 * 6 = 300 seen by the
     * first hook, halved by the second. */
    CHECK_EQ_INT(ly.calls, 1);
    CHECK_CLOSE(ly.seen, 5, 0, 0);
    CHECK_CLOSE(lx.seen, 300, 0, 1e-4);
    CHECK_CLOSE(lx2.seen, 300, 0, 1e-4);
    CHECK_CLOSE(cn_get(cn_get_grad(x), (int64_t[]){1}), 150, 0, 1e-4);
    /* cn_grad runs them too; a removed hook does not run and is freed. */
    CHECK_EQ_INT(cn_remove_grad_hook(x, hx2), 0);
    CHECK_EQ_INT(lx2.freed, 1);
    CHECK_STATUS_ERROR(cn_remove_grad_hook(x, hx2), "no hook");
    cn_tensor *gx = NULL;
    CHECK_EQ_INT(cn_grad(&z, NULL, 1, &x, 1, &gx, CN_GRAD_RETAIN_GRAPH), 0);
    CHECK_CLOSE(cn_get(gx, (int64_t[]){0}), 300, 0, 1e-4);
    CHECK_EQ_INT(ly.calls, 2);
    CHECK_EQ_INT(lx2.calls, 1);
    /* A failing hook stops the pass with its message; a result of another
     * shape is refused. */
    cn_tensor *w = cn_full(CN_F32, CN_SHAPE(2), 1.0);
    cn_set_requires_grad(w, true);
    cn_tensor *u = cn_sum(cn_mul(w, w), NULL, 0, false);
    CHECK(cn_add_grad_hook(w, failing_hook, NULL, NULL) > 0);
    CHECK_STATUS_ERROR(cn_backward_ex(u, NULL, CN_GRAD_RETAIN_GRAPH), "the hook says no");
    cn_tensor *v = cn_full(CN_F32, CN_SHAPE(2), 1.0);
    cn_set_requires_grad(v, true);
    CHECK(cn_add_grad_hook(v, wrong_shape_hook, NULL, NULL) > 0);
    CHECK_STATUS_ERROR(cn_backward(cn_sum(cn_mul(v, v), NULL, 0, false), NULL), "f32 [3] gradient");
    cn_tensor *c = cn_full(CN_F32, CN_SHAPE(2), 1.0);
    CHECK_STATUS_ERROR(cn_add_grad_hook(c, scale_hook, &lx, NULL), "doesn't require gradient");
    cn_scope_end();
    /* The hooks go with their tensors. */
    CHECK_EQ_INT(ly.freed, 1);
    CHECK_EQ_INT(lx.freed, 1);
}

int main(void) {
    RUN(test_square_sum);
    RUN(test_grad_hooks);
    RUN(test_seed_example);
    RUN(test_accumulate_and_zero);
    RUN(test_broadcast_grad);
    RUN(test_errors);
    RUN(test_retain_graph);
    RUN(test_no_grad_and_detach);
    RUN(test_grad_function);
    RUN(test_second_order);
    RUN(test_accumulate_into_view);
    RUN(test_second_order_sin_sigmoid);
    RUN(test_hessian_vector_product);
    RUN(test_forward_mode);
    RUN(test_long_chain);
    RUN(test_chain_across_threads);
    RUN(test_nodes_across_threads);
    return th_summary();
}
