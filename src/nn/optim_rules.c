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
#include "optim.h"

#include <math.h>

/* This file is compiled with -fno-math-errno (CMakeLists.txt), so the
 * square roots vectorise. */

#define CN_ALWAYS_INLINE static inline __attribute__((always_inline))

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

void cn_opt_state_names(cn_opt_alg alg, const cn_opt_hyper *h,
                        const char *names[CN_OPT_MAXSTATE]) {
    for (int k = 0; k < CN_OPT_MAXSTATE; k++) names[k] = NULL;
    switch (alg) {
    case CN_OPT_SGD:
        if (h->momentum != 0) names[0] = "momentum_buffer";
        break;
    case CN_OPT_ADAM:
    case CN_OPT_ADAMW:
        names[0] = "exp_avg";
        names[1] = "exp_avg_sq";
        if (h->amsgrad) names[2] = "max_exp_avg_sq";
        break;
    case CN_OPT_RMSPROP:
        names[0] = "square_avg";
        if (h->momentum > 0) names[1] = "momentum_buffer";
        if (h->centered) names[2] = "grad_avg";
        break;
    case CN_OPT_ADAGRAD:
        names[0] = "sum";
        break;
    default: break;
    }
}

double cn_opt_state_init(cn_opt_alg alg, const cn_opt_hyper *h, int slot) {
    return alg == CN_OPT_ADAGRAD && slot == 0 ? h->initial_accumulator_value : 0.0;
}

void cn_opt_prepare(cn_opt_alg alg, const cn_opt_hyper *h, cn_dtype dt, int64_t t,
                    cn_opt_item *it) {
    int d = dt == CN_F64;
    double *c = it->c;
    c[0] = h->maximize ? -1.0 : 1.0;
    c[1] = h->weight_decay;
    unsigned wd = h->weight_decay != 0;
    switch (alg) {
    case CN_OPT_SGD: {
        unsigned mom = h->momentum != 0;
        unsigned f = wd | mom << 1 | (mom && t == 1) << 2 | (mom && h->nesterov) << 3;
        c[2] = h->momentum;
        c[3] = 1 - h->dampening;
        c[4] = -h->lr;
        it->fn = sgd_tab[d][f];
        break;
    }
    case CN_OPT_ADAM:
    case CN_OPT_ADAMW: {
        /* torch: step is a float; beta ** step is libm's pow. */
        double bc1 = 1 - pow(h->beta1, (double)t), bc2 = 1 - pow(h->beta2, (double)t);
        bool adamw = alg == CN_OPT_ADAMW;
        c[2] = adamw ? 1 - h->lr * h->weight_decay : 1.0;
        c[3] = h->beta1;
        c[4] = 1 - h->beta1;
        c[5] = h->beta2;
        c[6] = 1 - h->beta2;
        c[7] = sqrt(bc2);
        c[8] = h->eps;
        c[9] = -(h->lr / bc1);
        it->fn = adam_tab[d][(!adamw && wd) | (unsigned)h->amsgrad << 1];
        break;
    }
    case CN_OPT_RMSPROP: {
        c[2] = h->alpha;
        c[3] = 1 - h->alpha;
        c[4] = h->eps;
        c[5] = h->momentum;
        c[6] = -h->lr;
        it->fn = rmsprop_tab[d][wd | (unsigned)h->centered << 1 | (unsigned)(h->momentum > 0) << 2];
        break;
    }
    case CN_OPT_ADAGRAD: {
        c[2] = h->eps;
        c[3] = -(h->lr / (1 + (double)(t - 1) * h->lr_decay));
        it->fn = adagrad_tab[d][wd];
        break;
    }
    default: it->fn = NULL; break;
    }
}
