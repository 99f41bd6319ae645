/* Distributed training, run as `mpirun -np 2 test_dist` (and as one
 * process): the collectives against values computed here from every
 * rank's known inputs; data-parallel training of a small MLP against one
 * process training on the global batch (computed on every rank, no
 * communication), in eager mode (with and without overlapping the
 * averaging) and as a compiled training step; reruns give the same bits;
 * a rank with a different model is named in the error; a model split over
 * two ranks with send/recv gives one process's loss and gradients.
 *
 * With N ranks and per-rank batch b, one process with batch N b and
 * drop_last sees the same samples in the same steps; the gradients differ
 * only by rounding (a mean of N means against one mean), so the losses
 * agree to a relative 1e-5 over the steps checked. */
#include "harness.h"

#include <math.h>

enum { NS = 96, DIN = 12, DH = 16, NCLS = 4, STEPS = 8 };

static cn_tensor *data_x, *data_y;

static void make_data(void) {
    cn_manual_seed(77);
    cn_scope_begin();
    data_x = cn_retain(cn_randn(CN_F32, CN_SHAPE(NS, DIN)));
    cn_tensor *w = cn_randn(CN_F32, CN_SHAPE(DIN, NCLS));
    data_y = cn_retain(cn_argmax(cn_matmul(data_x, w), 1, false));
    cn_scope_end();
}

static cn_module *make_model(int hidden) {
    cn_manual_seed(5); /* the same start on every rank before the broadcast */
    cn_module *layers[] = {cn_nn_linear(DIN, hidden, true), cn_nn_relu(),
                           cn_nn_linear(hidden, NCLS, true)};
    return cn_nn_sequential(layers, 3);
}

typedef enum { EAGER, EAGER_NO_OVERLAP, STATIC } mode;

/* STEPS steps; losses[s] is the global batch's mean loss (averaged over the
 * ranks when distributed); params gets the final flat parameters. */
static int train(bool distributed, mode md, double *losses, float *params, int64_t *nparams) {
    int P = distributed ? cn_dist_size() : 1, r = distributed ? cn_dist_rank() : 0;
    int64_t b = distributed ? 4 : 4 * (int64_t)cn_dist_size();
    cn_scope_begin();
    cn_module *model = make_model(DH);
    cn_tensor **ps;
    int np = cn_module_parameters(model, &ps, NULL);
    cn_optimizer *opt = cn_sgd(ps, np, &(cn_sgd_opts){.lr = 0.1, .momentum = 0.9});
    free(ps);
    cn_ddp *ddp = NULL;
    if (distributed)
        ddp = cn_ddp_new(model, opt,
                         &(cn_ddp_opts){.bucket_bytes = 256, .no_overlap = md == EAGER_NO_OVERLAP});
    cn_tensor *ds[2] = {data_x, data_y};
    cn_loader *l = cn_loader_new(ds, 2,
                                 &(cn_loader_opts){.batch_size = b, .shuffle = true, .seed = 3,
                                                   .drop_last = true, .shard_index = r,
                                                   .shard_count = distributed ? P : 0});
    cn_graph *g = NULL;
    cn_program *prog = NULL;
    cn_tensor *ph[2] = {NULL, NULL};
    int rc = model && opt && l && (!distributed || ddp) ? 0 : -1;
    if (rc == 0 && md == STATIC) {
        cn_scope_begin();
        g = cn_graph_new();
        ph[0] = cn_retain(cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, DIN)));
        ph[1] = cn_retain(cn_placeholder(g, "y", CN_I64, CN_SHAPE(-1)));
        cn_tensor *loss = cn_cross_entropy(cn_module_forward(model, ph[0]), ph[1],
                                           CN_REDUCTION_MEAN, 0);
        prog = loss ? cn_compile_train_step(g, &loss, 1, opt, NULL) : NULL;
        cn_scope_end();
        if (!prog) rc = -1;
    }
    int s = 0;
    for (int epoch = 0; rc == 0 && s < STEPS; epoch++) {
        cn_loader_set_epoch(l, epoch);
        cn_tensor *batch[2];
        int got;
        while (rc == 0 && s < STEPS && (got = cn_loader_next(l, batch)) == 1) {
            cn_scope_begin();
            cn_tensor *loss = NULL;
            if (prog) {
                cn_tensor *res[1] = {NULL};
                if (cn_run(prog, ph, batch, 2, res, 1) == 0) loss = res[0];
            } else {
                cn_optimizer_zero_grad(opt);
                loss = cn_cross_entropy(cn_module_forward(model, batch[0]), batch[1],
                                        CN_REDUCTION_MEAN, 0);
                if (loss && (cn_backward(loss, NULL) < 0 || cn_optimizer_step(opt) < 0))
                    loss = NULL;
            }
            if (!loss) {
                rc = -1;
            } else {
                cn_tensor *lv = cn_detach(cn_reshape(loss, CN_SHAPE(1)));
                lv = cn_contiguous(cn_cast(lv, CN_F64));
                if (distributed) cn_dist_allreduce(lv, CN_DIST_MEAN);
                losses[s++] = cn_item(lv);
            }
            cn_scope_end();
        }
    }
    if (rc == 0) {
        cn_tensor *flat = cn_optimizer_flat_params(opt);
        *nparams = cn_numel(flat);
        cn_copy_to_buffer(flat, CN_F32, params, (size_t)*nparams * sizeof(float));
    } else {
        fprintf(stderr, "rank %d: %s\n", cn_dist_rank(), cn_last_error());
    }
    if (ddp) {
        cn_ddp_stats st;
        if (cn_ddp_get_stats(ddp, &st) == 0 && distributed && P > 1 && rc == 0)
            CHECK_MSG(st.steps == STEPS && st.buckets >= STEPS, "ddp stats: %lld steps, %lld buckets",
                      (long long)st.steps, (long long)st.buckets);
    }
    cn_program_free(prog);
    cn_graph_free(g);
    cn_release(ph[0]);
    cn_release(ph[1]);
    cn_loader_free(l);
    cn_ddp_free(ddp);
    cn_optimizer_free(opt);
    cn_module_free(model);
    cn_scope_end();
    return rc;
}

static void test_collectives(void) {
    int P = cn_dist_size(), r = cn_dist_rank();
    /* Rank r holds v[i] = (r + 1) * (i + 1) + r / 8 (exact in binary). */
    const int n = 37;
    cn_tensor *t = cn_zeros(CN_F64, CN_SHAPE(n));
    cn_tensor *tf = cn_zeros(CN_F32, CN_SHAPE(n));
    cn_tensor *ti = cn_zeros(CN_I64, CN_SHAPE(n));
    for (int i = 0; i < n; i++) {
        double v = (r + 1) * (i + 1) + r / 8.0;
        cn_set(t, (int64_t[]){i}, v);
        cn_set(tf, (int64_t[]){i}, v);
        cn_set(ti, (int64_t[]){i}, (double)((r + 1) * (i + 1)));
    }
    cn_tensor *mx = cn_clone(t), *mn = cn_clone(t), *mean = cn_clone(tf);
    CHECK(cn_dist_allreduce(t, CN_DIST_SUM) == 0 && cn_dist_allreduce(ti, CN_DIST_SUM) == 0 &&
          cn_dist_allreduce(mx, CN_DIST_MAX) == 0 && cn_dist_allreduce(mn, CN_DIST_MIN) == 0 &&
          cn_dist_allreduce(mean, CN_DIST_MEAN) == 0);
    for (int i = 0; i < n; i++) {
        double sum = 0, sumi = 0;
        for (int q = 0; q < P; q++) {
            sum += (q + 1) * (i + 1) + q / 8.0;
            sumi += (q + 1) * (i + 1);
        }
        CHECK_MSG(cn_get(t, (int64_t[]){i}) == sum, "sum[%d] %g want %g", i,
                  cn_get(t, (int64_t[]){i}), sum);
        CHECK(cn_get(ti, (int64_t[]){i}) == sumi);
        CHECK(cn_get(mx, (int64_t[]){i}) == P * (i + 1) + (P - 1) / 8.0);
        CHECK(cn_get(mn, (int64_t[]){i}) == (i + 1));
        CHECK(fabs(cn_get(mean, (int64_t[]){i}) - sum / P) <= 1e-6 * sum);
    }
    /* Broadcast from the last rank; allgather in rank order. */
    cn_tensor *bc = cn_full(CN_F32, CN_SHAPE(3), r * 10.0);
    CHECK(cn_dist_broadcast(bc, P - 1) == 0 && cn_get(bc, (int64_t[]){2}) == (P - 1) * 10.0);
    cn_tensor *ag = cn_dist_allgather(cn_full(CN_I32, CN_SHAPE(2), r + 1.0));
    CHECK(ag && cn_dim(ag, 0) == P && cn_dim(ag, 1) == 2);
    for (int q = 0; ag && q < P; q++) CHECK(cn_get(ag, (int64_t[]){q, 1}) == q + 1);
    /* What they refuse. */
    CHECK_ERROR(cn_dist_allreduce(cn_zeros(CN_U8, CN_SHAPE(2)), CN_DIST_SUM) == 0, "dtype");
    CHECK_ERROR(cn_dist_allreduce(cn_transpose(cn_zeros(CN_F32, CN_SHAPE(2, 3)), 0, 1),
                                  CN_DIST_SUM) == 0,
                "contiguous");
    CHECK_ERROR(cn_dist_broadcast(bc, P) == 0, "not a rank");
    CHECK(cn_dist_barrier() == 0);
}

/* NCCL on a GPU, as one process (two ranks on one GPU is not a job NCCL
 * takes): the collectives run and leave the values as one rank's. */
static void test_nccl_one_rank(void) {
    if (cn_dist_size() != 1 || cn_device_count(CN_DEVICE_CUDA) == 0 ||
        !strstr(cn_build_info(), "+nccl")) {
        printf("skipped: NCCL needs one process and a CUDA device with a build with NCCL\n");
        return;
    }
    cn_device g = CN_DEVICE(CN_DEVICE_CUDA, 0);
    cn_tensor *t = cn_to(cn_arange(0, 10, 1, CN_F32), g);
    CHECK(cn_dist_allreduce(t, CN_DIST_SUM) == 0 && cn_dist_allreduce(t, CN_DIST_MEAN) == 0 &&
          cn_dist_broadcast(t, 0) == 0);
    CHECK(t && cn_equal(cn_to(t, CN_CPU), cn_arange(0, 10, 1, CN_F32)));
    cn_tensor *ag = cn_dist_allgather(t);
    CHECK(ag && cn_dim(ag, 0) == 1 && cn_device_equal(cn_tensor_device(ag), g));
}

static void test_data_parallel(void) {
    static const char *const names[] = {"eager", "eager, no overlap", "static"};
    double ref[STEPS], dist[STEPS], again[STEPS];
    static float pref[4096], pdist[4096], pagain[4096];
    int64_t nref = 0, nd = 0, na = 0;
    for (int md = EAGER; md <= STATIC; md++) {
        CHECK_MSG(train(false, (mode)md, ref, pref, &nref) == 0, "%s: the reference", names[md]);
        CHECK_MSG(train(true, (mode)md, dist, pdist, &nd) == 0, "%s: distributed", names[md]);
        CHECK_MSG(train(true, (mode)md, again, pagain, &na) == 0, "%s: rerun", names[md]);
        CHECK(nref == nd && nd == na && nd > 0 && nd <= 4096);
        double worst = 0;
        for (int s = 0; s < STEPS; s++) {
            double rel = fabs(dist[s] - ref[s]) / fabs(ref[s]);
            if (rel > worst) worst = rel;
        }
        CHECK_MSG(worst <= 1e-5, "%s: losses differ from one process by %.3g (relative)",
                  names[md], worst);
        double pw = 0;
        for (int64_t i = 0; i < nd; i++) pw = fmax(pw, fabs((double)pdist[i] - pref[i]));
        CHECK_MSG(pw <= 1e-5, "%s: parameters differ from one process by %.3g", names[md], pw);
        CHECK_MSG(memcmp(dist, again, sizeof dist) == 0 &&
                      memcmp(pdist, pagain, sizeof(float) * (size_t)nd) == 0,
                  "%s: a rerun gave other bits", names[md]);
        /* Every rank ends with the same parameters, to the bit. */
        cn_tensor *mine = cn_from_data(CN_F32, CN_SHAPE(nd), pdist);
        cn_tensor *lo = cn_clone(mine), *hi = cn_clone(mine);
        cn_dist_allreduce(lo, CN_DIST_MIN);
        cn_dist_allreduce(hi, CN_DIST_MAX);
        CHECK_MSG(cn_equal(lo, hi), "%s: ranks ended with different parameters", names[md]);
        if (cn_dist_rank() == 0)
            printf("%s: %d ranks, %d steps: losses within %.2g of one process, parameters "
                   "within %.2g\n",
                   names[md], cn_dist_size(), STEPS, worst, pw);
    }
}

/* Two stages of a model on ranks 0 and 1 joined by send/recv: the loss and
 * both stages' weight gradients equal one process's, to the bit (the same
 * ops on the same values; the messages carry exact bytes). */
static void test_send_recv(void) {
    if (cn_dist_size() < 2) {
        CHECK_ERROR(cn_send(cn_ones(CN_F32, CN_SHAPE(2)), 1, 0), "not another rank");
        printf("skipped: one process (send and recv need two ranks)\n");
        return;
    }
    int r = cn_dist_rank();
    cn_manual_seed(11);
    cn_tensor *x = cn_randn(CN_F64, CN_SHAPE(5, 4));
    cn_tensor *w0 = cn_randn(CN_F64, CN_SHAPE(4, 3)), *w1 = cn_randn(CN_F64, CN_SHAPE(3, 2));
    cn_set_requires_grad(w0, true);
    cn_set_requires_grad(w1, true);
    /* One process: both stages. */
    cn_tensor *h = cn_tanh(cn_matmul(x, w0));
    cn_tensor *loss = cn_sum(cn_square(cn_matmul(h, w1)), NULL, 0, false);
    CHECK(cn_backward(loss, NULL) == 0);
    cn_tensor *g0 = cn_clone(cn_get_grad(w0)), *g1 = cn_clone(cn_get_grad(w1));
    double want = cn_item(loss);
    cn_zero_grad(w0);
    cn_zero_grad(w1);
    if (r == 0) {
        cn_tensor *tok = cn_send(cn_tanh(cn_matmul(x, w0)), 1, 7);
        CHECK(tok && cn_requires_grad(tok) && cn_item(tok) == 0);
        CHECK(cn_backward(tok, NULL) == 0);
        CHECK_MSG(cn_get_grad(w0) && cn_equal(cn_get_grad(w0), g0),
                  "stage 0's gradient differs from one process's");
    } else if (r == 1) {
        cn_tensor *hr = cn_recv(NULL, CN_F64, 2, (int64_t[]){5, 3}, 0, 7);
        CHECK(hr && cn_requires_grad(hr));
        cn_tensor *l = cn_sum(cn_square(cn_matmul(hr, w1)), NULL, 0, false);
        CHECK(l && cn_item(l) == want);
        CHECK(cn_backward(l, NULL) == 0);
        CHECK_MSG(cn_get_grad(w1) && cn_equal(cn_get_grad(w1), g1),
                  "stage 1's gradient differs from one process's");
    }
    /* What they refuse: no such rank, itself, a bad tag, a bad token. */
    CHECK_ERROR(cn_send(x, cn_dist_size(), 0), "not another rank");
    CHECK_ERROR(cn_send(x, r, 0), "not another rank");
    CHECK_ERROR(cn_send(x, r == 0 ? 1 : 0, -1), "tag");
    CHECK_ERROR(cn_recv(cn_ones(CN_F32, CN_SHAPE(2)), CN_F32, 1, (int64_t[]){2}, r == 0 ? 1 : 0, 0),
                "token");
    CHECK(cn_dist_barrier() == 0);
}

static void test_mismatch(void) {
    if (cn_dist_size() < 2) {
        printf("skipped: one process (a mismatch between ranks needs two)\n");
        return;
    }
    /* The last rank builds a wider hidden layer. */
    cn_module *m = make_model(cn_dist_rank() == cn_dist_size() - 1 ? DH + 1 : DH);
    cn_tensor **ps;
    int np = cn_module_parameters(m, &ps, NULL);
    cn_optimizer *opt = cn_sgd(ps, np, &(cn_sgd_opts){.lr = 0.1});
    free(ps);
    char want[64];
    snprintf(want, sizeof want, "rank %d's model", cn_dist_size() - 1);
    CHECK_ERROR(cn_ddp_new(m, opt, NULL), want);
    cn_optimizer_free(opt);
    cn_module_free(m);
}

int main(int argc, char **argv) {
    if (cn_dist_init(&argc, &argv) < 0) {
        fprintf(stderr, "%s\n", cn_last_error());
        return 1;
    }
    if (!cn_dist_available()) printf("(built without MPI: one process)\n");
    make_data();
    RUN(test_collectives);
    RUN(test_nccl_one_rank);
    RUN(test_data_parallel);
    RUN(test_send_recv);
    RUN(test_mismatch);
    cn_release(data_x);
    cn_release(data_y);
    int rc = th_summary();
    /* Every rank's result: the job fails if any rank failed. */
    cn_tensor *f = cn_scalar(CN_I32, rc != 0);
    f = cn_contiguous(cn_reshape(f, CN_SHAPE(1)));
    cn_dist_allreduce(f, CN_DIST_MAX);
    int any = (int)cn_item(f);
    cn_release(f);
    cn_dist_finalize();
    return any ? 1 : 0;
}
