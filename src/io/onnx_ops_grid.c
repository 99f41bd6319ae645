/* ONNX sampling on grids: GridSample (opsets 16 and 20, 4-D) and
 * AffineGrid (opset 20, 2-D), as torch.nn.functional.grid_sample and
 * affine_grid compute them, composed of Chutney ops (floor, clamp,
 * gather, products), so they run in a static program and carry gradients
 * to the input and to the grid. A spatial transformer network is
 * affine_grid then grid_sample. */
#include "onnx_internal.h"

#ifdef CN_HAVE_ONNX
#include <inttypes.h>
#include <stdlib.h>

/* A normalised coordinate g in [-1, 1] as a pixel position on an axis of
 * `size` pixels: the corner pixels' centres at +-1 (align_corners), or
 * their outer edges. */
static cn_tensor *unnormalize(cn_tensor *g, int64_t size, bool align) {
    if (align) return cn_mul_scalar(cn_add_scalar(g, 1), (double)(size - 1) / 2);
    return cn_mul_scalar(cn_add_scalar(cn_mul_scalar(cn_add_scalar(g, 1), (double)size), -1), 0.5);
}

/* c reflected into [lo2 / 2, hi2 / 2] (PyTorch's reflect_coordinates:
 * bounds given doubled so that half-pixel bounds stay integers). */
static cn_tensor *reflect(cn_tensor *c, double lo2, double hi2) {
    if (lo2 == hi2) return cn_mul_scalar(c, 0);
    double lo = lo2 / 2, span = (hi2 - lo2) / 2;
    cn_tensor *in = cn_abs(cn_add_scalar(c, -lo));
    cn_tensor *flips = cn_floor(cn_mul_scalar(in, 1 / span));
    cn_tensor *extra = cn_sub(in, cn_mul_scalar(flips, span));
    cn_tensor *odd = cn_gt(cn_sub(flips, cn_mul_scalar(cn_floor(cn_mul_scalar(flips, 0.5)), 2)),
                           onnx_scalar_like(c, 0.5));
    return cn_where(odd, cn_add_scalar(cn_neg(extra), span + lo), cn_add_scalar(extra, lo));
}

enum { PAD_ZEROS, PAD_BORDER, PAD_REFLECTION };

/* A pixel position on an axis of `size` after the padding mode's folding
 * (zeros: as it is; border: clamped; reflection: reflected, then
 * clamped). */
static cn_tensor *fold(cn_tensor *c, int64_t size, bool align, int pad) {
    if (pad == PAD_REFLECTION)
        c = align ? reflect(c, 0, 2.0 * (double)(size - 1)) : reflect(c, -1, 2.0 * (double)size - 1);
    if (pad != PAD_ZEROS) c = cn_clamp(c, 0, (double)(size - 1));
    return c;
}

/* x's pixels [N, C, H, W] at integer positions (xi, yi) [N, Ho, Wo], times
 * w [N, Ho, Wo], as [N, C, Ho * Wo]; positions outside the image give 0. */
static cn_tensor *tap(cn_tensor *flat, cn_tensor *xi, cn_tensor *yi, cn_tensor *w, int64_t H, int64_t W) {
    int64_t N = cn_dim(flat, 0), C = cn_dim(flat, 1), P = cn_numel(xi) / (N ? N : 1);
    cn_tensor *zero = onnx_scalar_like(xi, 0);
    cn_tensor *inside = cn_logical_and(cn_logical_and(cn_ge(xi, zero), cn_le(xi, onnx_scalar_like(xi, (double)(W - 1)))),
                                       cn_logical_and(cn_ge(yi, zero), cn_le(yi, onnx_scalar_like(yi, (double)(H - 1)))));
    /* Positions are whole numbers up to rounding (reflected ones); the
     * flat index in int64, whatever the float type. */
    cn_tensor *yl = cn_cast(cn_round(cn_clamp(yi, 0, (double)(H - 1))), CN_I64);
    cn_tensor *xl = cn_cast(cn_round(cn_clamp(xi, 0, (double)(W - 1))), CN_I64);
    cn_tensor *lin = cn_add(cn_mul(yl, cn_scalar(CN_I64, (double)W)), xl);
    cn_tensor *idx = cn_reshape(lin, 3, (int64_t[]){N, 1, P});
    cn_tensor *v = cn_gather(flat, 2, cn_expand(idx, 3, (int64_t[]){N, C, P}));
    cn_tensor *wm = cn_where(inside, w, onnx_scalar_like(w, 0));
    return cn_mul(v, cn_reshape(wm, 3, (int64_t[]){N, 1, P}));
}

/* The cubic convolution weights (A = -0.75, as PyTorch) of the four taps
 * at -1, 0, 1, 2 from the pixel before t's position, t in [0, 1). */
static void cubic_weights(cn_tensor *t, cn_tensor **w) {
    const double A = -0.75;
    cn_tensor *near[2] = {t, cn_add_scalar(cn_neg(t), 1)};          /* |x| <= 1 */
    cn_tensor *far[2] = {cn_add_scalar(t, 1), cn_add_scalar(cn_neg(t), 2)}; /* 1 < |x| < 2 */
    for (int k = 0; k < 2; k++) {
        cn_tensor *x = near[k];
        w[k + 1] = cn_add_scalar(cn_mul(cn_mul(cn_add_scalar(cn_mul_scalar(x, A + 2), -(A + 3)), x), x), 1);
        x = far[k];
        cn_tensor *p = cn_add_scalar(cn_mul(cn_add_scalar(cn_mul_scalar(x, A), -5 * A), x), 8 * A);
        w[k ? 3 : 0] = cn_add_scalar(cn_mul(p, x), -4 * A);
    }
}

H(h_grid_sample) {
    UNUSED;
    cn_tensor *x = in[0], *grid = in[1];
    if (cn_ndim(x) == 5) return onnx_unsup(c, "volumetric (5-D) input");
    if (cn_ndim(x) != 4) return onnx_bad(c, "X must be [N, C, H, W]");
    if (cn_ndim(grid) != 4 || cn_dim(grid, 3) != 2) return onnx_bad(c, "grid must be [N, H_out, W_out, 2]");
    for (int d = 0; d < 4; d++)
        if (cn_dim(x, d) < 0 || cn_dim(grid, d) < 0) return onnx_unsup(c, "unknown sizes");
    if (cn_dim(grid, 0) != cn_dim(x, 0))
        return onnx_bad(c, "grid has %" PRId64 " batches, X %" PRId64, cn_dim(grid, 0), cn_dim(x, 0));
    if (!cn_dtype_is_float(cn_tensor_dtype(x)) || !cn_dtype_is_float(cn_tensor_dtype(grid)))
        return onnx_bad(c, "X and grid must be floating-point");
    char mb[32], pb[32];
    const char *mode = onnx_attr_str(n, "mode", c->opset_of_node >= 20 ? "linear" : "bilinear", mb, sizeof mb);
    const char *padding = onnx_attr_str(n, "padding_mode", "zeros", pb, sizeof pb);
    bool align = onnx_attr_int(n, "align_corners", 0) != 0;
    bool linear = !strcmp(mode, "linear") || !strcmp(mode, "bilinear");
    bool cubic = !strcmp(mode, "cubic") || !strcmp(mode, "bicubic");
    if (!linear && !cubic && strcmp(mode, "nearest")) return onnx_bad(c, "mode '%s'", mode);
    int pad = !strcmp(padding, "zeros") ? PAD_ZEROS : !strcmp(padding, "border") ? PAD_BORDER
              : !strcmp(padding, "reflection") ? PAD_REFLECTION : -1;
    if (pad < 0) return onnx_bad(c, "padding_mode '%s' (zeros, border or reflection)", padding);
    int64_t N = cn_dim(x, 0), C = cn_dim(x, 1), H = cn_dim(x, 2), W = cn_dim(x, 3);
    int64_t Ho = cn_dim(grid, 1), Wo = cn_dim(grid, 2);
    if (H == 0 || W == 0) return onnx_bad(c, "X has no pixels");
    /* Positions and weights in f32 at least: f16 cannot hold a pixel index
     * past 2048 exactly, nor any past 65504. */
    cn_dtype dt = cn_tensor_dtype(x), wt = dt == CN_F64 ? CN_F64 : CN_F32;
    grid = cn_cast(grid, wt);
    cn_tensor *ux = unnormalize(cn_squeeze(cn_narrow(grid, 3, 0, 1), 3), W, align);
    cn_tensor *uy = unnormalize(cn_squeeze(cn_narrow(grid, 3, 1, 1), 3), H, align);
    cn_tensor *flat = cn_reshape(cn_cast(x, wt), 3, (int64_t[]){N, C, H * W});
    cn_tensor *y = NULL;
    if (cubic) {
        /* Sixteen taps around the unfolded position, each folded by the
         * padding mode on its own (PyTorch's get_value_bounded). */
        cn_tensor *x0 = cn_floor(ux), *y0 = cn_floor(uy), *wx[4], *wy[4];
        cubic_weights(cn_sub(ux, x0), wx);
        cubic_weights(cn_sub(uy, y0), wy);
        for (int j = 0; j < 4; j++) {
            cn_tensor *yt = fold(cn_add_scalar(y0, j - 1), H, align, pad);
            for (int i = 0; i < 4; i++) {
                cn_tensor *t = tap(flat, fold(cn_add_scalar(x0, i - 1), W, align, pad), yt,
                                   cn_mul(wx[i], wy[j]), H, W);
                y = y ? cn_add(y, t) : t;
            }
        }
        DONE(cn_cast(cn_reshape(y, 4, (int64_t[]){N, C, Ho, Wo}), dt));
    }
    cn_tensor *ix = fold(ux, W, align, pad), *iy = fold(uy, H, align, pad);
    if (linear) {
        cn_tensor *x0 = cn_floor(ix), *y0 = cn_floor(iy);
        cn_tensor *wx1 = cn_sub(ix, x0), *wy1 = cn_sub(iy, y0);
        cn_tensor *wx0 = cn_add_scalar(cn_neg(wx1), 1), *wy0 = cn_add_scalar(cn_neg(wy1), 1);
        cn_tensor *x1 = cn_add_scalar(x0, 1), *y1 = cn_add_scalar(y0, 1);
        y = cn_add(cn_add(tap(flat, x0, y0, cn_mul(wx0, wy0), H, W), tap(flat, x1, y0, cn_mul(wx1, wy0), H, W)),
                   cn_add(tap(flat, x0, y1, cn_mul(wx0, wy1), H, W), tap(flat, x1, y1, cn_mul(wx1, wy1), H, W)));
    } else {
        /* Halves round to even, as PyTorch's nearbyint. */
        y = tap(flat, cn_round(ix), cn_round(iy), onnx_full_like(ix, 1), H, W);
    }
    DONE(cn_cast(cn_reshape(y, 4, (int64_t[]){N, C, Ho, Wo}), dt));
}

/* AffineGrid: the normalised (x, y, 1) of every output pixel times theta's
 * rows, [N, H, W, 2], as torch.nn.functional.affine_grid. */
H(h_affine_grid) {
    UNUSED;
    cn_tensor *theta = in[0];
    int64_t size[5];
    int k = onnx_const_ints(c, in[1], "size", size, 5);
    if (k < 0) return k;
    if (k == 5) return onnx_unsup(c, "volumetric (5-D) sizes");
    if (k != 4) return onnx_bad(c, "size has %d values (4 for [N, C, H, W])", k);
    if (cn_ndim(theta) != 3 || cn_dim(theta, 1) != 2 || cn_dim(theta, 2) != 3 || cn_dim(theta, 0) != size[0])
        return onnx_bad(c, "theta must be [%" PRId64 ", 2, 3]", size[0]);
    if (!cn_dtype_is_float(cn_tensor_dtype(theta))) return onnx_bad(c, "theta must be floating-point");
    int64_t N = size[0], H = size[2], W = size[3];
    if (N < 0 || H < 1 || W < 1) return onnx_bad(c, "size [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "]",
                                                 size[0], size[1], H, W);
    /* The constant grid on its own too: a batch of 0 passes any size. */
    if (onnx_check_size(c, 4, (int64_t[]){N, H, W, 2}) < 0 || onnx_check_size(c, 3, (int64_t[]){H, W, 3}) < 0)
        return CN_EINVAL;
    bool align = onnx_attr_int(n, "align_corners", 0) != 0;
    double *base = malloc(sizeof *base * (size_t)(3 * H * W));
    if (!base) return cn_failc(CN_ENOMEM, "onnx: out of memory");
    for (int64_t i = 0; i < H; i++)
        for (int64_t j = 0; j < W; j++) {
            double *b = base + 3 * (i * W + j);
            b[0] = align ? (W > 1 ? -1 + 2.0 * (double)j / (double)(W - 1) : -1) : (2.0 * (double)j + 1) / (double)W - 1;
            b[1] = align ? (H > 1 ? -1 + 2.0 * (double)i / (double)(H - 1) : -1) : (2.0 * (double)i + 1) / (double)H - 1;
            b[2] = 1;
        }
    cn_tensor *bt = cn_cast(cn_from_data(CN_F64, 3, (int64_t[]){1, H * W, 3}, base), cn_tensor_dtype(theta));
    free(base);
    /* [1, HW, 3] @ [N, 3, 2] */
    cn_tensor *g = cn_matmul(bt, cn_transpose(theta, 1, 2));
    DONE(cn_reshape(g, 4, (int64_t[]){N, H, W, 2}));
}

const onnx_op_entry cn_onnx_ops_grid[] = {
    {"GridSample", h_grid_sample, "align_corners,mode,padding_mode", 2, 2, 1,
     "4-D; known sizes"},
    {"AffineGrid", h_affine_grid, "align_corners", 2, 2, 1, "2-D; size a constant"},
    {NULL, NULL, NULL, 0, 0, 0, NULL},
};

#endif /* CN_HAVE_ONNX */
