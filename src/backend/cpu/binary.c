/* Binary elementwise kernels: one row function per (op, dtype), run by the
 * elementwise iterator, which merges axes so that contiguous and simply
 * broadcast operands arrive as long rows with unit or zero strides. */
#include "binary.h"

#include "kernels.h"

#include "elem_math.h"
#include "iter.h"

#include <math.h>

/* ---- row functions ----
 * Each row gets its own loop for (contiguous, contiguous), (contiguous,
 * broadcast scalar) and (broadcast scalar, contiguous): with the strides
 * known to be 1 or 0 the compiler vectorises them. Everything else takes the
 * strided loop. The output is a fresh tensor, so it aliases no input. */
#define BINARY_ROW(NAME, TI, TO, EXPR)                                                             \
    CN_HOT_FN(NAME, (void *ctx, int64_t n, char **p, const int64_t *s), (ctx, n, p, s)) {          \
        (void)ctx;                                                                                 \
        TO *restrict o = (TO *)p[0];                                                               \
        const TI *restrict x = (const TI *)p[1];                                                   \
        const TI *restrict y = (const TI *)p[2];                                                   \
        if (s[0] == 1 && s[1] == 1 && s[2] == 1) {                                                 \
            for (int64_t i = 0; i < n; i++) {                                                      \
                const TI a = x[i], b = y[i];                                                       \
                o[i] = (TO)(EXPR);                                                                 \
            }                                                                                      \
        } else if (s[0] == 1 && s[1] == 1 && s[2] == 0) {                                          \
            const TI b = *y;                                                                       \
            for (int64_t i = 0; i < n; i++) {                                                      \
                const TI a = x[i];                                                                 \
                o[i] = (TO)(EXPR);                                                                 \
            }                                                                                      \
        } else if (s[0] == 1 && s[1] == 0 && s[2] == 1) {                                          \
            const TI a = *x;                                                                       \
            for (int64_t i = 0; i < n; i++) {                                                      \
                const TI b = y[i];                                                                 \
                o[i] = (TO)(EXPR);                                                                 \
            }                                                                                      \
        } else {                                                                                   \
            const int64_t so = s[0], sx = s[1], sy = s[2];                                         \
            for (int64_t i = 0; i < n; i++) {                                                      \
                const TI a = x[i * sx], b = y[i * sy];                                             \
                o[i * so] = (TO)(EXPR);                                                            \
            }                                                                                      \
        }                                                                                          \
    }

/* A row that reads only the first input (pow with a known scalar exponent). */
#define UNARY_ROW(NAME, T, EXPR)                                                                   \
    CN_HOT_FN(NAME, (void *ctx, int64_t n, char **p, const int64_t *s), (ctx, n, p, s)) {          \
        (void)ctx;                                                                                 \
        T *restrict o = (T *)p[0];                                                                 \
        const T *restrict x = (const T *)p[1];                                                     \
        if (s[0] == 1 && s[1] == 1) {                                                              \
            for (int64_t i = 0; i < n; i++) {                                                      \
                const T a = x[i];                                                                  \
                o[i] = (EXPR);                                                                     \
            }                                                                                      \
        } else {                                                                                   \
            const int64_t so = s[0], sx = s[1];                                                    \
            for (int64_t i = 0; i < n; i++) {                                                      \
                const T a = x[i * sx];                                                             \
                o[i * so] = (EXPR);                                                                \
            }                                                                                      \
        }                                                                                          \
    }

#define COMPARE_ROWS(SUF, T, V)                                                                    \
    BINARY_ROW(eq_##SUF, T, uint8_t, V(a) == V(b))                                                 \
    BINARY_ROW(ne_##SUF, T, uint8_t, V(a) != V(b))                                                 \
    BINARY_ROW(lt_##SUF, T, uint8_t, V(a) < V(b))                                                  \
    BINARY_ROW(le_##SUF, T, uint8_t, V(a) <= V(b))                                                 \
    BINARY_ROW(gt_##SUF, T, uint8_t, V(a) > V(b))                                                  \
    BINARY_ROW(ge_##SUF, T, uint8_t, V(a) >= V(b))

#define AS_IS(v) (v)
/* A bool byte other than 0 or 1 (from a borrowed buffer) still means true. */
#define TRUTH(v) ((v) != 0)

#define FLOAT_ROWS(SUF, T, POW)                                                                    \
    BINARY_ROW(add_##SUF, T, T, a + b)                                                             \
    BINARY_ROW(sub_##SUF, T, T, a - b)                                                             \
    BINARY_ROW(mul_##SUF, T, T, a * b)                                                             \
    BINARY_ROW(div_##SUF, T, T, a / b)                                                             \
    BINARY_ROW(pow_##SUF, T, T, POW(a, b))                                                         \
    BINARY_ROW(max_##SUF, T, T, FMAX(a, b))                                                        \
    BINARY_ROW(min_##SUF, T, T, FMIN(a, b))                                                        \
    COMPARE_ROWS(SUF, T, AS_IS)

/* Signed overflow is undefined in C: integers wrap through their unsigned
 * type (UT, at least as wide as int so u8 never promotes to signed int). */
#define INT_ROWS(SUF, T, UT)                                                                       \
    BINARY_ROW(add_##SUF, T, T, (UT)a + (UT)b)                                                     \
    BINARY_ROW(sub_##SUF, T, T, (UT)a - (UT)b)                                                     \
    BINARY_ROW(mul_##SUF, T, T, (UT)a * (UT)b)                                                     \
    BINARY_ROW(max_##SUF, T, T, b > a ? b : a)                                                     \
    BINARY_ROW(min_##SUF, T, T, b < a ? b : a)                                                     \
    COMPARE_ROWS(SUF, T, AS_IS)

FLOAT_ROWS(f32, float, powf)
FLOAT_ROWS(f64, double, pow)
INT_ROWS(i32, int32_t, uint32_t)
INT_ROWS(i64, int64_t, uint64_t)
INT_ROWS(u8, uint8_t, unsigned)
INT_ROWS(i8, int8_t, unsigned)

/* bool: add is or, mul is and (as in torch); sub and pow have no bool
 * meaning and are refused by inference. */
BINARY_ROW(add_b8, uint8_t, uint8_t, (a | b) != 0)
BINARY_ROW(mul_b8, uint8_t, uint8_t, (a != 0) & (b != 0))
BINARY_ROW(max_b8, uint8_t, uint8_t, (a | b) != 0)
BINARY_ROW(min_b8, uint8_t, uint8_t, (a != 0) & (b != 0))
COMPARE_ROWS(b8, uint8_t, TRUTH)

/* Integer powers by repeated squaring, wrapping like repeated multiplication
 * (mod 2^64, then truncated to the type). e >= 0 was checked beforehand. */
static inline uint64_t ipow_u64(uint64_t x, uint64_t e) {
    uint64_t r = 1;
    while (e) {
        if (e & 1) r *= x;
        x *= x;
        e >>= 1;
    }
    return r;
}

#define IPOW(T, UT) (T)(UT) ipow_u64((uint64_t)(int64_t)a, (uint64_t)b)
BINARY_ROW(pow_i32, int32_t, int32_t, IPOW(int32_t, uint32_t))
BINARY_ROW(pow_i64, int64_t, int64_t, IPOW(int64_t, uint64_t))
BINARY_ROW(pow_u8, uint8_t, uint8_t, IPOW(uint8_t, uint8_t))
BINARY_ROW(pow_i8, int8_t, int8_t, IPOW(int8_t, uint8_t))

/* pow with a scalar exponent that has a cheaper exact form. Each gives what
 * pow gives for every input, signed zeros, infinities and NaN included
 * (sqrt alone would turn -0 into -0 and -inf into NaN). */
UNARY_ROW(pow2_f32, float, a * a)
UNARY_ROW(pow2_f64, double, a * a)
UNARY_ROW(powm1_f32, float, 1.0f / a)
UNARY_ROW(powm1_f64, double, 1.0 / a)
UNARY_ROW(powh_f32, float, a == -INFINITY ? INFINITY : sqrtf(a) + 0.0f)
UNARY_ROW(powh_f64, double, a == -INFINITY ? INFINITY : sqrt(a) + 0.0)
UNARY_ROW(pow1_f32, float, a)
UNARY_ROW(pow1_f64, double, a)
UNARY_ROW(pow0_f32, float, ((void)a, 1.0f))
UNARY_ROW(pow0_f64, double, ((void)a, 1.0))

#define ROWS(OP)                                                                                   \
    {[CN_F32] = OP##_f32, [CN_F64] = OP##_f64, [CN_I32] = OP##_i32, [CN_I64] = OP##_i64,           \
     [CN_U8] = OP##_u8, [CN_I8] = OP##_i8}

/* Indexed by kind and the inputs' dtype; NULL: no kernel for that dtype. */
static const cn_row_fn row_table[CN_BIN_GE + 1][CN_DTYPE_COUNT] = {
    [CN_BIN_ADD] = {[CN_F32] = add_f32, [CN_F64] = add_f64, [CN_I32] = add_i32,
                    [CN_I64] = add_i64, [CN_U8] = add_u8, [CN_BOOL] = add_b8, [CN_I8] = add_i8},
    [CN_BIN_SUB] = ROWS(sub),
    [CN_BIN_MUL] = {[CN_F32] = mul_f32, [CN_F64] = mul_f64, [CN_I32] = mul_i32,
                    [CN_I64] = mul_i64, [CN_U8] = mul_u8, [CN_BOOL] = mul_b8, [CN_I8] = mul_i8},
    [CN_BIN_DIV] = {[CN_F32] = div_f32, [CN_F64] = div_f64},
    [CN_BIN_POW] = ROWS(pow),
    [CN_BIN_MAX] = {[CN_F32] = max_f32, [CN_F64] = max_f64, [CN_I32] = max_i32,
                    [CN_I64] = max_i64, [CN_U8] = max_u8, [CN_BOOL] = max_b8, [CN_I8] = max_i8},
    [CN_BIN_MIN] = {[CN_F32] = min_f32, [CN_F64] = min_f64, [CN_I32] = min_i32,
                    [CN_I64] = min_i64, [CN_U8] = min_u8, [CN_BOOL] = min_b8, [CN_I8] = min_i8},
#define CMP(K, OP)                                                                                 \
    [K] = {[CN_F32] = OP##_f32, [CN_F64] = OP##_f64, [CN_I32] = OP##_i32, [CN_I64] = OP##_i64,     \
           [CN_U8] = OP##_u8, [CN_BOOL] = OP##_b8, [CN_I8] = OP##_i8}
    CMP(CN_BIN_EQ, eq), CMP(CN_BIN_NE, ne), CMP(CN_BIN_LT, lt),
    CMP(CN_BIN_LE, le), CMP(CN_BIN_GT, gt), CMP(CN_BIN_GE, ge),
#undef CMP
};

/* ---- truth values: logic and where's condition, of any dtype ---- */

/* Rows are cut into blocks whose truth values fit on the stack. */
#define TRUTH_BLOCK 512

/* t[i] = (element i of a row of dtype dt with stride s) != 0. NaN is true;
 * -0.0 is false. */
static void truth_row(uint8_t *restrict t, const char *p, int64_t s, int64_t n, cn_dtype dt) {
#define TRUTH_LOOP(T, TEST)                                                                        \
    do {                                                                                           \
        const T *x = (const T *)p;                                                                 \
        if (s == 1)                                                                                \
            for (int64_t i = 0; i < n; i++) t[i] = TEST(x[i]);                                     \
        else                                                                                       \
            for (int64_t i = 0; i < n; i++) t[i] = TEST(x[i * s]);                                 \
    } while (0)
#define NONZERO(v) ((v) != 0)
#define HALF_NONZERO(v) (((v) & 0x7fffu) != 0)
    switch (dt) {
    case CN_F32: TRUTH_LOOP(float, NONZERO); break;
    case CN_F64: TRUTH_LOOP(double, NONZERO); break;
    case CN_F16:
    case CN_BF16: TRUTH_LOOP(uint16_t, HALF_NONZERO); break;
    case CN_I32: TRUTH_LOOP(int32_t, NONZERO); break;
    case CN_I64: TRUTH_LOOP(int64_t, NONZERO); break;
    default: TRUTH_LOOP(uint8_t, NONZERO); break;
    }
#undef TRUTH_LOOP
#undef NONZERO
#undef HALF_NONZERO
}

typedef struct logic_ctx {
    cn_binary_kind kind;
    cn_dtype da, db;
} logic_ctx;

CN_HOT_FN(logic_row, (void *ctx, int64_t n, char **p, const int64_t *s), (ctx, n, p, s)) {
    const logic_ctx *c = ctx;
    const int64_t ea = (int64_t)cn_dsize(c->da), eb = (int64_t)cn_dsize(c->db);
    uint8_t ta[TRUTH_BLOCK], tb[TRUTH_BLOCK];
    for (int64_t i0 = 0; i0 < n; i0 += TRUTH_BLOCK) {
        int64_t m = n - i0 < TRUTH_BLOCK ? n - i0 : TRUTH_BLOCK;
        truth_row(ta, p[1] + i0 * s[1] * ea, s[1], m, c->da);
        truth_row(tb, p[2] + i0 * s[2] * eb, s[2], m, c->db);
        uint8_t *o = (uint8_t *)p[0] + i0 * s[0];
        const int64_t so = s[0];
        switch (c->kind) {
        case CN_BIN_AND:
            for (int64_t i = 0; i < m; i++) o[i * so] = ta[i] & tb[i];
            break;
        case CN_BIN_OR:
            for (int64_t i = 0; i < m; i++) o[i * so] = ta[i] | tb[i];
            break;
        default:
            for (int64_t i = 0; i < m; i++) o[i * so] = ta[i] ^ tb[i];
            break;
        }
    }
}

typedef struct where_ctx {
    cn_dtype dc, dv; /* the condition's and the values' dtypes */
} where_ctx;

CN_HOT_FN(where_row, (void *ctx, int64_t n, char **p, const int64_t *s), (ctx, n, p, s)) {
    const where_ctx *c = ctx;
    const int64_t ec = (int64_t)cn_dsize(c->dc), ev = (int64_t)cn_dsize(c->dv);
    const bool unit = s[0] == 1 && s[2] == 1 && s[3] == 1;
    /* One side a broadcast scalar (relu's gradient: where(x <= 0, 0, g)). */
    const bool scalar_a = s[0] == 1 && s[2] == 0 && s[3] == 1;
    const bool scalar_b = s[0] == 1 && s[2] == 1 && s[3] == 0;
    uint8_t t[TRUTH_BLOCK];
    for (int64_t i0 = 0; i0 < n; i0 += TRUTH_BLOCK) {
        int64_t m = n - i0 < TRUTH_BLOCK ? n - i0 : TRUTH_BLOCK;
        truth_row(t, p[1] + i0 * s[1] * ec, s[1], m, c->dc);
        char *po = p[0] + i0 * s[0] * ev;
        const char *pa = p[2] + i0 * s[2] * ev, *pb = p[3] + i0 * s[3] * ev;
#define SELECT(T)                                                                                  \
    do {                                                                                           \
        T *restrict o = (T *)po;                                                                   \
        const T *x = (const T *)pa, *y = (const T *)pb;                                            \
        if (unit) {                                                                                \
            for (int64_t i = 0; i < m; i++) o[i] = t[i] ? x[i] : y[i];                             \
        } else if (scalar_a) {                                                                     \
            const T x0 = x[0];                                                                     \
            for (int64_t i = 0; i < m; i++) o[i] = t[i] ? x0 : y[i];                               \
        } else if (scalar_b) {                                                                     \
            const T y0 = y[0];                                                                     \
            for (int64_t i = 0; i < m; i++) o[i] = t[i] ? x[i] : y0;                               \
        } else {                                                                                   \
            for (int64_t i = 0; i < m; i++) o[i * s[0]] = t[i] ? x[i * s[2]] : y[i * s[3]];        \
        }                                                                                          \
    } while (0)
        /* Typed copies (not raw bytes) keep the accesses type-correct. */
        switch (c->dv) {
        case CN_F32: SELECT(float); break;
        case CN_F64: SELECT(double); break;
        case CN_F16:
        case CN_BF16: SELECT(uint16_t); break;
        case CN_I32: SELECT(int32_t); break;
        case CN_I64: SELECT(int64_t); break;
        default: SELECT(uint8_t); break;
        }
#undef SELECT
    }
}

/* ---- drivers ---- */

/* Elements per thread for ops that cost tens of cycles each (pow): worth
 * splitting far sooner than a memory-bound add. */
#define CN_GRAIN_COSTLY 4096

typedef struct range_job {
    const cn_iter *it;
    cn_row_fn fn;
    void *ctx;
} range_job;

static void range_chunk(void *p, int64_t b, int64_t e) {
    range_job *j = p;
    cn_iter_run_range(j->it, b, e, j->fn, j->ctx);
}

static void run_costly(const cn_iter *it, cn_row_fn fn, void *ctx) {
    range_job j = {it, fn, ctx};
    cn_parallel_for(it->numel, CN_GRAIN_COSTLY, range_chunk, &j);
}

typedef struct neg_scan {
    cn_dtype dt;
    bool negative;
} neg_scan;

static void neg_row(void *ctx, int64_t n, char **p, const int64_t *s) {
    neg_scan *c = ctx;
    for (int64_t i = 0; i < n && !c->negative; i++) {
        int64_t v = c->dt == CN_I32 ? ((const int32_t *)p[0])[i * s[0]]
                                    : ((const int64_t *)p[0])[i * s[0]];
        if (v < 0) c->negative = true;
    }
}

/* Does the integer tensor t hold a negative value? */
static bool has_negative(const cn_tensor *t) {
    if (t->dtype != CN_I32 && t->dtype != CN_I64) return false;
    cn_iter it;
    cn_iter_init(&it, (cn_tensor *)t, NULL, 0);
    neg_scan c = {(cn_dtype)t->dtype, false};
    cn_iter_run_range(&it, 0, it.numel, neg_row, &c);
    return c.negative;
}

/* A cheaper row for pow when b is one float value with an exact shortcut,
 * else NULL. */
static cn_row_fn pow_scalar_row(const cn_tensor *b) {
    if (cn_numel(b) != 1) return NULL;
    bool f32 = b->dtype == CN_F32;
    double e = f32 ? *(const float *)cn_t_ptr(b) : *(const double *)cn_t_ptr(b);
    if (e == 2) return f32 ? pow2_f32 : pow2_f64;
    if (e == 1) return f32 ? pow1_f32 : pow1_f64;
    if (e == 0) return f32 ? pow0_f32 : pow0_f64;
    if (e == -1) return f32 ? powm1_f32 : powm1_f64;
    if (e == 0.5) return f32 ? powh_f32 : powh_f64;
    return NULL;
}

int cn_cpu_binary(const char *name, cn_binary_kind kind, cn_tensor *out, const cn_tensor *a,
                  const cn_tensor *b) {
    cn_tensor *in[2] = {(cn_tensor *)a, (cn_tensor *)b};
    cn_iter it;
    if ((unsigned)kind >= CN_BIN_COUNT)
        return cn_failc(CN_EINVAL, "%s: internal error: no binary kind %d", name, (int)kind);
    if (kind >= CN_BIN_AND) {
        if (out->dtype != CN_BOOL)
            return cn_failc(CN_EINVAL, "%s: internal error: output is %s, not bool", name,
                            cn_dtype_name((cn_dtype)out->dtype));
        logic_ctx c = {kind, (cn_dtype)a->dtype, (cn_dtype)b->dtype};
        cn_iter_init(&it, out, in, 2);
        cn_iter_run(&it, logic_row, &c);
        return CN_OK;
    }
    cn_dtype dt = (cn_dtype)a->dtype;
    cn_dtype want = kind >= CN_BIN_EQ ? CN_BOOL : dt;
    if (b->dtype != dt || out->dtype != want)
        return cn_failc(CN_EINVAL, "%s: internal error: dtypes %s, %s -> %s", name,
                        cn_dtype_name(dt), cn_dtype_name((cn_dtype)b->dtype),
                        cn_dtype_name((cn_dtype)out->dtype));
    cn_row_fn fn = row_table[kind][dt];
    if (!fn)
        return cn_failc(CN_EUNSUPPORTED, "%s: not implemented for %s tensors", name,
                        cn_dtype_name(dt));
    cn_iter_init(&it, out, in, 2);
    if (kind == CN_BIN_POW) {
        if (!cn_dtype_is_float(dt)) {
            if (has_negative(b))
                return cn_failc(CN_EINVAL, "%s: integers to negative integer powers are not "
                                           "allowed", name);
        } else {
            cn_row_fn fast = pow_scalar_row(b);
            if (fast) {
                cn_iter_run(&it, fast, NULL);
                return CN_OK;
            }
        }
        run_costly(&it, fn, NULL);
        return CN_OK;
    }
    cn_iter_run(&it, fn, NULL);
    return CN_OK;
}

int cn_cpu_where(cn_tensor *out, const cn_tensor *cond, const cn_tensor *a, const cn_tensor *b) {
    if (a->dtype != out->dtype || b->dtype != out->dtype)
        return cn_failc(CN_EINVAL, "where: internal error: dtypes %s, %s -> %s",
                        cn_dtype_name((cn_dtype)a->dtype), cn_dtype_name((cn_dtype)b->dtype),
                        cn_dtype_name((cn_dtype)out->dtype));
    cn_tensor *in[3] = {(cn_tensor *)cond, (cn_tensor *)a, (cn_tensor *)b};
    cn_iter it;
    cn_iter_init(&it, out, in, 3);
    where_ctx c = {(cn_dtype)cond->dtype, (cn_dtype)out->dtype};
    cn_iter_run(&it, where_row, &c);
    return CN_OK;
}

/* ---- the op kernels (kernels.h) ---- */

/* The kind of each binary op (CN_BIN_COUNT: not one). */
static cn_binary_kind binary_kind_of(cn_op_id id) {
    switch (id) {
    case CN_OP_add: return CN_BIN_ADD;
    case CN_OP_sub: return CN_BIN_SUB;
    case CN_OP_mul: return CN_BIN_MUL;
    case CN_OP_div: return CN_BIN_DIV;
    case CN_OP_pow: return CN_BIN_POW;
    case CN_OP_maximum: return CN_BIN_MAX;
    case CN_OP_minimum: return CN_BIN_MIN;
    case CN_OP_eq: return CN_BIN_EQ;
    case CN_OP_ne: return CN_BIN_NE;
    case CN_OP_lt: return CN_BIN_LT;
    case CN_OP_le: return CN_BIN_LE;
    case CN_OP_gt: return CN_BIN_GT;
    case CN_OP_ge: return CN_BIN_GE;
    case CN_OP_logical_and: return CN_BIN_AND;
    case CN_OP_logical_or: return CN_BIN_OR;
    case CN_OP_logical_xor: return CN_BIN_XOR;
    default: return CN_BIN_COUNT;
    }
}

/* add .. logical_xor. */
int cn_cpu_k_binary(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                    cn_tensor *out) {
    (void)nin;
    (void)a;
    cn_binary_kind k = binary_kind_of(id);
    if (k == CN_BIN_COUNT)
        return cn_failc(CN_EINVAL, "%s: internal error: not a binary op", cn_op_names[id]);
    return cn_cpu_binary(cn_op_names[id], k, out, in[0], in[1]);
}

int cn_cpu_k_where(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                   cn_tensor *out) {
    (void)id;
    (void)nin;
    (void)a;
    return cn_cpu_where(out, in[0], in[1], in[2]);
}
