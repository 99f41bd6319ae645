/* ONNX spectral ops: DFT (opsets 17 and 20) and STFT (opset 17), as
 * products with cosine and sine matrices computed in double at load time:
 * exact to the dtype's rounding for the frame lengths models use, in a
 * static program, with gradients (a learnable front end trains through
 * them). Complex values are ONNX's: a last axis of 2 (real, imaginary); a
 * last axis of 1 is a real signal. */
#include "onnx_internal.h"

#ifdef CN_HAVE_ONNX
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* cos or sin of 2 pi k n / N as [N, K] in dtype dt. */
static cn_tensor *twiddles(int64_t N, int64_t K, bool sine, cn_dtype dt) {
    double *m = malloc(sizeof *m * (size_t)(N * K + 1));
    if (!m) return cn_fail("onnx: out of memory");
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) {
            /* k n mod N keeps the angle small and exact. */
            double th = 2 * M_PI * (double)((k * n) % N) / (double)N;
            m[n * K + k] = sine ? sin(th) : cos(th);
        }
    cn_tensor *t = cn_from_data(CN_F64, 2, (int64_t[]){N, K}, m);
    free(m);
    return t ? cn_cast(t, dt) : NULL;
}

/* The DFT of x [..., n, ..., 1 or 2] along `axis` (not the last), over N
 * points (the signal cut or padded with zeros), K = N or N / 2 + 1 bins:
 * [..., K, ..., 2]. */
static cn_tensor *dft(onnx_ctx *c, cn_tensor *x, int axis, int64_t N, bool inverse, bool onesided) {
    int r = cn_ndim(x);
    int64_t last = cn_dim(x, r - 1), n = cn_dim(x, axis);
    if (last != 1 && last != 2) {
        onnx_bad(c, "the last axis has %" PRId64 " values (1: real, 2: complex)", last);
        return NULL;
    }
    if (n < 0) {
        onnx_unsup(c, "a signal axis of unknown size");
        return NULL;
    }
    if (N < 1 || N > (INT64_C(1) << 16)) {
        onnx_bad(c, "a DFT of %" PRId64 " points (1 to 65536)", N);
        return NULL;
    }
    if (onesided && last == 2) {
        onnx_bad(c, "onesided is for real signals");
        return NULL;
    }
    if (onnx_check_size(c, 2, (int64_t[]){N, N}) < 0) return NULL;
    int64_t K = onesided ? N / 2 + 1 : N;
    cn_dtype dt = cn_tensor_dtype(x);
    cn_tensor *xr = cn_squeeze(cn_narrow(x, r - 1, 0, 1), r - 1);
    cn_tensor *xi = last == 2 ? cn_squeeze(cn_narrow(x, r - 1, 1, 1), r - 1) : NULL;
    int rr = r - 1; /* the rank without the complex axis */
    if (n > N) {
        xr = cn_narrow(xr, axis, 0, N);
        if (xi) xi = cn_narrow(xi, axis, 0, N);
    } else if (n < N) {
        int64_t pads[2 * CN_MAX_DIMS] = {0};
        pads[2 * (rr - 1 - axis) + 1] = N - n; /* after, on `axis` (pairs from the last axis) */
        xr = cn_pad(xr, pads, 2 * rr, CN_PAD_CONSTANT, 0);
        if (xi) xi = cn_pad(xi, pads, 2 * rr, CN_PAD_CONSTANT, 0);
    }
    /* The signal axis last, for the products. */
    xr = cn_transpose(xr, axis, rr - 1);
    if (xi) xi = cn_transpose(xi, axis, rr - 1);
    cn_tensor *C = twiddles(N, K, false, dt), *S = twiddles(N, K, true, dt);
    cn_tensor *yr, *yi;
    /* forward: W = cos - i sin; inverse: cos + i sin, over N */
    if (!inverse) {
        yr = cn_matmul(xr, C), yi = cn_neg(cn_matmul(xr, S));
        if (xi) yr = cn_add(yr, cn_matmul(xi, S)), yi = cn_add(yi, cn_matmul(xi, C));
    } else {
        yr = cn_matmul(xr, C), yi = cn_matmul(xr, S);
        if (xi) yr = cn_sub(yr, cn_matmul(xi, S)), yi = cn_add(yi, cn_matmul(xi, C));
        yr = cn_mul_scalar(yr, 1.0 / (double)N), yi = cn_mul_scalar(yi, 1.0 / (double)N);
    }
    yr = cn_unsqueeze(cn_transpose(yr, axis, rr - 1), rr);
    yi = cn_unsqueeze(cn_transpose(yi, axis, rr - 1), rr);
    return cn_concat((cn_tensor *[]){yr, yi}, 2, rr);
}

H(h_dft) {
    UNUSED;
    cn_tensor *x = in[0];
    int r = cn_ndim(x);
    if (r < 2) return onnx_bad(c, "the input needs a signal axis and a complex axis");
    if (!cn_dtype_is_float(cn_tensor_dtype(x))) return onnx_bad(c, "the input must be floating-point");
    int64_t axis = -2;
    if (c->opset_of_node < 20) {
        axis = onnx_attr_int(n, "axis", 1);
    } else if (nin > 2 && in[2]) {
        double a;
        int rc = onnx_const_scalar(c, in[2], "axis", &a);
        if (rc < 0) return rc;
        if (!onnx_fits_i64(a)) return onnx_bad(c, "axis %g", a);
        axis = (int64_t)a;
    }
    int ax = onnx_axis(c, axis, r, "axis");
    if (ax < 0) return CN_EINVAL;
    if (ax == r - 1) return onnx_bad(c, "axis %" PRId64 " is the complex axis", axis);
    int64_t N = cn_dim(x, ax);
    if (nin > 1 && in[1]) {
        double len;
        int rc = onnx_const_scalar(c, in[1], "dft_length", &len);
        if (rc < 0) return rc;
        if (!onnx_fits_i64(len)) return onnx_bad(c, "dft_length %g", len);
        N = (int64_t)len;
    }
    DONE(dft(c, x, ax, N, onnx_attr_int(n, "inverse", 0) != 0, onnx_attr_int(n, "onesided", 0) != 0));
}

/* STFT: frames of the signal [batch, length, 1 or 2] every frame_step
 * samples (a gather of constant indices), times the window, each
 * transformed: [batch, frames, bins, 2]. */
H(h_stft) {
    UNUSED;
    cn_tensor *x = in[0], *window = nin > 2 ? in[2] : NULL;
    if (cn_ndim(x) != 3) return onnx_bad(c, "signal must be [batch, length, 1 or 2]");
    if (!cn_dtype_is_float(cn_tensor_dtype(x))) return onnx_bad(c, "signal must be floating-point");
    double step_d, fl_d = -1;
    int rc = onnx_const_scalar(c, in[1], "frame_step", &step_d);
    if (rc == 0 && nin > 3 && in[3]) rc = onnx_const_scalar(c, in[3], "frame_length", &fl_d);
    if (rc < 0) return rc;
    if (window && cn_ndim(window) != 1) return onnx_bad(c, "window must be 1-D");
    int64_t wl = window ? cn_dim(window, 0) : -1;
    if (fl_d < 0 && wl < 0) return onnx_bad(c, "neither a window nor frame_length");
    if (!onnx_fits_i64(step_d) || (fl_d >= 0 && !onnx_fits_i64(fl_d))) return onnx_bad(c, "frame sizes");
    int64_t step = (int64_t)step_d, fl = fl_d >= 0 ? (int64_t)fl_d : wl, L = cn_dim(x, 1);
    if (wl >= 0 && wl != fl) return onnx_bad(c, "the window has %" PRId64 " values, frame_length is %" PRId64, wl, fl);
    if (L < 0) return onnx_unsup(c, "a signal of unknown length");
    if (step < 1 || fl < 1 || fl > L)
        return onnx_bad(c, "frame_step %" PRId64 ", frame_length %" PRId64 " for %" PRId64 " samples", step, fl, L);
    int64_t frames = 1 + (L - fl) / step;
    if (onnx_check_size(c, 2, (int64_t[]){frames, fl}) < 0) return CN_EINVAL;
    int64_t *idx = malloc(sizeof *idx * (size_t)(frames * fl));
    if (!idx) return cn_failc(CN_ENOMEM, "onnx: out of memory");
    for (int64_t f = 0; f < frames; f++)
        for (int64_t j = 0; j < fl; j++) idx[f * fl + j] = f * step + j;
    cn_tensor *it = cn_from_data(CN_I64, 1, (int64_t[]){frames * fl}, idx);
    free(idx);
    int64_t B = cn_dim(x, 0), ch = cn_dim(x, 2);
    cn_tensor *fr = it ? cn_reshape(cn_index_select(x, 1, it), 4, (int64_t[]){B, frames, fl, ch}) : NULL;
    if (fr && window) fr = cn_mul(fr, cn_reshape(cn_cast(window, cn_tensor_dtype(x)), 4, (int64_t[]){1, 1, fl, 1}));
    if (!fr) return CN_EINVAL;
    DONE(dft(c, fr, 2, fl, false, onnx_attr_int(n, "onesided", 1) != 0));
}

const onnx_op_entry cn_onnx_ops_spectral[] = {
    {"DFT", h_dft, "axis,inverse,onesided", 1, 3, 1, "dft_length and axis constants; at most 65536 points"},
    {"STFT", h_stft, "onesided", 2, 4, 1, "frame_step and frame_length constants"},
    {NULL, NULL, NULL, 0, 0, 0, NULL},
};

#endif /* CN_HAVE_ONNX */
