/* Back-propagation through time on a vanilla RNN, with gradient clipping.
 *
 * The task: read a sine wave one sample at a time and predict the next
 * sample. The RNN is a plain C loop over time steps; in eager mode each step
 * runs at once and is recorded, so cn_backward goes back through every step.
 * The very same function, given placeholders instead of data, unrolls the
 * loop into a static graph, which cn_grad extends with the backward pass and
 * cn_compile turns into a program that is run once per batch.
 *
 *   build/examples/rnn_bptt [steps]
 *
 * Exits non-zero if training does not reduce the loss or the two modes
 * disagree, so it doubles as a test. */
#include <chutney.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { BATCH = 32, T = 24, HIDDEN = 16, NPARAMS = 5 };

typedef struct rnn {
    cn_tensor *w_xh, *w_hh, *b_h, *w_hy, *b_y;
} rnn;

/* Mean squared error of the next-sample predictions over all steps.
 * xs: [B, T] inputs, ys: [B, T] targets; data or placeholders alike. */
static cn_tensor *rnn_loss(const rnn *m, cn_tensor *xs, cn_tensor *ys) {
    cn_tensor *h = NULL, *loss = NULL;
    for (int t = 0; t < T; t++) {
        cn_tensor *x_t = cn_narrow(xs, 1, t, 1); /* [B, 1] */
        cn_tensor *pre = cn_add(cn_matmul(x_t, m->w_xh), m->b_h);
        if (h) pre = cn_add(pre, cn_matmul(h, m->w_hh));
        h = cn_tanh(pre);
        cn_tensor *y_t = cn_add(cn_matmul(h, m->w_hy), m->b_y);
        cn_tensor *err = cn_mean(cn_square(cn_sub(y_t, cn_narrow(ys, 1, t, 1))), NULL, 0, false);
        loss = loss ? cn_add(loss, err) : err;
    }
    return cn_div_scalar(loss, T);
}

/* A batch of sine waves with random phases and frequencies. */
static void make_batch(cn_tensor **xs, cn_tensor **ys) {
    cn_tensor *phase = cn_uniform(CN_F32, CN_SHAPE(BATCH, 1), 0, 6.2832);
    cn_tensor *freq = cn_uniform(CN_F32, CN_SHAPE(BATCH, 1), 0.15, 0.45);
    cn_tensor *steps = cn_reshape(cn_arange(0, T + 1, 1, CN_F32), CN_SHAPE(1, T + 1));
    cn_tensor *wave = cn_sin(cn_add(cn_mul(steps, freq), phase)); /* [B, T+1] */
    *xs = cn_narrow(wave, 1, 0, T);
    *ys = cn_narrow(wave, 1, 1, T);
}

static cn_tensor **params(rnn *m) { return (cn_tensor **)m; }

static void sgd_step(rnn *m, double lr) {
    cn_no_grad_begin();
    for (int i = 0; i < NPARAMS; i++) {
        cn_tensor *p = params(m)[i];
        cn_copy_(p, cn_sub(p, cn_mul_scalar(cn_get_grad(p), lr)));
        cn_zero_grad(p);
    }
    cn_no_grad_end();
}

static double max_abs_diff(cn_tensor *a, cn_tensor *b) {
    return cn_item(cn_max(cn_abs(cn_sub(a, b)), NULL, 0, false));
}

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 300;
    cn_manual_seed(7);
    rnn m;
    double bound = 1 / sqrt(HIDDEN); /* PyTorch's RNN initialisation */
    m.w_xh = cn_keep(cn_uniform(CN_F32, CN_SHAPE(1, HIDDEN), -bound, bound));
    m.w_hh = cn_keep(cn_uniform(CN_F32, CN_SHAPE(HIDDEN, HIDDEN), -bound, bound));
    m.b_h = cn_keep(cn_zeros(CN_F32, CN_SHAPE(HIDDEN)));
    m.w_hy = cn_keep(cn_uniform(CN_F32, CN_SHAPE(HIDDEN, 1), -bound, bound));
    m.b_y = cn_keep(cn_zeros(CN_F32, CN_SHAPE(1)));
    for (int i = 0; i < NPARAMS; i++) cn_set_requires_grad(params(&m)[i], true);

    /* Eager: the loop runs and is recorded; backward goes through time. */
    double first = 0, last = 0;
    for (int s = 0; s < steps; s++) {
        cn_scope_begin();
        cn_tensor *xs, *ys;
        make_batch(&xs, &ys);
        cn_tensor *loss = rnn_loss(&m, xs, ys);
        if (!loss || cn_backward(loss, NULL) < 0) {
            fprintf(stderr, "rnn_bptt: %s\n", cn_last_error());
            return 1;
        }
        /* Exploding gradients are the classic BPTT failure: clip each
         * element, then the global norm. */
        double norm;
        cn_clip_grad_value(params(&m), NPARAMS, 1.0);
        cn_clip_grad_norm(params(&m), NPARAMS, 0.5, 2, &norm);
        sgd_step(&m, 0.1);
        double l = cn_item(loss);
        if (s == 0) first = l;
        last = l;
        if (s % 50 == 0 || s == steps - 1)
            printf("eager  step %4d  loss %.5f  grad norm %.4f\n", s, l, norm);
        cn_scope_end();
    }

    /* Static: the same rnn_loss on placeholders unrolls into a graph. */
    cn_scope_begin();
    cn_graph *g = cn_graph_new();
    cn_tensor *px = cn_placeholder(g, "xs", CN_F32, CN_SHAPE(-1, T));
    cn_tensor *py = cn_placeholder(g, "ys", CN_F32, CN_SHAPE(-1, T));
    cn_tensor *sloss = rnn_loss(&m, px, py);
    cn_tensor *outs[1 + NPARAMS] = {sloss};
    if (cn_grad(&sloss, NULL, 1, params(&m), NPARAMS, outs + 1, 0) < 0) {
        fprintf(stderr, "rnn_bptt: %s\n", cn_last_error());
        return 1;
    }
    cn_program *prog = cn_compile(g, outs, 1 + NPARAMS, NULL);
    if (!prog) {
        fprintf(stderr, "rnn_bptt: %s\n", cn_last_error());
        return 1;
    }
    /* One batch both ways: the same loss and gradients. */
    cn_tensor *xs, *ys, *res[1 + NPARAMS];
    make_batch(&xs, &ys);
    cn_tensor *feeds[2] = {xs, ys}, *phs[2] = {px, py};
    if (cn_run(prog, phs, feeds, 2, res, 1 + NPARAMS) < 0) {
        fprintf(stderr, "rnn_bptt: %s\n", cn_last_error());
        return 1;
    }
    cn_tensor *eloss = rnn_loss(&m, xs, ys);
    cn_backward(eloss, NULL);
    double worst = max_abs_diff(res[0], eloss);
    for (int i = 0; i < NPARAMS; i++) {
        double d = max_abs_diff(res[1 + i], cn_get_grad(params(&m)[i]));
        if (d > worst) worst = d;
        cn_zero_grad(params(&m)[i]);
    }
    printf("static program: %d ops unrolled over %d steps; loss %.5f, largest difference "
           "from eager %.2g\n",
           cn_program_num_steps(prog), T, cn_item(res[0]), worst);
    cn_program_free(prog);
    cn_graph_free(g);
    cn_scope_end(); /* the graph's values go with their scope */
    for (int i = 0; i < NPARAMS; i++) cn_release(params(&m)[i]);

    printf("loss %.5f -> %.5f\n", first, last);
    if (!(last < 0.5 * first)) {
        fprintf(stderr, "rnn_bptt: training did not reduce the loss enough\n");
        return 1;
    }
    if (!(worst < 1e-5)) {
        fprintf(stderr, "rnn_bptt: static and eager results differ by %g\n", worst);
        return 1;
    }
    return 0;
}
