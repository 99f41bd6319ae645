/* One variant of the register machine's loop (fused_regs.h), included by
 * fused_regs_variant.h once per dtype with:
 *   FR_NAME  the function's name       FR_ATTR  its target attribute (or nothing)
 *   FR_ET    the element type          FR_VB    bytes per vector register
 *   FR_ITE   the same-size integer type, for masks and bitwise selects
 *   FR_P0/FR_P1  the op's parameters in FR_ET (from cn_fk_params)
 *   FR_NV    vector variables in the accumulator
 * Every loop over the accumulator's variables is unrolled, so they stay in
 * registers. Where the accumulator is smaller than a group (32- and
 * 16-byte vectors), the code runs once per part of the group; a part is
 * computed from the same part of every operand, so the passes do not see
 * each other. */

#define FR_PASS (FR_VB * FR_NV) /* bytes */
#define FR_GE (FR_PASS / (int64_t)sizeof(FR_ET))

typedef FR_ET FR_CAT(FR_NAME, _vt) __attribute__((vector_size(FR_VB)));
typedef FR_ITE FR_CAT(FR_NAME, _it) __attribute__((vector_size(FR_VB)));
/* The same, at any address (groups are not aligned to the vector size). */
typedef FR_ET FR_CAT(FR_NAME, _ut) __attribute__((vector_size(FR_VB), aligned(1), may_alias));
#define VT FR_CAT(FR_NAME, _vt)
#define IT FR_CAT(FR_NAME, _it)
#define UT FR_CAT(FR_NAME, _ut)
#define FR_LD(p, j) (*(const UT *)((p) + (j) * FR_VB))
#define FR_ST(p, j, v) (*(UT *)((p) + (j) * FR_VB) = (v))
#define FR_SEL(m, a, b) ((VT)(((IT)(a) & (IT)(m)) | ((IT)(b) & ~(IT)(m))))
#define FR_MASK(m) ((VT)((IT)(m) & (IT)one))
#define FR_CLAMP(a, lo, hi) FR_SEL(FR_SEL(a < lo, lo, a) > hi, hi, FR_SEL(a < lo, lo, a))
/* A parameter in every lane: v - 0 is v for every v, where 0 + v would
 * turn -0 into +0. */
#define FR_SPLAT(v) ((v) - zero)

/* One pass: the code over the part of the group at byte offset off, into
 * out + off; CALLs compute n_call elements. */
FR_ATTR static inline __attribute__((always_inline)) void
FR_CAT(FR_NAME, _pass)(const cn_fr_code *code, int ncode, char *const *ptr, int64_t off,
                       int64_t n_call, char *out) {
    _Alignas(64) FR_ET s_in[FR_GE], s_out[FR_GE];
    const VT zero = {0};
    const VT one = zero + (FR_ET)1;
    const IT sign = (IT)(-zero);
    VT A[FR_NV];
    FR_EACH(j) A[j] = zero;
    for (int k = 0; k < ncode; k++) {
        const cn_fr_code *c = &code[k];
        switch (c->op) {
        case CN_FR_LOAD: {
            const char *p = ptr[c->arg[0]] + off;
            FR_EACH(j) A[j] = FR_LD(p, j);
            break;
        }
        case CN_FR_STORE: {
            char *p = ptr[c->arg[0]] + off;
            FR_EACH(j) FR_ST(p, j, A[j]);
            break;
        }
        case CN_FR_CALL: {
            const void *x[3];
            FR_EACH(j) FR_ST((char *)s_in, j, A[j]);
            for (int q = 0; q < 3; q++)
                x[q] = q == c->accpos ? (const void *)s_in
                       : c->arg[q] >= 0 ? (const void *)(ptr[c->arg[q]] + off)
                                        : NULL;
            c->fn(n_call, s_out, x[0], x[1], x[2], &c->p);
            FR_EACH(j) A[j] = FR_LD((const char *)s_out, j);
            break;
        }
        case CN_FR_COPY: break;
#define FR_UN(OPC, E)                                                                              \
    case OPC: {                                                                                    \
        FR_EACH(j) {                                                                               \
            const VT a = A[j];                                                                     \
            A[j] = (E);                                                                            \
        }                                                                                          \
        break;                                                                                     \
    }
        FR_UN(CN_FR_NEG, -a)
        FR_UN(CN_FR_ABS, (VT)((IT)a & ~sign))
        FR_UN(CN_FR_SIGN,
              FR_SEL(a != a, a, FR_SEL(a > zero, one, FR_SEL(a < zero, -one, zero))))
        FR_UN(CN_FR_SQUARE, a * a)
        FR_UN(CN_FR_RECIPROCAL, one / a)
        FR_UN(CN_FR_RELU, FR_SEL(a < zero, zero, a))
        FR_UN(CN_FR_LEAKY_RELU, FR_SEL(a > zero, a, a * (FR_P0(c))))
        FR_UN(CN_FR_CLAMP, FR_CLAMP(a, FR_SPLAT(FR_P0(c)), FR_SPLAT(FR_P1(c))))
        /* max(x, y) = y > x or y NaN ? y : x, and min likewise, with the
         * operand that is not acc the constant c, never NaN. */
        FR_UN(CN_FR_MAX_C0, FR_SEL(FR_SPLAT(FR_P0(c)) > a, FR_SPLAT(FR_P0(c)), a))
        FR_UN(CN_FR_MAX_C1, FR_SEL(a <= FR_SPLAT(FR_P0(c)), FR_SPLAT(FR_P0(c)), a))
        FR_UN(CN_FR_MIN_C0, FR_SEL(FR_SPLAT(FR_P0(c)) < a, FR_SPLAT(FR_P0(c)), a))
        FR_UN(CN_FR_MIN_C1, FR_SEL(a >= FR_SPLAT(FR_P0(c)), FR_SPLAT(FR_P0(c)), a))
        FR_UN(CN_FR_NOT, FR_MASK(a == zero))
        FR_UN(CN_FR_TRUTH, FR_MASK(a != zero))
#undef FR_UN
#define FR_BIN(OPC, E)                                                                             \
    case OPC: {                                                                                    \
        const char *p = ptr[c->arg[1 - c->accpos]] + off;                                          \
        if (c->accpos == 0) {                                                                      \
            FR_EACH(j) {                                                                           \
                const VT x = A[j], y = FR_LD(p, j);                                                \
                A[j] = (E);                                                                        \
            }                                                                                      \
        } else {                                                                                   \
            FR_EACH(j) {                                                                           \
                const VT x = FR_LD(p, j), y = A[j];                                                \
                A[j] = (E);                                                                        \
            }                                                                                      \
        }                                                                                          \
        break;                                                                                     \
    }
        FR_BIN(CN_FR_ADD, x + y)
        FR_BIN(CN_FR_SUB, x - y)
        FR_BIN(CN_FR_MUL, x * y)
        FR_BIN(CN_FR_DIV, x / y)
        FR_BIN(CN_FR_MAX, FR_SEL((y > x) | (y != y), y, x))
        FR_BIN(CN_FR_MIN, FR_SEL((y < x) | (y != y), y, x))
        FR_BIN(CN_FR_EQ, FR_MASK(x == y))
        FR_BIN(CN_FR_NE, FR_MASK(x != y))
        FR_BIN(CN_FR_LT, FR_MASK(x < y))
        FR_BIN(CN_FR_LE, FR_MASK(x <= y))
        FR_BIN(CN_FR_GT, FR_MASK(x > y))
        FR_BIN(CN_FR_GE, FR_MASK(x >= y))
        FR_BIN(CN_FR_AND, FR_MASK((x != zero) & (y != zero)))
        FR_BIN(CN_FR_OR, FR_MASK((x != zero) | (y != zero)))
        FR_BIN(CN_FR_XOR, FR_MASK((x != zero) ^ (y != zero)))
#undef FR_BIN
        case CN_FR_WHERE: {
            const char *p[3];
            for (int q = 0; q < 3; q++) p[q] = q == c->accpos ? NULL : ptr[c->arg[q]] + off;
            if (c->accpos == 0) {
                FR_EACH(j) A[j] = FR_SEL(A[j] != zero, FR_LD(p[1], j), FR_LD(p[2], j));
            } else if (c->accpos == 1) {
                FR_EACH(j) A[j] = FR_SEL(FR_LD(p[0], j) != zero, A[j], FR_LD(p[2], j));
            } else {
                FR_EACH(j) A[j] = FR_SEL(FR_LD(p[0], j) != zero, FR_LD(p[1], j), A[j]);
            }
            break;
        }
        default: break;
        }
    }
    FR_EACH(j) FR_ST(out + off, j, A[j]);
}

FR_ATTR static void FR_NAME(const cn_fr_code *code, int ncode, char **ptr, const int16_t *adv,
                            int nadv, int64_t ngroups, int64_t last_n, char *out) {
    const int64_t es = (int64_t)sizeof(FR_ET), group_n = CN_FR_GROUP_BYTES / es;
    for (int64_t g = 0; g < ngroups; g++) {
        const int64_t n_g = g == ngroups - 1 ? last_n : group_n;
        /* Passes past the elements that matter are skipped, and CALLs
         * compute only those (a small tensor's one partial group would
         * otherwise pay for a whole group of exp). */
        for (int64_t off = 0; off < CN_FR_GROUP_BYTES && off / es < n_g; off += FR_PASS)
            FR_CAT(FR_NAME, _pass)(code, ncode, ptr, off,
                                   n_g - off / es < FR_GE ? n_g - off / es : FR_GE, out);
        out += CN_FR_GROUP_BYTES;
        for (int i = 0; i < nadv; i++) ptr[adv[i]] += CN_FR_GROUP_BYTES;
    }
}

#undef VT
#undef IT
#undef UT
#undef FR_LD
#undef FR_ST
#undef FR_SEL
#undef FR_MASK
#undef FR_CLAMP
#undef FR_SPLAT
#undef FR_PASS
#undef FR_GE
