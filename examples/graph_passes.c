/* What the graph passes do, on a small program: a function with a constant
 * subtree, identities, a repeated subexpression, a chain of scalar factors,
 * a dead branch and a chain of elementwise ops after a matmul. Prints the
 * program as built and after every pass (cn_compile_opts.trace), runs it
 * at -O0 and -O2 and checks both give the same result.
 * docs/graph-passes.md quotes this output. */
#include <chutney.h>

#include <math.h>
#include <stdio.h>

static cn_tensor *model(cn_tensor *x, cn_tensor *w, cn_tensor *b, cn_tensor *scale) {
    /* A constant subtree: folded at compile time. */
    cn_tensor *s = cn_exp(cn_neg(scale));
    /* Identities and a chain of scalar factors. */
    cn_tensor *h = cn_mul_scalar(cn_add_scalar(cn_matmul(x, w), 0.0), 1.0);
    h = cn_mul_scalar(cn_mul_scalar(cn_mul_scalar(h, 2), 2), 2);
    /* The same expression twice: one is kept. */
    cn_tensor *a = cn_tanh(cn_add(h, b)), *a2 = cn_tanh(cn_add(h, b));
    /* A dead branch: computed, never used. */
    (void)cn_sigmoid(cn_mul(a, a2));
    /* Elementwise chain: fused into one kernel after the matmul. */
    return cn_relu(cn_mul(cn_add(a, a2), s));
}

int main(void) {
    cn_scope_begin(); /* every tensor below is released at cn_scope_end() */
    cn_manual_seed(0);
    cn_tensor *w = cn_randn(CN_F32, CN_SHAPE(4, 3));
    cn_tensor *b = cn_randn(CN_F32, CN_SHAPE(3));
    cn_tensor *scale = cn_full(CN_F32, CN_SHAPE(3), 0.5);
    cn_graph *g = cn_graph_new();
    cn_tensor *x = cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, 4));
    cn_tensor *y = model(x, w, b, scale);
    cn_program *p0 = cn_compile(g, &y, 1, &(cn_compile_opts){.opt_level = 0});
    cn_program *p2 = cn_compile(g, &y, 1, &(cn_compile_opts){.opt_level = 2, .trace = stdout});
    if (!p0 || !p2) {
        fprintf(stderr, "compile: %s\n", cn_last_error());
        return 1;
    }
    cn_tensor *xv = cn_randn(CN_F32, CN_SHAPE(5, 4)), *y0, *y2;
    if (cn_run(p0, &x, &xv, 1, &y0, 1) || cn_run(p2, &x, &xv, 1, &y2, 1)) {
        fprintf(stderr, "run: %s\n", cn_last_error());
        return 1;
    }
    cn_program_stats s0, s2;
    cn_program_stats_get(p0, &s0);
    cn_program_stats_get(p2, &s2);
    double diff = cn_item(cn_max(cn_abs(cn_sub(y0, y2)), NULL, 0, false));
    printf("-O0: %d steps; -O2: %d steps (%d fused); largest difference %g\n", s0.nsteps,
           s2.nsteps, s2.nfused, diff);
    cn_program_free(p0);
    cn_program_free(p2);
    cn_graph_free(g);
    cn_scope_end();
    /* t*2*2*2 became t*8 (one rounding instead of three): equal within
     * rounding; everything else is exact. */
    return diff <= 1e-6 && s2.nsteps < s0.nsteps ? 0 : 1;
}
