/* The fused elementwise kernel (src/graph/fused.c): random expressions over
 * random broadcast shapes and layouts (transposed, reversed, strided,
 * expanded, rank 0, one-element), f32 and f64, values with infinities, NaN,
 * signed zeros and subnormals, each compared bit for bit (any NaN matching
 * any NaN) with the same ops run one by one through the public API; the same bits at 1 and 2 threads;
 * an output updated in place; masks; and every error a caller can make. */
#include "harness.h"

#include "core/isa.h"
#include "backend/fused_expr.h"

#define MAXIN 5
#define MAXINSTR 24   /* room for test_trees */
#define RANDINSTR 12  /* instructions of a random case, at most */

static const int unary_ops[] = {
    CN_OP_neg,  CN_OP_abs,   CN_OP_sign,    CN_OP_exp,     CN_OP_log,        CN_OP_log1p,
    CN_OP_expm1, CN_OP_sqrt, CN_OP_rsqrt,   CN_OP_square,  CN_OP_reciprocal, CN_OP_sin,
    CN_OP_cos,  CN_OP_tanh,  CN_OP_sigmoid, CN_OP_relu,    CN_OP_leaky_relu, CN_OP_elu,
    CN_OP_gelu, CN_OP_silu,  CN_OP_softplus, CN_OP_erf,    CN_OP_floor,      CN_OP_ceil,
    CN_OP_round, CN_OP_clamp, CN_OP_contiguous};
static const int arith_ops[] = {CN_OP_add, CN_OP_sub,     CN_OP_mul,    CN_OP_div,
                                CN_OP_pow, CN_OP_maximum, CN_OP_minimum};
static const int cmp_ops[] = {CN_OP_eq, CN_OP_ne, CN_OP_lt, CN_OP_le, CN_OP_gt, CN_OP_ge};
static const int logic_ops[] = {CN_OP_logical_and, CN_OP_logical_or, CN_OP_logical_xor};
#define NOF(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* op applied through the public function of the same name. */
static cn_tensor *apply_public(const cn_fused_instr *ins, cn_tensor *const *r) {
    cn_tensor *a = ins->a >= 0 ? r[ins->a] : NULL, *b = ins->b >= 0 ? r[ins->b] : NULL;
    const cn_attrs *at = &ins->attrs;
    switch (ins->op) {
    case CN_OP_neg: return cn_neg(a);
    case CN_OP_abs: return cn_abs(a);
    case CN_OP_sign: return cn_sign(a);
    case CN_OP_exp: return cn_exp(a);
    case CN_OP_log: return cn_log(a);
    case CN_OP_log1p: return cn_log1p(a);
    case CN_OP_expm1: return cn_expm1(a);
    case CN_OP_sqrt: return cn_sqrt(a);
    case CN_OP_rsqrt: return cn_rsqrt(a);
    case CN_OP_square: return cn_square(a);
    case CN_OP_reciprocal: return cn_reciprocal(a);
    case CN_OP_sin: return cn_sin(a);
    case CN_OP_cos: return cn_cos(a);
    case CN_OP_tanh: return cn_tanh(a);
    case CN_OP_sigmoid: return cn_sigmoid(a);
    case CN_OP_relu: return cn_relu(a);
    case CN_OP_leaky_relu: return cn_leaky_relu(a, at->f[0]);
    case CN_OP_elu: return cn_elu(a, at->f[0]);
    case CN_OP_gelu: return cn_gelu(a, at->i[0] != 0);
    case CN_OP_silu: return cn_silu(a);
    case CN_OP_softplus: return cn_softplus(a, at->f[0], at->f[1]);
    case CN_OP_erf: return cn_erf(a);
    case CN_OP_floor: return cn_floor(a);
    case CN_OP_ceil: return cn_ceil(a);
    case CN_OP_round: return cn_round(a);
    case CN_OP_clamp: return cn_clamp(a, at->f[0], at->f[1]);
    case CN_OP_contiguous: return cn_contiguous(a);
    case CN_OP_cast: return cn_cast(a, (cn_dtype)at->i[0]);
    case CN_OP_logical_not: return cn_logical_not(a);
    case CN_OP_add: return cn_add(a, b);
    case CN_OP_sub: return cn_sub(a, b);
    case CN_OP_mul: return cn_mul(a, b);
    case CN_OP_div: return cn_div(a, b);
    case CN_OP_pow: return cn_pow(a, b);
    case CN_OP_maximum: return cn_maximum(a, b);
    case CN_OP_minimum: return cn_minimum(a, b);
    case CN_OP_eq: return cn_eq(a, b);
    case CN_OP_ne: return cn_ne(a, b);
    case CN_OP_lt: return cn_lt(a, b);
    case CN_OP_le: return cn_le(a, b);
    case CN_OP_gt: return cn_gt(a, b);
    case CN_OP_ge: return cn_ge(a, b);
    case CN_OP_logical_and: return cn_logical_and(a, b);
    case CN_OP_logical_or: return cn_logical_or(a, b);
    case CN_OP_logical_xor: return cn_logical_xor(a, b);
    case CN_OP_where: return cn_where(a, b, r[ins->c]);
    default: return NULL;
    }
}

/* ---- random cases ---- */

typedef struct fcase {
    cn_dtype T;
    int ond;
    int64_t oshape[CN_MAX_DIMS];
    int nin, ninstr, result;
    cn_tensor *in[MAXIN];
    cn_fused_instr instr[MAXINSTR];
    bool mask[MAXIN + MAXINSTR];
} fcase;

static double special_value(void) {
    static const double v[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1e30, -1e-40, 1e-310, 88.5,
                               -104.0, 0.5, -1.0, 1.0, 20.0, 40.0};
    return v[th_randint(0, NOF(v))];
}

/* A random input broadcastable to the case's output. */
static cn_tensor *random_input(fcase *c, bool mask) {
    int64_t shape[CN_MAX_DIMS];
    int nd = th_broadcastable(c->ond, c->oshape, shape);
    int kind = (int)th_randint(0, 10);
    if (kind == 0) nd = 0; /* a rank-0 scalar */
    cn_dtype dt = mask ? CN_BOOL : c->T;
    int64_t n = th_numel(nd, shape);
    double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    /* A rank-0 value from pow's shortcut exponents now and then. */
    static const double expo[] = {2, 0.5, -1, 0, 1, 3};
    for (int64_t k = 0; k < n; k++) {
        double x = th_randint(0, 30) == 0 ? special_value() : th_uniform(-3, 3);
        if (nd == 0 && th_randint(0, 2)) x = expo[th_randint(0, NOF(expo))];
        if (mask) x = th_randint(0, 2);
        v[k] = x;
    }
    cn_tensor *t = th_make(dt, nd, shape, v, (int)th_randint(0, TH_NLAYOUTS));
    free(v);
    /* Sometimes already expanded to the output's shape (zero strides). */
    if (kind == 1 && c->ond >= nd) t = cn_broadcast_to(t, c->ond, c->oshape);
    return t;
}

/* A register of the wanted kind (mask or value), recent ones more often;
 * -1 if there is none. */
static int pick_reg(const fcase *c, int nreg, bool mask) {
    int cand[MAXIN + MAXINSTR], n = 0;
    for (int r = 0; r < nreg; r++)
        if (c->mask[r] == mask) cand[n++] = r;
    if (n == 0) return -1;
    if (th_randint(0, 2) == 0) return cand[n - 1];
    return cand[th_randint(0, n)];
}

static cn_attrs random_attrs(int op, cn_dtype T) {
    cn_attrs a = {0};
    switch (op) {
    case CN_OP_leaky_relu: a.f[0] = th_uniform(-0.5, 0.5); break;
    case CN_OP_elu: a.f[0] = th_uniform(0.1, 2); break;
    case CN_OP_gelu: a.i[0] = th_randint(0, 2); break;
    case CN_OP_softplus:
        a.f[0] = th_randint(0, 2) ? 1.0 : th_uniform(-2, 2);
        if (a.f[0] == 0) a.f[0] = 1;
        a.f[1] = th_randint(0, 2) ? 20.0 : th_uniform(-1, 3);
        break;
    case CN_OP_clamp:
        a.f[0] = th_randint(0, 4) == 0 ? -INFINITY : th_uniform(-2, 1);
        a.f[1] = th_randint(0, 4) == 0 ? INFINITY : th_uniform(-1, 2);
        break;
    case CN_OP_cast: a.i[0] = T; break;
    default: break;
    }
    return a;
}

/* One random instruction appended to c (which has nreg registers). */
static void random_instr(fcase *c, int nreg) {
    for (;;) {
        cn_fused_instr ins = {.a = -1, .b = -1, .c = -1};
        bool out_mask = false;
        switch ((int)th_randint(0, 12)) {
        case 0: case 1: case 2: case 3: /* unary */
            ins.op = (uint16_t)unary_ops[th_randint(0, NOF(unary_ops))];
            ins.a = (int16_t)pick_reg(c, nreg, false);
            break;
        case 4: case 5: case 6: case 7: /* arithmetic, a scalar operand now and then */
            ins.op = (uint16_t)arith_ops[th_randint(0, NOF(arith_ops))];
            ins.a = (int16_t)pick_reg(c, nreg, false);
            ins.b = (int16_t)pick_reg(c, nreg, false);
            if (th_randint(0, 2)) {
                int16_t t = ins.a;
                ins.a = ins.b;
                ins.b = t;
            }
            break;
        case 8: /* comparison */
            ins.op = (uint16_t)cmp_ops[th_randint(0, NOF(cmp_ops))];
            ins.a = (int16_t)pick_reg(c, nreg, false);
            ins.b = (int16_t)pick_reg(c, nreg, th_randint(0, 4) == 0);
            out_mask = true;
            break;
        case 9: /* logic on masks (or values: non-zero is true) */
            if (th_randint(0, 3) == 0) {
                ins.op = CN_OP_logical_not;
                ins.a = (int16_t)pick_reg(c, nreg, th_randint(0, 2));
            } else {
                ins.op = (uint16_t)logic_ops[th_randint(0, NOF(logic_ops))];
                ins.a = (int16_t)pick_reg(c, nreg, true);
                ins.b = (int16_t)pick_reg(c, nreg, th_randint(0, 2));
            }
            out_mask = true;
            break;
        case 10: { /* where: a mask or value condition, two values or two masks */
            ins.op = CN_OP_where;
            bool m = th_randint(0, 5) == 0;
            ins.a = (int16_t)pick_reg(c, nreg, th_randint(0, 4) != 0);
            ins.b = (int16_t)pick_reg(c, nreg, m);
            ins.c = (int16_t)pick_reg(c, nreg, m);
            out_mask = m;
            break;
        }
        default: { /* cast between masks and values */
            ins.op = CN_OP_cast;
            bool from_mask = th_randint(0, 2);
            ins.a = (int16_t)pick_reg(c, nreg, from_mask);
            out_mask = !from_mask;
            break;
        }
        }
        if (ins.a < 0 || (ins.b < 0 && ins.op >= CN_OP_add && ins.op != CN_OP_logical_not &&
                          ins.op != CN_OP_cast) ||
            (ins.op == CN_OP_where && ins.c < 0))
            continue; /* no register of a kind it needs yet */
        ins.attrs = random_attrs(ins.op, c->T);
        if (ins.op == CN_OP_cast && out_mask) ins.attrs.i[0] = CN_BOOL;
        c->instr[c->ninstr++] = ins;
        c->mask[nreg] = out_mask;
        return;
    }
}

/* The whole output of t as bits (f32, f64 or bool), t broadcast to c's
 * output shape. Caller frees. */
static uint64_t *bits_of(cn_tensor *t, const fcase *c, int64_t n) {
    cn_tensor *b = cn_contiguous(cn_broadcast_to(t, c->ond, c->oshape));
    uint64_t *v = calloc((size_t)(n > 0 ? n : 1), sizeof *v);
    if (!b || !v) return v;
    const char *p = cn_data(b);
    size_t es = cn_dtype_size(cn_tensor_dtype(b));
    for (int64_t k = 0; k < n; k++) memcpy(&v[k], p + (size_t)k * es, es);
    return v;
}

/* IEEE leaves the sign and payload of a NaN from two NaN operands to the
 * hardware, which keeps the first: the compiler may order a commutative
 * operation's operands either way, so any NaN matches any NaN. */
static bool is_nan_bits(uint64_t v, cn_dtype dt) {
    if (dt == CN_F32) return (v & 0x7fffffffu) > 0x7f800000u;
    if (dt == CN_F64) return (v & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
    return false;
}

/* Run case c fused (at the current thread count) and one op at a time;
 * report the first difference. Returns the fused output. */
static cn_tensor *check_case(fcase *c, int id) {
    cn_tensor *reg[MAXIN + MAXINSTR];
    for (int i = 0; i < c->nin; i++) reg[i] = c->in[i];
    for (int k = 0; k < c->ninstr; k++) reg[c->nin + k] = apply_public(&c->instr[k], reg);
    cn_tensor *want = reg[c->result];
    cn_dtype odt = c->mask[c->result] ? CN_BOOL : c->T;
    cn_tensor *out = cn_empty(odt, c->ond, c->oshape);
    cn_fused_expr e = {c->nin, c->ninstr, c->instr, c->result};
    int rc = cn_fused_run(&e, c->in, out);
    CHECK_MSG(rc == 0, "case %d: cn_fused_run failed: %s", id, cn_last_error());
    CHECK_MSG(want && cn_tensor_dtype(want) == odt, "case %d: the reference failed or has dtype %s",
              id, want ? cn_dtype_name(cn_tensor_dtype(want)) : "-");
    if (rc != 0 || !want || cn_tensor_dtype(want) != odt) return out;
    int64_t n = cn_numel(out);
    uint64_t *a = bits_of(out, c, n), *b = bits_of(want, c, n);
    int64_t bad = -1;
    for (int64_t k = 0; k < n && bad < 0; k++)
        if (a[k] != b[k] && !(is_nan_bits(a[k], odt) && is_nan_bits(b[k], odt))) bad = k;
    th_checks++;
    if (bad >= 0) {
        char line[1024];
        int len = 0;
        for (int k = 0; k < c->ninstr; k++)
            len += snprintf(line + len, sizeof line - (size_t)len, " r%d=%s(%d,%d,%d)",
                            c->nin + k, cn_op_names[c->instr[k].op], c->instr[k].a,
                            c->instr[k].b, c->instr[k].c);
        double fa = 0, fb = 0;
        if (odt == CN_F32) {
            float x, y;
            memcpy(&x, &a[bad], 4);
            memcpy(&y, &b[bad], 4);
            fa = x, fb = y;
        } else if (odt == CN_F64) {
            memcpy(&fa, &a[bad], 8);
            memcpy(&fb, &b[bad], 8);
        } else {
            fa = (double)a[bad], fb = (double)b[bad];
        }
        th_fail(__FILE__, __LINE__, "case %d (%s, result r%d):%s: element %" PRId64
                " is %.9g (bits %#" PRIx64 "), one op at a time gives %.9g (bits %#" PRIx64 ")",
                id, cn_dtype_name(c->T), c->result, line, bad, fa, a[bad], fb, b[bad]);
    }
    free(a);
    free(b);
    return out;
}

static void make_case(fcase *c, bool big) {
    memset(c, 0, sizeof *c);
    c->T = th_randint(0, 4) ? CN_F32 : CN_F64;
    c->ond = (int)th_randint(0, 5);
    if (big) {
        /* Several blocks, rows that cross block edges, parallel chunks. */
        c->ond = (int)th_randint(2, 4);
        th_random_shape(c->ond, 3, 40, c->oshape);
        c->oshape[c->ond - 1] = th_randint(30, 200);
    } else {
        th_random_shape(c->ond, 1, 6, c->oshape);
        if (c->ond > 0 && th_randint(0, 8) == 0) c->oshape[0] = 0; /* empty */
    }
    c->nin = (int)th_randint(1, MAXIN + 1);
    for (int i = 0; i < c->nin; i++) {
        c->mask[i] = i > 0 && th_randint(0, 6) == 0;
        c->in[i] = random_input(c, c->mask[i]);
    }
    int ninstr = (int)th_randint(1, RANDINSTR + 1);
    for (int k = 0; k < ninstr; k++) random_instr(c, c->nin + k);
    /* Mostly the last register; sometimes an earlier one, so later
     * instructions are dead. */
    c->result = th_randint(0, 6) ? c->nin + c->ninstr - 1
                                 : (int)th_randint(0, c->nin + c->ninstr);
}

/* At every instruction-set level this machine has: the register machine's
 * loop is a different function at each (src/backend/cpu/fused_regs.c). */
static void test_random_small(void) {
    int before = cn_isa();
    for (int level = 0; level < CN_ISA_LEVELS; level++) {
        if (!cn_isa_available(level)) continue;
        CHECK(cn_isa_set(level) == CN_OK);
        th_seed(1234);
        for (int id = 0; id < 600; id++) {
            cn_scope_begin();
            fcase c;
            make_case(&c, false);
            check_case(&c, 100000 * level + id);
            cn_scope_end();
        }
    }
    cn_isa_set(before);
}

/* Large cases: several blocks each, fused at 2 threads against one op at a
 * time, and fused at 1 thread against fused at 2. */
static void test_random_large(void) {
    th_seed(99);
    int before = cn_get_num_threads();
    for (int id = 0; id < 24; id++) {
        cn_scope_begin();
        fcase c;
        make_case(&c, true);
        cn_set_num_threads(2);
        cn_tensor *o2 = check_case(&c, 10000 + id);
        cn_set_num_threads(1);
        cn_tensor *o1 = check_case(&c, 20000 + id);
        int64_t n = cn_numel(o1);
        size_t es = cn_dtype_size(cn_tensor_dtype(o1));
        CHECK_MSG(memcmp(cn_data(o1), cn_data(o2), (size_t)n * es) == 0,
                  "case %d: 1 and 2 threads differ", id);
        cn_scope_end();
    }
    cn_set_num_threads(before);
}

/* A fixed chain (the benchmark's kind) on a contiguous 1M-ish tensor and on
 * a transposed one. */
static void test_chain(void) {
    int64_t shape[2] = {301, 517};
    double *v = malloc(sizeof(double) * 301 * 517);
    for (int k = 0; k < 301 * 517; k++) v[k] = th_uniform(-4, 4);
    for (int layout = 0; layout < TH_NLAYOUTS; layout++) {
        fcase c = {.T = CN_F32, .ond = 2, .oshape = {301, 517}, .nin = 3};
        c.in[0] = th_make(CN_F32, 2, shape, v, layout);
        c.in[1] = th_make(CN_F32, 2, shape, v, TH_CONTIG);
        c.in[2] = cn_scalar(CN_F32, 2.0);
        cn_fused_instr ins[] = {
            {CN_OP_mul, 0, 2, -1},  {CN_OP_add, 3, 2, -1}, {CN_OP_tanh, 4, -1, -1},
            {CN_OP_mul, 5, 1, -1},  {CN_OP_relu, 6, -1, -1}, {CN_OP_sigmoid, 7, -1, -1},
            {CN_OP_sub, 8, 0, -1},  {CN_OP_exp, 9, -1, -1},
        };
        memcpy(c.instr, ins, sizeof ins);
        c.ninstr = NOF(ins);
        c.result = c.nin + c.ninstr - 1;
        check_case(&c, 30000 + layout);
    }
    free(v);
}

/* in[0] is out itself: an epilogue updating a result in place. */
/* Trees, where the register machine must store values (one side of each
 * add while the other is computed) and reuse the slots: a balanced sum of
 * 8 products of 4 inputs, and a value read by three later instructions,
 * over 4099 elements (blocks, groups and a partial group), f32 and f64. */
static void test_trees(void) {
    int64_t shape[1] = {4099};
    double *v = malloc(sizeof(double) * 4099);
    for (int dt = 0; dt < 2; dt++) {
        fcase c = {.T = dt ? CN_F64 : CN_F32, .ond = 1, .oshape = {4099}, .nin = 4};
        for (int i = 0; i < 4; i++) {
            for (int k = 0; k < 4099; k++) v[k] = th_uniform(-2, 2);
            c.in[i] = th_make(c.T, 1, shape, v, i == 3 ? TH_NLAYOUTS - 1 : TH_CONTIG);
        }
        /* 4..11: products of pairs; 12..15: pairwise sums; 16, 17; 18 the root */
        cn_fused_instr ins[] = {
            {CN_OP_mul, 0, 1, -1}, {CN_OP_mul, 2, 3, -1}, {CN_OP_mul, 0, 2, -1},
            {CN_OP_mul, 1, 3, -1}, {CN_OP_sub, 0, 3, -1}, {CN_OP_div, 1, 2, -1},
            {CN_OP_maximum, 3, 0, -1}, {CN_OP_minimum, 2, 1, -1},
            {CN_OP_add, 4, 5, -1}, {CN_OP_sub, 6, 7, -1}, {CN_OP_add, 8, 9, -1},
            {CN_OP_mul, 10, 11, -1}, {CN_OP_add, 12, 13, -1}, {CN_OP_sub, 15, 14, -1},
            {CN_OP_div, 17, 16, -1},
            /* 19 = tanh(18), read by three: 19 * 19 + where(19 > 0, 19, 0) */
            {CN_OP_tanh, 18, -1, -1}, {CN_OP_mul, 19, 19, -1}, {CN_OP_gt, 19, 0, -1},
            {CN_OP_where, 21, 19, 20}, {CN_OP_add, 20, 22, -1},
        };
        memcpy(c.instr, ins, sizeof ins);
        c.ninstr = NOF(ins);
        c.result = c.nin + c.ninstr - 1;
        check_case(&c, 40000 + dt);
    }
    free(v);
}

/* Many values alive at once, more than a chunk's stack holds (the heap
 * path) and a plan too big for the caller's stack: v_k = sin(v_(k-1)) for
 * k = 1..150, then v_1 + v_2 + ... + v_150, each v_k stored until the sum
 * reaches it. */
static void test_many_stored(void) {
    enum { K = 150, N = 5003 };
    cn_fused_instr *ins = calloc(2 * K, sizeof *ins);
    int n = 0;
    for (int k = 1; k <= K; k++) /* v_k is register k (input 0 is x = v_0) */
        ins[n++] = (cn_fused_instr){.op = CN_OP_sin, .a = (int16_t)(k - 1), .b = -1, .c = -1};
    int acc = 1;
    for (int k = 2; k <= K; k++) {
        ins[n] = (cn_fused_instr){.op = CN_OP_add, .a = (int16_t)acc, .b = (int16_t)k, .c = -1};
        acc = 1 + n++;
    }
    cn_tensor *x = th_random(CN_F32, CN_SHAPE(N), -3, 3, TH_CONTIG, NULL);
    cn_tensor *out = cn_empty(CN_F32, 1, (int64_t[]){N});
    cn_fused_expr e = {1, n, ins, acc};
    CHECK_MSG(cn_fused_run(&e, &x, out) == 0, "%s", cn_last_error());
    cn_tensor *v = x, *sum = NULL;
    for (int k = 1; k <= K; k++) {
        v = cn_sin(v);
        sum = k == 1 ? v : cn_add(sum, v);
    }
    CHECK(memcmp(cn_data(out), cn_data(sum), N * sizeof(float)) == 0);
    free(ins);
}

static void test_inplace(void) {
    int64_t shape[2] = {37, 129};
    cn_tensor *x = th_random(CN_F32, 2, shape, -2, 2, TH_CONTIG, NULL);
    int64_t bshape[1] = {129};
    cn_tensor *bias = th_random(CN_F32, 1, bshape, -1, 1, TH_CONTIG, NULL);
    cn_tensor *want = cn_gelu(cn_add(x, bias), false);
    cn_fused_instr ins[] = {{CN_OP_add, 0, 1, -1}, {CN_OP_gelu, 2, -1, -1}};
    cn_fused_expr e = {2, 2, ins, 3};
    cn_tensor *in[2] = {x, bias};
    CHECK(cn_fused_run(&e, in, x) == 0);
    CHECK(memcmp(cn_data(x), cn_data(want), sizeof(float) * 37 * 129) == 0);
    /* A shifted view of out's storage is refused. */
    cn_fused_instr ins2[] = {{CN_OP_neg, 0, -1, -1}};
    cn_fused_expr e2 = {1, 1, ins2, 1};
    cn_tensor *whole = cn_reshape(x, 1, (int64_t[]){37 * 129});
    cn_tensor *shifted = cn_slice(whole, 0, 1, CN_END, 1);
    cn_tensor *dst = cn_slice(whole, 0, 0, 37 * 129 - 1, 1);
    CHECK_STATUS_ERROR(cn_fused_run(&e2, &shifted, dst), "overlaps out");
    /* Disjoint parts of one storage are fine. */
    cn_tensor *lo = cn_slice(whole, 0, 0, 100, 1), *hi = cn_slice(whole, 0, 100, 200, 1);
    cn_tensor *want2 = cn_contiguous(cn_neg(hi));
    CHECK(cn_fused_run(&e2, &hi, lo) == 0);
    CHECK(memcmp(cn_data(lo), cn_data(want2), 100 * sizeof(float)) == 0);
}

/* Scalar-only expressions fill the output; an expression that is just an
 * input copies it; a result that needs nothing else skips the rest. */
static void test_special_forms(void) {
    int64_t shape[2] = {5, 3};
    cn_tensor *out = cn_empty(CN_F32, 2, shape);
    cn_tensor *s = cn_scalar(CN_F32, 0.25f);
    cn_fused_instr ins[] = {{CN_OP_exp, 0, -1, -1}, {CN_OP_pow, 1, 0, -1}};
    cn_fused_expr e = {1, 2, ins, 2};
    CHECK(cn_fused_run(&e, &s, out) == 0);
    float want = (float)cn_item(cn_pow(cn_exp(s), s));
    for (int k = 0; k < 15; k++) CHECK(((float *)cn_data(out))[k] == want);

    cn_tensor *x = th_random(CN_F32, 2, shape, -1, 1, TH_TRANSPOSED, NULL);
    cn_fused_expr copy = {1, 0, NULL, 0};
    CHECK(cn_fused_run(&copy, &x, out) == 0);
    cn_tensor *xc = cn_contiguous(x);
    CHECK(memcmp(cn_data(out), cn_data(xc), 15 * sizeof(float)) == 0);

    /* The result does not need the log: it is checked but not run. */
    cn_fused_instr dead[] = {{CN_OP_neg, 0, -1, -1}, {CN_OP_log, 0, -1, -1}};
    cn_fused_expr de = {1, 2, dead, 1};
    CHECK(cn_fused_run(&de, &x, out) == 0);
    cn_tensor *nx = cn_contiguous(cn_neg(x));
    CHECK(memcmp(cn_data(out), cn_data(nx), 15 * sizeof(float)) == 0);

    /* A mask result into a bool output. */
    cn_tensor *m = cn_empty(CN_BOOL, 2, shape);
    cn_fused_instr cmp[] = {{CN_OP_gt, 0, 1, -1}};
    cn_tensor *zero = cn_scalar(CN_F32, 0);
    cn_tensor *in2[2] = {x, zero};
    cn_fused_expr ce = {2, 1, cmp, 2};
    CHECK(cn_fused_run(&ce, in2, m) == 0);
    cn_tensor *mw = cn_contiguous(cn_gt(x, zero));
    CHECK(memcmp(cn_data(m), cn_data(mw), 15) == 0);
}

/* The first of n elements where a and b (of dtype T) differ in their bits,
 * any NaN matching any NaN; -1 if none. */
static int64_t first_diff(const cn_tensor *a, const cn_tensor *b, cn_dtype T, int64_t n) {
    size_t es = cn_dsize(T);
    for (int64_t k = 0; k < n; k++) {
        uint64_t x = 0, y = 0;
        memcpy(&x, (const char *)cn_data((cn_tensor *)a) + k * es, es);
        memcpy(&y, (const char *)cn_data((cn_tensor *)b) + k * es, es);
        if (x != y && !(is_nan_bits(x, T) && is_nan_bits(y, T))) return k;
    }
    return -1;
}

/* maximum and minimum with a constant operand (ReLU6, hardswish) run a
 * form without the NaN test of the operand: on either side, for a constant
 * of either sign of zero or NaN (which keeps the general form), they give
 * the unfused ops' bits on NaN, signed zeros, infinities and ties. So does
 * clamp, whose bounds keep their sign of zero. */
static void test_const_max_min(void) {
    static const double xs[] = {NAN, -NAN, 0.0, -0.0, INFINITY, -INFINITY, 6.0, -6.0, 3.5,
                                -1e-40, 1e30, 0.25, 7.0, -0.5};
    static const double cs[] = {0.0, -0.0, 6.0, -1.5, NAN, INFINITY};
    int64_t n = 131; /* a group and a part of one */
    double v[131];
    for (int64_t k = 0; k < n; k++) v[k] = xs[k % NOF(xs)];
    for (int dt = 0; dt < 2; dt++) {
        cn_dtype T = dt ? CN_F64 : CN_F32;
        cn_tensor *x = th_make(T, 1, &n, v, TH_CONTIG);
        cn_tensor *out = cn_empty(T, 1, &n);
        for (size_t ci = 0; ci < NOF(cs); ci++) {
            cn_tensor *cst = cn_scalar(T, cs[ci]);
            cn_tensor *in[2] = {x, cst};
            for (int form = 0; form < 4; form++) {
                /* op(-x, c) or op(c, -x): the neg leaves -x in the accumulator */
                bool max = form < 2, c_first = form & 1;
                cn_fused_instr ins[2] = {{CN_OP_neg, 0, -1, -1},
                                         {max ? CN_OP_maximum : CN_OP_minimum,
                                          (int16_t)(c_first ? 1 : 2), (int16_t)(c_first ? 2 : 1),
                                          -1}};
                cn_fused_expr e = {2, 2, ins, 3};
                CHECK(cn_fused_run(&e, in, out) == 0);
                cn_tensor *nx = cn_neg(x);
                cn_tensor *want = max ? (c_first ? cn_maximum(cst, nx) : cn_maximum(nx, cst))
                                      : (c_first ? cn_minimum(cst, nx) : cn_minimum(nx, cst));
                int64_t k = first_diff(out, want, T, n);
                CHECK_MSG(k < 0, "%s form %d c=%g x=%g", cn_dtype_name(T), form, cs[ci],
                          k < 0 ? 0 : -v[k]);
            }
        }
        cn_fused_instr cl = {CN_OP_clamp, 0, -1, -1};
        cl.attrs.f[0] = -0.0;
        cl.attrs.f[1] = 6.0;
        cn_fused_expr e = {1, 1, &cl, 1};
        CHECK(cn_fused_run(&e, &x, out) == 0);
        int64_t k = first_diff(out, cn_clamp(x, -0.0, 6.0), T, n);
        CHECK_MSG(k < 0, "%s clamp(%g, -0, 6)", cn_dtype_name(T), k < 0 ? 0 : v[k]);
    }
}

/* A bool byte other than 0 or 1 (a borrowed buffer) is true, as the
 * unfused kernels read it. */
static void test_bool_bytes(void) {
    static uint8_t bytes[6] = {0, 1, 2, 255, 0, 7};
    int64_t shape[1] = {6};
    cn_tensor *m = cn_from_buffer(CN_BOOL, 1, shape, bytes, NULL);
    cn_tensor *m2 = cn_slice(m, 0, CN_END, CN_BEGIN, -1); /* reversed */
    double vals[6] = {1, 2, 3, 4, 5, 6};
    cn_tensor *x = th_make(CN_F32, 1, shape, vals, TH_CONTIG);
    cn_tensor *zero = cn_scalar(CN_F32, 0);
    cn_tensor *in[4] = {m, m2, x, zero};
    /* where(m, x, 0), then where(m == m2, that, -x) */
    cn_fused_instr ins[] = {{CN_OP_where, 0, 2, 3},
                            {CN_OP_eq, 0, 1, -1},
                            {CN_OP_neg, 2, -1, -1},
                            {CN_OP_where, 5, 4, 6}};
    cn_fused_expr e = {4, 4, ins, 7};
    cn_tensor *out = cn_empty(CN_F32, 1, shape);
    CHECK(cn_fused_run(&e, in, out) == 0);
    cn_tensor *want = cn_contiguous(cn_where(cn_eq(m, m2), cn_where(m, x, zero), cn_neg(x)));
    CHECK(memcmp(cn_data(out), cn_data(want), 6 * sizeof(float)) == 0);
}

static void test_supports(void) {
    cn_attrs a = {0};
    CHECK(cn_fused_supports(CN_OP_add, &a, CN_F32));
    CHECK(cn_fused_supports(CN_OP_tanh, NULL, CN_F64));
    CHECK(cn_fused_supports(CN_OP_where, &a, CN_F32));
    CHECK(cn_fused_supports(CN_OP_lt, &a, CN_F32));
    CHECK(!cn_fused_supports(CN_OP_add, &a, CN_I32));
    CHECK(!cn_fused_supports(CN_OP_add, &a, CN_F16));
    CHECK(!cn_fused_supports(CN_OP_matmul, &a, CN_F32));
    CHECK(!cn_fused_supports(CN_OP_sum, &a, CN_F32));
    CHECK(!cn_fused_supports(CN_OP_softplus, &a, CN_F32)); /* beta 0 */
    a.f[0] = NAN;
    CHECK(!cn_fused_supports(CN_OP_clamp, &a, CN_F32));
    a = (cn_attrs){0};
    a.i[0] = CN_F64;
    CHECK(!cn_fused_supports(CN_OP_cast, &a, CN_F32));
    a.i[0] = CN_BOOL;
    CHECK(cn_fused_supports(CN_OP_cast, &a, CN_F32));
}

static void test_errors(void) {
    int64_t shape[2] = {4, 3};
    cn_tensor *x = th_random(CN_F32, 2, shape, -1, 1, TH_CONTIG, NULL);
    cn_tensor *out = cn_empty(CN_F32, 2, shape);
    cn_fused_instr neg[] = {{CN_OP_neg, 0, -1, -1}};
    cn_fused_expr e = {1, 1, neg, 1};

    cn_fused_instr fwd[] = {{CN_OP_neg, 1, -1, -1}};
    cn_fused_expr ef = {1, 1, fwd, 1};
    CHECK_STATUS_ERROR(cn_fused_run(&ef, &x, out), "not one written before it");
    cn_fused_expr er = {1, 1, neg, 5};
    CHECK_STATUS_ERROR(cn_fused_run(&er, &x, out), "result register 5");
    cn_fused_instr mm[] = {{CN_OP_matmul, 0, 0, -1}};
    cn_fused_expr em = {1, 1, mm, 1};
    CHECK_STATUS_ERROR(cn_fused_run(&em, &x, out), "not an op the kernel fuses");
    cn_fused_instr extra[] = {{CN_OP_neg, 0, 0, -1}};
    cn_fused_expr ex = {1, 1, extra, 1};
    CHECK_STATUS_ERROR(cn_fused_run(&ex, &x, out), "unused operand");
    cn_fused_instr sp[] = {{CN_OP_softplus, 0, -1, -1}};
    cn_fused_expr es = {1, 1, sp, 1};
    CHECK_STATUS_ERROR(cn_fused_run(&es, &x, out), "beta");

    int64_t bad_shape[2] = {4, 2};
    cn_tensor *y = cn_zeros(CN_F32, 2, bad_shape);
    CHECK_STATUS_ERROR(cn_fused_run(&e, &y, out), "does not broadcast");
    cn_tensor *xi = cn_zeros(CN_I32, 2, shape);
    CHECK_STATUS_ERROR(cn_fused_run(&e, &xi, out), "computes in f32");
    cn_tensor *outi = cn_empty(CN_I64, 2, shape);
    CHECK_STATUS_ERROR(cn_fused_run(&e, &x, outi), "only f32 and f64");
    cn_tensor *outt = cn_transpose(cn_empty(CN_F32, 2, (int64_t[]){3, 4}), 0, 1);
    CHECK_STATUS_ERROR(cn_fused_run(&e, &x, outt), "contiguous");

    /* Masks: not into arithmetic, and the result's kind must match out. */
    cn_tensor *m = cn_zeros(CN_BOOL, 2, shape);
    CHECK_STATUS_ERROR(cn_fused_run(&e, &m, out), "mask");
    cn_fused_instr gt[] = {{CN_OP_gt, 0, 0, -1}};
    cn_fused_expr eg = {1, 1, gt, 1};
    CHECK_STATUS_ERROR(cn_fused_run(&eg, &x, out), "is a mask but out is f32");
    cn_tensor *in2[2] = {x, m};
    cn_fused_instr add[] = {{CN_OP_add, 0, 1, -1}};
    cn_fused_expr ea = {2, 1, add, 2};
    CHECK_STATUS_ERROR(cn_fused_run(&ea, in2, out), "an operand is a mask");
    cn_fused_instr wh[] = {{CN_OP_where, 1, 0, 1}};
    cn_fused_expr ew = {2, 1, wh, 2};
    CHECK_STATUS_ERROR(cn_fused_run(&ew, in2, out), "one branch is a mask");
    CHECK_STATUS_ERROR(cn_fused_run(NULL, &x, out), "NULL");
    cn_fused_expr eneg = {-1, 1, neg, 0};
    CHECK_STATUS_ERROR(cn_fused_run(&eneg, &x, out), "bad expression");
    cn_tensor *nul = NULL;
    CHECK_STATUS_ERROR(cn_fused_run(&e, &nul, out), "input 0 is NULL");
}

int main(void) {
    RUN(test_supports);
    RUN(test_errors);
    RUN(test_special_forms);
    RUN(test_const_max_min);
    RUN(test_bool_bytes);
    RUN(test_inplace);
    RUN(test_chain);
    RUN(test_trees);
    RUN(test_many_stored);
    RUN(test_random_small);
    RUN(test_random_large);
    return th_summary();
}
