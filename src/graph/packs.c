/* A program's constant weights packed once: the b of a matmul (a linear
 * layer's weight, ONNX MatMul and Gemm initializers) and the weights of a
 * convolution whose forward product runs on the built-in GEMM, or on
 * oneDNN in a weight format of its own (an opaque pack), f32 or, under
 * bf16/f16 autocast (whose casts of constants are folded), half, as are
 * the b of autocast's native matmuls. Packing
 * them again on every product was a third of some models' time (issue 21);
 * packed here, each run's products read the panels directly (gemm.h), with
 * the same bits as packing on the fly.
 *
 * A constant is read at run time, so a user may write it between runs: the
 * pack records the storage version and is made again when it changed.
 * Parameters (requires_grad) change every training step and are never
 * packed. */
#include "packs.h"

#include "../backend/cpu/conv.h"
#include "../backend/cpu/matmul_dnnl.h"

/* Matmuls smaller than this (multiply-adds) keep BLAS: their packing is
 * cheap, and small products of a program then give eager mode's bits. */
#define PACK_MIN_MACS (1 << 20)

/* The product's rows (m) of a matmul: 1 packs nothing (a vector product). */
static int64_t matmul_rows(const cn_meta *a) {
    int64_t m = 1;
    for (int d = 0; d + 1 < a->ndim; d++) m *= a->shape[d];
    return m;
}

/* Value v's dtype and shape in this run: the plan has those of steps, the
 * run's live tensors those of inputs and constants. */
static cn_meta meta_of(const cn_ir *ir, const cn_plan *pl, cn_tensor *const *live, int32_t v) {
    if (ir->v[v].kind == IRV_STEP) return pl->meta[v];
    cn_meta m = {0};
    const cn_tensor *t = live[v] ? live[v] : ir->v[v].t;
    m.dtype = (cn_dtype)t->dtype;
    m.ndim = t->ndim;
    memcpy(m.shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    return m;
}

/* Step s's constant weight (a matmul's b, a convolution's w) that a pack
 * could hold, with the meta of its x; NULL when it has none. half: bf16
 * and f16 weights too (autocast's native convolutions and matmuls on
 * oneDNN, whose casts of constant weights were folded). */
static const cn_tensor *const_weight(const cn_ir *ir, const cn_plan *pl, cn_tensor *const *live,
                                     int s, cn_meta *xm, bool half) {
    const ir_step *st = &ir->s[s];
    if (st->dev.kind != CN_DEVICE_CPU || st->nin < 2) return NULL;
    if (st->kind != IRS_OP && !(st->kind == IRS_FUSED && st->op != CN_OP_COUNT)) return NULL;
    if (st->op != CN_OP_matmul && st->op != CN_OP_conv2d) return NULL;
    if (!ir_is_const(ir, st->in[1])) return NULL;
    const cn_tensor *w = ir->v[st->in[1]].t;
    *xm = meta_of(ir, pl, live, st->in[0]);
    cn_dtype dt = (cn_dtype)w->dtype;
    if ((dt != CN_F32 && dt != CN_F64 && !(half && cn_is_half(dt))) || w->requires_grad ||
        !w->storage ||
        w->storage->device_kind != CN_DEVICE_CPU || xm->dtype != dt)
        return NULL;
    return w;
}

/* A convolution step whose forward product runs on oneDNN: its pack in
 * oneDNN's weight format (have, when still that), or NULL. */
static cn_gemm_pack *dnnl_conv_pack(const cn_ir *ir, const cn_plan *pl, cn_tensor *const *live,
                                    int s, const cn_gemm_pack *have) {
    const ir_step *st = &ir->s[s];
    cn_meta xm;
    if (st->op != CN_OP_conv2d) return NULL;
    const cn_tensor *w = const_weight(ir, pl, live, s, &xm, true);
    if (!w || w->ndim != 4 || xm.ndim != 4) return NULL;
    bool bias = (st->kind == IRS_FUSED ? st->head_nin : st->nin) == 3;
    return cn_cpu_conv2d_fwd_dnnl_pack(&pl->attrs[s], xm.shape, w, pl->meta[st->out].shape, bias,
                                       have);
}

/* A matmul step whose constant b is half (autocast's native product, its
 * cast folded): b in the format of oneDNN's products (have, when still
 * that), or NULL. */
static cn_gemm_pack *dnnl_matmul_pack(const cn_ir *ir, const cn_plan *pl, cn_tensor *const *live,
                                      int s, const cn_gemm_pack *have) {
    cn_meta xm;
    if (ir->s[s].op != CN_OP_matmul) return NULL;
    const cn_tensor *w = const_weight(ir, pl, live, s, &xm, true);
    if (!w || !cn_is_half((cn_dtype)w->dtype) || w->ndim != 2 || xm.ndim < 2) return NULL;
    return cn_dnnl_matmul_pack(matmul_rows(&xm), w, have);
}

/* What step s would pack: its constant and the pack's geometry; false when
 * nothing. */
static bool wants_pack(const cn_ir *ir, const cn_plan *pl, cn_tensor *const *live, int s,
                       const cn_tensor **wt,
                       bool *b_side, int64_t *rows, int64_t *k, int64_t *rs, int64_t *cs,
                       int64_t *count, int64_t *gstride) {
    const ir_step *st = &ir->s[s];
    cn_meta xm;
    const cn_tensor *w = const_weight(ir, pl, live, s, &xm, false);
    if (!w) return false;
    const cn_meta *x = &xm;
    cn_dtype dt = (cn_dtype)w->dtype;
    *wt = w;
    if (st->op == CN_OP_matmul) {
        int64_t m = x->ndim >= 2 ? matmul_rows(x) : 1;
        if (w->ndim != 2 || w->shape[1] < 2 || m < 2 ||
            (double)m * (double)w->shape[0] * (double)w->shape[1] < PACK_MIN_MACS)
            return false;
        *b_side = true;
        *rows = w->shape[1], *k = w->shape[0];
        *rs = w->strides[0], *cs = w->strides[1];
        *count = 1, *gstride = 0;
        return true;
    }
    const cn_meta *y = &pl->meta[st->out];
    const cn_attrs *a = &pl->attrs[s];
    if (w->ndim != 4 || x->ndim != 4 || !cn_is_contiguous(w) || a->i[0] < 1 ||
        !cn_cpu_conv2d_fwd_packs(a, x->shape, w->shape, y->shape, dt))
        return false;
    *b_side = cn_cpu_conv2d_fwd_transposed(a, x->shape, w->shape, y->shape, dt);
    *count = a->i[0];
    *rows = w->shape[0] / *count;
    *k = w->shape[1] * w->shape[2] * w->shape[3];
    /* w^T's element (p, o) at w[o k + p] where the product is transposed */
    if (*b_side) *rs = 1, *cs = *k;
    else *rs = *k, *cs = 1;
    *gstride = *rows * *k;
    return *rows > 1 && *k > 0;
}

int cn_packs_update(const cn_ir *ir, const cn_plan *pl, cn_tensor *const *live,
                    cn_gemm_pack **packs) {
    for (int s = 0; s < ir->ns; s++) {
        const cn_tensor *w = NULL;
        bool b_side = false;
        int64_t rows = 0, k = 0, rs = 0, cs = 0, count = 0, gstride = 0;
        cn_gemm_pack *dp = dnnl_conv_pack(ir, pl, live, s, packs[s]);
        if (!dp) dp = dnnl_matmul_pack(ir, pl, live, s, packs[s]);
        if (dp) {
            if (dp != packs[s]) cn_gemm_pack_free(packs[s]);
            packs[s] = dp;
            continue;
        }
        if (!wants_pack(ir, pl, live, s, &w, &b_side, &rows, &k, &rs, &cs, &count, &gstride)) {
            cn_gemm_pack_free(packs[s]);
            packs[s] = NULL;
            continue;
        }
        if (cn_gemm_pack_current(packs[s], w) &&
            cn_gemm_pack_made_as(packs[s], b_side, rows, k, rs, cs, count, gstride))
            continue;
        cn_gemm_pack_free(packs[s]);
        packs[s] = cn_gemm_pack_new((cn_dtype)w->dtype, b_side, rows, k, w, cn_t_ptr(w), rs, cs,
                                    count, gstride);
        /* No memory for a pack: the step packs as it runs, as unpacked. */
        if (!packs[s]) cn_clear_error();
    }
    return CN_OK;
}

bool cn_packs_current(const cn_ir *ir, cn_gemm_pack *const *packs) {
    for (int s = 0; s < ir->ns; s++)
        if (packs[s] && !cn_gemm_pack_holds(packs[s], ir->v[ir->s[s].in[1]].t)) return false;
    return true;
}

void cn_packs_free(cn_gemm_pack **packs, int n) {
    for (int s = 0; packs && s < n; s++) {
        cn_gemm_pack_free(packs[s]);
        packs[s] = NULL;
    }
}

size_t cn_packs_bytes(cn_gemm_pack *const *packs, int n) {
    size_t bytes = 0;
    for (int s = 0; packs && s < n; s++) bytes += cn_gemm_pack_bytes(packs[s]);
    return bytes;
}
