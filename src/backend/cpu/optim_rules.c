/* The optimisers' update rules: one pass over contiguous parameter,
 * gradient and state elements per step, each element updated on its own,
 * so any split into chunks (any thread count) gives the same bits.
 *
 * Each rule follows torch.optim's single-tensor code (PyTorch 1.13)
 * operation by operation, in the parameter's dtype, with the scalars
 * computed in double and rounded to that dtype as PyTorch's kernels do. The
 * rule is written once with its options as bits; a kernel is generated for
 * every combination, so the options are constants inside each loop and the
 * compiler vectorises it. */
#include "../backend.h"
#include "kernels.h"

#include <math.h>
#include <stdlib.h>

/* This file is compiled with -fno-math-errno (CMakeLists.txt), so the
 * square roots vectorise. */

#define CN_ALWAYS_INLINE static inline __attribute__((always_inline))

/* One run of elements updated with the same constants. */
typedef struct cn_opt_item cn_opt_item;
typedef void (*cn_opt_kernel)(const cn_opt_item *it, int64_t begin, int64_t end);
struct cn_opt_item {
    cn_opt_kernel fn;
    void *p;
    const void *g;
    void *s[CN_OPT_MAXSTATE];
    int64_t n;
    double c[12];
};

/* ---- SGD ----
 * c: sign (-1 to maximise), weight_decay, momentum, 1 - dampening, -lr.
 * bits: 1 weight decay, 2 momentum, 4 first step (the buffer starts as the
 * gradient), 8 nesterov. s[0]: momentum buffer. */
#define SGD_BODY(T)                                                                                \
    CN_ALWAYS_INLINE void sgd_body_##T(const cn_opt_item *it, int64_t b, int64_t e, unsigned f) { \
        T *restrict p = (T *)it->p;                                                                \
        const T *restrict g = (const T *)it->g;                                                    \
        T *restrict buf = (T *)it->s[0];                                                           \
        const T sgn = (T)it->c[0], wd = (T)it->c[1], mom = (T)it->c[2], omd = (T)it->c[3],         \
                nlr = (T)it->c[4];                                                                 \
        for (int64_t i = b; i < e; i++) {                                                          \
            T d = sgn * g[i];                                                                      \
            if (f & 1) d = d + wd * p[i];                                                          \
            if (f & 2) {                                                                           \
                T m = (f & 4) ? d : buf[i] * mom + omd * d;                                        \
                buf[i] = m;                                                                        \
                d = (f & 8) ? d + mom * m : m;                                                     \
            }                                                                                      \
            p[i] = p[i] + nlr * d;                                                                 \
        }                                                                                          \
    }

/* ---- Adam and AdamW ----
 * c: sign, weight_decay (Adam's, added to the gradient), decay (AdamW's
 * 1 - lr * weight_decay, else 1), beta1, 1 - beta1, beta2, 1 - beta2,
 * sqrt(1 - beta2^t), eps, -lr / (1 - beta1^t).
 * bits: 1 Adam's weight decay, 2 amsgrad. s: exp_avg, exp_avg_sq,
 * max_exp_avg_sq. */
#define ADAM_BODY(T, SQRT)                                                                         \
    CN_ALWAYS_INLINE void adam_body_##T(const cn_opt_item *it, int64_t b, int64_t e, unsigned f) { \
        T *restrict p = (T *)it->p;                                                                \
        const T *restrict g = (const T *)it->g;                                                    \
        T *restrict m_ = (T *)it->s[0], *restrict v_ = (T *)it->s[1];                              \
        T *restrict vmax = (T *)it->s[2];                                                          \
        const T sgn = (T)it->c[0], wd = (T)it->c[1], decay = (T)it->c[2], b1 = (T)it->c[3],        \
                omb1 = (T)it->c[4], b2 = (T)it->c[5], omb2 = (T)it->c[6], bc2s = (T)it->c[7],      \
                eps = (T)it->c[8], nss = (T)it->c[9];                                              \
        for (int64_t i = b; i < e; i++) {                                                          \
            T gi = sgn * g[i];                                                                     \
            T pi = p[i];                                                                           \
            if (f & 1) gi = gi + wd * pi;                                                          \
            pi = pi * decay;                                                                       \
            T m = m_[i] * b1 + omb1 * gi;                                                          \
            T v = v_[i] * b2 + omb2 * gi * gi;                                                     \
            m_[i] = m;                                                                             \
            v_[i] = v;                                                                             \
            if (f & 2) { /* torch.maximum: a NaN wins */                                           \
                T vm = vmax[i];                                                                    \
                v = ((vm > v) | (vm != vm)) ? vm : v;                                              \
                vmax[i] = v;                                                                       \
            }                                                                                      \
            T den = SQRT(v) / bc2s + eps;                                                          \
            p[i] = pi + nss * (m / den);                                                           \
        }                                                                                          \
    }

/* ---- RMSprop ----
 * c: sign, weight_decay, alpha, 1 - alpha, eps, momentum, -lr.
 * bits: 1 weight decay, 2 centered, 4 momentum. s: square_avg,
 * momentum_buffer, grad_avg. */
#define RMSPROP_BODY(T, SQRT)                                                                      \
    CN_ALWAYS_INLINE void rmsprop_body_##T(const cn_opt_item *it, int64_t b, int64_t e,            \
                                           unsigned f) {                                           \
        T *restrict p = (T *)it->p;                                                                \
        const T *restrict g = (const T *)it->g;                                                    \
        T *restrict sq_ = (T *)it->s[0], *restrict buf = (T *)it->s[1];                            \
        T *restrict ga_ = (T *)it->s[2];                                                           \
        const T sgn = (T)it->c[0], wd = (T)it->c[1], alpha = (T)it->c[2], oma = (T)it->c[3],       \
                eps = (T)it->c[4], mom = (T)it->c[5], nlr = (T)it->c[6], neg1 = (T)-1;             \
        for (int64_t i = b; i < e; i++) {                                                          \
            T gi = sgn * g[i];                                                                     \
            if (f & 1) gi = gi + wd * p[i];                                                        \
            T sq = sq_[i] * alpha + oma * gi * gi;                                                 \
            sq_[i] = sq;                                                                           \
            T avg;                                                                                 \
            if (f & 2) {                                                                           \
                T ga = ga_[i] * alpha + oma * gi;                                                  \
                ga_[i] = ga;                                                                       \
                avg = SQRT(sq + neg1 * ga * ga);                                                   \
            } else {                                                                               \
                avg = SQRT(sq);                                                                    \
            }                                                                                      \
            avg = avg + eps;                                                                       \
            if (f & 4) {                                                                           \
                T bb = buf[i] * mom + gi / avg;                                                    \
                buf[i] = bb;                                                                       \
                p[i] = p[i] + nlr * bb;                                                            \
            } else {                                                                               \
                p[i] = p[i] + nlr * (gi / avg);                                                    \
            }                                                                                      \
        }                                                                                          \
    }

/* ---- Adagrad ----
 * c: sign, weight_decay, eps, -lr / (1 + (t - 1) lr_decay).
 * bits: 1 weight decay. s[0]: the sum of squares. */
#define ADAGRAD_BODY(T, SQRT)                                                                      \
    CN_ALWAYS_INLINE void adagrad_body_##T(const cn_opt_item *it, int64_t b, int64_t e,            \
                                           unsigned f) {                                           \
        T *restrict p = (T *)it->p;                                                                \
        const T *restrict g = (const T *)it->g;                                                    \
        T *restrict s_ = (T *)it->s[0];                                                            \
        const T sgn = (T)it->c[0], wd = (T)it->c[1], eps = (T)it->c[2], nclr = (T)it->c[3];        \
        for (int64_t i = b; i < e; i++) {                                                          \
            T gi = sgn * g[i];                                                                     \
            if (f & 1) gi = gi + wd * p[i];                                                        \
            T s = s_[i] + gi * gi;                                                                 \
            s_[i] = s;                                                                             \
            T sd = SQRT(s) + eps;                                                                  \
            p[i] = p[i] + nclr * (gi / sd);                                                        \
        }                                                                                          \
    }

SGD_BODY(float)
SGD_BODY(double)
ADAM_BODY(float, sqrtf)
ADAM_BODY(double, sqrt)
RMSPROP_BODY(float, sqrtf)
RMSPROP_BODY(double, sqrt)
ADAGRAD_BODY(float, sqrtf)
ADAGRAD_BODY(double, sqrt)

/* One kernel per (rule, dtype, option bits), and tables of them. */
#define KERNEL(R, T, F)                                                                            \
    CN_HOT_FN(R##_##T##_##F, (const cn_opt_item *it, int64_t b, int64_t e), (it, b, e)) {          \
        R##_body_##T(it, b, e, F##u);                                                              \
    }
#define KERNELS2(R, T) KERNEL(R, T, 0) KERNEL(R, T, 1)
#define KERNELS4(R, T) KERNELS2(R, T) KERNEL(R, T, 2) KERNEL(R, T, 3)
#define KERNELS8(R, T)                                                                             \
    KERNELS4(R, T) KERNEL(R, T, 4) KERNEL(R, T, 5) KERNEL(R, T, 6) KERNEL(R, T, 7)
#define KERNELS16(R, T)                                                                            \
    KERNELS8(R, T) KERNEL(R, T, 8) KERNEL(R, T, 9) KERNEL(R, T, 10) KERNEL(R, T, 11)               \
        KERNEL(R, T, 12) KERNEL(R, T, 13) KERNEL(R, T, 14) KERNEL(R, T, 15)
#define TAB2(R, T) R##_##T##_0, R##_##T##_1
#define TAB4(R, T) TAB2(R, T), R##_##T##_2, R##_##T##_3
#define TAB8(R, T) TAB4(R, T), R##_##T##_4, R##_##T##_5, R##_##T##_6, R##_##T##_7
#define TAB16(R, T)                                                                                \
    TAB8(R, T), R##_##T##_8, R##_##T##_9, R##_##T##_10, R##_##T##_11, R##_##T##_12,                \
        R##_##T##_13, R##_##T##_14, R##_##T##_15

KERNELS16(sgd, float)
KERNELS16(sgd, double)
KERNELS4(adam, float)
KERNELS4(adam, double)
KERNELS8(rmsprop, float)
KERNELS8(rmsprop, double)
KERNELS2(adagrad, float)
KERNELS2(adagrad, double)

static const cn_opt_kernel sgd_tab[2][16] = {{TAB16(sgd, float)}, {TAB16(sgd, double)}};
static const cn_opt_kernel adam_tab[2][4] = {{TAB4(adam, float)}, {TAB4(adam, double)}};
static const cn_opt_kernel rmsprop_tab[2][8] = {{TAB8(rmsprop, float)}, {TAB8(rmsprop, double)}};
static const cn_opt_kernel adagrad_tab[2][2] = {{TAB2(adagrad, float)}, {TAB2(adagrad, double)}};


/* Updates run in fixed chunks of this many elements on the pool: any
 * thread count gives the same bits (every element is updated on its own). */
#define CN_OPT_CHUNK 16384

typedef struct run_ctx {
    const cn_opt_item *items;
    const int64_t *start; /* nitems + 1 prefix sums of the items' sizes */
    int nitems;
    int64_t total;
} run_ctx;

static void run_task(void *ctx, int64_t t0, int64_t t1) {
    const run_ctx *r = ctx;
    for (int64_t t = t0; t < t1; t++) {
        int64_t lo = t * CN_OPT_CHUNK;
        int64_t hi = lo + CN_OPT_CHUNK < r->total ? lo + CN_OPT_CHUNK : r->total;
        /* The first item that ends after lo. */
        int a = 0, b = r->nitems - 1;
        while (a < b) {
            int m = (a + b) / 2;
            if (r->start[m + 1] > lo) b = m;
            else a = m + 1;
        }
        for (int i = a; i < r->nitems && r->start[i] < hi; i++) {
            int64_t s = r->start[i], e = r->start[i + 1];
            int64_t bb = (lo > s ? lo : s) - s, ee = (hi < e ? hi : e) - s;
            if (ee > bb) r->items[i].fn(&r->items[i], bb, ee);
        }
    }
}

static cn_opt_kernel pick(const cn_optim_update *u) {
    int d = u->dtype == CN_F64;
    switch (u->alg) {
    case CN_OPT_SGD: return u->bits < 16 ? sgd_tab[d][u->bits] : NULL;
    case CN_OPT_ADAM:
    case CN_OPT_ADAMW: return u->bits < 4 ? adam_tab[d][u->bits] : NULL;
    case CN_OPT_RMSPROP: return u->bits < 8 ? rmsprop_tab[d][u->bits] : NULL;
    case CN_OPT_ADAGRAD: return u->bits < 2 ? adagrad_tab[d][u->bits] : NULL;
    default: return NULL;
    }
}

static void *at(cn_storage *s, int64_t off, size_t es) {
    return s ? (char *)s->data + (size_t)off * es : NULL;
}

int cn_cpu_optim_update(const cn_optim_update *u, int n) {
    enum { INLINE = 16 };
    cn_opt_item ibuf[INLINE];
    int64_t sbuf[INLINE + 1];
    cn_opt_item *items = n > INLINE ? malloc(sizeof *items * (size_t)n) : ibuf;
    int64_t *start = n > INLINE ? malloc(sizeof *start * ((size_t)n + 1)) : sbuf;
    if (!items || !start) {
        if (items != ibuf) free(items);
        if (start != sbuf) free(start);
        return cn_failc(CN_ENOMEM, "optimizer_step: out of memory");
    }
    start[0] = 0;
    for (int i = 0; i < n; i++) {
        const cn_optim_update *x = &u[i];
        cn_opt_item *it = &items[i];
        size_t es = cn_dsize(x->dtype);
        it->fn = (x->dtype == CN_F32 || x->dtype == CN_F64) ? pick(x) : NULL;
        if (!it->fn) {
            if (items != ibuf) free(items);
            if (start != sbuf) free(start);
            return cn_failc(CN_EINVAL, "optimizer_step: no update loop for rule %d, options %u, %s",
                            (int)x->alg, x->bits, cn_dtype_name(x->dtype));
        }
        it->p = at(x->p, x->p_off, es);
        it->g = at(x->g, x->g_off, es);
        for (int k = 0; k < CN_OPT_MAXSTATE; k++) it->s[k] = at(x->s[k], x->s_off[k], es);
        it->n = x->n;
        memcpy(it->c, x->c, sizeof it->c);
        start[i + 1] = start[i] + x->n;
    }
    run_ctx r = {items, start, n, start[n]};
    if (r.total > 0)
        cn_parallel_tasks((r.total + CN_OPT_CHUNK - 1) / CN_OPT_CHUNK, run_task, &r);
    if (items != ibuf) free(items);
    if (start != sbuf) free(start);
    return CN_OK;
}
