/* Gradient cases for the binary elementwise ops and where (src/ops/binary.c).
 * Broadcasting in every combination the rules must undo: size-1 axes on both
 * sides, missing leading axes, rank-0 operands, and the Python-scalar forms
 * (cn_*_scalar), whose constant operand takes no gradient. Inputs stay away
 * from the points where the numeric derivative means nothing: divisors away
 * from 0, pow's base positive (or an integer exponent), maximum/minimum
 * operands that almost surely differ, where's float cond away from 0. */
static cn_tensor *gcb_add(cn_tensor **x) { return cn_add(x[0], x[1]); }
static cn_tensor *gcb_sub(cn_tensor **x) { return cn_sub(x[0], x[1]); }
static cn_tensor *gcb_mul(cn_tensor **x) { return cn_mul(x[0], x[1]); }
static cn_tensor *gcb_div(cn_tensor **x) { return cn_div(x[0], x[1]); }
static cn_tensor *gcb_pow(cn_tensor **x) { return cn_pow(x[0], x[1]); }
static cn_tensor *gcb_maximum(cn_tensor **x) { return cn_maximum(x[0], x[1]); }
static cn_tensor *gcb_minimum(cn_tensor **x) { return cn_minimum(x[0], x[1]); }
static cn_tensor *gcb_where(cn_tensor **x) { return cn_where(x[0], x[1], x[2]); }

static cn_tensor *gcb_add_scalar(cn_tensor **x) { return cn_add_scalar(x[0], 1.5); }
static cn_tensor *gcb_rsub_scalar(cn_tensor **x) { return cn_rsub_scalar(x[0], 2); }
static cn_tensor *gcb_mul_self(cn_tensor **x) { return cn_mul(x[0], x[0]); }
static cn_tensor *gcb_div_scalar(cn_tensor **x) { return cn_div_scalar(x[0], -3); }
static cn_tensor *gcb_rdiv(cn_tensor **x) { return cn_div(cn_scalar(CN_F64, 2), x[0]); }
/* Negative bases are fine with an integer exponent that is a constant. */
static cn_tensor *gcb_pow_int(cn_tensor **x) { return cn_pow_scalar(x[0], 3); }
static cn_tensor *gcb_pow_half(cn_tensor **x) { return cn_pow_scalar(x[0], 0.5); }
static cn_tensor *gcb_pow_zero(cn_tensor **x) { return cn_pow_scalar(x[0], 0); }
static cn_tensor *gcb_exp2(cn_tensor **x) { return cn_pow(cn_scalar(CN_F64, 2), x[0]); }
/* x^x: both rules at once, on one leaf. */
static cn_tensor *gcb_pow_self(cn_tensor **x) { return cn_pow(x[0], x[0]); }
static cn_tensor *gcb_maximum_scalar(cn_tensor **x) {
    return cn_maximum(x[0], cn_scalar(CN_F64, 0.25));
}
static cn_tensor *gcb_minimum_scalar(cn_tensor **x) {
    return cn_minimum(cn_scalar(CN_F64, -0.25), x[0]);
}
/* A leaky-relu-like select whose condition is computed from a
 * differentiated input (the comparison carries no gradient). */
static cn_tensor *gcb_where_data(cn_tensor **x) {
    return cn_where(cn_gt(x[0], cn_scalar(CN_F64, 0)), x[0], cn_mul(x[0], x[1]));
}
static cn_tensor *gcb_where_scalars(cn_tensor **x) {
    return cn_where(x[0], x[1], cn_scalar(CN_F64, 0.5));
}
static cn_tensor *gcb_where_scalar_a(cn_tensor **x) {
    return cn_where(x[0], cn_scalar(CN_F64, -0.5), x[1]);
}
static cn_tensor *gcb_radd(cn_tensor **x) { return cn_add(cn_scalar(CN_F64, 1.5), x[0]); }
static cn_tensor *gcb_rmul(cn_tensor **x) { return cn_mul(cn_scalar(CN_F64, -0.5), x[0]); }

#define GCB_ANY {GC_SHAPE(3, 4), -1, 1}
#define GCB_COND(...) {GC_SHAPE(__VA_ARGS__), .is_index = true, .index_max = 2}
/* A float operand that takes no gradient (no tangent either): forward mode
 * must then broadcast the other operand's tangent up to the output's shape. */
#define GCB_CONST(...) {GC_SHAPE(__VA_ARGS__), -1, 1, .no_grad = true}

static const grad_case grad_cases_binary[] = {
    {"add", "3x1 + 1x4", 2, {{GC_SHAPE(3, 1), -1, 1}, {GC_SHAPE(1, 4), -1, 1}}, gcb_add},
    {"add", "2x3x4 + 4", 2, {{GC_SHAPE(2, 3, 4), -1, 1}, {GC_SHAPE(4), -1, 1}}, gcb_add},
    {"add", "rank 0 + 3x4", 2, {{.ndim = 0, .lo = -1, .hi = 1}, GCB_ANY}, gcb_add},
    {"add", "rank 0 + rank 0", 2, {{.ndim = 0, .lo = -1, .hi = 1}, {.ndim = 0, .lo = -1, .hi = 1}},
     gcb_add},
    {"add", "x + 1.5", 1, {GCB_ANY}, gcb_add_scalar},
    {"sub", "3x1 - 1x4", 2, {{GC_SHAPE(3, 1), -1, 1}, {GC_SHAPE(1, 4), -1, 1}}, gcb_sub},
    {"sub", "4 - 2x3x4", 2, {{GC_SHAPE(4), -1, 1}, {GC_SHAPE(2, 3, 4), -1, 1}}, gcb_sub},
    {"sub", "3x4 - rank 0", 2, {GCB_ANY, {.ndim = 0, .lo = -1, .hi = 1}}, gcb_sub},
    {"sub", "2 - x", 1, {GCB_ANY}, gcb_rsub_scalar},
    {"mul", "3x1 * 1x4", 2, {{GC_SHAPE(3, 1), -1, 1}, {GC_SHAPE(1, 4), -1, 1}}, gcb_mul},
    {"mul", "2x3x4 * 4", 2, {{GC_SHAPE(2, 3, 4), -1, 1}, {GC_SHAPE(4), -1, 1}}, gcb_mul},
    {"mul", "rank 0 * 3x2", 2, {{.ndim = 0, .lo = -2, .hi = 2}, {GC_SHAPE(3, 2), -1, 1}},
     gcb_mul},
    {"mul", "x * x", 1, {GCB_ANY}, gcb_mul_self},
    {"div", "3x1 / 1x4", 2,
     {{GC_SHAPE(3, 1), -1, 1}, {GC_SHAPE(1, 4), -2, 2, .gap = 0.5}}, gcb_div},
    {"div", "2x3x4 / 4", 2,
     {{GC_SHAPE(2, 3, 4), -1, 1}, {GC_SHAPE(4), -2, 2, .gap = 0.5}}, gcb_div},
    {"div", "4 / 2x3x4", 2,
     {{GC_SHAPE(4), -1, 1}, {GC_SHAPE(2, 3, 4), -2, 2, .gap = 0.5}}, gcb_div},
    {"div", "3x4 / rank 0", 2, {GCB_ANY, {.ndim = 0, .lo = 0.5, .hi = 2}}, gcb_div},
    {"div", "x / -3", 1, {GCB_ANY}, gcb_div_scalar},
    {"div", "2 / x", 1, {{GC_SHAPE(3, 4), -2, 2, .gap = 0.5}}, gcb_rdiv},
    {"pow", "3x1 ^ 1x4", 2, {{GC_SHAPE(3, 1), 0.5, 2}, {GC_SHAPE(1, 4), -2, 2}}, gcb_pow},
    {"pow", "2x3x4 ^ 4", 2, {{GC_SHAPE(2, 3, 4), 0.5, 2}, {GC_SHAPE(4), -2, 2}}, gcb_pow},
    {"pow", "4 ^ 2x3x4", 2, {{GC_SHAPE(4), 0.5, 2}, {GC_SHAPE(2, 3, 4), -2, 2}}, gcb_pow},
    {"pow", "3x4 ^ rank 0", 2, {{GC_SHAPE(3, 4), 0.5, 2}, {.ndim = 0, .lo = -2, .hi = 2}},
     gcb_pow},
    {"pow", "x ^ 3, x of either sign", 1, {{GC_SHAPE(3, 4), -2, 2}}, gcb_pow_int},
    {"pow", "x ^ 0.5", 1, {{GC_SHAPE(3, 4), 0.5, 2}}, gcb_pow_half},
    {"pow", "x ^ 0", 1, {{GC_SHAPE(3, 4), -2, 2, .gap = 0.1}}, gcb_pow_zero},
    {"pow", "2 ^ x", 1, {GCB_ANY}, gcb_exp2},
    {"pow", "x ^ x", 1, {{GC_SHAPE(3, 4), 0.5, 2}}, gcb_pow_self},
    {"maximum", "3x4", 2, {GCB_ANY, GCB_ANY}, gcb_maximum},
    {"maximum", "3x1, 1x4", 2, {{GC_SHAPE(3, 1), -1, 1}, {GC_SHAPE(1, 4), -1, 1}},
     gcb_maximum},
    {"maximum", "2x3x4, 4", 2, {{GC_SHAPE(2, 3, 4), -1, 1}, {GC_SHAPE(4), -1, 1}},
     gcb_maximum},
    {"maximum", "rank 0, 3x4", 2, {{.ndim = 0, .lo = -1, .hi = 1}, GCB_ANY}, gcb_maximum},
    {"maximum", "x, 0.25", 1, {GCB_ANY}, gcb_maximum_scalar},
    {"minimum", "3x4", 2, {GCB_ANY, GCB_ANY}, gcb_minimum},
    {"minimum", "3x1, 1x4", 2, {{GC_SHAPE(3, 1), -1, 1}, {GC_SHAPE(1, 4), -1, 1}},
     gcb_minimum},
    {"minimum", "4, 2x3x4", 2, {{GC_SHAPE(4), -1, 1}, {GC_SHAPE(2, 3, 4), -1, 1}},
     gcb_minimum},
    {"minimum", "3x4, rank 0", 2, {GCB_ANY, {.ndim = 0, .lo = -1, .hi = 1}}, gcb_minimum},
    {"minimum", "-0.25, x", 1, {GCB_ANY}, gcb_minimum_scalar},
    {"where", "i64 cond 3x4", 3, {GCB_COND(3, 4), GCB_ANY, GCB_ANY}, gcb_where},
    {"where", "cond 3x1, a 1x4, b 3x4", 3,
     {GCB_COND(3, 1), {GC_SHAPE(1, 4), -1, 1}, GCB_ANY}, gcb_where},
    {"where", "cond 4, a 2x3x4, b rank 0", 3,
     {GCB_COND(4), {GC_SHAPE(2, 3, 4), -1, 1}, {.ndim = 0, .lo = -1, .hi = 1}}, gcb_where},
    {"where", "cond 2x1x4, a 3x1, b 4", 3,
     {GCB_COND(2, 1, 4), {GC_SHAPE(3, 1), -1, 1}, {GC_SHAPE(4), -1, 1}}, gcb_where},
    /* A float cond that asks for a gradient gets zeros (its truth value is
     * constant away from 0, so the numeric derivative is 0 too). */
    {"where", "float cond differentiated", 3,
     {{GC_SHAPE(3, 4), -1, 1, .gap = 0.3}, GCB_ANY, {GC_SHAPE(4), -1, 1}}, gcb_where},
    {"where", "cond from x > 0", 2, {{GC_SHAPE(3, 4), -1, 1, .gap = 0.1}, GCB_ANY},
     gcb_where_data},
    {"where", "a 1x4, b scalar", 2, {GCB_COND(3, 4), {GC_SHAPE(1, 4), -1, 1}}, gcb_where_scalars},
    /* One operand differentiated, the other constant or Python scalar. */
    {"add", "1.5 + x", 1, {GCB_ANY}, gcb_radd},
    {"add", "3x1 + const 1x4", 2, {{GC_SHAPE(3, 1), -1, 1}, GCB_CONST(1, 4)}, gcb_add},
    {"add", "const 2x3x4 + 4", 2, {GCB_CONST(2, 3, 4), {GC_SHAPE(4), -1, 1}}, gcb_add},
    {"sub", "const 2x3 - rank 0", 2, {GCB_CONST(2, 3), {.ndim = 0, .lo = -1, .hi = 1}},
     gcb_sub},
    {"mul", "-0.5 * x", 1, {GCB_ANY}, gcb_rmul},
    {"mul", "const 3x1 * 1x4", 2, {GCB_CONST(3, 1), {GC_SHAPE(1, 4), -1, 1}}, gcb_mul},
    {"div", "4 / const 2x3x4", 2,
     {{GC_SHAPE(4), -1, 1}, {GC_SHAPE(2, 3, 4), 0.5, 2, .no_grad = true}}, gcb_div},
    {"div", "const 3x1 / 1x4", 2,
     {GCB_CONST(3, 1), {GC_SHAPE(1, 4), -2, 2, .gap = 0.5}}, gcb_div},
    {"pow", "3x1 ^ const 1x4", 2,
     {{GC_SHAPE(3, 1), 0.5, 2}, {GC_SHAPE(1, 4), -2, 2, .no_grad = true}}, gcb_pow},
    {"pow", "const 3x1 ^ 1x4", 2,
     {{GC_SHAPE(3, 1), 0.5, 2, .no_grad = true}, {GC_SHAPE(1, 4), -2, 2}}, gcb_pow},
    {"maximum", "3x1, const 1x4", 2, {{GC_SHAPE(3, 1), -1, 1}, GCB_CONST(1, 4)}, gcb_maximum},
    {"maximum", "const 3x1, 1x4", 2, {GCB_CONST(3, 1), {GC_SHAPE(1, 4), -1, 1}}, gcb_maximum},
    {"minimum", "4, const 2x3x4", 2, {{GC_SHAPE(4), -1, 1}, GCB_CONST(2, 3, 4)}, gcb_minimum},
    {"minimum", "const 4, 2x3x4", 2, {GCB_CONST(4), {GC_SHAPE(2, 3, 4), -1, 1}}, gcb_minimum},
    {"where", "a scalar, b 1x4", 2, {GCB_COND(3, 4), {GC_SHAPE(1, 4), -1, 1}},
     gcb_where_scalar_a},
    {"where", "a 3x1, const b 1x4", 3,
     {GCB_COND(3, 4), {GC_SHAPE(3, 1), -1, 1}, GCB_CONST(1, 4)}, gcb_where},
};

#undef GCB_ANY
#undef GCB_COND
#undef GCB_CONST
