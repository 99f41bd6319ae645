/* Reductions on the CPU.
 *
 * Plan. The axes of x are split into kept and reduced ones; size-1 axes are
 * dropped, and each group is sorted by stride and merged where contiguous.
 * Then one of two layouts:
 *  - row mode: a reduced axis has the smallest stride, so each output folds
 *    rows of its own elements (row sums, full reductions);
 *  - column mode: a kept axis has the smallest stride, so a tile of
 *    neighbouring outputs is updated from each input row at once (column
 *    sums such as bias gradients) instead of striding down columns.
 *
 * Determinism. The reduced elements of each output are cut into blocks whose
 * size depends on the shapes only; a block's partial result is always
 * computed the same way, and partials are folded in block order. Threads
 * only decide who computes which block, so the bits do not depend on the
 * thread count.
 *
 * Accuracy. Float sums run over 32 lanes (vectorised) inside chunks of 512
 * elements, and chunk sums are added in double; column sums add sub-blocks
 * of 64 rows in double. Variance is two-pass inside each (cache-resident)
 * block, blocks merged with Chan's formula; logsumexp subtracts the max. */
#include "reduce.h"

#include "kernels.h"
#include "vmath.h"

#include <math.h>
#include <stdlib.h>

enum { ET_F32, ET_F64, ET_I64 };

#define ROW_BLOCK 16384   /* reduced elements per block, row mode */
#define COL_TILE 256      /* outputs per tile, column mode */
#define COL_SUB 64        /* rows per sub-block, column mode */
#define COL_BLOCK 65536   /* elements per block (rows x tile), column mode */
#define COL_MIN_WIDTH 8   /* narrower kept axes are reduced in row mode */
#define SHORT_ROW 16      /* rows up to this long are reduced in column mode */
#define LANES 32
#define CHUNK 512
#define TASK_GRAIN 32768  /* elements of work worth a thread */

/* The partial result of a reduction. f: sum, product, extreme, mean (var)
 * or max (logsumexp); g: M2 (var) or the sum of exp(x - f) (logsumexp);
 * i: the integer sum, product or extreme; n: the count (var) or the index
 * of the extreme (argmax/argmin, -1 before any element). */
typedef struct rstate {
    double f, g;
    int64_t i, n;
} rstate;

typedef struct rplan rplan;
/* Row mode: fold n elements at stride s (index i0 of the reduced axis) into
 * st; pass and c as row_block describes. */
typedef void (*seg_fn)(const rplan *p, rstate *st, const char *x, int64_t n, int64_t s,
                       int64_t i0, int pass, double c);
/* Column mode: fold the rows at element offsets off[0..nrows) from x (row
 * r0 first) into the tw states of a tile. */
typedef void (*col_fn)(const rplan *p, rstate *st, const char *x, const int64_t *off, int nrows,
                       int64_t r0, int64_t tw);

struct rplan {
    cn_reduce_kind kind;
    int et;
    size_t es, oes;
    cn_dtype odt;
    double param;
    const char *x;
    char *out;
    int64_t nout, len;   /* outputs; reduced elements per output */
    int nk, nr;          /* kept dims (less the tile dim), reduced dims; outermost first */
    int64_t kshape[CN_MAX_DIMS], kin[CN_MAX_DIMS], kout[CN_MAX_DIMS];
    int64_t rshape[CN_MAX_DIMS], rin[CN_MAX_DIMS];
    bool column;
    int64_t cw, cin, cout; /* column mode: the tile dim's size and strides */
    int64_t tw, ntiles;    /* tile width (1 in row mode), tiles per kept group */
    int64_t blk, nblocks;  /* block length: elements (row mode) or rows (column mode) */
    int64_t ntasks;        /* outputs (row mode) or groups * tiles (column mode) */
    seg_fn seg;
    col_fn col;
};

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t abs64(int64_t a) { return a < 0 ? -a : a; }

/* ---- an odometer over a multi-index: offsets along one or two stride sets ---- */

typedef struct odo {
    int nd;
    const int64_t *shape, *s0, *s1;
    int64_t idx[CN_MAX_DIMS];
    int64_t o0, o1;
} odo;

static void odo_seek(odo *o, int nd, const int64_t *shape, const int64_t *s0, const int64_t *s1,
                     int64_t lin) {
    o->nd = nd;
    o->shape = shape;
    o->s0 = s0;
    o->s1 = s1 ? s1 : s0;
    o->o0 = o->o1 = 0;
    for (int d = nd - 1; d >= 0; d--) {
        o->idx[d] = lin % shape[d];
        lin /= shape[d];
        o->o0 += o->idx[d] * s0[d];
        o->o1 += o->idx[d] * o->s1[d];
    }
}

static inline void odo_next(odo *o) {
    for (int d = o->nd - 1; d >= 0; d--) {
        o->o0 += o->s0[d];
        o->o1 += o->s1[d];
        if (++o->idx[d] < o->shape[d]) return;
        o->o0 -= o->s0[d] * o->shape[d];
        o->o1 -= o->s1[d] * o->shape[d];
        o->idx[d] = 0;
    }
}

/* ---- states: start, merge, store ---- */

/* NaN wins over everything, so max/min propagate it whatever the order. */
static inline double nanmax(double a, double b) { return (b > a || b != b) ? b : a; }
static inline double nanmin(double a, double b) { return (b < a || b != b) ? b : a; }
/* Integer sums and products wrap like PyTorch's (no signed overflow). */
static inline int64_t wadd(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline int64_t wmul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }

static rstate state_init(const rplan *p) {
    rstate s = {0, 0, 0, 0};
    switch (p->kind) {
    case CN_RED_PROD: s.f = 1; s.i = 1; break;
    case CN_RED_MAX: s.f = -INFINITY; s.i = INT64_MIN; break;
    case CN_RED_MIN: s.f = INFINITY; s.i = INT64_MAX; break;
    case CN_RED_LOGSUMEXP: s.f = -INFINITY; break;
    case CN_RED_ARGMAX:
    case CN_RED_ARGMIN: s.n = -1; break;
    default: break;
    }
    return s;
}

/* Does candidate value (bf, bi) beat the current (af, ai) of argmax/argmin?
 * Strictly better only, so the earlier index wins ties; NaN is the extreme. */
static inline bool arg_better(const rplan *p, double bf, int64_t bi, double af, int64_t ai) {
    if (p->et == ET_I64) return p->kind == CN_RED_ARGMAX ? bi > ai : bi < ai;
    if (af != af) return false;
    if (bf != bf) return true;
    return p->kind == CN_RED_ARGMAX ? bf > af : bf < af;
}

/* Chan et al.: merge (mean, m2, n) into a's running variance state. */
static inline void var_merge(rstate *a, double mean, double m2, int64_t n) {
    if (n == 0) return;
    if (a->n == 0) {
        a->f = mean;
        a->g = m2;
        a->n = n;
        return;
    }
    double na = (double)a->n, nb = (double)n, nt = na + nb, d = mean - a->f;
    a->f += d * (nb / nt);
    a->g += m2 + d * d * (na * nb / nt);
    a->n += n;
}

/* Merge (max m, sum of exp(x - m) s) into a's logsumexp state. A non-finite
 * max settles the result by itself; the sum is then 1 for +inf (so the
 * result is inf) and 0 for -inf. */
static inline void lse_merge(rstate *a, double m, double s) {
    double mm = nanmax(a->f, m);
    if (!isfinite(mm)) {
        a->f = mm;
        a->g = mm > 0 ? 1 : 0;
        return;
    }
    a->g = a->g * exp(a->f - mm) + s * exp(m - mm);
    a->f = mm;
}

static void state_merge(const rplan *p, rstate *a, const rstate *b) {
    bool ints = p->et == ET_I64;
    switch (p->kind) {
    case CN_RED_SUM:
    case CN_RED_MEAN:
        if (ints) a->i = wadd(a->i, b->i);
        else a->f += b->f;
        break;
    case CN_RED_PROD:
        if (ints) a->i = wmul(a->i, b->i);
        else a->f *= b->f;
        break;
    case CN_RED_MAX:
        if (ints) a->i = b->i > a->i ? b->i : a->i;
        else a->f = nanmax(a->f, b->f);
        break;
    case CN_RED_MIN:
        if (ints) a->i = b->i < a->i ? b->i : a->i;
        else a->f = nanmin(a->f, b->f);
        break;
    case CN_RED_ARGMAX:
    case CN_RED_ARGMIN:
        if (b->n >= 0 && (a->n < 0 || arg_better(p, b->f, b->i, a->f, a->i))) *a = *b;
        break;
    case CN_RED_VAR:
    case CN_RED_STD: var_merge(a, b->f, b->g, b->n); break;
    case CN_RED_LOGSUMEXP: lse_merge(a, b->f, b->g); break;
    case CN_RED_NORM:
        if (isinf(p->param)) a->f = nanmax(a->f, b->f);
        else a->f += b->f;
        break;
    default: break;
    }
}

static void store_value(cn_dtype dt, char *o, double v, int64_t iv, bool is_int) {
    switch (dt) {
    case CN_F32: *(float *)o = (float)(is_int ? (double)iv : v); break;
    case CN_F64: *(double *)o = is_int ? (double)iv : v; break;
    case CN_I64: *(int64_t *)o = iv; break;
    case CN_I32: *(int32_t *)o = (int32_t)iv; break;
    case CN_U8: *(uint8_t *)o = (uint8_t)iv; break;
    case CN_I8: *(int8_t *)o = (int8_t)iv; break;
    case CN_BOOL: *(uint8_t *)o = iv != 0; break;
    default: cn_store_f64(o, dt, 0, is_int ? (double)iv : v); break;
    }
}

static void state_store(const rplan *p, const rstate *s, char *o) {
    double v = 0;
    bool is_int = false;
    switch (p->kind) {
    case CN_RED_SUM:
    case CN_RED_PROD:
    case CN_RED_MAX:
    case CN_RED_MIN:
        is_int = p->et == ET_I64;
        v = s->f;
        break;
    case CN_RED_MEAN: v = s->f / (double)p->len; break;
    case CN_RED_VAR:
    case CN_RED_STD: {
        /* PyTorch's divisor: N - correction, clamped at 0 (then inf or NaN). */
        double dof = (double)p->len - p->param;
        v = s->g / (dof > 0 ? dof : 0);
        if (p->kind == CN_RED_STD) v = sqrt(v);
        break;
    }
    case CN_RED_LOGSUMEXP: v = isfinite(s->f) ? s->f + log(s->g) : s->f; break;
    case CN_RED_NORM: {
        double q = p->param;
        v = (q == 1 || isinf(q)) ? s->f : q == 2 ? sqrt(s->f) : pow(s->f, 1 / q);
        break;
    }
    case CN_RED_ARGMAX:
    case CN_RED_ARGMIN: is_int = true; break;
    default: break;
    }
    int64_t iv = (p->kind == CN_RED_ARGMAX || p->kind == CN_RED_ARGMIN) ? s->n : s->i;
    store_value(p->odt, o, v, iv, is_int);
}

/* Leaves are inlined into the CN_HOT_FN functions that call them, so they
 * are compiled for each of those functions' targets. */
#if defined(__GNUC__)
#define LEAF static inline __attribute__((always_inline))
#else
#define LEAF static inline
#endif

#define SEG_FN(NAME)                                                                               \
    CN_HOT_FN(NAME,                                                                                \
              (const rplan *p, rstate *st, const char *xc, int64_t n, int64_t s, int64_t i0,       \
               int pass, double c),                                                                \
              (p, st, xc, n, s, i0, pass, c))

/* ---- row-mode leaves, one set per element type ----
 * The leaves are inline functions of the stride s; each SEG_FN calls them
 * once with s == 1 spelled out, so the unit-stride copy is compiled (and
 * vectorised) on its own. LANES independent accumulators let the compiler
 * keep them in vector registers without reassociating anything. */

/* out = the sum of F(q[i * s]) for i < m (m <= CHUNK): LANES independent
 * lanes, then groups of 4, then single elements, so short rows do not wait
 * on one long chain of additions either. */
#define LANE_SUM(T, out, q, m, F)                                                                  \
    do {                                                                                           \
        int64_t i_ = 0;                                                                            \
        T h_[4] = {0, 0, 0, 0};                                                                    \
        if ((m) >= LANES) {                                                                        \
            T a_[LANES];                                                                           \
            for (int j_ = 0; j_ < LANES; j_++) a_[j_] = F((q)[j_ * s]);                            \
            for (i_ = LANES; i_ + LANES <= (m); i_ += LANES)                                       \
                for (int j_ = 0; j_ < LANES; j_++) a_[j_] += F((q)[(i_ + j_) * s]);                \
            CN_FOLD32_TO4(T, a_, h_, CN_ADD);                                                      \
        }                                                                                          \
        for (; i_ + 4 <= (m); i_ += 4)                                                             \
            for (int j_ = 0; j_ < 4; j_++) h_[j_] += F((q)[(i_ + j_) * s]);                        \
        T t_ = (h_[0] + h_[2]) + (h_[1] + h_[3]);                                                  \
        for (; i_ < (m); i_++) t_ += F((q)[i_ * s]);                                               \
        out = t_;                                                                                  \
    } while (0)

#define ID_(v) (v)
#define EXPM_f32(v) cn_vexpf((v) - mx)
#define EXPM_f64(v) exp((v) - mx)
#define SQ_(v) ((double)(v) * (double)(v))
#define ABS_(v) fabs((double)(v))
#define DEV_(v) ((v) - mu)
#define DEV2_(v) (((v) - mu) * ((v) - mu))

/* Sums go chunk by chunk (CHUNK elements summed in the input type), chunk
 * sums added in double. */
#define DEF_FLOAT_LEAVES(T, S)                                                                     \
    LEAF double sum_##S(const T *x, int64_t n, int64_t s) {                                        \
        double total = 0;                                                                          \
        for (int64_t c = 0; c < n; c += CHUNK) {                                                   \
            T t;                                                                                   \
            LANE_SUM(T, t, x + c * s, min64(CHUNK, n - c), ID_);                                   \
            total += (double)t;                                                                    \
        }                                                                                          \
        return total;                                                                              \
    }                                                                                              \
    LEAF double sumexp_##S(const T *x, int64_t n, int64_t s, T mx) {                               \
        double total = 0;                                                                          \
        for (int64_t c = 0; c < n; c += CHUNK) {                                                   \
            T t;                                                                                   \
            LANE_SUM(T, t, x + c * s, min64(CHUNK, n - c), EXPM_##S);                              \
            total += (double)t;                                                                    \
        }                                                                                          \
        return total;                                                                              \
    }                                                                                              \
    /* Sums of d = x - mu and d^2 (the second pass of the variance); the                           \
     * block is in cache, so two sweeps cost little. */                                            \
    LEAF void dev_##S(const T *x, int64_t n, int64_t s, T mu, double *sd, double *sd2) {           \
        for (int64_t c = 0; c < n; c += CHUNK) {                                                   \
            T t1, t2;                                                                              \
            LANE_SUM(T, t1, x + c * s, min64(CHUNK, n - c), DEV_);                                 \
            LANE_SUM(T, t2, x + c * s, min64(CHUNK, n - c), DEV2_);                                \
            *sd += (double)t1;                                                                     \
            *sd2 += (double)t2;                                                                    \
        }                                                                                          \
    }                                                                                              \
    LEAF double prod_##S(const T *x, int64_t n, int64_t s) {                                       \
        double acc[4] = {1, 1, 1, 1};                                                              \
        int64_t i = 0;                                                                             \
        for (; i + 4 <= n; i += 4)                                                                 \
            for (int j = 0; j < 4; j++) acc[j] *= (double)x[(i + j) * s];                          \
        for (; i < n; i++) acc[0] *= (double)x[i * s];                                             \
        return (acc[0] * acc[1]) * (acc[2] * acc[3]);                                              \
    }                                                                                              \
    /* NaN-propagating max (max_) or min of n >= 1 elements: lanes, groups                         \
     * of 4, then single elements, as LANE_SUM. */                                                 \
    LEAF T ext_##S(const T *x, int64_t n, int64_t s, bool max_) {                                  \
        T h[4] = {x[0], x[0], x[0], x[0]};                                                         \
        int64_t i = 0;                                                                             \
        if (n >= LANES) {                                                                          \
            T acc[LANES];                                                                          \
            for (int j = 0; j < LANES; j++) acc[j] = x[j * s];                                     \
            for (i = LANES; i + LANES <= n; i += LANES)                                            \
                for (int j = 0; j < LANES; j++)                                                    \
                    acc[j] = max_ ? CN_NANMAX(acc[j], x[(i + j) * s])                              \
                                  : CN_NANMIN(acc[j], x[(i + j) * s]);                             \
            if (max_) CN_FOLD32_TO4(T, acc, h, CN_NANMAX);                                         \
            else CN_FOLD32_TO4(T, acc, h, CN_NANMIN);                                              \
        }                                                                                          \
        for (; i + 4 <= n; i += 4)                                                                 \
            for (int j = 0; j < 4; j++)                                                            \
                h[j] = max_ ? CN_NANMAX(h[j], x[(i + j) * s]) : CN_NANMIN(h[j], x[(i + j) * s]);   \
        for (; i < n; i++) h[0] = max_ ? CN_NANMAX(h[0], x[i * s]) : CN_NANMIN(h[0], x[i * s]);    \
        T r = h[0];                                                                                \
        for (int j = 1; j < 4; j++) r = max_ ? CN_NANMAX(r, h[j]) : CN_NANMIN(r, h[j]);            \
        return r;                                                                                  \
    }                                                                                              \
    /* Sum of |x|^p in double (so squares of large f32 values do not                               \
     * overflow), or max |x| for p = inf. */                                                       \
    LEAF double pnorm_##S(const T *x, int64_t n, int64_t s, double p) {                            \
        double r = 0;                                                                              \
        if (isinf(p)) {                                                                            \
            for (int64_t i = 0; i < n; i++) r = nanmax(r, fabs((double)x[i * s]));                 \
            return r;                                                                              \
        }                                                                                          \
        for (int64_t c = 0; c < n; c += CHUNK) {                                                   \
            const T *q = x + c * s;                                                                \
            int64_t m = min64(CHUNK, n - c);                                                       \
            double t = 0;                                                                          \
            if (p == 2) LANE_SUM(double, t, q, m, SQ_);                                            \
            else if (p == 1) LANE_SUM(double, t, q, m, ABS_);                                      \
            else                                                                                   \
                for (int64_t i = 0; i < m; i++) t += pow(fabs((double)q[i * s]), p);               \
            r += t;                                                                                \
        }                                                                                          \
        return r;                                                                                  \
    }                                                                                              \
    /* The extreme first (vectorised), then the position of its first                              \
     * occurrence. */                                                                              \
    LEAF int64_t arg_##S(const T *x, int64_t n, int64_t s, bool max_, T *best) {                   \
        T m = ext_##S(x, n, s, max_);                                                              \
        int64_t k = 0;                                                                             \
        if (m != m) {                                                                              \
            while (x[k * s] == x[k * s]) k++;                                                      \
        } else {                                                                                   \
            while (x[k * s] != m) k++;                                                             \
        }                                                                                          \
        *best = m;                                                                                 \
        return k;                                                                                  \
    }                                                                                              \
    /* Row-mode leaves, one small function per kind (see row_block for                             \
     * pass and c). */                                                                             \
    SEG_FN(seg_sum_##S) {                                                                          \
        const T *x = (const T *)xc;                                                                \
        st->f += s == 1 ? sum_##S(x, n, 1) : sum_##S(x, n, s);                                     \
    }                                                                                              \
    SEG_FN(seg_prod_##S) { st->f *= prod_##S((const T *)xc, n, s); }                               \
    SEG_FN(seg_max_##S) {                                                                          \
        const T *x = (const T *)xc;                                                                \
        st->f = nanmax(st->f, s == 1 ? ext_##S(x, n, 1, true) : ext_##S(x, n, s, true));           \
    }                                                                                              \
    SEG_FN(seg_min_##S) {                                                                          \
        const T *x = (const T *)xc;                                                                \
        st->f = nanmin(st->f, s == 1 ? ext_##S(x, n, 1, false) : ext_##S(x, n, s, false));         \
    }                                                                                              \
    SEG_FN(seg_var_##S) {                                                                          \
        const T *x = (const T *)xc;                                                                \
        if (pass == 0) st->f += s == 1 ? sum_##S(x, n, 1) : sum_##S(x, n, s);                      \
        else if (s == 1) dev_##S(x, n, 1, (T)c, &st->f, &st->g);                                   \
        else dev_##S(x, n, s, (T)c, &st->f, &st->g);                                               \
    }                                                                                              \
    SEG_FN(seg_lse_##S) {                                                                          \
        const T *x = (const T *)xc;                                                                \
        if (pass == 0)                                                                             \
            st->f = nanmax(st->f, s == 1 ? ext_##S(x, n, 1, true) : ext_##S(x, n, s, true));       \
        else                                                                                       \
            st->g += s == 1 ? sumexp_##S(x, n, 1, (T)c) : sumexp_##S(x, n, s, (T)c);               \
    }                                                                                              \
    SEG_FN(seg_norm_##S) {                                                                         \
        const T *x = (const T *)xc;                                                                \
        double v = s == 1 ? pnorm_##S(x, n, 1, p->param) : pnorm_##S(x, n, s, p->param);           \
        st->f = isinf(p->param) ? nanmax(st->f, v) : st->f + v;                                    \
    }                                                                                              \
    SEG_FN(seg_arg_##S) {                                                                          \
        const T *x = (const T *)xc;                                                                \
        bool mx = p->kind == CN_RED_ARGMAX;                                                        \
        T m;                                                                                       \
        int64_t k = s == 1 ? arg_##S(x, n, 1, mx, &m) : arg_##S(x, n, s, mx, &m);                  \
        if (st->n < 0 || arg_better(p, (double)m, 0, st->f, 0)) {                                  \
            st->f = (double)m;                                                                     \
            st->n = i0 + k;                                                                        \
        }                                                                                          \
    }

DEF_FLOAT_LEAVES(float, f32)
DEF_FLOAT_LEAVES(double, f64)

/* Integers (i64; narrower types arrive widened): wrapping sums and
 * products, extremes and their positions. */
LEAF uint64_t sum_i64(const int64_t *x, int64_t n, int64_t s) {
    uint64_t acc[LANES] = {0}, t = 0;
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) acc[j] += (uint64_t)x[(i + j) * s];
    for (int j = 0; j < LANES; j++) t += acc[j];
    for (; i < n; i++) t += (uint64_t)x[i * s];
    return t;
}

LEAF int64_t ext_i64(const int64_t *x, int64_t n, int64_t s, bool max_) {
    int64_t m = x[0];
    for (int64_t i = 1; i < n; i++)
        if (max_) m = x[i * s] > m ? x[i * s] : m;
        else m = x[i * s] < m ? x[i * s] : m;
    return m;
}

SEG_FN(seg_sum_i64) {
    const int64_t *x = (const int64_t *)xc;
    st->i = wadd(st->i, (int64_t)(s == 1 ? sum_i64(x, n, 1) : sum_i64(x, n, s)));
}

SEG_FN(seg_prod_i64) {
    const int64_t *x = (const int64_t *)xc;
    uint64_t t = 1;
    for (int64_t i = 0; i < n; i++) t *= (uint64_t)x[i * s];
    st->i = wmul(st->i, (int64_t)t);
}

SEG_FN(seg_max_i64) {
    const int64_t *x = (const int64_t *)xc;
    int64_t m = s == 1 ? ext_i64(x, n, 1, true) : ext_i64(x, n, s, true);
    st->i = m > st->i ? m : st->i;
}

SEG_FN(seg_min_i64) {
    const int64_t *x = (const int64_t *)xc;
    int64_t m = s == 1 ? ext_i64(x, n, 1, false) : ext_i64(x, n, s, false);
    st->i = m < st->i ? m : st->i;
}

SEG_FN(seg_arg_i64) {
    const int64_t *x = (const int64_t *)xc;
    bool mx = p->kind == CN_RED_ARGMAX;
    int64_t m = s == 1 ? ext_i64(x, n, 1, mx) : ext_i64(x, n, s, mx);
    if (st->n < 0 || arg_better(p, 0, m, 0, st->i)) {
        int64_t k = 0;
        while (x[k * s] != m) k++;
        st->i = m;
        st->n = i0 + k;
    }
}

static seg_fn pick_seg(cn_reduce_kind kind, int et) {
#define PICK(NAME) return et == ET_F32 ? NAME##_f32 : et == ET_F64 ? NAME##_f64 : NAME##_i64
#define PICKF(NAME) return et == ET_F32 ? NAME##_f32 : NAME##_f64
    switch (kind) {
    case CN_RED_SUM:
    case CN_RED_MEAN: PICK(seg_sum);
    case CN_RED_PROD: PICK(seg_prod);
    case CN_RED_MAX: PICK(seg_max);
    case CN_RED_MIN: PICK(seg_min);
    case CN_RED_ARGMAX:
    case CN_RED_ARGMIN: PICK(seg_arg);
    case CN_RED_VAR:
    case CN_RED_STD: PICKF(seg_var);
    case CN_RED_LOGSUMEXP: PICKF(seg_lse);
    default: PICKF(seg_norm);
    }
#undef PICK
#undef PICKF
}

/* ---- column-mode leaves: a sub-block of rows into a tile of states ----
 * tmp arrays hold one partial per column over the sub-block (vectorised
 * across the row); they are merged into the double states at its end. */

#define ROWS_LOOP(BODY)                                                                            \
    for (int r = 0; r < nrows; r++) {                                                              \
        const elem *row = x + off[r];                                                              \
        if (cs == 1) {                                                                             \
            for (int64_t j = 0; j < tw; j++) {                                                     \
                const elem v = row[j];                                                             \
                BODY                                                                               \
            }                                                                                      \
        } else {                                                                                   \
            for (int64_t j = 0; j < tw; j++) {                                                     \
                const elem v = row[j * cs];                                                        \
                BODY                                                                               \
            }                                                                                      \
        }                                                                                          \
    }

#define DEF_FLOAT_COL(T, S, EXPF)                                                                  \
    CN_HOT_FN(col_##S,                                                                             \
              (const rplan *p, rstate *st, const char *xc, const int64_t *off, int nrows,          \
               int64_t r0, int64_t tw),                                                            \
              (p, st, xc, off, nrows, r0, tw)) {                                                   \
        typedef T elem; /* for ROWS_LOOP */                                                        \
        const T *x = (const T *)xc;                                                                \
        const int64_t cs = p->cin;                                                                 \
        T t1[COL_TILE], t2[COL_TILE], t3[COL_TILE];                                                \
        double d1[COL_TILE];                                                                       \
        int64_t ix[COL_TILE];                                                                      \
        switch (p->kind) {                                                                         \
        case CN_RED_SUM:                                                                           \
        case CN_RED_MEAN:                                                                          \
            for (int64_t j = 0; j < tw; j++) t1[j] = 0;                                            \
            ROWS_LOOP(t1[j] += v;)                                                                 \
            for (int64_t j = 0; j < tw; j++) st[j].f += (double)t1[j];                             \
            break;                                                                                 \
        case CN_RED_PROD:                                                                          \
            for (int64_t j = 0; j < tw; j++) d1[j] = 1;                                            \
            ROWS_LOOP(d1[j] *= (double)v;)                                                         \
            for (int64_t j = 0; j < tw; j++) st[j].f *= d1[j];                                     \
            break;                                                                                 \
        case CN_RED_MAX:                                                                           \
        case CN_RED_LOGSUMEXP:                                                                     \
            for (int64_t j = 0; j < tw; j++) t1[j] = -(T)INFINITY;                                 \
            ROWS_LOOP(t1[j] = (v > t1[j] || v != v) ? v : t1[j];)                                  \
            if (p->kind == CN_RED_MAX) {                                                           \
                for (int64_t j = 0; j < tw; j++) st[j].f = nanmax(st[j].f, t1[j]);                 \
                break;                                                                             \
            }                                                                                      \
            /* A non-finite max needs no sum (lse_merge); shift by 0 to keep it quiet. */          \
            for (int64_t j = 0; j < tw; j++) {                                                     \
                t2[j] = isfinite(t1[j]) ? t1[j] : 0;                                               \
                t3[j] = 0;                                                                         \
            }                                                                                      \
            ROWS_LOOP(t3[j] += EXPF(v - t2[j]);)                                                   \
            for (int64_t j = 0; j < tw; j++) lse_merge(&st[j], t1[j], t3[j]);                      \
            break;                                                                                 \
        case CN_RED_MIN:                                                                           \
            for (int64_t j = 0; j < tw; j++) t1[j] = (T)INFINITY;                                  \
            ROWS_LOOP(t1[j] = (v < t1[j] || v != v) ? v : t1[j];)                                  \
            for (int64_t j = 0; j < tw; j++) st[j].f = nanmin(st[j].f, t1[j]);                     \
            break;                                                                                 \
        case CN_RED_VAR:                                                                           \
        case CN_RED_STD: {                                                                         \
            for (int64_t j = 0; j < tw; j++) t1[j] = 0;                                            \
            ROWS_LOOP(t1[j] += v;)                                                                 \
            for (int64_t j = 0; j < tw; j++) {                                                     \
                t1[j] = (T)((double)t1[j] / nrows);                                                \
                t2[j] = 0;                                                                         \
                t3[j] = 0;                                                                         \
            }                                                                                      \
            ROWS_LOOP(const T d = v - t1[j]; t2[j] += d; t3[j] += d * d;)                          \
            for (int64_t j = 0; j < tw; j++) {                                                     \
                double sd = t2[j], m2 = (double)t3[j] - sd * sd / nrows;                           \
                var_merge(&st[j], (double)t1[j] + sd / nrows, m2 < 0 ? 0 : m2, nrows);             \
            }                                                                                      \
            break;                                                                                 \
        }                                                                                          \
        case CN_RED_NORM: {                                                                        \
            const double q = p->param;                                                             \
            for (int64_t j = 0; j < tw; j++) d1[j] = 0;                                            \
            if (isinf(q)) {                                                                        \
                ROWS_LOOP(d1[j] = nanmax(d1[j], fabs((double)v));)                                 \
                for (int64_t j = 0; j < tw; j++) st[j].f = nanmax(st[j].f, d1[j]);                 \
                break;                                                                             \
            }                                                                                      \
            if (q == 2) {                                                                          \
                ROWS_LOOP(d1[j] += (double)v * (double)v;)                                         \
            } else if (q == 1) {                                                                   \
                ROWS_LOOP(d1[j] += fabs((double)v);)                                               \
            } else {                                                                               \
                ROWS_LOOP(d1[j] += pow(fabs((double)v), q);)                                       \
            }                                                                                      \
            for (int64_t j = 0; j < tw; j++) st[j].f += d1[j];                                     \
            break;                                                                                 \
        }                                                                                          \
        case CN_RED_ARGMAX:                                                                        \
        case CN_RED_ARGMIN: {                                                                      \
            const bool mx = p->kind == CN_RED_ARGMAX;                                              \
            const T *first = x + off[0];                                                           \
            for (int64_t j = 0; j < tw; j++) {                                                     \
                t1[j] = first[j * cs];                                                             \
                ix[j] = r0;                                                                        \
            }                                                                                      \
            for (int r = 1; r < nrows; r++) {                                                      \
                const T *row = x + off[r];                                                         \
                for (int64_t j = 0; j < tw; j++) {                                                 \
                    const T v = row[j * cs], b = t1[j];                                            \
                    bool better = b == b && (v != v || (mx ? v > b : v < b));                      \
                    t1[j] = better ? v : b;                                                        \
                    ix[j] = better ? r0 + r : ix[j];                                               \
                }                                                                                  \
            }                                                                                      \
            for (int64_t j = 0; j < tw; j++)                                                       \
                if (st[j].n < 0 || arg_better(p, t1[j], 0, st[j].f, 0)) {                          \
                    st[j].f = t1[j];                                                               \
                    st[j].n = ix[j];                                                               \
                }                                                                                  \
            break;                                                                                 \
        }                                                                                          \
        default: break;                                                                            \
        }                                                                                          \
    }

DEF_FLOAT_COL(float, f32, cn_vexpf)
DEF_FLOAT_COL(double, f64, exp)

CN_HOT_FN(col_i64,
          (const rplan *p, rstate *st, const char *xc, const int64_t *off, int nrows, int64_t r0,
           int64_t tw),
          (p, st, xc, off, nrows, r0, tw)) {
    typedef int64_t elem;
    const elem *x = (const elem *)xc;
    const int64_t cs = p->cin;
    uint64_t u[COL_TILE];
    int64_t t1[COL_TILE], ix[COL_TILE];
    switch (p->kind) {
    case CN_RED_SUM:
        for (int64_t j = 0; j < tw; j++) u[j] = 0;
        ROWS_LOOP(u[j] += (uint64_t)v;)
        for (int64_t j = 0; j < tw; j++) st[j].i = wadd(st[j].i, (int64_t)u[j]);
        break;
    case CN_RED_PROD:
        for (int64_t j = 0; j < tw; j++) u[j] = 1;
        ROWS_LOOP(u[j] *= (uint64_t)v;)
        for (int64_t j = 0; j < tw; j++) st[j].i = wmul(st[j].i, (int64_t)u[j]);
        break;
    case CN_RED_MAX:
        for (int64_t j = 0; j < tw; j++) t1[j] = INT64_MIN;
        ROWS_LOOP(t1[j] = v > t1[j] ? v : t1[j];)
        for (int64_t j = 0; j < tw; j++) st[j].i = t1[j] > st[j].i ? t1[j] : st[j].i;
        break;
    case CN_RED_MIN:
        for (int64_t j = 0; j < tw; j++) t1[j] = INT64_MAX;
        ROWS_LOOP(t1[j] = v < t1[j] ? v : t1[j];)
        for (int64_t j = 0; j < tw; j++) st[j].i = t1[j] < st[j].i ? t1[j] : st[j].i;
        break;
    case CN_RED_ARGMAX:
    case CN_RED_ARGMIN: {
        const bool mx = p->kind == CN_RED_ARGMAX;
        for (int64_t j = 0; j < tw; j++) {
            t1[j] = x[off[0] + j * cs];
            ix[j] = r0;
        }
        for (int r = 1; r < nrows; r++) {
            const elem *row = x + off[r];
            for (int64_t j = 0; j < tw; j++) {
                const elem v = row[j * cs];
                bool better = mx ? v > t1[j] : v < t1[j];
                t1[j] = better ? v : t1[j];
                ix[j] = better ? r0 + r : ix[j];
            }
        }
        for (int64_t j = 0; j < tw; j++)
            if (st[j].n < 0 || arg_better(p, 0, t1[j], 0, st[j].i)) {
                st[j].i = t1[j];
                st[j].n = ix[j];
            }
        break;
    }
    default: break;
    }
}

/* ---- blocks ---- */

/* Row mode: the partial state of the reduced elements [b0, b1) of the
 * output whose elements start at xb. Variance and logsumexp make two passes
 * over the block (it is in cache for the second): pass 0 sums (variance) or
 * takes the max (logsumexp), pass 1 folds deviations from c, the block's
 * mean or max. */
static void row_block(const rplan *p, const char *xb, int64_t b0, int64_t b1, rstate *st) {
    *st = state_init(p);
    const int64_t n0 = p->rshape[p->nr - 1], s0 = p->rin[p->nr - 1];
    const int64_t cnt = b1 - b0;
    bool var = p->kind == CN_RED_VAR || p->kind == CN_RED_STD;
    int passes = (var || p->kind == CN_RED_LOGSUMEXP) ? 2 : 1;
    double c = 0;
    for (int pass = 0; pass < passes; pass++) {
        if (pass == 1) {
            if (var) {
                c = st->f / (double)cnt;
                if (p->et == ET_F32) c = (float)c; /* the mean the f32 pass subtracts */
                st->f = 0;
            } else {
                if (!isfinite(st->f)) {
                    st->g = st->f > 0 ? 1 : 0;
                    break;
                }
                c = st->f;
            }
        }
        if (p->nr == 1) { /* the block is one piece of the row */
            p->seg(p, st, xb + b0 * s0 * (int64_t)p->es, cnt, s0, b0, pass, c);
            continue;
        }
        odo o;
        odo_seek(&o, p->nr - 1, p->rshape, p->rin, NULL, b0 / n0);
        int64_t j = b0 % n0;
        for (int64_t lin = b0; lin < b1;) {
            int64_t n = min64(n0 - j, b1 - lin);
            p->seg(p, st, xb + (o.o0 + j * s0) * (int64_t)p->es, n, s0, lin, pass, c);
            lin += n;
            j = 0;
            odo_next(&o);
        }
    }
    if (var) {
        double sd = st->f, m2 = st->g - sd * sd / (double)cnt;
        st->f = c + sd / (double)cnt;
        st->g = m2 < 0 ? 0 : m2;
        st->n = cnt;
    }
}

/* Column mode: the partial states of block b of the tile at xb. */
static void col_block(const rplan *p, const char *xb, int64_t tw, int64_t b, rstate *st) {
    rstate init = state_init(p);
    for (int64_t j = 0; j < tw; j++) st[j] = init;
    int64_t r0 = b * p->blk, r1 = min64(r0 + p->blk, p->len);
    odo o;
    odo_seek(&o, p->nr, p->rshape, p->rin, NULL, r0);
    int64_t off[COL_SUB];
    for (int64_t r = r0; r < r1; r += COL_SUB) {
        int nrows = (int)min64(COL_SUB, r1 - r);
        for (int k = 0; k < nrows; k++) {
            off[k] = o.o0;
            odo_next(&o);
        }
        p->col(p, st, xb, off, nrows, r, tw);
    }
}

/* ---- tasks: one output (row mode) or one tile of outputs (column mode) ---- */

typedef struct task_pos {
    const char *x;
    char *out;
    int64_t tw;
} task_pos;

static task_pos task_at(const rplan *p, int64_t t) {
    int64_t g = p->column ? t / p->ntiles : t, k = p->column ? t % p->ntiles : 0;
    odo o;
    odo_seek(&o, p->nk, p->kshape, p->kin, p->kout, g);
    int64_t xo = o.o0 + k * COL_TILE * p->cin, oo = o.o1 + k * COL_TILE * p->cout;
    task_pos tp = {p->x + xo * (int64_t)p->es, p->out + oo * (int64_t)p->oes,
                   p->column ? min64(COL_TILE, p->cw - k * COL_TILE) : 1};
    return tp;
}

static void block_partial(const rplan *p, task_pos tp, int64_t b, rstate *st) {
    if (p->column) {
        col_block(p, tp.x, tp.tw, b, st);
    } else {
        int64_t b0 = b * p->blk;
        row_block(p, tp.x, b0, min64(b0 + p->blk, p->len), st);
    }
}

typedef struct rjob {
    const rplan *p;
    rstate *parts; /* [task][block][tile]: block partials, or NULL to compute them in turn */
} rjob;

/* Fold the blocks of task t in order and store its outputs. */
static void fold_task(const rplan *p, int64_t t, task_pos tp, const rstate *parts) {
    rstate acc[COL_TILE], st[COL_TILE];
    rstate init = state_init(p);
    for (int64_t j = 0; j < tp.tw; j++) acc[j] = init;
    for (int64_t b = 0; b < p->nblocks; b++) {
        const rstate *pb = st;
        if (parts) pb = parts + (t * p->nblocks + b) * p->tw;
        else col_block(p, tp.x, tp.tw, b, st);
        for (int64_t j = 0; j < tp.tw; j++) state_merge(p, &acc[j], &pb[j]);
    }
    for (int64_t j = 0; j < tp.tw; j++)
        state_store(p, &acc[j], tp.out + j * p->cout * (int64_t)p->oes);
}

/* Row mode: the same fold for one output, without the tile's arrays
 * (outputs are many and often short here). */
static void fold_output(const rplan *p, int64_t t, const char *x, char *out, const rstate *parts) {
    rstate acc = state_init(p), st;
    for (int64_t b = 0; b < p->nblocks; b++) {
        const rstate *pb = &st;
        if (parts) {
            pb = parts + t * p->nblocks + b;
        } else {
            int64_t b0 = b * p->blk;
            row_block(p, x, b0, min64(b0 + p->blk, p->len), &st);
        }
        state_merge(p, &acc, pb);
    }
    state_store(p, &acc, out);
}

static void fold_range(void *ctx, int64_t t0, int64_t t1) {
    const rjob *jb = ctx;
    const rplan *p = jb->p;
    if (p->column) {
        for (int64_t t = t0; t < t1; t++) fold_task(p, t, task_at(p, t), jb->parts);
        return;
    }
    odo o;
    odo_seek(&o, p->nk, p->kshape, p->kin, p->kout, t0);
    for (int64_t t = t0; t < t1; t++, odo_next(&o))
        fold_output(p, t, p->x + o.o0 * (int64_t)p->es, p->out + o.o1 * (int64_t)p->oes,
                    jb->parts);
}

static void partial_range(void *ctx, int64_t i0, int64_t i1) {
    const rjob *jb = ctx;
    const rplan *p = jb->p;
    for (int64_t i = i0; i < i1; i++)
        block_partial(p, task_at(p, i / p->nblocks), i % p->nblocks, jb->parts + i * p->tw);
}

/* ---- planning ---- */

/* Sort dims by |stride| descending (stable: equal strides keep their order),
 * then merge neighbours that are laid out back to back in every stride set. */
static int sort_merge(int n, int64_t *shape, int64_t *s0, int64_t *s1) {
    for (int i = 1; i < n; i++) {
        for (int k = i; k > 0 && abs64(s0[k]) > abs64(s0[k - 1]); k--) {
            int64_t t = shape[k];
            shape[k] = shape[k - 1];
            shape[k - 1] = t;
            t = s0[k];
            s0[k] = s0[k - 1];
            s0[k - 1] = t;
            if (s1) {
                t = s1[k];
                s1[k] = s1[k - 1];
                s1[k - 1] = t;
            }
        }
    }
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m > 0 && s0[m - 1] == s0[i] * shape[i] && (!s1 || s1[m - 1] == s1[i] * shape[i])) {
            shape[m - 1] *= shape[i];
            s0[m - 1] = s0[i];
            if (s1) s1[m - 1] = s1[i];
            continue;
        }
        shape[m] = shape[i];
        s0[m] = s0[i];
        if (s1) s1[m] = s1[i];
        m++;
    }
    return m;
}

static void plan_init(rplan *p, cn_reduce_kind kind, cn_tensor *out, const cn_tensor *x,
                      const int64_t *axes, int naxes, double param) {
    memset(p, 0, sizeof *p);
    p->kind = kind;
    p->param = param;
    cn_dtype dt = (cn_dtype)x->dtype;
    p->et = dt == CN_F32 ? ET_F32 : dt == CN_F64 ? ET_F64 : ET_I64;
    p->es = cn_dsize(dt);
    p->odt = (cn_dtype)out->dtype;
    p->oes = cn_dsize(p->odt);
    p->x = cn_t_ptr(x);
    p->out = cn_t_ptr(out);
    p->seg = pick_seg(kind, p->et);
    p->col = p->et == ET_F32 ? col_f32 : p->et == ET_F64 ? col_f64 : col_i64;

    bool red[CN_MAX_DIMS] = {false};
    for (int i = 0; i < naxes; i++) red[axes[i]] = true;
    int64_t ostride[CN_MAX_DIMS], os = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        if (red[d]) continue;
        ostride[d] = os;
        os *= x->shape[d];
    }
    p->nout = p->len = 1;
    for (int d = 0; d < x->ndim; d++) {
        int64_t n = x->shape[d];
        if (red[d]) p->len *= n;
        else p->nout *= n;
        if (n == 1) continue;
        if (red[d]) {
            p->rshape[p->nr] = n;
            p->rin[p->nr++] = x->strides[d];
        } else {
            p->kshape[p->nk] = n;
            p->kin[p->nk] = x->strides[d];
            p->kout[p->nk++] = ostride[d];
        }
    }
    p->nk = sort_merge(p->nk, p->kshape, p->kin, p->kout);
    p->nr = sort_merge(p->nr, p->rshape, p->rin, NULL);
    bool none_reduced = p->nr == 0;
    if (none_reduced) { /* one element per output: a single row */
        p->rshape[0] = 1;
        p->rin[0] = 0;
        p->nr = 1;
    }
    /* Short rows cost more in per-output overhead than in arithmetic: they
     * too are better walked a tile of outputs at a time, strided loads and all. */
    p->column = p->nk > 0 && p->kshape[p->nk - 1] >= COL_MIN_WIDTH &&
                (none_reduced || p->len <= SHORT_ROW ||
                 abs64(p->kin[p->nk - 1]) < abs64(p->rin[p->nr - 1]));
    if (p->column) {
        p->nk--;
        p->cw = p->kshape[p->nk];
        p->cin = p->kin[p->nk];
        p->cout = p->kout[p->nk];
        p->tw = min64(p->cw, COL_TILE);
        p->ntiles = (p->cw + p->tw - 1) / p->tw;
        int64_t rows = (COL_BLOCK / p->tw + COL_SUB - 1) / COL_SUB * COL_SUB;
        p->blk = rows;
        p->ntasks = p->nout / p->cw * p->ntiles;
    } else {
        p->tw = 1;
        p->blk = ROW_BLOCK;
        p->ntasks = p->nout;
    }
    p->nblocks = (p->len + p->blk - 1) / p->blk;
}

int cn_cpu_reduce(const char *name, cn_reduce_kind kind, cn_tensor *out, const cn_tensor *x,
                  const int64_t *axes, int naxes, double param) {
    rplan p;
    plan_init(&p, kind, out, x, axes, naxes, param);
    if (p.nout == 0) return CN_OK;
    if (p.len == 0) { /* empty reductions: the identity, finished (NaN for mean/var) */
        rstate init = state_init(&p);
        for (int64_t i = 0; i < p.nout; i++) state_store(&p, &init, p.out + i * (int64_t)p.oes);
        return CN_OK;
    }
    rjob jb = {&p, NULL};
    int64_t work = p.len * p.tw; /* elements per task */
    bool few = p.ntasks < 4 * (int64_t)cn_get_num_threads();
    if (p.nblocks > 1 && few && !cn_in_parallel_region()) {
        /* Too few outputs to keep the threads busy: compute the blocks in
         * parallel, then fold them in order (the same bits as folding as we
         * go, which is also the way out if there is no memory for them). */
        jb.parts = cn_alloc((size_t)(p.ntasks * p.nblocks * p.tw) * sizeof *jb.parts);
        if (jb.parts) cn_parallel_for(p.ntasks * p.nblocks, 1, partial_range, &jb);
    }
    int64_t grain = work >= TASK_GRAIN || jb.parts ? 1 : TASK_GRAIN / work;
    cn_parallel_for(p.ntasks, grain, fold_range, &jb);
    cn_free(jb.parts); /* from the cache: a compiled step allocates nothing */
    return CN_OK;
}

/* ---- the op kernels (kernels.h) ---- */

cn_tensor *cn_cpu_widen_i64(cn_tensor *x) {
    if (cn_dtype_is_float((cn_dtype)x->dtype) || x->dtype == CN_I64) return cn_retain(x);
    cn_tensor *w = cn_t_empty(CN_I64, x->ndim, x->shape);
    if (!w) return NULL;
    if (cn_copy_strided(w, x) < 0) {
        cn_release(w);
        return NULL;
    }
    return w;
}

/* The kind of each reduction op (CN_RED_COUNT: not one). */
static cn_reduce_kind reduce_kind_of(cn_op_id id) {
    switch (id) {
    case CN_OP_sum:
    case CN_OP_sum_to: return CN_RED_SUM;
    case CN_OP_mean: return CN_RED_MEAN;
    case CN_OP_prod: return CN_RED_PROD;
    case CN_OP_max: return CN_RED_MAX;
    case CN_OP_min: return CN_RED_MIN;
    case CN_OP_var: return CN_RED_VAR;
    case CN_OP_std: return CN_RED_STD;
    case CN_OP_logsumexp: return CN_RED_LOGSUMEXP;
    case CN_OP_norm: return CN_RED_NORM;
    case CN_OP_argmax: return CN_RED_ARGMAX;
    case CN_OP_argmin: return CN_RED_ARGMIN;
    default: return CN_RED_COUNT;
    }
}

/* sum .. norm: list[0..nlist) = the axes (canonical: sorted, distinct),
 * f[0] = the correction (var, std) or p (norm). */
int cn_cpu_k_reduce(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                    cn_tensor *out) {
    (void)nin;
    cn_reduce_kind k = reduce_kind_of(id);
    if (k == CN_RED_COUNT || k == CN_RED_ARGMAX || k == CN_RED_ARGMIN)
        return cn_failc(CN_EINVAL, "%s: internal error: not a reduction over axes",
                        cn_op_names[id]);
    cn_tensor *x = cn_cpu_widen_i64(in[0]);
    if (!x) return CN_ENOMEM;
    int r = cn_cpu_reduce(cn_op_names[id], k, out, x, a->list, (int)a->nlist, a->f[0]);
    cn_release(x);
    return r;
}

/* argmax, argmin: i[1] = the axis (canonical), i[2] = 1 to pick over the
 * flattened tensor. */
int cn_cpu_k_arg(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                 cn_tensor *out) {
    (void)nin;
    cn_reduce_kind k = reduce_kind_of(id);
    if (k != CN_RED_ARGMAX && k != CN_RED_ARGMIN)
        return cn_failc(CN_EINVAL, "%s: internal error: not argmax or argmin", cn_op_names[id]);
    cn_tensor *w = cn_cpu_widen_i64(in[0]), *x = w;
    if (!w) return CN_ENOMEM;
    int64_t axis = a->i[1];
    if (a->i[2] && w->ndim > 0) {
        /* Positions count in row-major order: a contiguous copy seen as 1-D. */
        cn_tensor *c = cn_t_contiguous(w);
        x = c ? cn_t_alias(c) : NULL;
        cn_release(c);
        if (!x) {
            cn_release(w);
            return CN_ENOMEM;
        }
        x->shape[0] = cn_shape_numel(w->ndim, w->shape);
        x->strides[0] = 1;
        x->ndim = 1;
        axis = 0;
    }
    int r = cn_cpu_reduce(cn_op_names[id], k, out, x, &axis, x->ndim > 0, 0);
    if (x != w) cn_release(x);
    cn_release(w);
    return r;
}
