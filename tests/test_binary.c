/* Binary elementwise ops: every op against a naive double reference over
 * random broadcast shapes and every layout, type promotion, NaN and signed
 * zeros, integer wrap-around, pow's special cases, where, the scalar forms,
 * user errors, and identical results at 1 and 2 threads. */
#include "harness.h"

enum { ADD, SUB, MUL, DIV, POW, MAX, MIN, EQ, NE, LT, LE, GT, GE, AND, OR, XOR, NKINDS };

typedef cn_tensor *(*bin_fn)(cn_tensor *, cn_tensor *);

static const bin_fn fns[NKINDS] = {cn_add, cn_sub, cn_mul, cn_div, cn_pow, cn_maximum,
                                   cn_minimum, cn_eq, cn_ne, cn_lt, cn_le, cn_gt,
                                   cn_ge, cn_logical_and, cn_logical_or, cn_logical_xor};
static const char *const names[NKINDS] = {"add", "sub", "mul", "div", "pow", "maximum",
                                          "minimum", "eq", "ne", "lt", "le", "gt",
                                          "ge", "logical_and", "logical_or", "logical_xor"};

static const cn_dtype all_dtypes[] = {CN_F32, CN_F64, CN_F16, CN_BF16,
                                      CN_I32, CN_I64, CN_U8,  CN_BOOL};

static bool is_float(cn_dtype dt) { return cn_dtype_is_float(dt); }

/* ---- the reference ---- */

/* A double result stored as dt (the kernel's rounding or wrap-around). */
static double store_as(cn_dtype dt, double r) {
    switch (dt) {
    case CN_F32: return (float)r;
    case CN_F64: return r;
    case CN_F16: return cn_f16_to_f32(cn_f32_to_f16((float)r));
    case CN_BF16: return cn_bf16_to_f32(cn_f32_to_bf16((float)r));
    case CN_I32: return (double)(int32_t)(uint32_t)(uint64_t)(int64_t)r;
    case CN_I64: return r;
    case CN_U8: return (double)(uint8_t)(int64_t)r;
    default: return r != 0;
    }
}

/* An input value as the op sees it after promotion to dt (halves compute in
 * f32). */
static double as_input(cn_dtype dt, double v) {
    if (dt == CN_F64) return v;
    if (is_float(dt)) return (float)v;
    if (dt == CN_BOOL) return v != 0;
    return v;
}

static double ref_op(int k, cn_dtype dt, double a, double b) {
    a = as_input(dt, a);
    b = as_input(dt, b);
    switch (k) {
    case ADD: return store_as(dt, a + b);
    case SUB: return store_as(dt, a - b);
    case MUL: return store_as(dt, a * b);
    case DIV: return store_as(dt, a / b);
    case POW:
        if (!is_float(dt)) {
            double r = 1;
            for (int64_t i = 0; i < (int64_t)b; i++) r = store_as(dt, r * a);
            return r;
        }
        return store_as(dt, pow(a, b));
    case MAX: return isnan(a) || isnan(b) ? NAN : (a > b ? a : b);
    case MIN: return isnan(a) || isnan(b) ? NAN : (a < b ? a : b);
    case EQ: return a == b;
    case NE: return a != b;
    case LT: return a < b;
    case LE: return a <= b;
    case GT: return a > b;
    case GE: return a >= b;
    case AND: return (a != 0) && (b != 0);
    case OR: return (a != 0) || (b != 0);
    default: return (a != 0) != (b != 0);
    }
}

static int broadcast(int na, const int64_t *sa, int nb, const int64_t *sb, int64_t *out) {
    int n = na > nb ? na : nb;
    for (int i = 0; i < n; i++) {
        int ia = i - (n - na), ib = i - (n - nb);
        int64_t x = ia >= 0 ? sa[ia] : 1, y = ib >= 0 ? sb[ib] : 1;
        out[i] = x == 1 ? y : x;
    }
    return n;
}

/* out has the broadcast shape of a and b, dtype want, and element k equal to
 * ref_op(k, compute, a, b) within rtol. Reports the first mismatch only. */
static void check_against_ref(cn_tensor *out, cn_dtype want, int k, cn_dtype compute,
                              cn_tensor *a, cn_tensor *b, double rtol, const char *ctx) {
    int64_t shape[CN_MAX_DIMS], idx[CN_MAX_DIMS];
    int nd = broadcast(cn_ndim(a), cn_shape(a), cn_ndim(b), cn_shape(b), shape);
    CHECK_MSG(out != NULL, "%s %s: failed: %s", names[k], ctx, cn_last_error());
    if (!out) return;
    char sb[200];
    CHECK_MSG(th_same_shape(out, nd, shape), "%s %s: result shape %s", names[k], ctx,
              cn_shape_str(out, sb, sizeof sb));
    CHECK_MSG(cn_tensor_dtype(out) == want, "%s %s: dtype %s, expected %s", names[k], ctx,
              cn_dtype_name(cn_tensor_dtype(out)), cn_dtype_name(want));
    if (!th_same_shape(out, nd, shape)) return;
    int64_t n = th_numel(nd, shape);
    for (int64_t e = 0; e < n; e++) {
        th_unravel(e, nd, shape, idx);
        double x = th_at_broadcast(a, nd, idx), y = th_at_broadcast(b, nd, idx);
        double got = cn_get(out, idx), exp = ref_op(k, compute, x, y);
        if (!th_close(got, exp, rtol, 0)) {
            CHECK_MSG(0, "%s %s: element %" PRId64 ": %s(%.9g, %.9g) = %.9g, expected %.9g",
                      names[k], ctx, e, names[k], x, y, got, exp);
            return;
        }
    }
    th_checks++;
}

/* Value ranges that keep each op meaningful and exact in the reference. */
static void value_range(int k, cn_dtype dt, int operand, double *lo, double *hi) {
    if (dt == CN_BOOL) { *lo = 0; *hi = 2; return; }
    if (dt == CN_U8) { *lo = 0; *hi = k == POW ? 5 : 40; return; }
    if (!is_float(dt)) {
        if (k == POW) { *lo = operand ? 0 : -4; *hi = operand ? 6 : 5; }
        else { *lo = -20; *hi = 20; }
        return;
    }
    if (k == POW) { *lo = operand ? -2.5 : 0.1; *hi = operand ? 2.5 : 3; }
    else { *lo = -4; *hi = 4; }
}

static double op_rtol(int k, cn_dtype dt) {
    if (k != POW || !is_float(dt)) return 0; /* exact: double rounding is harmless for + - * / */
    return dt == CN_F64 ? 1e-15 : 3e-7;
}

/* ---- random shapes, every layout, every op and dtype ---- */

static void test_random_broadcast_all_layouts(void) {
    th_seed(11);
    const cn_dtype dts[] = {CN_F32, CN_F64, CN_I32, CN_I64, CN_U8, CN_BOOL};
    for (int k = 0; k < NKINDS; k++) {
        for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
            cn_dtype dt = dts[d];
            if (dt == CN_BOOL && (k == SUB || k == POW)) continue; /* errors, tested below */
            cn_dtype want = k >= EQ ? CN_BOOL : (k == DIV && !is_float(dt)) ? CN_F32 : dt;
            cn_dtype compute = k == DIV && !is_float(dt) ? CN_F32 : dt;
            for (int trial = 0; trial < 2; trial++) {
                int64_t shape[CN_MAX_DIMS], sa[CN_MAX_DIMS], sb[CN_MAX_DIMS];
                int nd = (int)th_randint(1, 5);
                th_random_shape(nd, trial ? 1 : 0, 4, shape);
                int na = th_broadcastable(nd, shape, sa);
                int nb = th_broadcastable(nd, shape, sb);
                double loa, hia, lob, hib;
                value_range(k, dt, 0, &loa, &hia);
                value_range(k, dt, 1, &lob, &hib);
                for (int la = 0; la < TH_NLAYOUTS; la++) {
                    for (int lb = 0; lb < TH_NLAYOUTS; lb++) {
                        cn_scope_begin();
                        cn_tensor *a = th_random(dt, na, sa, loa, hia, la, NULL);
                        cn_tensor *b = th_random(dt, nb, sb, lob, hib, lb, NULL);
                        char ctx[64];
                        snprintf(ctx, sizeof ctx, "%s layouts %d/%d", cn_dtype_name(dt), la, lb);
                        check_against_ref(fns[k](a, b), want, k, compute, a, b, op_rtol(k, dt),
                                          ctx);
                        cn_scope_end();
                    }
                }
            }
        }
    }
}

/* Rows long enough for the vector loops and their tails, in each fast path
 * (contiguous with contiguous, with a broadcast scalar on either side) and
 * the strided one. */
static void test_fast_paths_and_tails(void) {
    th_seed(12);
    const int ks[] = {ADD, SUB, MUL, DIV, POW, MAX, MIN, EQ, LT, GE, AND, XOR};
    const cn_dtype dts[] = {CN_F32, CN_F64, CN_I32, CN_I64, CN_U8};
    for (size_t q = 0; q < sizeof ks / sizeof ks[0]; q++) {
        int k = ks[q];
        for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
            cn_dtype dt = dts[d];
            cn_dtype compute = k == DIV && !is_float(dt) ? CN_F32 : dt;
            cn_dtype want = k >= EQ ? CN_BOOL : compute;
            double loa, hia, lob, hib;
            value_range(k, dt, 0, &loa, &hia);
            value_range(k, dt, 1, &lob, &hib);
            for (int64_t n = 1; n <= 67; n += 11) {
                cn_scope_begin();
                int64_t full[2] = {3, n}, col[2] = {3, 1}, row[1] = {n};
                cn_tensor *a = th_random(dt, 2, full, loa, hia, TH_CONTIG, NULL);
                cn_tensor *b = th_random(dt, 2, full, lob, hib, TH_CONTIG, NULL);
                cn_tensor *bc = th_random(dt, 2, col, lob, hib, TH_CONTIG, NULL);
                cn_tensor *ac = th_random(dt, 2, col, loa, hia, TH_CONTIG, NULL);
                cn_tensor *br = th_random(dt, 1, row, lob, hib, TH_STRIDED, NULL);
                cn_tensor *s0 = th_random(dt, 0, NULL, lob, hib, TH_CONTIG, NULL);
                char ctx[64];
                snprintf(ctx, sizeof ctx, "%s n=%" PRId64, cn_dtype_name(dt), n);
                double rt = op_rtol(k, dt);
                check_against_ref(fns[k](a, b), want, k, compute, a, b, rt, ctx);
                check_against_ref(fns[k](a, bc), want, k, compute, a, bc, rt, ctx);
                check_against_ref(fns[k](ac, b), want, k, compute, ac, b, rt, ctx);
                check_against_ref(fns[k](a, br), want, k, compute, a, br, rt, ctx);
                check_against_ref(fns[k](a, s0), want, k, compute, a, s0, rt, ctx);
                cn_scope_end();
            }
        }
    }
}

static void test_rank0_and_zero_size(void) {
    th_seed(13);
    for (int k = 0; k < NKINDS; k++) {
        cn_scope_begin();
        double lo, hi;
        value_range(k, CN_F32, 0, &lo, &hi);
        cn_tensor *s = th_random(CN_F32, 0, NULL, lo, hi, TH_CONTIG, NULL);
        cn_tensor *t = th_random(CN_F32, 3, (int64_t[]){2, 3, 4}, lo, hi, TH_MIXED, NULL);
        cn_dtype want = k >= EQ ? CN_BOOL : CN_F32;
        check_against_ref(fns[k](s, t), want, k, CN_F32, s, t, op_rtol(k, CN_F32), "rank0 first");
        check_against_ref(fns[k](t, s), want, k, CN_F32, t, s, op_rtol(k, CN_F32), "rank0 second");
        cn_tensor *r = fns[k](s, s);
        CHECK_MSG(r && cn_ndim(r) == 0, "%s of two rank-0 tensors", names[k]);
        check_against_ref(r, want, k, CN_F32, s, s, op_rtol(k, CN_F32), "rank0 both");

        cn_tensor *z = cn_zeros(CN_F32, CN_SHAPE(0, 3));
        cn_tensor *c = cn_ones(CN_F32, CN_SHAPE(3));
        CHECK_SHAPE(fns[k](z, c), 0, 3);
        CHECK_SHAPE(fns[k](c, z), 0, 3);
        CHECK_SHAPE(fns[k](cn_zeros(CN_F32, CN_SHAPE(2, 0)), cn_ones(CN_F32, CN_SHAPE(2, 1))), 2, 0);
        CHECK_SHAPE(fns[k](cn_zeros(CN_F32, CN_SHAPE(0)), cn_ones(CN_F32, CN_SHAPE(1))), 0);
        CHECK_SHAPE(fns[k](cn_zeros(CN_F32, CN_SHAPE(0)), s), 0);
        CHECK_ERROR(fns[k](cn_zeros(CN_F32, CN_SHAPE(0)), cn_ones(CN_F32, CN_SHAPE(2))),
                    "cannot be broadcast");
        cn_scope_end();
    }
}

/* ---- type promotion ---- */

/* torch.promote_types over F32 F64 F16 BF16 I32 I64 U8 BOOL. */
static const cn_dtype promote_table[8][8] = {
    {CN_F32, CN_F64, CN_F32, CN_F32, CN_F32, CN_F32, CN_F32, CN_F32},
    {CN_F64, CN_F64, CN_F64, CN_F64, CN_F64, CN_F64, CN_F64, CN_F64},
    {CN_F32, CN_F64, CN_F16, CN_F32, CN_F16, CN_F16, CN_F16, CN_F16},
    {CN_F32, CN_F64, CN_F32, CN_BF16, CN_BF16, CN_BF16, CN_BF16, CN_BF16},
    {CN_F32, CN_F64, CN_F16, CN_BF16, CN_I32, CN_I64, CN_I32, CN_I32},
    {CN_F32, CN_F64, CN_F16, CN_BF16, CN_I64, CN_I64, CN_I64, CN_I64},
    {CN_F32, CN_F64, CN_F16, CN_BF16, CN_I32, CN_I64, CN_U8, CN_U8},
    {CN_F32, CN_F64, CN_F16, CN_BF16, CN_I32, CN_I64, CN_U8, CN_BOOL},
};

static int category(cn_dtype dt) { return dt == CN_BOOL ? 0 : is_float(dt) ? 2 : 1; }

static int dt_index(cn_dtype dt) {
    for (int i = 0; i < 8; i++)
        if (all_dtypes[i] == dt) return i;
    return 0;
}

/* torch.result_type: a rank-0 operand only decides when its category is
 * higher. */
static cn_dtype result_type(cn_dtype da, int nda, cn_dtype db, int ndb) {
    if ((nda == 0) == (ndb == 0)) return promote_table[dt_index(da)][dt_index(db)];
    cn_dtype zero = nda == 0 ? da : db, dim = nda == 0 ? db : da;
    return category(zero) > category(dim) ? zero : dim;
}

static void test_promotion_every_pair(void) {
    const double va[4] = {1, 0, 1, 3}, vb[4] = {1, 1, 0, 2};
    for (int i = 0; i < 8; i++) {
        for (int j = 0; j < 8; j++) {
            cn_scope_begin();
            cn_dtype da = all_dtypes[i], db = all_dtypes[j], rt = promote_table[i][j];
            cn_tensor *a = th_make(da, 1, (int64_t[]){4}, va, TH_REVERSED);
            cn_tensor *b = th_make(db, 1, (int64_t[]){4}, vb, TH_STRIDED);
            char ctx[64];
            snprintf(ctx, sizeof ctx, "%s with %s", cn_dtype_name(da), cn_dtype_name(db));
            const int ks[] = {ADD, SUB, MUL, DIV, POW, MAX, MIN, EQ, LT, GE, AND, XOR};
            for (size_t q = 0; q < sizeof ks / sizeof ks[0]; q++) {
                int k = ks[q];
                if (rt == CN_BOOL && (k == SUB || k == POW)) {
                    CHECK_ERROR(fns[k](a, b), "two bool tensors");
                    continue;
                }
                cn_dtype compute = k == DIV && !is_float(rt) ? CN_F32 : rt;
                if (k >= AND) compute = CN_F64; /* logic reads each input as it is */
                cn_dtype want = k >= EQ ? CN_BOOL : compute;
                check_against_ref(fns[k](a, b), want, k, compute, a, b, op_rtol(k, compute), ctx);
            }
            /* A rank-0 operand only decides when its category is higher. */
            cn_tensor *s = th_make(db, 0, NULL, vb, TH_CONTIG);
            cn_dtype rt0 = result_type(da, 1, db, 0);
            if (rt0 == CN_BOOL) {
                check_against_ref(cn_add(a, s), CN_BOOL, ADD, CN_BOOL, a, s, 0, ctx);
            } else {
                check_against_ref(cn_add(a, s), rt0, ADD, rt0, a, s, 0, ctx);
                check_against_ref(cn_sub(s, a), rt0, SUB, rt0, s, a, 0, ctx);
            }
            cn_scope_end();
        }
    }
}

static void test_promotion_examples(void) {
    cn_tensor *i32 = cn_full(CN_I32, CN_SHAPE(2), 3);
    cn_tensor *i64 = cn_full(CN_I64, CN_SHAPE(2), 4);
    cn_tensor *u8 = cn_full(CN_U8, CN_SHAPE(2), 250);
    cn_tensor *f32 = cn_full(CN_F32, CN_SHAPE(2), 0.5);
    cn_tensor *bl = cn_full(CN_BOOL, CN_SHAPE(2), 1);
    CHECK(cn_tensor_dtype(cn_add(i32, f32)) == CN_F32);
    CHECK(cn_tensor_dtype(cn_add(i64, i32)) == CN_I64);
    cn_tensor *ui = cn_add(u8, i32);
    CHECK(cn_tensor_dtype(ui) == CN_I32);
    CHECK_CLOSE(th_at(ui, 0), 253, 0, 0); /* no u8 wrap: computed in i32 */
    cn_tensor *bb = cn_add(bl, bl);
    CHECK(cn_tensor_dtype(bb) == CN_BOOL);
    CHECK_CLOSE(th_at(bb, 1), 1, 0, 0);
    CHECK(cn_tensor_dtype(cn_add(f32, cn_scalar(CN_F64, 0.25))) == CN_F32);
    CHECK(cn_tensor_dtype(cn_add(i32, cn_scalar(CN_F32, 0.25))) == CN_F32);
    CHECK(cn_tensor_dtype(cn_add(u8, cn_scalar(CN_I64, 1))) == CN_U8);
    CHECK(cn_tensor_dtype(cn_add(cn_scalar(CN_F32, 1), cn_scalar(CN_F64, 1))) == CN_F64);
    CHECK(cn_tensor_dtype(cn_div(i32, i64)) == CN_F32);
    CHECK_CLOSE(th_at(cn_div(i32, i64), 0), 0.75, 0, 0);
    CHECK(cn_tensor_dtype(cn_div(bl, bl)) == CN_F32);
    CHECK(cn_tensor_dtype(cn_lt(i32, f32)) == CN_BOOL);
    /* Compared in f32, where 16777217 rounds to 16777216 (as in torch). */
    cn_tensor *big = cn_full(CN_I32, CN_SHAPE(1), 16777217);
    CHECK_CLOSE(th_at(cn_eq(big, cn_full(CN_F32, CN_SHAPE(1), 16777216)), 0), 1, 0, 0);
    CHECK_CLOSE(th_at(cn_eq(big, cn_full(CN_I64, CN_SHAPE(1), 16777216)), 0), 0, 0, 0);
    /* Halves compute in f32 and come back as halves. */
    cn_tensor *h = cn_full(CN_F16, CN_SHAPE(2), 1.5);
    cn_tensor *hh = cn_mul(h, h);
    CHECK(cn_tensor_dtype(hh) == CN_F16);
    CHECK_CLOSE(th_at(hh, 0), 2.25, 0, 0);
    CHECK(cn_tensor_dtype(cn_maximum(cn_full(CN_BF16, CN_SHAPE(1), 1), h)) == CN_F32);
    CHECK(cn_tensor_dtype(cn_eq(h, h)) == CN_BOOL);
}

/* ---- values that need care ---- */

static void test_nan_and_signed_zero(void) {
    const double x[] = {NAN, 1, NAN, -0.0, 0.0, -INFINITY, 2};
    const double y[] = {1, NAN, NAN, 0.0, -0.0, INFINITY, 2};
    cn_dtype dts[] = {CN_F32, CN_F64, CN_F16};
    for (int d = 0; d < 3; d++) {
        cn_tensor *a = th_make(dts[d], 1, (int64_t[]){7}, x, TH_CONTIG);
        cn_tensor *b = th_make(dts[d], 1, (int64_t[]){7}, y, TH_REVERSED);
        /* b is stored reversed but reads as y. */
        cn_tensor *mx = cn_maximum(a, b), *mn = cn_minimum(a, b);
        const double wmax[] = {NAN, NAN, NAN, -0.0, 0.0, INFINITY, 2};
        const double wmin[] = {NAN, NAN, NAN, -0.0, 0.0, -INFINITY, 2};
        for (int i = 0; i < 7; i++) {
            CHECK_CLOSE(th_at(mx, i), wmax[i], 0, 0);
            CHECK_CLOSE(th_at(mn, i), wmin[i], 0, 0);
        }
        /* Ties keep the first operand, like torch: maximum(-0, 0) = -0. */
        CHECK(signbit(th_at(mx, 3)) && !signbit(th_at(mx, 4)));
        CHECK(signbit(th_at(mn, 3)) && !signbit(th_at(mn, 4)));
        const int ks[] = {EQ, NE, LT, LE, GT, GE};
        for (int q = 0; q < 6; q++) {
            cn_tensor *r = fns[ks[q]](a, b);
            for (int i = 0; i < 7; i++)
                CHECK_MSG(th_at(r, i) == ref_op(ks[q], CN_F64, x[i], y[i]),
                          "%s(%g, %g) on %s = %g", names[ks[q]], x[i], y[i],
                          cn_dtype_name(dts[d]), th_at(r, i));
        }
        /* NaN != NaN, and -0 == 0. */
        CHECK_CLOSE(th_at(cn_ne(a, a), 0), 1, 0, 0);
        CHECK_CLOSE(th_at(cn_eq(a, a), 2), 0, 0, 0);
        CHECK_CLOSE(th_at(cn_eq(a, b), 3), 1, 0, 0);
    }
    /* Division by zero. */
    cn_tensor *q = cn_div(cn_from_data(CN_F32, CN_SHAPE(3), (float[]){1, -1, 0}),
                          cn_zeros(CN_F32, CN_SHAPE(1)));
    CHECK_CLOSE(th_at(q, 0), INFINITY, 0, 0);
    CHECK_CLOSE(th_at(q, 1), -INFINITY, 0, 0);
    CHECK(isnan(th_at(q, 2)));
    cn_tensor *qi = cn_div(cn_from_data(CN_I32, CN_SHAPE(2), (int32_t[]){7, 0}),
                           cn_zeros(CN_I64, CN_SHAPE(1)));
    CHECK(cn_tensor_dtype(qi) == CN_F32);
    CHECK_CLOSE(th_at(qi, 0), INFINITY, 0, 0);
    CHECK(isnan(th_at(qi, 1)));
}

static void test_integer_wraparound(void) {
    cn_tensor *a = cn_from_data(CN_I32, CN_SHAPE(3), (int32_t[]){INT32_MAX, INT32_MIN, 65536});
    cn_tensor *b = cn_from_data(CN_I32, CN_SHAPE(3), (int32_t[]){1, 1, 65536});
    CHECK_EQ_INT(cn_get_int(cn_add(a, b), (int64_t[]){0}), INT32_MIN);
    CHECK_EQ_INT(cn_get_int(cn_sub(a, b), (int64_t[]){1}), INT32_MAX);
    CHECK_EQ_INT(cn_get_int(cn_mul(a, b), (int64_t[]){2}), 0);
    CHECK_EQ_INT(cn_get_int(cn_mul(a, a), (int64_t[]){0}), 1);
    cn_tensor *c = cn_from_data(CN_I64, CN_SHAPE(2), (int64_t[]){INT64_MAX, INT64_MIN});
    CHECK_EQ_INT(cn_get_int(cn_add(c, cn_scalar(CN_I64, 1)), (int64_t[]){0}), INT64_MIN);
    CHECK_EQ_INT(cn_get_int(cn_sub(c, cn_scalar(CN_I64, 1)), (int64_t[]){1}), INT64_MAX);
    CHECK_EQ_INT(cn_get_int(cn_mul(c, cn_scalar(CN_I64, -1)), (int64_t[]){1}), INT64_MIN);
    CHECK_EQ_INT(cn_get_int(cn_mul(c, c), (int64_t[]){0}), 1);
    CHECK_EQ_INT(cn_get_int(cn_maximum(c, cn_scalar(CN_I64, 0)), (int64_t[]){0}), INT64_MAX);
    CHECK_EQ_INT(cn_get_int(cn_minimum(c, cn_scalar(CN_I64, 0)), (int64_t[]){1}), INT64_MIN);
    /* Exact beyond 2^53, where a double would round. */
    cn_tensor *e = cn_full(CN_I64, CN_SHAPE(1), 9007199254740992.0);
    CHECK_EQ_INT(cn_get_int(cn_add(e, cn_scalar(CN_I64, 1)), (int64_t[]){0}), 9007199254740993LL);
    cn_tensor *u = cn_from_data(CN_U8, CN_SHAPE(3), (uint8_t[]){200, 3, 16});
    cn_tensor *v = cn_from_data(CN_U8, CN_SHAPE(3), (uint8_t[]){100, 5, 16});
    CHECK_EQ_INT(cn_get_int(cn_add(u, v), (int64_t[]){0}), 44);
    CHECK_EQ_INT(cn_get_int(cn_sub(u, v), (int64_t[]){1}), 254);
    CHECK_EQ_INT(cn_get_int(cn_mul(u, v), (int64_t[]){2}), 0);
    CHECK_EQ_INT(cn_get_int(cn_maximum(u, v), (int64_t[]){0}), 200);
    CHECK_CLOSE(th_at(cn_gt(u, v), 0), 1, 0, 0); /* unsigned: 200 > 100 */
}

/* A naive integer power with wrap-around, independent of the kernel's. */
static int64_t naive_ipow_i64(int64_t a, int64_t e) {
    uint64_t r = 1;
    for (int64_t i = 0; i < e; i++) r *= (uint64_t)a;
    return (int64_t)r;
}

static void test_pow_special_cases(void) {
    /* C's pow rules (which torch follows) for f32 and f64. */
    const double xs[] = {0, -0.0, 1, -1, 2.5, -2.5, INFINITY, -INFINITY, NAN, 1e-30, 3e30, -8};
    const double es[] = {0, 1, 2, -1, 0.5, 3, -2, 1.0 / 3, NAN, INFINITY, -INFINITY, -0.5, 2.5};
    const int nx = 12, ne = 13;
    for (int f = 0; f < 2; f++) {
        cn_dtype dt = f ? CN_F64 : CN_F32;
        cn_tensor *x = th_make(dt, 1, (int64_t[]){nx}, xs, TH_STRIDED);
        for (int j = 0; j < ne; j++) {
            cn_scope_begin();
            /* As a rank-0 exponent (the scalar fast paths) and as a full row. */
            cn_tensor *e0 = cn_scalar(dt, es[j]);
            cn_tensor *ef = cn_full(dt, CN_SHAPE(nx), es[j]);
            cn_tensor *r0 = cn_pow(x, e0), *rf = cn_pow(x, ef);
            for (int i = 0; i < nx; i++) {
                double xi = th_at(x, i), want = f ? pow(xi, es[j]) : (float)pow(xi, (float)es[j]);
                double g0 = th_at(r0, i), gf = th_at(rf, i);
                CHECK_MSG(th_close(g0, want, f ? 1e-15 : 3e-7, 0) && th_close(gf, want, f ? 1e-15 : 3e-7, 0),
                          "pow(%g, %g) on %s = %g / %g, expected %g", xi, es[j],
                          cn_dtype_name(dt), g0, gf, want);
                if (want == 0)
                    CHECK_MSG(!!signbit(g0) == !!signbit(want) && !!signbit(gf) == !!signbit(want),
                              "pow(%g, %g): sign of zero", xi, es[j]);
            }
            cn_scope_end();
        }
    }
    /* Integers: exact, with wrap-around. */
    cn_tensor *b = cn_from_data(CN_I64, CN_SHAPE(6), (int64_t[]){2, -3, 3, -1, 0, 7});
    cn_tensor *p = cn_from_data(CN_I64, CN_SHAPE(6), (int64_t[]){63, 5, 40, 1000001, 0, 0});
    cn_tensor *r = cn_pow(b, p);
    const int64_t bv[6] = {2, -3, 3, -1, 0, 7}, pv[6] = {63, 5, 40, 1000001, 0, 0};
    for (int i = 0; i < 6; i++)
        CHECK_EQ_INT(cn_get_int(r, (int64_t[]){i}), naive_ipow_i64(bv[i], pv[i]));
    cn_tensor *r32 = cn_pow(cn_cast(b, CN_I32), cn_cast(p, CN_I32));
    CHECK(cn_tensor_dtype(r32) == CN_I32);
    for (int i = 0; i < 6; i++)
        CHECK_EQ_INT(cn_get_int(r32, (int64_t[]){i}), (int32_t)(uint32_t)naive_ipow_i64(bv[i], pv[i]));
    cn_tensor *ru = cn_pow(cn_full(CN_U8, CN_SHAPE(1), 3), cn_full(CN_U8, CN_SHAPE(1), 7));
    CHECK_EQ_INT(cn_get_int(ru, (int64_t[]){0}), 2187 % 256);
    /* int ^ float promotes to float. */
    cn_tensor *rf = cn_pow(cn_full(CN_I32, CN_SHAPE(1), 4), cn_scalar(CN_F32, 0.5));
    CHECK(cn_tensor_dtype(rf) == CN_F32);
    CHECK_CLOSE(th_at(rf, 0), 2, 0, 0);
    CHECK_ERROR(cn_pow(b, cn_from_data(CN_I64, CN_SHAPE(2, 1), (int64_t[]){1, -1})),
                "integers to negative integer powers are not allowed");
    CHECK_ERROR(cn_pow(cn_cast(b, CN_I32), cn_scalar(CN_I32, -2)), "negative integer powers");
    CHECK_ERROR(cn_pow_scalar(b, -1), "negative integer powers");
    CHECK_ERROR(cn_pow_scalar(cn_full(CN_U8, CN_SHAPE(2), 2), -1), "negative integer powers");
    CHECK_ERROR(cn_pow(cn_full(CN_BOOL, CN_SHAPE(2), 1), cn_full(CN_BOOL, CN_SHAPE(2), 1)),
                "pow: not supported for two bool tensors");
}

/* ---- logic and where: operands of any dtype, non-zero is true ---- */

/* Values whose truth a careless kernel gets wrong: -0, NaN, tiny, and an
 * integer whose low byte is zero. */
static double truth_value(cn_dtype dt, int i) {
    static const double fv[] = {0, -0.0, NAN, 0.5, -2, 1e-30, INFINITY, 0};
    static const double iv[] = {0, 256, -1, 3, 0, 65536, 1, 0};
    static const double uv[] = {0, 255, 0, 1, 7, 0, 128, 2};
    if (is_float(dt)) return fv[i % 8];
    if (dt == CN_U8) return uv[i % 8];
    if (dt == CN_BOOL) return (i % 3) != 0;
    return iv[i % 8];
}

static cn_tensor *truth_tensor(cn_dtype dt, int nd, const int64_t *shape, int layout, int shift) {
    double v[64];
    int64_t n = th_numel(nd, shape);
    for (int64_t i = 0; i < n; i++) v[i] = truth_value(dt, (int)(i * 5 + shift));
    return th_make(dt, nd, shape, v, layout);
}

static void test_logical_any_dtypes(void) {
    for (int i = 0; i < 8; i++) {
        for (int j = 0; j < 8; j++) {
            cn_scope_begin();
            cn_dtype da = all_dtypes[i], db = all_dtypes[j];
            int la = (i + j) % TH_NLAYOUTS, lb = (i * 3 + j) % TH_NLAYOUTS;
            cn_tensor *a = truth_tensor(da, 2, (int64_t[]){3, 8}, la, i);
            cn_tensor *b = truth_tensor(db, 2, (int64_t[]){1, 8}, lb, j + 1);
            char ctx[64];
            snprintf(ctx, sizeof ctx, "%s with %s", cn_dtype_name(da), cn_dtype_name(db));
            for (int k = AND; k <= XOR; k++) {
                check_against_ref(fns[k](a, b), CN_BOOL, k, CN_F64, a, b, 0, ctx);
                check_against_ref(fns[k](b, a), CN_BOOL, k, CN_F64, b, a, 0, ctx);
            }
            cn_scope_end();
        }
    }
    /* Long rows cross the kernel's blocks. */
    cn_tensor *x = cn_arange(0, 1500, 1, CN_I32);
    cn_tensor *m = cn_logical_xor(cn_gt(x, cn_scalar(CN_I32, 700)), cn_scalar(CN_F32, 1));
    CHECK_SHAPE(m, 1500);
    CHECK_CLOSE(th_at(m, 700), 1, 0, 0);
    CHECK_CLOSE(th_at(m, 701), 0, 0, 0);
    CHECK_CLOSE(th_at(m, 1499), 0, 0, 0);
}

static void test_bool_arithmetic(void) {
    /* A borrowed buffer may hold bool bytes other than 0/1: still true. */
    static uint8_t raw[4] = {0, 1, 2, 255};
    cn_tensor *a = cn_from_buffer(CN_BOOL, CN_SHAPE(4), raw, NULL);
    cn_tensor *b = cn_from_data(CN_BOOL, CN_SHAPE(4), (uint8_t[]){1, 1, 1, 0});
    const double add[] = {1, 1, 1, 1}, mul[] = {0, 1, 1, 0}, eq[] = {0, 1, 1, 0};
    cn_tensor *s = cn_add(a, b), *p = cn_mul(a, b), *e = cn_eq(a, b), *mx = cn_maximum(a, b);
    cn_tensor *mn = cn_minimum(a, b), *lt = cn_lt(b, a);
    for (int i = 0; i < 4; i++) {
        CHECK_EQ_INT(cn_get_int(s, (int64_t[]){i}), (int64_t)add[i]);
        CHECK_EQ_INT(cn_get_int(p, (int64_t[]){i}), (int64_t)mul[i]);
        CHECK_EQ_INT(cn_get_int(e, (int64_t[]){i}), (int64_t)eq[i]);
        CHECK_EQ_INT(cn_get_int(mx, (int64_t[]){i}), (int64_t)add[i]);
        CHECK_EQ_INT(cn_get_int(mn, (int64_t[]){i}), (int64_t)mul[i]);
        CHECK_EQ_INT(cn_get_int(lt, (int64_t[]){i}), i == 3);
    }
    CHECK(cn_tensor_dtype(s) == CN_BOOL);
    CHECK_ERROR(cn_sub(a, b), "sub: not supported for two bool tensors (bool[4] and bool[4])");
    CHECK_ERROR(cn_sub(a, cn_scalar(CN_BOOL, 1)), "logical_xor");
    /* With an integer the bool counts as 0/1. */
    cn_tensor *d = cn_sub(b, cn_scalar(CN_I64, 3));
    CHECK(cn_tensor_dtype(d) == CN_I64);
    CHECK_EQ_INT(cn_get_int(d, (int64_t[]){0}), -2);
}

static void test_where(void) {
    th_seed(14);
    const cn_dtype conds[] = {CN_BOOL, CN_F32, CN_I64, CN_F16, CN_U8};
    const cn_dtype vals[][2] = {{CN_F32, CN_F32}, {CN_F64, CN_F64}, {CN_I32, CN_F32},
                                {CN_I64, CN_U8},  {CN_BOOL, CN_BOOL}, {CN_F16, CN_F16},
                                {CN_BF16, CN_I32}};
    for (int c = 0; c < 5; c++) {
        for (int v = 0; v < 7; v++) {
            for (int trial = 0; trial < 3; trial++) {
                cn_scope_begin();
                int64_t shape[CN_MAX_DIMS], sc[CN_MAX_DIMS], sa[CN_MAX_DIMS], sb[CN_MAX_DIMS];
                int nd = (int)th_randint(1, 4);
                th_random_shape(nd, trial == 2 ? 0 : 1, 4, shape);
                int nc = th_broadcastable(nd, shape, sc);
                int na = th_broadcastable(nd, shape, sa);
                int nb = th_broadcastable(nd, shape, sb);
                int lc = (c + trial) % TH_NLAYOUTS, la = (v + trial) % TH_NLAYOUTS,
                    lb = (c + v + 2 * trial) % TH_NLAYOUTS;
                cn_tensor *cond = truth_tensor(conds[c], nc, sc, lc, trial + v);
                cn_tensor *a = th_random(vals[v][0], na, sa, -5, 5, la, NULL);
                cn_tensor *b = th_random(vals[v][1], nb, sb, -5, 5, lb, NULL);
                cn_tensor *r = cn_where(cond, a, b);
                int64_t os[CN_MAX_DIMS], t[CN_MAX_DIMS], idx[CN_MAX_DIMS];
                int ond = broadcast(nc, sc, na, sa, t);
                ond = broadcast(ond, t, nb, sb, os);
                cn_dtype wdt = result_type(vals[v][0], na, vals[v][1], nb);
                CHECK_MSG(r && th_same_shape(r, ond, os), "where %s/%s/%s: shape (%s)",
                          cn_dtype_name(conds[c]), cn_dtype_name(vals[v][0]),
                          cn_dtype_name(vals[v][1]), cn_last_error());
                if (r && th_same_shape(r, ond, os)) {
                    CHECK(cn_tensor_dtype(r) == wdt);
                    int64_t n = th_numel(ond, os);
                    for (int64_t e = 0; e < n; e++) {
                        th_unravel(e, ond, os, idx);
                        double cv = th_at_broadcast(cond, ond, idx);
                        double ev = cv != 0 ? th_at_broadcast(a, ond, idx)
                                            : th_at_broadcast(b, ond, idx);
                        ev = store_as(wdt, ev);
                        if (th_at(r, e) != ev) {
                            CHECK_MSG(0, "where %s/%s: element %" PRId64 " = %g, expected %g",
                                      cn_dtype_name(conds[c]), cn_dtype_name(wdt), e,
                                      th_at(r, e), ev);
                            break;
                        }
                    }
                }
                cn_scope_end();
            }
        }
    }
    /* Rank 0 everywhere, a rank-0 value promoting, and long rows. */
    cn_tensor *r0 = cn_where(cn_scalar(CN_BOOL, 0), cn_scalar(CN_F32, 1), cn_scalar(CN_F32, 2));
    CHECK(r0 && cn_ndim(r0) == 0 && cn_item(r0) == 2);
    cn_tensor *x = cn_arange(0, 2000, 1, CN_F32);
    cn_tensor *r = cn_where(cn_lt(x, cn_scalar(CN_F32, 1000)), x, cn_scalar(CN_F64, -1));
    CHECK(cn_tensor_dtype(r) == CN_F32);
    CHECK_CLOSE(th_at(r, 999), 999, 0, 0);
    CHECK_CLOSE(th_at(r, 1000), -1, 0, 0);
    cn_tensor *ri = cn_where(cn_scalar(CN_BOOL, 1), cn_full(CN_I32, CN_SHAPE(2), 7),
                             cn_scalar(CN_F64, 0.5));
    CHECK(cn_tensor_dtype(ri) == CN_F64);
    /* NaN payloads and signed zeros pass through untouched. */
    cn_tensor *nz = cn_from_data(CN_F32, CN_SHAPE(2), (float[]){-0.0f, NAN});
    cn_tensor *w = cn_where(cn_ones(CN_BOOL, CN_SHAPE(2)), nz, cn_zeros(CN_F32, CN_SHAPE(1)));
    CHECK(signbit(th_at(w, 0)) && isnan(th_at(w, 1)));
    CHECK_ERROR(cn_where(cn_ones(CN_BOOL, CN_SHAPE(3)), cn_ones(CN_F32, CN_SHAPE(2, 1)),
                         cn_ones(CN_F32, CN_SHAPE(4))),
                "cannot be broadcast");
    CHECK_ERROR(cn_where(cn_ones(CN_BOOL, CN_SHAPE(4)), cn_ones(CN_F32, CN_SHAPE(3)),
                         cn_ones(CN_F32, CN_SHAPE(1))),
                "where: shapes [4] and [3] and [1] cannot be broadcast");
}

/* ---- scalar forms ---- */

static void test_scalar_functions(void) {
    cn_tensor *i = cn_from_data(CN_I32, CN_SHAPE(3), (int32_t[]){1, -2, 7});
    cn_tensor *u = cn_from_data(CN_U8, CN_SHAPE(2), (uint8_t[]){1, 200});
    cn_tensor *b = cn_from_data(CN_BOOL, CN_SHAPE(2), (uint8_t[]){1, 0});
    cn_tensor *f = cn_from_data(CN_F32, CN_SHAPE(2), (float[]){1.5f, -3});
    cn_tensor *d = cn_from_data(CN_F64, CN_SHAPE(1), (double[]){0.1});
    cn_tensor *h = cn_from_data(CN_F32, CN_SHAPE(1), (float[]){0.25f});
    h = cn_cast(h, CN_F16);

    cn_tensor *r = cn_mul_scalar(i, 2.5);
    CHECK(cn_tensor_dtype(r) == CN_F32);
    CHECK_CLOSE(th_at(r, 1), -5, 0, 0);
    r = cn_add_scalar(i, 2);
    CHECK(cn_tensor_dtype(r) == CN_I32);
    CHECK_CLOSE(th_at(r, 2), 9, 0, 0);
    r = cn_sub_scalar(i, 1);
    CHECK(cn_tensor_dtype(r) == CN_I32);
    CHECK_CLOSE(th_at(r, 0), 0, 0, 0);
    r = cn_rsub_scalar(i, 10);
    CHECK(cn_tensor_dtype(r) == CN_I32);
    CHECK_CLOSE(th_at(r, 1), 12, 0, 0);
    r = cn_rsub_scalar(f, 0.5);
    CHECK_CLOSE(th_at(r, 0), -1, 0, 0);
    CHECK_CLOSE(th_at(r, 1), 3.5, 0, 0);
    r = cn_div_scalar(i, 2);
    CHECK(cn_tensor_dtype(r) == CN_F32);
    CHECK_CLOSE(th_at(r, 2), 3.5, 0, 0);
    r = cn_pow_scalar(i, 2);
    CHECK(cn_tensor_dtype(r) == CN_I32);
    CHECK_CLOSE(th_at(r, 1), 4, 0, 0);
    r = cn_pow_scalar(i, 0.5);
    CHECK(cn_tensor_dtype(r) == CN_F32);
    CHECK_CLOSE(th_at(r, 2), sqrtf(7.0f), 0, 0);
    CHECK(isnan(th_at(r, 1)));
    r = cn_add_scalar(u, 300); /* 300 stored as u8 wraps, as in torch */
    CHECK(cn_tensor_dtype(r) == CN_U8);
    CHECK_CLOSE(th_at(r, 0), 45, 0, 0);
    r = cn_sub_scalar(u, 1);
    CHECK_CLOSE(th_at(r, 1), 199, 0, 0);
    r = cn_mul_scalar(u, 0.5);
    CHECK(cn_tensor_dtype(r) == CN_F32);
    CHECK_CLOSE(th_at(r, 1), 100, 0, 0);
    r = cn_add_scalar(b, 1);
    CHECK(cn_tensor_dtype(r) == CN_I64);
    CHECK_CLOSE(th_at(r, 0), 2, 0, 0);
    r = cn_mul_scalar(b, 2.5);
    CHECK(cn_tensor_dtype(r) == CN_F32);
    CHECK_CLOSE(th_at(r, 0), 2.5, 0, 0);
    r = cn_rsub_scalar(b, 1);
    CHECK(cn_tensor_dtype(r) == CN_I64);
    CHECK_CLOSE(th_at(r, 0), 0, 0, 0);
    CHECK_CLOSE(th_at(r, 1), 1, 0, 0);
    r = cn_pow_scalar(b, 3);
    CHECK(cn_tensor_dtype(r) == CN_I64);
    CHECK_CLOSE(th_at(r, 0), 1, 0, 0);
    r = cn_div_scalar(b, 4);
    CHECK(cn_tensor_dtype(r) == CN_F32);
    CHECK_CLOSE(th_at(r, 0), 0.25, 0, 0);
    r = cn_add_scalar(f, 0.1);
    CHECK(cn_tensor_dtype(r) == CN_F32);
    CHECK_CLOSE(th_at(r, 0), (float)(1.5f + 0.1f), 0, 0);
    r = cn_add_scalar(d, 0.2);
    CHECK(cn_tensor_dtype(r) == CN_F64);
    CHECK_CLOSE(th_at(r, 0), 0.1 + 0.2, 0, 0); /* the scalar is not rounded to f32 */
    r = cn_mul_scalar(h, 3);
    CHECK(cn_tensor_dtype(r) == CN_F16);
    CHECK_CLOSE(th_at(r, 0), 0.75, 0, 0);
    r = cn_pow_scalar(f, 2);
    CHECK_CLOSE(th_at(r, 1), 9, 0, 0);
    r = cn_div_scalar(f, 0);
    CHECK_CLOSE(th_at(r, 0), INFINITY, 0, 0);
    r = cn_add_scalar(i, NAN);
    CHECK(cn_tensor_dtype(r) == CN_F32 && isnan(th_at(r, 0)));
    /* Rank 0 in, rank 0 out. */
    r = cn_mul_scalar(cn_scalar(CN_I64, 4), 3);
    CHECK(r && cn_ndim(r) == 0 && cn_tensor_dtype(r) == CN_I64 && cn_item(r) == 12);
}

/* ---- errors ---- */

static void test_errors(void) {
    cn_tensor *a = cn_ones(CN_F32, CN_SHAPE(2, 3));
    cn_tensor *b = cn_ones(CN_F32, CN_SHAPE(4));
    for (int k = 0; k < NKINDS; k++) {
        char want[128];
        snprintf(want, sizeof want, "%s: shapes [2, 3] and [4] cannot be broadcast", names[k]);
        CHECK_ERROR(fns[k](a, b), want);
    }
    CHECK_ERROR(cn_add(cn_ones(CN_F32, CN_SHAPE(2, 1, 5)), cn_ones(CN_F32, CN_SHAPE(3, 4))),
                "cannot be broadcast");
    /* NULL in, NULL out, the message untouched. */
    CHECK(cn_mul(a, b) == NULL);
    char before[256];
    snprintf(before, sizeof before, "%s", cn_last_error());
    CHECK(cn_add(NULL, a) == NULL);
    CHECK(cn_where(a, NULL, a) == NULL);
    CHECK(cn_add_scalar(NULL, 1) == NULL);
    CHECK(cn_pow_scalar(NULL, -1) == NULL);
    CHECK(strcmp(cn_last_error(), before) == 0);
    cn_clear_error();
}

/* ---- thread count ---- */

static void run_big(cn_tensor **outs, cn_tensor *a, cn_tensor *b, cn_tensor *rowv) {
    outs[0] = cn_add(a, b);
    outs[1] = cn_mul(a, rowv);
    outs[2] = cn_pow(a, b);
    outs[3] = cn_maximum(a, cn_scalar(CN_F32, 0.1));
    outs[4] = cn_lt(a, b);
    outs[5] = cn_where(outs[4], a, rowv);
    outs[6] = cn_div(cn_transpose(a, 0, 1), b);
    outs[7] = cn_logical_xor(a, outs[4]);
    outs[8] = cn_pow_scalar(a, 2);
}

static void test_threads_bitwise(void) {
    int saved = cn_get_num_threads();
    float *buf = malloc(sizeof(float) * 2001000);
    for (int64_t k = 0; k < 1000000; k++) buf[k] = (float)th_uniform(0.01, 2);
    for (int64_t k = 1000000; k < 2001000; k++) buf[k] = (float)th_uniform(-2, 2);
    cn_tensor *a = cn_from_data(CN_F32, CN_SHAPE(1000, 1000), buf);
    cn_tensor *b = cn_from_data(CN_F32, CN_SHAPE(1000, 1000), buf + 1000000);
    cn_tensor *rowv = cn_from_data(CN_F32, CN_SHAPE(1000), buf + 2000000);
    free(buf);
    cn_tensor *one[9], *two[9];
    cn_set_num_threads(1);
    run_big(one, a, b, rowv);
    cn_set_num_threads(2);
    run_big(two, a, b, rowv);
    cn_set_num_threads(saved);
    for (int i = 0; i < 9; i++) {
        CHECK_MSG(one[i] && two[i], "big op %d failed: %s", i, cn_last_error());
        if (!one[i] || !two[i]) continue;
        CHECK_EQ_INT(cn_numel(one[i]), 1000000);
        size_t bytes = (size_t)cn_numel(one[i]) * cn_dtype_size(cn_tensor_dtype(one[i]));
        CHECK_MSG(memcmp(cn_data(one[i]), cn_data(two[i]), bytes) == 0,
                  "big op %d differs between 1 and 2 threads", i);
    }
    /* Spot checks against the reference. */
    for (int64_t k = 0; k < 1000000; k += 99991) {
        double x = th_at(a, k), y = th_at(b, k);
        CHECK_CLOSE(th_at(two[0], k), (float)(x + y), 0, 0);
        CHECK_CLOSE(th_at(two[2], k), (float)pow(x, y), 3e-7, 0);
        CHECK_CLOSE(th_at(two[8], k), (float)(x * x), 0, 0);
    }
}

int main(void) {
    RUN(test_random_broadcast_all_layouts);
    RUN(test_fast_paths_and_tails);
    RUN(test_rank0_and_zero_size);
    RUN(test_promotion_every_pair);
    RUN(test_promotion_examples);
    RUN(test_nan_and_signed_zero);
    RUN(test_integer_wraparound);
    RUN(test_pow_special_cases);
    RUN(test_logical_any_dtypes);
    RUN(test_bool_arithmetic);
    RUN(test_where);
    RUN(test_scalar_functions);
    RUN(test_errors);
    RUN(test_threads_bitwise);
    return th_summary();
}
