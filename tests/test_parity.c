/* PyTorch parity: composite expressions (tests/parity/torch_parity.py has the
 * same list) on the inputs PyTorch drew, values and gradients of
 * sum(out * w), w[k] = cos(k), against torch's to 1e-5 relative in f32; and
 * the static mode (placeholders, cn_grad, cn_compile, cn_run) against eager.
 * The fixture file comes from CTest's parity_fixtures test (CN_PARITY_FILE). */
#include "fixture_text.h"

#define MAXIN 6

typedef cn_tensor *(*expr_fn)(cn_tensor **x);

static cn_tensor *f_seed_add_mul(cn_tensor **x) { return cn_mul(cn_add(x[0], x[1]), x[2]); }
static cn_tensor *f_seed_sigmoid_layer(cn_tensor **x) {
    return cn_reciprocal(cn_add_scalar(cn_exp(cn_neg(cn_matmul(x[0], x[1]))), 1));
}
static cn_tensor *f_seed_sum_xy_z(cn_tensor **x) {
    return cn_sum(cn_add(cn_mul(x[0], x[1]), x[2]), NULL, 0, false);
}
static cn_tensor *f_tanh_sigmoid(cn_tensor **x) { return cn_mul(cn_tanh(x[0]), cn_sigmoid(x[1])); }
static cn_tensor *f_softmax_weighted(cn_tensor **x) { return cn_mul(cn_softmax(x[0], 1), x[1]); }
static cn_tensor *f_nll_composite(cn_tensor **x) {
    cn_tensor *oh = cn_cast(cn_one_hot(x[1], 5), CN_F32);
    cn_tensor *s = cn_sum(cn_mul(cn_log_softmax(x[0], 1), oh), (int[]){1}, 1, false);
    return cn_neg(cn_mean(s, NULL, 0, false));
}
static cn_tensor *f_linear_relu(cn_tensor **x) {
    return cn_relu(cn_add(cn_matmul(x[0], x[1]), x[2]));
}
static cn_tensor *f_mlp2(cn_tensor **x) {
    cn_tensor *h = cn_relu(cn_add(cn_matmul(x[0], x[1]), x[2]));
    return cn_tanh(cn_add(cn_matmul(h, x[3]), x[4]));
}
static cn_tensor *f_softplus_by_hand(cn_tensor **x) { return cn_log1p(cn_exp(x[0])); }
static cn_tensor *f_gelu_erf(cn_tensor **x) { return cn_gelu(x[0], false); }
static cn_tensor *f_gelu_tanh(cn_tensor **x) { return cn_gelu(x[0], true); }
static cn_tensor *f_silu_elu_leaky(cn_tensor **x) {
    return cn_add(cn_add(cn_silu(x[0]), cn_elu(x[0], 0.7)), cn_leaky_relu(x[0], 0.1));
}
static cn_tensor *f_sqrt_sq(cn_tensor **x) {
    return cn_sqrt(cn_add_scalar(cn_mul(x[0], x[0]), 1));
}
static cn_tensor *f_pow_pos(cn_tensor **x) { return cn_pow(x[0], x[1]); }
static cn_tensor *f_div_broadcast(cn_tensor **x) {
    return cn_div(x[0], cn_add_scalar(cn_mul(x[1], x[1]), 1));
}
static cn_tensor *f_max_min(cn_tensor **x) {
    return cn_add(cn_maximum(x[0], x[1]), cn_minimum(x[0], x[2]));
}
static cn_tensor *f_where_gt(cn_tensor **x) {
    return cn_where(cn_gt(x[0], cn_scalar(CN_F32, 0)), cn_mul(x[0], x[1]), x[2]);
}
static cn_tensor *f_mean_var(cn_tensor **x) {
    return cn_mul(cn_mean(x[0], (int[]){0}, 1, false), cn_var(x[1], (int[]){1}, 1, 1, false));
}
static cn_tensor *f_std_keepdim(cn_tensor **x) {
    return cn_div(x[0], cn_std(x[0], (int[]){1}, 1, 1, true));
}
static cn_tensor *f_logsumexp(cn_tensor **x) { return cn_logsumexp(x[0], (int[]){1}, 1, false); }
static cn_tensor *f_norm2(cn_tensor **x) { return cn_mul(cn_norm(x[0], 2, NULL, 0, false), x[0]); }
static cn_tensor *f_prod_axis(cn_tensor **x) { return cn_prod(x[0], (int[]){1}, 1, false); }
static cn_tensor *f_amax_axis(cn_tensor **x) {
    return cn_add(cn_max(x[0], (int[]){1}, 1, false),
                  cn_sum(cn_min(x[0], (int[]){0}, 1, false), NULL, 0, false));
}
static cn_tensor *f_cumsum(cn_tensor **x) { return cn_square(cn_cumsum(x[0], 1)); }
static cn_tensor *f_concat_matmul(cn_tensor **x) {
    cn_tensor *xy[2] = {x[0], x[1]};
    return cn_matmul(cn_concat(xy, 2, 1), x[2]);
}
static cn_tensor *f_gather(cn_tensor **x) { return cn_mul_scalar(cn_gather(x[0], 1, x[1]), 2); }
static cn_tensor *f_index_select(cn_tensor **x) { return cn_sin(cn_index_select(x[0], 0, x[1])); }
static cn_tensor *f_pad_reflect(cn_tensor **x) {
    return cn_square(cn_pad(x[0], (int64_t[]){2, 1}, 2, CN_PAD_REFLECT, 0));
}
static cn_tensor *f_pad_replicate(cn_tensor **x) {
    return cn_mul_scalar(cn_pad(x[0], (int64_t[]){1, 2, 2, 0}, 4, CN_PAD_REPLICATE, 0), 3);
}
static cn_tensor *f_clamp_mul(cn_tensor **x) { return cn_mul(cn_clamp(x[0], -0.5, 0.5), x[1]); }
static cn_tensor *f_abs_sin_cos(cn_tensor **x) {
    return cn_add(cn_abs(x[0]), cn_mul(cn_sin(x[0]), cn_cos(x[1])));
}
static cn_tensor *f_layer_norm_by_hand(cn_tensor **x) {
    int ax[1] = {1};
    cn_tensor *c = cn_sub(x[0], cn_mean(x[0], ax, 1, true));
    cn_tensor *d = cn_sqrt(cn_add_scalar(cn_var(x[0], ax, 1, 0, true), 1e-5));
    return cn_add(cn_mul(cn_div(c, d), x[1]), x[2]);
}
static cn_tensor *f_triu_matmul(cn_tensor **x) {
    return cn_add(cn_matmul(cn_triu(x[0], 0), x[1]), cn_sum(cn_tril(x[0], -1), NULL, 0, false));
}
static cn_tensor *f_rsqrt_recip(cn_tensor **x) {
    return cn_add(cn_rsqrt(x[0]), cn_reciprocal(x[1]));
}
static cn_tensor *f_erf_expm1(cn_tensor **x) { return cn_mul(cn_erf(x[0]), cn_expm1(x[1])); }
static cn_tensor *f_batched_matmul(cn_tensor **x) {
    return cn_mean(cn_exp(cn_matmul(x[0], x[1])), NULL, 0, false);
}
static cn_tensor *f_scatter_add(cn_tensor **x) { return cn_scatter_add(x[0], 1, x[1], x[2]); }
static cn_tensor *f_log_exp_chain(cn_tensor **x) {
    return cn_log(cn_add(cn_exp(x[0]), cn_exp(cn_neg(x[0]))));
}

static const struct {
    const char *name;
    expr_fn fn;
} exprs[] = {
#define E(n) {#n, f_##n}
    E(seed_add_mul), E(seed_sigmoid_layer), E(seed_sum_xy_z), E(tanh_sigmoid),
    E(softmax_weighted), E(nll_composite), E(linear_relu), E(mlp2), E(softplus_by_hand),
    E(gelu_erf), E(gelu_tanh), E(silu_elu_leaky), E(sqrt_sq), E(pow_pos), E(div_broadcast),
    E(max_min), E(where_gt), E(mean_var), E(std_keepdim), E(logsumexp), E(norm2), E(prod_axis),
    E(amax_axis), E(cumsum), E(concat_matmul), E(gather), E(index_select), E(pad_reflect),
    E(pad_replicate), E(clamp_mul), E(abs_sin_cos), E(layer_norm_by_hand), E(triu_matmul),
    E(rsqrt_recip), E(erf_expm1), E(batched_matmul), E(scatter_add), E(log_exp_chain),
#undef E
};
#define NEXPRS (int)(sizeof exprs / sizeof exprs[0])

/* One "tag dt ndim dims... values..." record with the tag expected. */
static cn_tensor *read_tensor(FILE *f, const char *want_tag) {
    char tag[16];
    if (fscanf(f, "%15s", tag) != 1 || strcmp(tag, want_tag) != 0) return NULL;
    return fx_read_values(f);
}

static cn_tensor *loss_of(cn_tensor *y) {
    int64_t n = cn_numel(y);
    cn_tensor *w = cn_reshape(cn_cos(cn_arange(0, (double)n, 1, CN_F32)), cn_ndim(y), cn_shape(y));
    return cn_sum(cn_mul(y, w), NULL, 0, false);
}

/* a against reference b: |a - b| <= rtol * (|b| + max|b| * 1e-2), i.e. 1e-5
 * relative, with a floor from the tensor's scale for entries near zero. */
static bool close_tensors(const char *what, const char *name, cn_tensor *a, cn_tensor *b,
                          double rtol) {
    if (!a || !b || cn_numel(a) != cn_numel(b)) {
        CHECK_MSG(0, "%s: %s: missing or wrong size (%s)", name, what, cn_last_error());
        return false;
    }
    int64_t n = cn_numel(b);
    double scale = 0;
    for (int64_t k = 0; k < n; k++) scale = fmax(scale, fabs(th_at(b, k)));
    for (int64_t k = 0; k < n; k++) {
        double x = th_at(a, k), r = th_at(b, k);
        if (!th_close(x, r, rtol, rtol * scale * 1e-2 + 1e-30)) {
            CHECK_MSG(0, "%s: %s[%" PRId64 "] = %.9g, expected %.9g", name, what, k, x, r);
            return false;
        }
    }
    th_checks++;
    return true;
}

static void run_case(const char *name, expr_fn fn, cn_tensor **x, int nin, cn_tensor *ref_out,
                     cn_tensor **ref_grads) {
    cn_tensor *diff[MAXIN], *grads[MAXIN];
    int nd = 0;
    for (int i = 0; i < nin; i++)
        if (cn_tensor_dtype(x[i]) == CN_F32) {
            cn_set_requires_grad(x[i], true);
            diff[nd++] = x[i];
        }
    /* Eager. */
    cn_tensor *y = fn(x);
    if (!close_tensors("value", name, y, ref_out, 1e-5)) return;
    cn_tensor *loss = loss_of(y);
    CHECK_MSG(cn_grad(&loss, NULL, 1, diff, nd, grads, 0) == 0, "%s: grad: %s", name,
              cn_last_error());
    for (int d = 0; d < nd; d++) {
        char what[32];
        snprintf(what, sizeof what, "gradient %d", d);
        if (!close_tensors(what, name, grads[d], ref_grads[d], 1e-5)) return;
    }
    /* Static: the same function on placeholders, gradients by cn_grad. */
    cn_graph *g = cn_graph_new();
    cn_tensor *ph[MAXIN], *pdiff[MAXIN], *pgrads[MAXIN];
    int pd = 0;
    for (int i = 0; i < nin; i++) {
        ph[i] = cn_placeholder(g, "x", cn_tensor_dtype(x[i]), cn_ndim(x[i]), cn_shape(x[i]));
        if (cn_tensor_dtype(x[i]) == CN_F32) {
            cn_set_requires_grad(ph[i], true);
            pdiff[pd++] = ph[i];
        }
    }
    cn_tensor *sy = fn(ph);
    cn_tensor *sloss = loss_of(sy);
    int rc = cn_grad(&sloss, NULL, 1, pdiff, pd, pgrads, 0);
    CHECK_MSG(rc == 0, "%s: static grad: %s", name, cn_last_error());
    if (rc == 0) {
        cn_tensor *outs[MAXIN + 1], *res[MAXIN + 1];
        outs[0] = sy;
        for (int d = 0; d < pd; d++) outs[d + 1] = pgrads[d];
        cn_program *p = cn_compile(g, outs, pd + 1, NULL);
        rc = cn_run(p, ph, x, nin, res, pd + 1);
        CHECK_MSG(rc == 0, "%s: static run: %s", name, cn_last_error());
        if (rc == 0) {
            close_tensors("static value", name, res[0], y, 1e-6);
            for (int d = 0; d < pd; d++) close_tensors("static gradient", name, res[d + 1], grads[d], 1e-6);
        }
        cn_program_free(p);
    }
    cn_graph_free(g);
}

static void test_parity(void) {
    const char *path = getenv("CN_PARITY_FILE");
    CHECK_MSG(path != NULL, "CN_PARITY_FILE is not set (CTest's parity_fixtures test writes it)");
    if (!path) return;
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "cannot open %s", path);
    if (!f) return;
    int ncases = 0, seen = 0;
    CHECK(fscanf(f, " ncases %d", &ncases) == 1);
    for (int c = 0; c < ncases; c++) {
        char name[64];
        int nin;
        if (fscanf(f, " case %63s %d", name, &nin) != 2 || nin > MAXIN) {
            CHECK_MSG(0, "fixture file %s is malformed at case %d", path, c);
            break;
        }
        cn_scope_begin();
        cn_tensor *x[MAXIN], *grads[MAXIN];
        int nf = 0;
        bool ok = true;
        for (int i = 0; i < nin && ok; i++) {
            ok = (x[i] = read_tensor(f, "in")) != NULL;
            if (ok && cn_tensor_dtype(x[i]) == CN_F32) nf++;
        }
        cn_tensor *out = ok ? read_tensor(f, "out") : NULL;
        for (int i = 0; i < nf && out; i++)
            if (!(grads[i] = read_tensor(f, "grad"))) out = NULL;
        CHECK_MSG(out != NULL, "fixture file %s is malformed in case %s", path, name);
        if (!out) {
            cn_scope_end();
            break;
        }
        expr_fn fn = NULL;
        for (int e = 0; e < NEXPRS; e++)
            if (!strcmp(exprs[e].name, name)) fn = exprs[e].fn;
        CHECK_MSG(fn != NULL, "case %s has no C expression", name);
        if (fn) {
            run_case(name, fn, x, nin, out, grads);
            seen++;
        }
        cn_scope_end();
    }
    fclose(f);
    CHECK_MSG(seen == NEXPRS, "%d of %d expressions were in the fixtures", seen, NEXPRS);
}

int main(void) {
    RUN(test_parity);
    return th_summary();
}
