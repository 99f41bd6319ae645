/* int8 inference (cn_module_quantize_int8): per-channel symmetric int8
 * weights for Linear and Conv2d; their forwards are in linear.c and conv.c,
 * the products in src/ops/quant.c. */
#include "nn.h"
#include "../backend/cpu/qgemm.h"

#include <stdlib.h>

/* The weights a Linear or Conv2d must have to be quantised. */
static int check_weight(const cn_module *m) {
    const cn_tensor *w = m->nparams > 0 ? m->params[0].t : NULL;
    if (!w || w->dtype != CN_F32 || !cn_t_on_cpu(w))
        return cn_failc(CN_EUNSUPPORTED, "module_quantize_int8: %s: weights must be f32 on the CPU",
                        m->vt->type);
    return 0;
}

int cn_nn_quantize_weight(cn_module *m) {
    cn_tensor *w = cn_nn_p(m, 0), *b = cn_nn_p(m, 1);
    if (check_weight(m) < 0) return CN_EUNSUPPORTED;
    int64_t rows = w->shape[0], cols = rows ? cn_shape_numel(w->ndim, w->shape) / rows : 0;
    cn_scope_begin();
    cn_tensor *wc = cn_contiguous(cn_detach(w));
    /* The bias keeps its data but stops being a parameter: nothing here
     * trains. */
    cn_tensor *bias = b ? cn_retain(cn_detach(b)) : NULL;
    cn_tensor *q = cn_t_empty(CN_I8, w->ndim, w->shape);
    cn_tensor *s = cn_t_empty(CN_F32, 1, &rows);
    int16_t *row = malloc(sizeof(int16_t) * (size_t)(cols + 1));
    if (!wc || (b && !bias) || !q || !s || !row) {
        free(row);
        cn_scope_end();
        cn_release(bias), cn_release(q), cn_release(s);
        return CN_ENOMEM;
    }
    const float *src = cn_data(wc);
    int8_t *dst = cn_t_ptr(q);
    float *sc = cn_t_ptr(s);
    /* The weights are quantised as the GEMM quantises its inputs. */
    for (int64_t r = 0; r < rows; r++) {
        sc[r] = cn_qgemm_quantize(row, src + r * cols, cols);
        for (int64_t k = 0; k < cols; k++) dst[r * cols + k] = (int8_t)row[k];
    }
    free(row);
    cn_scope_end();
    for (int i = 0; i < m->nparams; i++) {
        cn_release(m->params[i].t);
        free(m->params[i].name);
    }
    m->nparams = 0;
    int rc = cn_module_add_buffer(m, "weight", q);
    if (rc == CN_OK) rc = cn_module_add_buffer(m, "weight_scale", s);
    if (rc == CN_OK && bias) rc = cn_module_add_buffer(m, "bias", bias);
    cn_release(q), cn_release(s), cn_release(bias);
    return rc;
}

static int quantize_tree(cn_module *m) {
    int n = 0, rc = 0;
    if (!strcmp(m->vt->type, "Linear")) rc = cn_nn_linear_quantize(m);
    else if (!strcmp(m->vt->type, "Conv2d")) rc = cn_nn_conv2d_quantize(m);
    if (rc < 0) return rc;
    n += rc;
    for (int i = 0; i < m->nchildren; i++) {
        rc = quantize_tree(m->children[i].m);
        if (rc < 0) return rc;
        n += rc;
    }
    return n;
}

/* Every layer checked before any is changed: a refusal leaves the whole
 * model as it was, not half quantised. */
static int check_tree(const cn_module *m) {
    if ((!strcmp(m->vt->type, "Linear") || !strcmp(m->vt->type, "Conv2d")) && check_weight(m) < 0)
        return CN_EUNSUPPORTED;
    for (int i = 0; i < m->nchildren; i++)
        if (check_tree(m->children[i].m) < 0) return CN_EUNSUPPORTED;
    return 0;
}

int cn_module_quantize_int8(cn_module *m) {
    if (!m) return cn_failc(CN_EINVAL, "module_quantize_int8: module is NULL");
    if (check_tree(m) < 0) return CN_EUNSUPPORTED;
    return quantize_tree(m);
}
