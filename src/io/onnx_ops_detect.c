/* ONNX ops whose outputs' sizes depend on their inputs' values, as object
 * detectors use them: NonZero, NonMaxSuppression, and RoiAlign over the
 * boxes they select. They compute on data (at load time when the inputs
 * fold, otherwise on every run of the model, which then runs eagerly:
 * onnx_needs_values); none has a gradient. The arithmetic is f32, as ONNX
 * Runtime's and torchvision's, so that boxes on a threshold fall the same
 * way. */
#include "onnx_internal.h"

#ifdef CN_HAVE_ONNX
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

/* t's elements as dt in a malloc'd buffer (NULL after cn_fail). */
static void *host_copy(cn_tensor *t, cn_dtype dt) {
    size_t bytes = (size_t)cn_numel(t) * cn_dtype_size(dt);
    void *p = malloc(bytes ? bytes : 1);
    if (!p) return cn_fail("onnx: out of memory");
    if (cn_copy_to_buffer(t, dt, p, bytes ? bytes : 1) < 0) {
        free(p);
        return NULL;
    }
    return p;
}

/* ---- NonZero ---- */

H(h_nonzero) {
    UNUSED;
    cn_tensor *x = in[0];
    if (cn_is_symbolic_tensor(x))
        return onnx_needs_values(c, "input 'X' is computed at run time (the output's size is the "
                                    "number of its nonzero elements)");
    /* A scalar is taken as one element of rank 1, as numpy does. */
    int r = cn_ndim(x) ? cn_ndim(x) : 1;
    int64_t nel = cn_numel(x);
    /* Whether each element is nonzero (NaN is), whatever the dtype. */
    cn_tensor *nz = cn_ne(x, cn_scalar(cn_tensor_dtype(x), 0));
    uint8_t *f = nz ? host_copy(nz, CN_BOOL) : NULL;
    if (!f) return CN_EINVAL;
    int64_t cnt = 0;
    for (int64_t i = 0; i < nel; i++) cnt += f[i] != 0;
    int64_t *o = malloc(sizeof *o * (size_t)(r * cnt + 1));
    if (!o) {
        free(f);
        return cn_failc(CN_ENOMEM, "onnx: out of memory");
    }
    int64_t k = 0;
    for (int64_t i = 0; i < nel; i++) {
        if (!f[i]) continue;
        int64_t rest = i;
        for (int d = r - 1; d >= 0; d--) {
            int64_t s = cn_ndim(x) ? cn_dim(x, d) : 1;
            o[d * cnt + k] = rest % s;
            rest /= s;
        }
        k++;
    }
    out[0] = cn_from_data(CN_I64, 2, (int64_t[]){r, cnt}, o);
    free(f);
    free(o);
    return out[0] ? 0 : CN_EINVAL;
}

/* ---- NonMaxSuppression ---- */

typedef struct {
    float score;
    int64_t index;
} scored;

/* Higher score first; on equal scores the lower index (ONNX Runtime's
 * order); NaN scores after all others. */
static int by_score(const void *a, const void *b) {
    const scored *x = a, *y = b;
    bool nx = isnan(x->score), ny = isnan(y->score);
    if (nx != ny) return nx ? 1 : -1; /* NaN last: a total order for qsort */
    if (!nx && x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

/* Box b as (x1, y1, x2, y2) with x1 <= x2, y1 <= y2: corners given as
 * [y1, x1, y2, x2] in either diagonal order (center_point_box 0), or
 * [x_center, y_center, width, height] (1). */
static void corners(const float *b, bool center, float *o) {
    if (center) {
        o[0] = b[0] - b[2] / 2, o[2] = b[0] + b[2] / 2;
        o[1] = b[1] - b[3] / 2, o[3] = b[1] + b[3] / 2;
    } else {
        o[0] = fminf(b[1], b[3]), o[2] = fmaxf(b[1], b[3]);
        o[1] = fminf(b[0], b[2]), o[3] = fmaxf(b[0], b[2]);
    }
}

static inline float min_f(float a, float b) { return a < b ? a : b; }
static inline float max_f(float a, float b) { return a > b ? a : b; }

/* Does box a suppress box b: intersection over union above the
 * threshold? A box of no area suppresses nothing (nor one with a NaN). */
static bool suppresses(const float *a, const float *b, float iou_threshold) {
    float area_a = (a[2] - a[0]) * (a[3] - a[1]), area_b = (b[2] - b[0]) * (b[3] - b[1]);
    if (!(area_a > 0 && area_b > 0)) return false;
    float w = min_f(a[2], b[2]) - max_f(a[0], b[0]), h = min_f(a[3], b[3]) - max_f(a[1], b[1]);
    if (!(w > 0 && h > 0)) return false;
    float inter = w * h, uni = area_a + area_b - inter;
    if (uni <= 0) return false;
    return inter / uni > iou_threshold;
}

H(h_nms) {
    UNUSED;
    for (int i = 0; i < nin; i++)
        if (in[i] && cn_is_symbolic_tensor(in[i]))
            return onnx_needs_values(c, "input %d is computed at run time (how many boxes are "
                                        "selected depends on the values)", i);
    cn_tensor *boxes = in[0], *scores = in[1];
    if (cn_ndim(boxes) != 3 || cn_dim(boxes, 2) != 4)
        return onnx_bad(c, "boxes must be [batches, boxes, 4]");
    if (cn_ndim(scores) != 3 || cn_dim(scores, 0) != cn_dim(boxes, 0) || cn_dim(scores, 2) != cn_dim(boxes, 1))
        return onnx_bad(c, "scores must be [batches, classes, boxes] for boxes of [%" PRId64 ", %" PRId64
                           ", 4]", cn_dim(boxes, 0), cn_dim(boxes, 1));
    double maxo = 0, iou = 0, sth = 0;
    bool has_sth = nin > 4 && in[4];
    if (nin > 2 && in[2] && onnx_const_scalar(c, in[2], "max_output_boxes_per_class", &maxo) < 0) return CN_EINVAL;
    if (nin > 3 && in[3] && onnx_const_scalar(c, in[3], "iou_threshold", &iou) < 0) return CN_EINVAL;
    if (has_sth && onnx_const_scalar(c, in[4], "score_threshold", &sth) < 0) return CN_EINVAL;
    if (!(iou >= 0 && iou <= 1)) return onnx_bad(c, "iou_threshold is %g (0 to 1)", iou);
    int64_t center = onnx_attr_int(n, "center_point_box", 0);
    if (center != 0 && center != 1) return onnx_bad(c, "center_point_box is %" PRId64 " (0 or 1)", center);
    int64_t nb = cn_dim(boxes, 0), nc = cn_dim(scores, 1), nx = cn_dim(boxes, 1);
    int64_t per = maxo > 0 ? (maxo < (double)nx ? (int64_t)maxo : nx) : 0;
    float *bx = host_copy(boxes, CN_F32), *sc = host_copy(scores, CN_F32);
    float *cb = malloc(sizeof *cb * (size_t)(4 * nx + 1));
    scored *cand = malloc(sizeof *cand * (size_t)(nx + 1));
    int64_t *sel = malloc(sizeof *sel * (size_t)(per + 1)), *odd = malloc(sizeof *odd * (size_t)(per + 1));
    int64_t *o = malloc(sizeof *o * (size_t)(3 * nb * nc * per + 1));
    int rc = bx && sc ? 0 : CN_EINVAL;
    if (rc == 0 && (!cb || !cand || !sel || !odd || !o)) rc = cn_failc(CN_ENOMEM, "onnx: out of memory");
    int64_t no = 0;
    for (int64_t b = 0; rc == 0 && b < nb && per > 0; b++) {
        for (int64_t i = 0; i < nx; i++) corners(bx + 4 * (b * nx + i), center, cb + 4 * i);
        for (int64_t k = 0; k < nc; k++) {
            const float *s = sc + (b * nc + k) * nx;
            int64_t m = 0, nodd = 0;
            for (int64_t i = 0; i < nx; i++)
                if (!has_sth || s[i] > (float)sth) cand[m++] = (scored){s[i], i};
            qsort(cand, (size_t)m, sizeof *cand, by_score);
            /* The boxes kept so far, ordered by their left edge: a
             * candidate is checked only against those whose x-extent can
             * meet its own (torchvision's batched NMS shifts each class's
             * boxes apart, so this is about a class's boxes, not all). The
             * kept set is what the plain greedy loop keeps. */
            int64_t ns = 0;
            double maxw = 0;
            for (int64_t j = 0; j < m && ns + nodd < per; j++) {
                const float *bj = cb + 4 * cand[j].index;
                bool keep = true, finite = isfinite(bj[0]) && isfinite(bj[2]);
                if (finite) {
                    double lo = (double)bj[0] - 2 * maxw - 1e-6 * fabs((double)bj[0]);
                    int64_t a = 0, z = ns;
                    while (a < z) {
                        int64_t mid = a + (z - a) / 2;
                        if ((double)cb[4 * sel[mid]] < lo) a = mid + 1;
                        else z = mid;
                    }
                    for (int64_t q = a; q < ns && cb[4 * sel[q]] < bj[2] && keep; q++)
                        keep = !suppresses(cb + 4 * sel[q], bj, (float)iou);
                    /* Boxes with an infinite or NaN edge are never in the
                     * ordering: they meet everything or nothing. */
                    for (int64_t q = 0; q < nodd && keep; q++) keep = !suppresses(cb + 4 * odd[q], bj, (float)iou);
                } else {
                    for (int64_t q = 0; q < ns && keep; q++) keep = !suppresses(cb + 4 * sel[q], bj, (float)iou);
                    for (int64_t q = 0; q < nodd && keep; q++) keep = !suppresses(cb + 4 * odd[q], bj, (float)iou);
                }
                if (!keep) continue;
                if (finite) {
                    int64_t a = 0, z = ns;
                    while (a < z) {
                        int64_t mid = a + (z - a) / 2;
                        if (cb[4 * sel[mid]] <= bj[0]) a = mid + 1;
                        else z = mid;
                    }
                    memmove(sel + a + 1, sel + a, sizeof *sel * (size_t)(ns - a));
                    sel[a] = cand[j].index;
                    ns++;
                    double w = (double)bj[2] - (double)bj[0];
                    if (w > maxw) maxw = w;
                } else {
                    odd[nodd++] = cand[j].index;
                }
                o[3 * no] = b, o[3 * no + 1] = k, o[3 * no + 2] = cand[j].index;
                no++;
            }
        }
    }
    if (rc == 0) out[0] = cn_from_data(CN_I64, 2, (int64_t[]){no, 3}, o);
    free(bx), free(sc), free(cb), free(cand), free(sel), free(odd), free(o);
    return rc < 0 ? rc : out[0] ? 0 : CN_EINVAL;
}

/* ---- RoiAlign ---- */

/* The four pixels around (y, x) and their bilinear weights; all zero
 * outside [-1, size] (Caffe2's RoIAlign, which ONNX follows). */
typedef struct {
    int64_t p[4];
    float w[4];
} bilinear;

static bilinear sample_at(float y, float x, int64_t h, int64_t w) {
    bilinear s = {{0, 0, 0, 0}, {0, 0, 0, 0}};
    if (!(y >= -1.0f && y <= (float)h && x >= -1.0f && x <= (float)w)) return s; /* NaN too */
    if (y <= 0) y = 0;
    if (x <= 0) x = 0;
    int64_t yl = (int64_t)y, xl = (int64_t)x, yh, xh;
    if (yl >= h - 1) yh = yl = h - 1, y = (float)yl;
    else yh = yl + 1;
    if (xl >= w - 1) xh = xl = w - 1, x = (float)xl;
    else xh = xl + 1;
    float ly = y - (float)yl, lx = x - (float)xl, hy = 1 - ly, hx = 1 - lx;
    s.p[0] = yl * w + xl, s.p[1] = yl * w + xh, s.p[2] = yh * w + xl, s.p[3] = yh * w + xh;
    s.w[0] = hy * hx, s.w[1] = hy * lx, s.w[2] = ly * hx, s.w[3] = ly * lx;
    return s;
}

H(h_roi_align) {
    UNUSED;
    cn_tensor *x = in[0], *rois = in[1], *bi = in[2];
    for (int i = 0; i < 3; i++)
        if (cn_is_symbolic_tensor(in[i]))
            return onnx_needs_values(c, "input %d is computed at run time (RoiAlign computes on "
                                        "data only)", i);
    if (x->requires_grad) return onnx_unsup(c, "a gradient through RoiAlign");
    if (cn_ndim(x) != 4) return onnx_bad(c, "X must be [N, C, H, W]");
    if (cn_ndim(rois) != 2 || cn_dim(rois, 1) != 4) return onnx_bad(c, "rois must be [num_rois, 4]");
    if (cn_ndim(bi) != 1 || cn_dim(bi, 0) != cn_dim(rois, 0))
        return onnx_bad(c, "batch_indices must be [num_rois] (%" PRId64 ")", cn_dim(rois, 0));
    if (!cn_dtype_is_float(cn_tensor_dtype(x))) return onnx_bad(c, "X must be floating-point");
    char mb[32], tb[32];
    const char *mode = onnx_attr_str(n, "mode", "avg", mb, sizeof mb);
    const char *ctm = onnx_attr_str(n, "coordinate_transformation_mode",
                                    c->opset_of_node >= 16 ? "half_pixel" : "output_half_pixel", tb, sizeof tb);
    bool avg = !strcmp(mode, "avg"), half = !strcmp(ctm, "half_pixel");
    if (!avg && strcmp(mode, "max")) return onnx_bad(c, "mode '%s' (avg or max)", mode);
    if (!half && strcmp(ctm, "output_half_pixel"))
        return onnx_bad(c, "coordinate_transformation_mode '%s' (half_pixel or output_half_pixel)", ctm);
    int64_t oh = onnx_attr_int(n, "output_height", 1), ow = onnx_attr_int(n, "output_width", 1);
    int64_t ratio = onnx_attr_int(n, "sampling_ratio", 0);
    float scale = (float)onnx_attr_float(n, "spatial_scale", 1.0);
    if (oh < 1 || ow < 1 || oh > ONNX_MAX_WINDOW || ow > ONNX_MAX_WINDOW)
        return onnx_bad(c, "output size %" PRId64 " x %" PRId64, oh, ow);
    if (ratio < 0 || ratio > ONNX_MAX_WINDOW) return onnx_bad(c, "sampling_ratio %" PRId64, ratio);
    int64_t N = cn_dim(x, 0), C = cn_dim(x, 1), H = cn_dim(x, 2), W = cn_dim(x, 3), R = cn_dim(rois, 0);
    if (H < 1 || W < 1) return onnx_bad(c, "X has no pixels (%" PRId64 " x %" PRId64 ")", H, W);
    int64_t shape[4] = {R, C, oh, ow};
    if (onnx_check_size(c, 4, shape) < 0) return CN_EINVAL;
    float *xd = host_copy(x, CN_F32), *rd = host_copy(rois, CN_F32);
    int64_t *bd = host_copy(bi, CN_I64);
    float *o = malloc(sizeof *o * (size_t)(R * C * oh * ow + 1));
    int rc = xd && rd && bd ? 0 : CN_EINVAL;
    if (rc == 0 && !o) rc = cn_failc(CN_ENOMEM, "onnx: out of memory");
    float off = half ? 0.5f : 0.0f;
    for (int64_t r = 0; rc == 0 && r < R; r++) {
        int64_t b = bd[r];
        if (b < 0 || b >= N) {
            rc = onnx_bad(c, "batch index %" PRId64 " of roi %" PRId64 " (X has %" PRId64 ")", b, r, N);
            break;
        }
        const float *q = rd + 4 * r;
        float x0 = q[0] * scale - off, y0 = q[1] * scale - off;
        float rw = q[2] * scale - off - x0, rh = q[3] * scale - off - y0;
        if (!half) rw = fmaxf(rw, 1.0f), rh = fmaxf(rh, 1.0f);
        float bh = rh / (float)oh, bw = rw / (float)ow;
        double gh_d = ratio > 0 ? (double)ratio : ceil((double)rh / (double)oh);
        double gw_d = ratio > 0 ? (double)ratio : ceil((double)rw / (double)ow);
        /* A box of no or negative size samples nothing (its bins are 0, as
         * ONNX Runtime's); NaN likewise. */
        if (!(gh_d > 0)) gh_d = 0;
        if (!(gw_d > 0)) gw_d = 0;
        /* Every sample costs C multiply-adds: a file cannot ask for days. */
        if (gh_d * gw_d * (double)oh * (double)ow * (double)C * (double)R > 0x1p34) {
            rc = onnx_bad(c, "roi %" PRId64 " asks for more than 2^34 samples in all (a box of %g x %g)", r,
                          (double)rh, (double)rw);
            break;
        }
        int64_t gh = (int64_t)gh_d, gw = (int64_t)gw_d;
        float count = (float)(gh * gw > 1 ? gh * gw : 1);
        for (int64_t ph = 0; ph < oh; ph++)
            for (int64_t pw = 0; pw < ow; pw++) {
                for (int64_t ch = 0; ch < C; ch++) o[((r * C + ch) * oh + ph) * ow + pw] = 0;
                bool first = true;
                for (int64_t iy = 0; iy < gh; iy++) {
                    float yy = y0 + (float)ph * bh + ((float)iy + 0.5f) * bh / (float)gh;
                    for (int64_t ix = 0; ix < gw; ix++) {
                        float xx = x0 + (float)pw * bw + ((float)ix + 0.5f) * bw / (float)gw;
                        bilinear s = sample_at(yy, xx, H, W);
                        for (int64_t ch = 0; ch < C; ch++) {
                            const float *p = xd + (b * C + ch) * H * W;
                            float *d = o + ((r * C + ch) * oh + ph) * ow + pw;
                            if (avg) {
                                *d += s.w[0] * p[s.p[0]] + s.w[1] * p[s.p[1]] + s.w[2] * p[s.p[2]] +
                                      s.w[3] * p[s.p[3]];
                            } else { /* the largest weighted corner, as ONNX Runtime */
                                for (int k = 0; k < 4; k++) {
                                    float v = s.w[k] * p[s.p[k]];
                                    if ((first && k == 0) || v > *d) *d = v;
                                }
                            }
                        }
                        first = false;
                    }
                }
                if (avg)
                    for (int64_t ch = 0; ch < C; ch++) o[((r * C + ch) * oh + ph) * ow + pw] /= count;
            }
    }
    if (rc == 0) {
        cn_tensor *y = cn_from_data(CN_F32, 4, shape, o);
        out[0] = y ? cn_cast(y, cn_tensor_dtype(x)) : NULL;
        if (!out[0]) rc = CN_EINVAL;
    }
    free(xd), free(rd), free(bd), free(o);
    return rc;
}

const onnx_op_entry cn_onnx_ops_detect[] = {
    {"NonZero", h_nonzero, "", 1, 1, 1, "on data: a model whose input it depends on runs eagerly"},
    {"NonMaxSuppression", h_nms, "center_point_box", 2, 5, 1,
     "on data: a model whose input it depends on runs eagerly"},
    {"RoiAlign", h_roi_align,
     "coordinate_transformation_mode,mode,output_height,output_width,sampling_ratio,spatial_scale", 3, 3,
     1, "on data, no gradient: a model whose input it depends on runs eagerly"},
    {NULL, NULL, NULL, 0, 0, 0, NULL},
};

#endif /* CN_HAVE_ONNX */
