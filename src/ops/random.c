/* Random numbers: rand, randn, uniform, normal, randint, randperm and the
 * bernoulli op.
 *
 * Every draw reserves one Philox counter per element (cn_rng_reserve) and
 * element i is a function of (seed, first counter + i) only, so the values
 * are the same whatever the device, the thread count or the split of the
 * work. The checks are here; the draws are the backends' (random_fill and
 * the bernoulli kernel; src/backend/cpu/random.c for the CPU). */
#include "op.h"
/* CPU draws that the seam's random_fill does not express: randperm, and
 * randint with i64 bounds beyond +-2^53 (doubles would round them). */
#include "../backend/cpu/kernels.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>

/* Check the shape, allocate on the current device, reserve the counters
 * and draw there. */
static cn_tensor *draw_tensor(const char *fn, cn_dtype dt, int ndim, const int64_t *shape,
                              cn_random_kind kind, double p0, double p1) {
    if (!cn_check_shape(fn, ndim, shape)) return NULL;
    cn_tensor *t = cn_t_empty_on(cn_current_device(), dt, ndim, shape);
    if (!t) return NULL;
    int64_t n = cn_shape_numel(ndim, shape);
    uint64_t key, ctr;
    cn_rng_reserve((uint64_t)n, &key, &ctr);
    const cn_backend *b = cn_backend_of(t);
    int r = b->random_fill ? b->random_fill(t, kind, p0, p1, key, ctr)
                           : cn_failc(CN_EUNSUPPORTED, "%s: the %s backend draws no random "
                                                       "numbers",
                                      fn, b->name);
    if (r < 0) {
        cn_release(t);
        return NULL;
    }
    return cn_scope_add(t);
}

/* t (a CPU tensor, owned) moved to the current device when that is not the
 * CPU; the result goes to the scope. */
static cn_tensor *to_current(cn_tensor *t) {
    cn_device d = cn_current_device();
    if (d.kind != CN_DEVICE_CPU) {
        cn_tensor *m = cn_t_to(t, d, false);
        cn_release(t);
        t = m;
    }
    return t ? cn_scope_add(t) : NULL;
}

static bool check_float_dtype(const char *fn, cn_dtype dt) {
    if ((unsigned)dt >= CN_DTYPE_COUNT) {
        cn_fail("%s: invalid dtype %d", fn, (int)dt);
        return false;
    }
    if (!cn_dtype_is_float(dt)) {
        cn_fail("%s: dtype %s is not a float type (f32, f64, f16, bf16)", fn, cn_dtype_name(dt));
        return false;
    }
    return true;
}

static cn_tensor *uniform_impl(const char *fn, cn_dtype dt, int ndim, const int64_t *shape,
                               double lo, double hi) {
    if (!check_float_dtype(fn, dt)) return NULL;
    if (!isfinite(lo) || !isfinite(hi) || !isfinite(hi - lo))
        return cn_fail("%s: bounds [%g, %g) must be finite (and hi - lo too)", fn, lo, hi);
    if (lo > hi) return cn_fail("%s: lo %g is greater than hi %g", fn, lo, hi);
    double dmax = dt == CN_F16    ? 65504.0
                  : dt == CN_BF16 ? 0x1.fep127
                  : dt == CN_F32  ? FLT_MAX
                                  : DBL_MAX;
    if (fabs(lo) > dmax || fabs(hi) > dmax)
        return cn_fail("%s: bounds [%g, %g) do not fit %s", fn, lo, hi, cn_dtype_name(dt));
    return draw_tensor(fn, dt, ndim, shape, CN_RANDOM_UNIFORM, lo, hi);
}

static cn_tensor *normal_impl(const char *fn, cn_dtype dt, int ndim, const int64_t *shape,
                              double mean, double std) {
    if (!check_float_dtype(fn, dt)) return NULL;
    if (!isfinite(mean) || !isfinite(std))
        return cn_fail("%s: mean %g and std %g must be finite", fn, mean, std);
    if (std < 0) return cn_fail("%s: std %g is negative", fn, std);
    return draw_tensor(fn, dt, ndim, shape, CN_RANDOM_NORMAL, mean, std);
}

cn_tensor *cn_rand(cn_dtype dt, int ndim, const int64_t *shape) {
    return uniform_impl("rand", dt, ndim, shape, 0.0, 1.0);
}

cn_tensor *cn_randn(cn_dtype dt, int ndim, const int64_t *shape) {
    return normal_impl("randn", dt, ndim, shape, 0.0, 1.0);
}

cn_tensor *cn_uniform(cn_dtype dt, int ndim, const int64_t *shape, double lo, double hi) {
    return uniform_impl("uniform", dt, ndim, shape, lo, hi);
}

cn_tensor *cn_normal(cn_dtype dt, int ndim, const int64_t *shape, double mean, double std) {
    return normal_impl("normal", dt, ndim, shape, mean, std);
}

cn_tensor *cn_randint(int64_t low, int64_t high, cn_dtype dt, int ndim, const int64_t *shape) {
    if ((unsigned)dt >= CN_DTYPE_COUNT) return cn_fail("randint: invalid dtype %d", (int)dt);
    if (!cn_is_int_dtype(dt))
        return cn_fail("randint: dtype %s is not an integer type (i32, i64, u8, i8)",
                       cn_dtype_name(dt));
    if (high <= low)
        return cn_fail("randint: high %" PRId64 " must be greater than low %" PRId64, high, low);
    int64_t min = dt == CN_U8 ? 0 : dt == CN_I8 ? INT8_MIN : dt == CN_I32 ? INT32_MIN : INT64_MIN;
    int64_t max = dt == CN_U8   ? UINT8_MAX
                  : dt == CN_I8 ? INT8_MAX
                  : dt == CN_I32 ? INT32_MAX
                                 : INT64_MAX;
    if (low < min || high - 1 > max)
        return cn_fail("randint: [%" PRId64 ", %" PRId64 ") does not fit %s (%" PRId64
                       "..%" PRId64 ")",
                       low, high, cn_dtype_name(dt), min, max);
    /* Bounds that doubles hold exactly go to the device's draw. */
    const int64_t exact = INT64_C(1) << 53;
    if (low >= -exact && high <= exact)
        return draw_tensor("randint", dt, ndim, shape, CN_RANDOM_INT, (double)low, (double)high);
    /* Wider (i64 only): the same draw on the CPU, then moved. */
    if (!cn_check_shape("randint", ndim, shape)) return NULL;
    cn_tensor *t = cn_t_empty(dt, ndim, shape);
    if (!t) return NULL;
    uint64_t key, ctr;
    cn_rng_reserve((uint64_t)cn_shape_numel(ndim, shape), &key, &ctr);
    if (cn_cpu_randint_fill(t, low, (uint64_t)high - (uint64_t)low, key, ctr) < 0) {
        cn_release(t);
        return NULL;
    }
    return to_current(t);
}

/* Drawn on the CPU (a sequential shuffle), then moved to the current
 * device. */
cn_tensor *cn_randperm(int64_t n) {
    if (n < 0) return cn_fail("randperm: n is %" PRId64 ", must be >= 0", n);
    if (!cn_check_shape("randperm", 1, &n)) return NULL;
    cn_tensor *t = cn_t_empty(CN_I64, 1, &n);
    if (!t) return NULL;
    uint64_t key, ctr;
    cn_rng_reserve((uint64_t)n, &key, &ctr);
    if (cn_cpu_randperm_fill(t, key, ctr) < 0) {
        cn_release(t);
        return NULL;
    }
    return to_current(t);
}

/* ---- bernoulli: out[i] = 1 with probability p[i], else 0 ---- */

static int bernoulli_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                           cn_meta *m) {
    (void)nin;
    (void)a;
    const cn_tensor *p = in[0];
    if (!cn_dtype_is_float((cn_dtype)p->dtype))
        return cn_failc(CN_EINVAL, "%s: p must be a float tensor, got %s", op->name,
                        cn_dtype_name((cn_dtype)p->dtype));
    m->dtype = (cn_dtype)p->dtype;
    m->ndim = p->ndim;
    memcpy(m->shape, p->shape, sizeof m->shape);
    return CN_OK;
}

const cn_op_def cn_opdef_bernoulli = {
    .name = "bernoulli",
    .ninputs = 1,
    .flags = CN_OPF_RANDOM | CN_OPF_NONDIFF,
    .infer = bernoulli_infer,
    .onnx = "Bernoulli",
    .doc = "y[i] = 1 with probability p[i], else 0 (p in [0, 1])",
};

cn_tensor *cn_bernoulli(const cn_tensor *p) {
    cn_tensor *x = (cn_tensor *)p;
    return cn_op_apply(CN_OP_bernoulli, &x, 1, NULL);
}
