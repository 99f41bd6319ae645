/* A model split over ranks by placement: device scopes "rank:R/cpu:0" in a
 * static graph, cut into per-rank programs joined by send/recv steps
 * (passes/split.c). Run as `mpirun -np 2 test_dist_place` and as one
 * process (where the second stage's rank is 0, so nothing is cut, and the
 * errors that need no peer are checked).
 *
 * - training (cn_compile_train_step, SGD with momentum): the split
 *   program's losses and parameters against one process training the same
 *   model unsplit (computed on every rank, no messages), with a parameter
 *   both stages read, whose gradient is summed over the ranks and sent to
 *   both; the copy of the other stage's parameters on each rank stays as
 *   it was made;
 * - forward only (cn_compile): each rank's outputs against one process,
 *   NULL for the other rank's, and cn_program_output_rank;
 * - the dump, the DOT and cn_program_stats name the ranks and count the
 *   send and recv steps;
 * - the errors: a device of another rank used eagerly (an op in its scope,
 *   cn_to, cn_set_default_device), sizes not known at a cut, a rank outside
 *   the job, malformed names.
 *
 * The messages carry exact bytes and each rank runs the same kernels on
 * the same values as one process, so the results agree to rounding: the
 * checks allow 1e-5 relative (the measured difference is printed). */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"

#include <math.h>

enum { B = 8, DIN = 6, DH = 5, NCLS = 3, STEPS = 6 };

static cn_tensor *data_x, *data_y;
static int peer; /* the stage-1 rank: 1, or 0 as one process */

static cn_device rank_cpu(int r) { return CN_DEVICE_ON_RANK(r, CN_DEVICE_CPU, 0); }

/* Two linear stages and a scale both read: h = tanh(x W0^T s), logits =
 * (h s) W1^T. Made from one seed, so every rank and the reference start
 * from the same values. */
typedef struct model {
    cn_module *l0, *l1;
    cn_tensor *s;
    cn_optimizer *opt;
} model;

static void make_model(model *m) {
    cn_manual_seed(21);
    m->l0 = cn_nn_linear(DIN, DH, true);
    m->l1 = cn_nn_linear(DH, NCLS, true);
    m->s = cn_retain(cn_full(CN_F32, CN_SHAPE(DH), 1.5));
    cn_set_requires_grad(m->s, true);
    cn_tensor **p0, **p1;
    int n0 = cn_module_parameters(m->l0, &p0, NULL), n1 = cn_module_parameters(m->l1, &p1, NULL);
    cn_tensor *all[8];
    int n = 0;
    for (int i = 0; i < n0; i++) all[n++] = p0[i];
    all[n++] = m->s;
    for (int i = 0; i < n1; i++) all[n++] = p1[i];
    free(p0);
    free(p1);
    m->opt = cn_sgd(all, n, &(cn_sgd_opts){.lr = 0.2, .momentum = 0.9});
}

static void free_model(model *m) {
    cn_optimizer_free(m->opt);
    cn_module_free(m->l0);
    cn_module_free(m->l1);
    cn_release(m->s);
}

/* Stage 0 under rank 0's scope and stage 1 under the peer's (split), or
 * no scopes (the reference). */
static cn_tensor *stage0(model *m, cn_tensor *x, bool split) {
    if (split) cn_device_scope_begin(rank_cpu(0));
    cn_tensor *h = cn_tanh(cn_mul(cn_module_forward(m->l0, x), m->s));
    if (split) cn_device_scope_end();
    return h;
}

static cn_tensor *stage1(model *m, cn_tensor *h, bool split) {
    if (split) cn_device_scope_begin(rank_cpu(peer));
    cn_tensor *logits = cn_module_forward(m->l1, cn_mul(h, m->s));
    if (split) cn_device_scope_end();
    return logits;
}

/* Train STEPS steps; losses[k] NaN where this rank does not get the loss.
 * Returns the optimiser's flat parameters after training, or NULL; *start
 * gets them before (both in the current scope). */
static cn_tensor *train(bool split, double *losses, cn_tensor **start, cn_program_stats *st) {
    model m;
    make_model(&m);
    *start = cn_clone(cn_optimizer_flat_params(m.opt)); /* (the caller's scope owns these) */
    cn_graph *g = cn_graph_new();
    cn_tensor *ph[2] = {cn_retain(cn_placeholder(g, "x", CN_F32, CN_SHAPE(B, DIN))),
                        cn_retain(cn_placeholder(g, "y", CN_I64, CN_SHAPE(B)))};
    cn_scope_begin();
    cn_tensor *loss = cn_cross_entropy(stage1(&m, stage0(&m, ph[0], split), split), ph[1],
                                       CN_REDUCTION_MEAN, 0);
    cn_program *p = loss ? cn_compile_train_step(g, &loss, 1, m.opt, NULL) : NULL;
    cn_scope_end();
    CHECK_MSG(p, "compile_train_step (split %d): %s", split, cn_last_error());
    cn_tensor *flat = NULL;
    for (int k = 0; p && k < STEPS; k++) {
        cn_scope_begin();
        cn_tensor *feed[2] = {cn_narrow(data_x, 0, (k % 3) * B, B), cn_narrow(data_y, 0, (k % 3) * B, B)};
        cn_tensor *out = NULL;
        CHECK_MSG(cn_run(p, ph, feed, 2, &out, 1) == 0, "run: %s", cn_last_error());
        losses[k] = out ? cn_item(out) : NAN;
        cn_scope_end();
    }
    if (p) {
        cn_program_stats_get(p, st);
        CHECK_EQ_INT(cn_program_output_rank(p, 0), split ? peer : -1);
        flat = cn_clone(cn_optimizer_flat_params(m.opt));
    }
    cn_program_free(p);
    cn_graph_free(g);
    cn_release(ph[0]);
    cn_release(ph[1]);
    free_model(&m);
    return flat;
}

/* Where each stage's parameters sit in the flat buffer: l0 (W0, b0), s, l1. */
enum { N0 = DH * DIN + DH, NS = DH, N1 = NCLS * DH + NCLS };

static double max_rel(const cn_tensor *a, const cn_tensor *b, int64_t from, int64_t n) {
    double worst = 0;
    for (int64_t i = from; i < from + n; i++) {
        double x = cn_get(a, (int64_t[]){i}), y = cn_get(b, (int64_t[]){i});
        worst = fmax(worst, fabs(x - y) / fmax(fabs(y), 1e-3));
    }
    return worst;
}

static void test_train(void) {
    int r = cn_dist_rank();
    double ref[STEPS], got[STEPS];
    cn_tensor *start_ref, *start;
    cn_program_stats sr, st;
    cn_tensor *pref = train(false, ref, &start_ref, &sr);
    cn_tensor *pgot = train(true, got, &start, &st);
    CHECK(pref && pgot);
    if (!pref || !pgot) return;
    bool has_loss = r == peer;
    double worst = 0;
    for (int k = 0; k < STEPS; k++) {
        CHECK_MSG(has_loss ? !isnan(got[k]) : isnan(got[k]), "step %d: loss %g on rank %d", k,
                  got[k], r);
        if (has_loss) worst = fmax(worst, fabs(got[k] - ref[k]) / fabs(ref[k]));
    }
    CHECK_MSG(worst <= 1e-5, "losses differ from one process by %.3g (relative)", worst);
    CHECK_MSG(!has_loss || ref[STEPS - 1] < ref[0] - 0.05, "no training: %g -> %g", ref[0],
              ref[STEPS - 1]);
    /* Each rank's stage trained as in one process; the scale, read by both,
     * on both; the other stage's copy here untouched. */
    bool mine0 = r == 0, mine1 = r == peer;
    double p0 = max_rel(pgot, mine0 ? pref : start_ref, 0, N0);
    double ps = max_rel(pgot, pref, N0, NS);
    double p1 = max_rel(pgot, mine1 ? pref : start_ref, N0 + NS, N1);
    CHECK_MSG(p0 <= 1e-5 && ps <= 1e-5 && p1 <= 1e-5,
              "rank %d: parameters differ by %.3g (stage 0), %.3g (scale), %.3g (stage 1)", r, p0,
              ps, p1);
    CHECK(mine0 || max_rel(pgot, pref, 0, N0) > 1e-3); /* (it did train in one process) */
    /* The split: one crossing forward (h), one back (its gradient), and the
     * scale's gradient parts and sum (both ranks read it). */
    if (cn_dist_size() > 1) {
        CHECK_EQ_INT(st.rank, r);
        /* rank 0 sends h and its part of the scale's gradient, and gets
         * h's gradient and the scale's whole gradient; rank 1 the reverse. */
        CHECK_MSG(st.nsends == 2 && st.nrecvs == 2, "rank %d: %d sends, %d recvs", r, st.nsends,
                  st.nrecvs);
        CHECK(st.nsteps < sr.nsteps);
    } else {
        CHECK_EQ_INT(st.rank, 0);
        CHECK_EQ_INT(st.nsends + st.nrecvs, 0);
    }
    CHECK_EQ_INT(sr.rank, -1);
    if (r == 0)
        printf("train: %d steps split over %d rank(s): losses within %.2g of one process, "
               "parameters within %.2g\n", STEPS, cn_dist_size(), worst, fmax(p0, fmax(ps, p1)));
    if (r == peer && r != 0)
        printf("train (rank %d): losses within %.2g, parameters within %.2g\n", r, worst,
               fmax(p0, fmax(ps, p1)));
}

/* Forward only, at -O0 and -O2: h on rank 0, the logits on the peer, a sum
 * of the input on every rank, and the logits back on rank 0 (messages both
 * ways). */
static void test_forward(void) {
    int r = cn_dist_rank();
    for (int level = 0; level <= 2; level += 2) {
        cn_scope_begin();
        model m;
        make_model(&m);
        cn_tensor *x = cn_narrow(data_x, 0, 0, B);
        cn_tensor *want_h = stage0(&m, x, false), *want_y = stage1(&m, want_h, false);
        cn_tensor *want_z = cn_add(cn_tanh(want_y), cn_sum(want_h, NULL, 0, false));
        cn_graph *g = cn_graph_new();
        cn_tensor *ph = cn_placeholder(g, "x", CN_F32, CN_SHAPE(B, DIN));
        cn_tensor *h = stage0(&m, ph, true), *y = stage1(&m, h, true);
        cn_device_scope_begin(rank_cpu(0));
        cn_tensor *z = cn_add(cn_tanh(y), cn_sum(h, NULL, 0, false));
        cn_device_scope_end();
        cn_tensor *outs[4] = {h, y, cn_sum(ph, NULL, 0, false), z};
        cn_program *p = cn_compile(g, outs, 4, &(cn_compile_opts){.opt_level = level});
        CHECK_MSG(p, "compile -O%d: %s", level, cn_last_error());
        cn_tensor *got[4] = {NULL, NULL, NULL, NULL};
        CHECK(p && cn_run(p, &ph, &x, 1, got, 4) == 0);
        bool split = cn_dist_size() > 1;
        int want_rank[4] = {0, peer, -1, 0}; /* (one process: a split of one part) */
        for (int o = 0; p && o < 4; o++) CHECK_EQ_INT(cn_program_output_rank(p, o), want_rank[o]);
        /* The same kernels on the same bytes: equal. */
        CHECK(r == 0 ? got[0] && cn_equal(got[0], want_h) : !got[0]);
        CHECK(r == peer ? got[1] && cn_equal(got[1], want_y) : !got[1]);
        CHECK(got[2] && cn_allclose(got[2], cn_sum(x, NULL, 0, false), 1e-6, 0));
        CHECK(r == 0 ? got[3] && cn_allclose(got[3], want_z, 1e-6, 0) : !got[3]);
        cn_program_stats st;
        if (p && cn_program_stats_get(p, &st) == 0 && split) {
            /* h to rank 1, y back to rank 0. */
            CHECK_EQ_INT(st.rank, r);
            CHECK_EQ_INT(st.nsends, 1);
            CHECK_EQ_INT(st.nrecvs, 1);
        }
        cn_program_free(p);
        cn_graph_free(g);
        free_model(&m);
        cn_scope_end();
    }
}

/* A stage on another kind of device of its rank ("rank:1/opencl:0"):
 * placement moves the received value there and the result back to the
 * CPU for the message (PoCL in CI; skipped without an OpenCL device). */
static void test_device_stage(void) {
    if (cn_device_count(CN_DEVICE_OPENCL) == 0) {
        printf("skipped: no OpenCL device\n");
        return;
    }
    int r = cn_dist_rank();
    model m;
    make_model(&m);
    cn_tensor *x = cn_narrow(data_x, 0, 0, B);
    cn_tensor *want = cn_tanh(stage1(&m, stage0(&m, x, false), false));
    cn_graph *g = cn_graph_new();
    cn_tensor *ph = cn_placeholder(g, "x", CN_F32, CN_SHAPE(B, DIN));
    cn_tensor *h = stage0(&m, ph, true);
    cn_device_scope_begin(CN_DEVICE_ON_RANK(peer, CN_DEVICE_OPENCL, 0));
    cn_tensor *y = cn_tanh(cn_module_forward(m.l1, cn_mul(h, m.s)));
    cn_device_scope_end();
    cn_program *p = cn_compile(g, &y, 1, NULL);
    cn_tensor *got = NULL;
    CHECK_MSG(p && cn_run(p, &ph, &x, 1, &got, 1) == 0, "%s", cn_last_error());
    CHECK(r == peer ? got && cn_allclose(cn_to(got, CN_CPU), want, 1e-5, 1e-6) : !got);
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    if (p) cn_program_dump(p, f);
    fclose(f);
    char want_dev[32];
    snprintf(want_dev, sizeof want_dev, "[rank:%d/opencl:0]", peer);
    CHECK_MSG(r != peer || (text && strstr(text, want_dev)), "rank %d:\n%s", r, text);
    if (r == peer && peer != 0) printf("rank %d's part, its stage on OpenCL:\n%s", r, text);
    free(text);
    cn_program_free(p);
    cn_graph_free(g);
    free_model(&m);
}

/* The text and DOT forms name the rank of every step and the peer of each
 * message. */
static void test_dump(void) {
    int r = cn_dist_rank();
    cn_scope_begin();
    model m;
    make_model(&m);
    cn_graph *g = cn_graph_new();
    cn_tensor *ph = cn_placeholder(g, "x", CN_F32, CN_SHAPE(B, DIN));
    cn_tensor *y = stage1(&m, stage0(&m, ph, true), true);
    cn_program *p = cn_compile(g, &y, 1, NULL);
    CHECK(p);
    char *text = NULL, *dot = NULL;
    size_t n = 0, nd = 0;
    FILE *f = open_memstream(&text, &n), *fd = open_memstream(&dot, &nd);
    CHECK(p && cn_program_dump(p, f) == 0 && cn_program_write_dot(p, fd) == 0);
    fclose(f);
    fclose(fd);
    char mine[32];
    snprintf(mine, sizeof mine, "[rank:%d/cpu:0]", r);
    CHECK_MSG(text && strstr(text, mine), "no %s in:\n%s", mine, text);
    snprintf(mine, sizeof mine, "@rank:%d/cpu:0", r);
    CHECK_MSG(dot && strstr(dot, mine), "no %s in the DOT:\n%s", mine, dot);
    if (cn_dist_size() > 1) {
        const char *msg = r == 0 ? "send(" : "recv(";
        const char *arrow = r == 0 ? "[rank:0/cpu:0 -> rank:1]" : "[rank:0 -> rank:1/cpu:0]";
        CHECK_MSG(strstr(text, msg) && strstr(text, arrow), "rank %d's dump:\n%s", r, text);
        CHECK_MSG(r != 0 || strstr(text, "outputs: (on rank:1)"), "rank 0's dump:\n%s", text);
        CHECK_MSG(strstr(dot, r == 0 ? "to rank 1, tag 0" : "from rank 0, tag 0"), "DOT:\n%s", dot);
        if (r == 0) printf("rank 0's part:\n%s", text);
    }
    free(text);
    free(dot);
    cn_program_free(p);
    cn_graph_free(g);
    free_model(&m);
    cn_scope_end();
}

static void test_names(void) {
    cn_device d;
    char b[48];
    CHECK(cn_device_parse("rank:1/cpu:0", &d) == 0 && cn_device_rank(d) == 1 &&
          cn_device_equal(cn_device_local(d), CN_CPU));
    CHECK(strcmp(cn_device_str(d, b, sizeof b), "rank:1/cpu:0") == 0);
    CHECK(cn_device_parse("rank:12/opencl:3", &d) == 0 && cn_device_rank(d) == 12 &&
          cn_device_equal(cn_device_local(d), CN_DEVICE(CN_DEVICE_OPENCL, 3)));
    CHECK(cn_device_parse("rank:2", &d) == 0 && cn_device_equal(d, rank_cpu(2)));
    CHECK(cn_device_parse("cuda:1", &d) == 0 && cn_device_rank(d) == -1);
    CHECK_STATUS_ERROR(cn_device_parse("rank:x/cpu:0", &d), "rank from 0");
    CHECK_STATUS_ERROR(cn_device_parse("rank:-1/cpu:0", &d), "rank from 0");
    CHECK_STATUS_ERROR(cn_device_parse("rank:1cpu", &d), "rank from 0");
    CHECK_STATUS_ERROR(cn_device_parse("rank:1/tpu:0", &d), "unknown kind");
}

/* Eagerly, a device of another rank fails, naming it; this rank's own is
 * the local device. */
static void test_eager(void) {
    int r = cn_dist_rank(), other = r == 0 ? 1 : 0;
    cn_device far = rank_cpu(other), here = rank_cpu(r);
    char name[32];
    snprintf(name, sizeof name, "rank:%d/cpu:0", other);
    cn_scope_begin();
    cn_tensor *a = cn_ones(CN_F32, CN_SHAPE(2, 3));
    CHECK(cn_device_scope_begin(far) == 0);
    CHECK_ERROR(cn_add(a, a), name);
    CHECK_ERROR(cn_add(a, a), "static graph");
    cn_tensor *made = cn_zeros(CN_F32, CN_SHAPE(2)); /* made here: every rank has every parameter */
    CHECK(made && cn_device_equal(cn_tensor_device(made), CN_CPU));
    CHECK(cn_reshape(a, CN_SHAPE(3, 2))); /* a view computes nothing */
    cn_device_scope_end();
    CHECK_ERROR(cn_to(a, far), name);
    CHECK_ERROR(cn_zeros_on(far, CN_F32, CN_SHAPE(2)), name);
    CHECK_STATUS_ERROR(cn_set_default_device(far), name);
    /* Its own rank: the local device. */
    CHECK(cn_device_scope_begin(here) == 0);
    cn_tensor *s = cn_add(a, a);
    CHECK(s && cn_get(s, (int64_t[]){1, 2}) == 2);
    cn_device_scope_end();
    cn_tensor *t = cn_to(a, here);
    CHECK(t && cn_device_equal(cn_tensor_device(t), CN_CPU));
    CHECK(cn_set_default_device(here) == 0 && cn_device_equal(cn_get_default_device(), CN_CPU));
    cn_scope_end();
}

/* Compiling: a rank outside the job; sizes unknown where a value crosses. */
static void test_compile_errors(void) {
    int P = cn_dist_size();
    cn_scope_begin();
    model m;
    make_model(&m);
    cn_graph *g = cn_graph_new();
    cn_tensor *ph = cn_placeholder(g, "x", CN_F32, CN_SHAPE(B, DIN));
    cn_device_scope_begin(rank_cpu(P));
    cn_tensor *y = cn_tanh(ph);
    cn_device_scope_end();
    char want[64];
    snprintf(want, sizeof want, "placed on rank:%d/cpu:0, but the job has %d process", P, P);
    CHECK_ERROR(cn_compile(g, &y, 1, NULL), want);
    /* The batch unknown: h's sizes are not known when compiling. */
    cn_tensor *phv = cn_placeholder(g, "xv", CN_F32, CN_SHAPE(-1, DIN));
    cn_tensor *yv = stage1(&m, stage0(&m, phv, true), true);
    if (P > 1) {
        CHECK_ERROR(cn_compile(g, &yv, 1, NULL), "sizes are not known when compiling");
    } else { /* one process: nothing crosses, so any size goes */
        cn_program *pv = cn_compile(g, &yv, 1, NULL);
        CHECK(pv);
        cn_program_free(pv);
    }
    cn_graph_free(g);
    free_model(&m);
    cn_scope_end();
}

int main(int argc, char **argv) {
    if (cn_dist_init(&argc, &argv) < 0) {
        fprintf(stderr, "%s\n", cn_last_error());
        return 1;
    }
    peer = cn_dist_size() > 1 ? 1 : 0;
    cn_manual_seed(7);
    cn_scope_begin();
    data_x = cn_retain(cn_randn(CN_F32, CN_SHAPE(3 * B, DIN)));
    data_y = cn_retain(cn_argmax(cn_matmul(data_x, cn_randn(CN_F32, CN_SHAPE(DIN, NCLS))), 1, false));
    cn_scope_end();
    RUN(test_names);
    RUN(test_eager);
    RUN(test_compile_errors);
    RUN(test_forward);
    RUN(test_dump);
    RUN(test_device_stage);
    RUN(test_train);
    cn_release(data_x);
    cn_release(data_y);
    int rc = th_summary();
    /* The job fails if any rank failed. */
    cn_tensor *f = cn_contiguous(cn_reshape(cn_scalar(CN_I32, rc != 0), CN_SHAPE(1)));
    cn_dist_allreduce(f, CN_DIST_MAX);
    int any = (int)cn_item(f);
    cn_release(f);
    cn_dist_finalize();
    return any ? 1 : 0;
}
