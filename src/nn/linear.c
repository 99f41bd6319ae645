/* Linear: y = x W^T + b. */
#include "nn.h"
#include "../ops/quant.h"

#include <inttypes.h>

static cn_tensor *linear_forward(cn_module *m, cn_tensor *x) {
    cn_tensor *w = cn_nn_p(m, 0), *b = cn_nn_p(m, 1);
    int64_t in = w->shape[1];
    if (x->ndim == 0 || (x->shape[x->ndim - 1] != in && x->shape[x->ndim - 1] >= 0)) {
        char buf[128];
        return cn_fail("Linear: input %s does not end in in_features = %" PRId64,
                       cn_fmt_shape(buf, sizeof buf, x->ndim, x->shape), in);
    }
    cn_tensor *y = cn_matmul(x, cn_mT(w));
    return b ? cn_add(y, b) : y;
}

static const cn_module_vtable linear_vt = {"Linear", linear_forward, NULL};

/* Its int8 form keeps its weights packed for the GEMM. */
typedef struct linear_mod {
    cn_module base;
    cn_q_pack pack;
} linear_mod;

/* Buffers: weight (i8), weight_scale, bias (cn_nn_quantize_weight). */
static cn_tensor *linear_int8_forward(cn_module *m, cn_tensor *x) {
    return cn_q_linear_int8(x, cn_nn_b(m, 0), cn_nn_b(m, 1), cn_nn_b(m, 2),
                            &((linear_mod *)m)->pack);
}

static void linear_int8_free(cn_module *m) { cn_q_pack_clear(&((linear_mod *)m)->pack); }

static const cn_module_vtable linear_int8_vt = {"LinearInt8", linear_int8_forward,
                                                linear_int8_free};

int cn_nn_linear_quantize(cn_module *m) {
    int rc = cn_nn_quantize_weight(m);
    if (rc < 0) return rc;
    m->vt = &linear_int8_vt;
    return 1;
}

cn_module *cn_nn_linear(int64_t in_features, int64_t out_features, bool bias) {
    if (in_features < 0 || out_features < 0)
        return cn_fail("linear: in_features %" PRId64 " and out_features %" PRId64
                       " must be >= 0", in_features, out_features);
    cn_module *m = cn_module_new(&linear_vt, sizeof(linear_mod));
    if (!m) return NULL;
    cn_tensor *w = cn_nn_new_param(m, "weight", 2, (int64_t[]){out_features, in_features});
    cn_tensor *b = w && bias ? cn_nn_new_param(m, "bias", 1, &out_features) : NULL;
    if (!w || (bias && !b) || cn_nn_init_default(w, b) < 0) {
        cn_module_free(m);
        return NULL;
    }
    return m;
}
