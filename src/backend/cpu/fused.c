/* The fused elementwise kernel (src/backend/fused_expr.h).
 *
 * The expression becomes code for an accumulator machine
 * (src/backend/cpu/fused_regs.h) that holds one group of the output (128 f32
 * or 64 f64 elements) in vector registers: a chain of ops runs from
 * register to register, and only values read more than once (trees, shared
 * subexpressions) are stored, into a group-sized slot in L1. The output is
 * cut into blocks of FU_BLOCK elements; per block each input is read once:
 * straight from the tensor when it is laid out like the output, else
 * gathered into a block buffer (runs along its innermost merged axis, with
 * fills for broadcast axes). Values that do not vary over the output (every
 * input they depend on has one element) are computed once, before the
 * blocks, by the ops' loops with n = 1: they are what an unfused op sees as
 * a one-element tensor, which is also where pow takes its shortcuts; the
 * code reads them from filled groups.
 *
 * Blocks are split over the thread pool; each element is computed the same
 * way whatever the split, so the thread count does not change the bits. */
#include "../fused_expr.h"
#include "epilogue.h"

#include "fused_regs.h"

#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

#define FU_BLOCK 1024
/* A group: what the register machine computes at once. */
#define FU_GROUP CN_FR_GROUP_BYTES
_Static_assert(FU_BLOCK % (FU_GROUP / 4) == 0 && FU_BLOCK % (FU_GROUP / 8) == 0,
               "a gathered block is whole groups");
/* Gather buffers are this many bytes further apart than a block: with
 * buffers a multiple of 4 KiB apart, loads and stores alias in the CPU's
 * store buffer (a load waits for an unrelated store). */
#define FU_SLOT_PAD 192
/* A chunk's buffers up to this size live on its stack. */
#define FU_STACK_BYTES 32768

/* ---- the ops ---- */

enum {
    FC_UNARY,  /* value -> value (kind: cn_unary_kind) */
    FC_ARITH,  /* value, value -> value (kind: cn_binary_kind) */
    FC_CMP,    /* any, any -> mask */
    FC_LOGIC,  /* any, any -> mask */
    FC_NOT,    /* any -> mask */
    FC_WHERE,  /* any, v, v -> v (v: both values or both masks) */
    FC_CAST,   /* any -> value (to T) or mask (to bool) */
    FC_COPY    /* any -> the same (contiguous) */
};

typedef struct fu_opinfo {
    uint8_t cls;
    uint8_t nargs;
    int kind;
} fu_opinfo;

static bool op_info(int op, fu_opinfo *o) {
#define U(ID, K)                                                                                   \
    case CN_OP_##ID: *o = (fu_opinfo){FC_UNARY, 1, K}; return true;
#define B(ID, C, K)                                                                                \
    case CN_OP_##ID: *o = (fu_opinfo){C, 2, K}; return true;
    switch (op) {
        U(neg, CN_UN_NEG) U(abs, CN_UN_ABS) U(sign, CN_UN_SIGN) U(exp, CN_UN_EXP)
        U(log, CN_UN_LOG) U(log1p, CN_UN_LOG1P) U(expm1, CN_UN_EXPM1) U(sqrt, CN_UN_SQRT)
        U(rsqrt, CN_UN_RSQRT) U(square, CN_UN_SQUARE) U(reciprocal, CN_UN_RECIPROCAL)
        U(sin, CN_UN_SIN) U(cos, CN_UN_COS) U(tanh, CN_UN_TANH) U(sigmoid, CN_UN_SIGMOID)
        U(relu, CN_UN_RELU) U(leaky_relu, CN_UN_LEAKY_RELU) U(elu, CN_UN_ELU)
        U(gelu, CN_UN_GELU) U(silu, CN_UN_SILU) U(softplus, CN_UN_SOFTPLUS) U(erf, CN_UN_ERF)
        U(floor, CN_UN_FLOOR) U(ceil, CN_UN_CEIL) U(round, CN_UN_ROUND) U(clamp, CN_UN_CLAMP)
        B(add, FC_ARITH, CN_BIN_ADD) B(sub, FC_ARITH, CN_BIN_SUB) B(mul, FC_ARITH, CN_BIN_MUL)
        B(div, FC_ARITH, CN_BIN_DIV) B(pow, FC_ARITH, CN_BIN_POW)
        B(maximum, FC_ARITH, CN_BIN_MAX) B(minimum, FC_ARITH, CN_BIN_MIN)
        B(eq, FC_CMP, CN_BIN_EQ) B(ne, FC_CMP, CN_BIN_NE) B(lt, FC_CMP, CN_BIN_LT)
        B(le, FC_CMP, CN_BIN_LE) B(gt, FC_CMP, CN_BIN_GT) B(ge, FC_CMP, CN_BIN_GE)
        B(logical_and, FC_LOGIC, CN_BIN_AND) B(logical_or, FC_LOGIC, CN_BIN_OR)
        B(logical_xor, FC_LOGIC, CN_BIN_XOR)
    case CN_OP_logical_not: *o = (fu_opinfo){FC_NOT, 1, CN_UN_LOGICAL_NOT}; return true;
    case CN_OP_where: *o = (fu_opinfo){FC_WHERE, 3, 0}; return true;
    case CN_OP_cast: *o = (fu_opinfo){FC_CAST, 1, 0}; return true;
    case CN_OP_contiguous: *o = (fu_opinfo){FC_COPY, 1, 0}; return true;
    default: return false;
    }
#undef U
#undef B
}

static const char *op_name(int op) {
    return op >= 0 && op < CN_OP_COUNT ? cn_op_names[op] : "?";
}

/* The attribute checks the op's inference makes (an expression may be built
 * without it), as an error message or NULL. */
static const char *attrs_problem(int op, const cn_attrs *a, cn_dtype dt) {
    switch (op) {
    case CN_OP_gelu:
        return a->i[0] == 0 || a->i[0] == 1 ? NULL : "approximate is not 0 or 1";
    case CN_OP_softplus:
        if (a->f[0] == 0 || isnan(a->f[0])) return "beta is 0 or NaN";
        return isnan(a->f[1]) ? "threshold is NaN" : NULL;
    case CN_OP_clamp: return isnan(a->f[0]) || isnan(a->f[1]) ? "a bound is NaN" : NULL;
    case CN_OP_cast:
        return a->i[0] == dt || a->i[0] == CN_BOOL ? NULL
                                                   : "casts only to the expression's dtype or bool";
    default: return NULL;
    }
}

bool cn_fused_supports(cn_op_id op, const cn_attrs *a, cn_dtype dt) {
    fu_opinfo o;
    if (dt != CN_F32 && dt != CN_F64) return false;
    if (!op_info(op, &o)) return false;
    cn_attrs zero = {0};
    return attrs_problem(op, a ? a : &zero, dt) == NULL;
}

/* ---- the plan ---- */

enum { RK_VAL, RK_MASK };
enum { IN_UNUSED, IN_DIRECT, IN_GATHER, IN_SCALAR };

typedef struct fu_input {
    int mode;
    cn_dtype dt;
    const char *base; /* the element at output index 0 */
    int ndim;         /* merged axes (>= 1) */
    int64_t shape[CN_MAX_DIMS], stride[CN_MAX_DIMS];
} fu_input;

/* An instruction the result needs whose value varies over the output. */
typedef struct fu_step {
    cn_fk_fn fn;    /* the op's loop (a CALL, or a scalar step computed at plan time) */
    uint8_t frop;   /* CN_FR_* */
    int dst;
    int arg[3];     /* registers, -1 unused */
    bool scal[3];   /* the argument does not vary over the output */
    cn_fk_params p;
} fu_step;

/* A register the code reads from a chunk's own buffer: a scalar's filled
 * group, or a value stored for a later reader. (Inputs are read where
 * their mode says; a gathered one's buffer is its slot.) */
enum { RB_NONE, RB_FILLED, RB_STORED };

typedef struct fu_reg {
    _Alignas(8) unsigned char sval[8]; /* a scalar register's value (T) */
    uint8_t buf;  /* RB_* */
    int slot;     /* its gather, filled or stored buffer's index */
    int uses;     /* reads by the steps not yet coded */
    int last;     /* the last step reading it, -1 none */
    uint8_t kind; /* RK_* */
    bool scalar;  /* the value does not vary over the output */
    bool need;    /* the result depends on it */
} fu_reg;

typedef struct fu_plan {
    cn_dtype T;
    int64_t es;
    int nin, nreg, result;
    int64_t numel;
    char *out;
    cn_dtype out_dt;
    bool fill;   /* the result does not vary: out is filled with it */
    fu_input *in;
    fu_step *steps;
    int nsteps;
    fu_reg *reg;
    cn_fr_code *code;
    int ncode;
    int16_t *adv;  /* registers read straight from inputs or gather buffers */
    int nadv;
    int *freelist;
    int ngather, nfilled, nstored;
    atomic_bool oom; /* a chunk could not get its buffers */
    void *arena;     /* the arrays above, when not on the caller's stack */
} fu_plan;

/* Small expressions plan on the caller's stack: a plan's mallocs were a
 * good part of a small fused step's time. */
#define FU_PLAN_STACK 8192

static size_t round8(size_t n) { return (n + 7) / 8 * 8; }

/* Each step codes at most a LOAD, its op and a STORE; one more for an
 * expression that is one of its inputs. */
static size_t plan_bytes(int nin, int ninstr) {
    int nreg = nin + ninstr;
    return round8(sizeof(fu_input) * (size_t)nin) + round8(sizeof(fu_step) * (size_t)ninstr) +
           round8(sizeof(fu_reg) * (size_t)nreg) +
           round8(sizeof(cn_fr_code) * (size_t)(3 * ninstr + 1)) +
           round8(sizeof(int16_t) * (size_t)nin) + sizeof(int) * (size_t)(nreg + 1);
}

/* Carve the plan's arrays out of p->arena if set (zeroed, plan_bytes
 * long), else out of a new block. */
static int plan_alloc(fu_plan *p, int nin, int ninstr) {
    size_t n = plan_bytes(nin, ninstr);
    char *m = p->arena;
    if (!m) {
        m = p->arena = calloc(1, n);
        if (!m) return cn_failc(CN_ENOMEM, "fused: out of memory");
    }
    p->in = (fu_input *)m;
    m += round8(sizeof(fu_input) * (size_t)nin);
    p->steps = (fu_step *)m;
    m += round8(sizeof(fu_step) * (size_t)ninstr);
    p->reg = (fu_reg *)m;
    m += round8(sizeof(fu_reg) * (size_t)(nin + ninstr));
    p->code = (cn_fr_code *)m;
    m += round8(sizeof(cn_fr_code) * (size_t)(3 * ninstr + 1));
    p->adv = (int16_t *)m;
    m += round8(sizeof(int16_t) * (size_t)nin);
    p->freelist = (int *)m;
    for (int r = 0; r < nin + ninstr; r++) p->reg[r].slot = p->reg[r].last = -1;
    return CN_OK;
}

static bool broadcasts_to(const cn_tensor *t, const cn_tensor *out) {
    if (t->ndim > out->ndim) return false;
    for (int i = 0; i < t->ndim; i++) {
        int64_t s = t->shape[t->ndim - 1 - i], o = out->shape[out->ndim - 1 - i];
        if (s != o && s != 1) return false;
    }
    return true;
}

/* The input's strides over out's axes (0 where broadcast), with size-1 axes
 * dropped and axes merged wherever the input steps over them as one. */
static void describe_input(fu_input *fi, const cn_tensor *t, const cn_tensor *out) {
    int64_t sh[CN_MAX_DIMS], st[CN_MAX_DIMS];
    int nd = 0, lead = out->ndim - t->ndim;
    for (int d = 0; d < out->ndim; d++) {
        if (out->shape[d] == 1) continue;
        int td = d - lead;
        sh[nd] = out->shape[d];
        st[nd] = td < 0 || t->shape[td] == 1 ? 0 : t->strides[td];
        nd++;
    }
    fi->ndim = 0;
    for (int d = 0; d < nd; d++) {
        int m = fi->ndim;
        if (m > 0 && fi->stride[m - 1] == st[d] * sh[d]) {
            fi->shape[m - 1] *= sh[d];
            fi->stride[m - 1] = st[d];
        } else {
            fi->shape[m] = sh[d];
            fi->stride[m] = st[d];
            fi->ndim++;
        }
    }
    if (fi->ndim == 0) {
        fi->ndim = 1;
        fi->shape[0] = 1;
        fi->stride[0] = 0;
    }
    fi->dt = (cn_dtype)t->dtype;
    fi->base = cn_t_ptr(t);
}

/* Bytes [lo, hi) that t's elements occupy in its storage. */
static void byte_range(const cn_tensor *t, int64_t *lo, int64_t *hi) {
    int64_t a = t->offset, b = t->offset;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] == 0) {
            *lo = *hi = 0;
            return;
        }
        int64_t span = (t->shape[d] - 1) * t->strides[d];
        if (span < 0) a += span;
        else b += span;
    }
    int64_t es = (int64_t)cn_dsize((cn_dtype)t->dtype);
    *lo = a * es;
    *hi = (b + 1) * es;
}

/* One input element as T (a bool as 0/1; a value's bits as they are). */
static void load_scalar(const fu_input *fi, cn_dtype T, void *dst) {
    if (fi->dt == T) {
        memcpy(dst, fi->base, cn_dsize(T));
        return;
    }
    double v = *(const uint8_t *)fi->base != 0;
    if (T == CN_F32) *(float *)dst = (float)v;
    else *(double *)dst = v;
}

/* A cast of step s that turns a value into a 0/1 mask (else it copies). */
static bool cast_truth(const fu_plan *p, const cn_attrs *a, const fu_step *s) {
    return a->i[0] == CN_BOOL && p->reg[s->arg[0]].kind == RK_VAL;
}

/* The loop of step s (operands' scalar flags set), or NULL. Operands are
 * always blocks: a scalar step's are blocks of one, and a CALL reads a
 * scalar from its filled group. */
static cn_fk_fn pick(const fu_plan *p, const fu_opinfo *oi, const cn_attrs *a, fu_step *s) {
    cn_dtype T = p->T;
    switch (oi->cls) {
    case FC_UNARY: {
        int k = oi->kind;
        if (k == CN_UN_GELU && a->i[0]) k = CN_UN_GELU_TANH;
        return cn_fk_unary((cn_unary_kind)k, T);
    }
    case FC_NOT: return cn_fk_unary(CN_UN_LOGICAL_NOT, T);
    case FC_ARITH:
        /* An unfused pow whose exponent has one element takes binary.c's
         * shortcuts; so does a scalar exponent here. */
        if (oi->kind == CN_BIN_POW && s->scal[1]) {
            const void *e = p->reg[s->arg[1]].sval;
            cn_fk_fn f = cn_fk_pow_scalar(T, T == CN_F32 ? *(const float *)e : *(const double *)e);
            if (f) {
                s->arg[1] = -1;
                s->scal[1] = false;
                return f;
            }
        }
        return cn_fk_binary((cn_binary_kind)oi->kind, T);
    case FC_CMP:
    case FC_LOGIC: return cn_fk_binary((cn_binary_kind)oi->kind, T);
    case FC_WHERE: return cn_fk_where(T);
    case FC_CAST: return cast_truth(p, a, s) ? cn_fk_truth(T) : cn_fk_copy(T);
    default: return cn_fk_copy(T);
    }
}

/* The register machine's op for step s (CN_FR_CALL: its loop, from pick). */
static uint8_t reg_op(const fu_plan *p, const fu_opinfo *oi, const cn_attrs *a, const fu_step *s) {
    switch (oi->cls) {
    case FC_UNARY:
        switch (oi->kind) {
        case CN_UN_NEG: return CN_FR_NEG;
        case CN_UN_ABS: return CN_FR_ABS;
        case CN_UN_SIGN: return CN_FR_SIGN;
        case CN_UN_SQUARE: return CN_FR_SQUARE;
        case CN_UN_RECIPROCAL: return CN_FR_RECIPROCAL;
        case CN_UN_RELU: return CN_FR_RELU;
        case CN_UN_LEAKY_RELU: return CN_FR_LEAKY_RELU;
        case CN_UN_CLAMP: return CN_FR_CLAMP;
        default: return CN_FR_CALL;
        }
    case FC_NOT: return CN_FR_NOT;
    case FC_ARITH:
    case FC_CMP:
    case FC_LOGIC:
        switch (oi->kind) {
        case CN_BIN_ADD: return CN_FR_ADD;
        case CN_BIN_SUB: return CN_FR_SUB;
        case CN_BIN_MUL: return CN_FR_MUL;
        case CN_BIN_DIV: return CN_FR_DIV;
        case CN_BIN_MAX: return CN_FR_MAX;
        case CN_BIN_MIN: return CN_FR_MIN;
        case CN_BIN_EQ: return CN_FR_EQ;
        case CN_BIN_NE: return CN_FR_NE;
        case CN_BIN_LT: return CN_FR_LT;
        case CN_BIN_LE: return CN_FR_LE;
        case CN_BIN_GT: return CN_FR_GT;
        case CN_BIN_GE: return CN_FR_GE;
        case CN_BIN_AND: return CN_FR_AND;
        case CN_BIN_OR: return CN_FR_OR;
        case CN_BIN_XOR: return CN_FR_XOR;
        default: return CN_FR_CALL; /* pow */
        }
    case FC_WHERE: return CN_FR_WHERE;
    case FC_CAST: return cast_truth(p, a, s) ? CN_FR_TRUTH : CN_FR_COPY;
    default: return CN_FR_COPY;
    }
}

/* A maximum or minimum whose operand other than acc is the scalar register
 * r: its value as the op's parameter, when it is not NaN (ReLU6 and
 * hardswish are written as maximum and minimum with constants). */
static void const_operand(const fu_plan *p, cn_fr_code *c, int r) {
    double v = p->T == CN_F32 ? *(const float *)p->reg[r].sval : *(const double *)p->reg[r].sval;
    if (v != v) return;
    bool max = c->op == CN_FR_MAX;
    c->op = c->accpos == 0 ? (max ? CN_FR_MAX_C0 : CN_FR_MIN_C0)
                           : (max ? CN_FR_MAX_C1 : CN_FR_MIN_C1);
    c->p.f0 = (float)v;
    c->p.d0 = v;
    c->arg[1 - c->accpos] = -1;
}

/* The steps as code for the register machine. The accumulator keeps the
 * last step's value; a value is stored to a group slot only when something
 * other than the very next step (or that step twice) reads it. Slots are
 * reused once their value's last reader is coded. */
static void plan_code(fu_plan *p) {
    int *freelist = p->freelist, nfree = 0;
    cn_fr_code *code = p->code;
    int n = 0;
    /* Inputs read group by group; scalars from filled groups. */
    for (int i = 0; i < p->nin; i++) {
        if (p->in[i].mode == IN_GATHER) p->reg[i].slot = p->ngather++;
        if (p->in[i].mode == IN_DIRECT || p->in[i].mode == IN_GATHER) p->adv[p->nadv++] = (int16_t)i;
    }
    for (int k = 0; k < p->nsteps; k++) {
        const fu_step *s = &p->steps[k];
        for (int j = 0; j < 3; j++) {
            int a = s->arg[j];
            if (a < 0) continue;
            fu_reg *ra = &p->reg[a];
            if (s->scal[j] && ra->buf == RB_NONE) ra->buf = RB_FILLED, ra->slot = p->nfilled++;
            if (!s->scal[j]) ra->uses++, ra->last = k;
        }
    }
    if (p->nsteps == 0) {
        /* The result is an input, laid out differently from out. */
        code[n++] = (cn_fr_code){.op = CN_FR_LOAD, .arg = {(int16_t)p->result, -1, -1}};
        p->ncode = n;
        return;
    }
    int acc = -1;
    for (int k = 0; k < p->nsteps; k++) {
        const fu_step *s = &p->steps[k];
        int pos = -1;
        for (int j = 0; j < 3 && pos < 0; j++)
            if (s->arg[j] >= 0 && s->arg[j] == acc) pos = j;
        if (pos < 0) {
            pos = 0;
            code[n++] = (cn_fr_code){.op = CN_FR_LOAD, .arg = {(int16_t)s->arg[0], -1, -1}};
        }
        if (s->frop != CN_FR_COPY) {
            cn_fr_code *c = &code[n++];
            *c = (cn_fr_code){.op = s->frop, .accpos = (uint8_t)pos, .fn = s->fn, .p = s->p};
            for (int j = 0; j < 3; j++) c->arg[j] = j == pos ? -1 : (int16_t)s->arg[j];
            if ((s->frop == CN_FR_MAX || s->frop == CN_FR_MIN) && s->scal[1 - pos])
                const_operand(p, c, s->arg[1 - pos]);
        }
        for (int j = 0; j < 3; j++) {
            int a = s->arg[j];
            if (a < 0 || s->scal[j]) continue;
            fu_reg *ra = &p->reg[a];
            ra->uses--;
            if (ra->last == k && ra->buf == RB_STORED) {
                freelist[nfree++] = ra->slot;
                ra->last = -1; /* given back once, even if read twice here */
            }
        }
        acc = s->dst;
        fu_reg *rd = &p->reg[acc];
        if (k + 1 < p->nsteps) {
            const fu_step *nx = &p->steps[k + 1];
            int next_reads = 0;
            for (int j = 0; j < 3; j++) next_reads += nx->arg[j] == acc && !nx->scal[j];
            if (!(rd->uses == 1 && next_reads == 1)) {
                rd->buf = RB_STORED;
                rd->slot = nfree > 0 ? freelist[--nfree] : p->nstored++;
                code[n++] = (cn_fr_code){.op = CN_FR_STORE, .arg = {(int16_t)acc, -1, -1}};
            }
        }
    }
    p->ncode = n;
}

static int fail_instr(int k, int op, const char *what) {
    return cn_failc(CN_EINVAL, "fused: instruction %d (%s): %s", k, op_name(op), what);
}

/* Check the expression against the tensors and plan its run. */
static int plan_build(fu_plan *p, const cn_fused_expr *e, cn_tensor *const *in, cn_tensor *out) {
    char b1[160], b2[160];
    if (!e || (e->nin > 0 && !in) || !out) return cn_failc(CN_EINVAL, "fused: NULL argument");
    if (e->nin < 0 || e->ninstr < 0 || (e->ninstr > 0 && !e->instr) ||
        (int64_t)e->nin + e->ninstr > INT16_MAX)
        return cn_failc(CN_EINVAL, "fused: bad expression (%d inputs, %d instructions)", e->nin,
                        e->ninstr);
    int nreg = e->nin + e->ninstr;
    if (e->result < 0 || e->result >= nreg)
        return cn_failc(CN_EINVAL, "fused: result register %d is not one of the %d registers",
                        e->result, nreg);
    if (!out->storage || !cn_is_contiguous(out))
        return cn_failc(CN_EINVAL, "fused: out %s must be a contiguous tensor with data",
                        cn_shape_str(out, b1, sizeof b1));
    /* T: out's dtype, or for a mask result the inputs' float dtype. */
    cn_dtype T = (cn_dtype)out->dtype;
    if (T == CN_BOOL) {
        T = CN_F32;
        for (int i = 0; i < e->nin; i++)
            if (in[i] && in[i]->dtype != CN_BOOL) {
                T = (cn_dtype)in[i]->dtype;
                break;
            }
    }
    if (T != CN_F32 && T != CN_F64)
        return cn_failc(CN_EUNSUPPORTED, "fused: out %s: only f32 and f64 expressions (and bool "
                        "masks) are supported", cn_shape_str(out, b1, sizeof b1));
    p->T = T;
    p->es = (int64_t)cn_dsize(T);
    p->nin = e->nin;
    p->nreg = nreg;
    p->result = e->result;
    p->numel = cn_numel(out);
    p->out = cn_t_ptr(out);
    p->out_dt = (cn_dtype)out->dtype;
    if (plan_alloc(p, e->nin, e->ninstr) < 0) return CN_ENOMEM;

    /* Inputs. */
    int64_t olo, ohi;
    byte_range(out, &olo, &ohi);
    for (int i = 0; i < e->nin; i++) {
        const cn_tensor *t = in[i];
        if (!t) return cn_failc(CN_EINVAL, "fused: input %d is NULL", i);
        if (!t->storage)
            return cn_failc(CN_EINVAL, "fused: input %d %s has no data (symbolic)", i,
                            cn_shape_str(t, b1, sizeof b1));
        if (t->dtype != T && t->dtype != CN_BOOL)
            return cn_failc(CN_EINVAL, "fused: input %d is %s; the expression computes in %s "
                            "(inputs are %s or bool)", i, cn_shape_str(t, b1, sizeof b1),
                            cn_dtype_name(T), cn_dtype_name(T));
        if (!broadcasts_to(t, out))
            return cn_failc(CN_EINVAL, "fused: input %d %s does not broadcast to out %s", i,
                            cn_shape_str(t, b1, sizeof b1), cn_shape_str(out, b2, sizeof b2));
        fu_input *fi = &p->in[i];
        describe_input(fi, t, out);
        p->reg[i].kind = t->dtype == CN_BOOL ? RK_MASK : RK_VAL;
        bool direct = t->dtype == T && fi->ndim == 1 && fi->stride[0] == 1;
        p->reg[i].scalar = p->numel <= 1 || (fi->ndim == 1 && fi->stride[0] == 0);
        fi->mode = p->reg[i].scalar ? IN_SCALAR : direct ? IN_DIRECT : IN_GATHER;
        if (p->numel > 0 && t->storage == out->storage) {
            int64_t lo, hi;
            byte_range(t, &lo, &hi);
            if (lo < ohi && olo < hi) {
                /* Only out itself, read block by block before the block is
                 * written. */
                bool same_one = p->numel == 1 && cn_t_ptr(t) == p->out;
                if (!same_one && !(fi->ndim == 1 && fi->stride[0] == 1 && fi->base == p->out &&
                                   cn_dsize((cn_dtype)t->dtype) == cn_dsize(p->out_dt)))
                    return cn_failc(CN_EINVAL, "fused: input %d %s overlaps out %s without "
                                    "being it", i, cn_shape_str(t, b1, sizeof b1),
                                    cn_shape_str(out, b2, sizeof b2));
            }
        }
    }

    /* Instructions: operands, kinds, scalar flags. */
    for (int k = 0; k < e->ninstr; k++) {
        const cn_fused_instr *ins = &e->instr[k];
        int r = e->nin + k;
        fu_opinfo oi;
        if (!op_info(ins->op, &oi)) return fail_instr(k, ins->op, "not an op the kernel fuses");
        const char *bad = attrs_problem(ins->op, &ins->attrs, T);
        if (bad) return fail_instr(k, ins->op, bad);
        int16_t args[3] = {ins->a, ins->b, ins->c};
        bool all_scalar = true;
        for (int j = 0; j < 3; j++) {
            if (j >= oi.nargs) {
                if (args[j] != -1) return fail_instr(k, ins->op, "an unused operand is not -1");
                continue;
            }
            if (args[j] < 0 || args[j] >= r)
                return cn_failc(CN_EINVAL, "fused: instruction %d (%s): operand %d is register "
                                "%d, not one written before it (0..%d)", k, op_name(ins->op),
                                j, args[j], r - 1);
            all_scalar &= p->reg[args[j]].scalar;
        }
        uint8_t ka = p->reg[args[0]].kind;
        switch (oi.cls) {
        case FC_UNARY:
            if (ka != RK_VAL) return fail_instr(k, ins->op, "its operand is a mask, not a value");
            p->reg[r].kind = RK_VAL;
            break;
        case FC_ARITH:
            if (ka != RK_VAL || p->reg[args[1]].kind != RK_VAL)
                return fail_instr(k, ins->op, "an operand is a mask, not a value (cast it)");
            p->reg[r].kind = RK_VAL;
            break;
        case FC_WHERE:
            if (p->reg[args[1]].kind != p->reg[args[2]].kind)
                return fail_instr(k, ins->op, "one branch is a mask and the other a value");
            p->reg[r].kind = p->reg[args[1]].kind;
            break;
        case FC_CAST: p->reg[r].kind = ins->attrs.i[0] == CN_BOOL ? RK_MASK : RK_VAL; break;
        case FC_COPY: p->reg[r].kind = ka; break;
        default: p->reg[r].kind = RK_MASK; break;
        }
        p->reg[r].scalar = all_scalar;
    }
    uint8_t rk = p->reg[e->result].kind;
    if ((rk == RK_MASK) != (p->out_dt == CN_BOOL))
        return cn_failc(CN_EINVAL, "fused: the result register %d is a %s but out is %s",
                        e->result, rk == RK_MASK ? "mask" : "value",
                        cn_dtype_name(p->out_dt));
    if (p->numel == 0) return CN_OK;

    /* What the result needs: steps and inputs it does not depend on are
     * skipped. p->reg[r].last: the last step reading r as a block. */
    p->reg[e->result].need = true;
    for (int k = e->ninstr - 1; k >= 0; k--) {
        if (!p->reg[e->nin + k].need) continue;
        const cn_fused_instr *ins = &e->instr[k];
        int16_t args[3] = {ins->a, ins->b, ins->c};
        for (int j = 0; j < 3; j++)
            if (args[j] >= 0) p->reg[args[j]].need = true;
    }
    for (int i = 0; i < e->nin; i++) {
        if (!p->reg[i].need) p->in[i].mode = IN_UNUSED;
        else if (p->in[i].mode == IN_SCALAR) load_scalar(&p->in[i], T, p->reg[i].sval);
    }

    /* Steps, computing scalar ones now. */
    int rc = CN_OK;
    for (int k = 0; k < e->ninstr && rc == CN_OK; k++) {
        int r = e->nin + k;
        if (!p->reg[r].need) continue;
        const cn_fused_instr *ins = &e->instr[k];
        fu_opinfo oi;
        op_info(ins->op, &oi);
        /* Built in place, field by field (a compound literal became a slow
         * `rep stos` per step); a scalar step's slot is reused by the next. */
        fu_step *s = &p->steps[p->nsteps];
        s->fn = NULL;
        s->dst = r;
        s->arg[0] = ins->a, s->arg[1] = ins->b, s->arg[2] = ins->c;
        s->scal[0] = s->scal[1] = s->scal[2] = false;
        const cn_attrs *a = &ins->attrs;
        s->p = (cn_fk_params){(float)a->f[0], (float)a->f[1], a->f[0], a->f[1]};
        if (p->reg[r].scalar) {
            /* Operands are blocks of one; pow sees its exponent as scalar. */
            s->scal[1] = oi.cls != FC_WHERE && oi.nargs == 2;
            cn_fk_fn f = pick(p, &oi, a, s);
            if (!f) {
                rc = fail_instr(k, ins->op, "no kernel for this dtype");
                break;
            }
            const void *x[3];
            for (int j = 0; j < 3; j++) x[j] = s->arg[j] >= 0 ? p->reg[s->arg[j]].sval : NULL;
            f(1, p->reg[r].sval, x[0], x[1], x[2], &s->p);
            continue;
        }
        for (int j = 0; j < oi.nargs; j++) s->scal[j] = p->reg[s->arg[j]].scalar;
        s->frop = reg_op(p, &oi, a, s);
        if (s->frop == CN_FR_CALL) {
            s->fn = pick(p, &oi, a, s);
            if (!s->fn) {
                rc = fail_instr(k, ins->op, "no kernel for this dtype");
                break;
            }
        }
        p->nsteps++;
    }
    p->fill = p->reg[e->result].scalar;
    if (rc == CN_OK && !p->fill) plan_code(p);
    return rc;
}

/* ---- running ---- */

/* n elements from src (dtype sdt, stride s in elements) into the T block
 * dst; bool becomes 0/1. A hot loop for broadcast inputs: a per-channel
 * scale of an NCHW tensor fills a run of H x W elements per channel
 * (DenseNet-121's batch norms before each convolution: the gathers took
 * twice the time of the arithmetic). */
CN_HOT_FN(copy_run, (char *dst, cn_dtype T, const char *src, cn_dtype sdt, int64_t s, int64_t n),
          (dst, T, src, sdt, s, n)) {
#define RUN(TD, TS, CONV)                                                                          \
    do {                                                                                           \
        TD *o = (TD *)dst;                                                                         \
        const TS *x = (const TS *)src;                                                             \
        if (s == 1) {                                                                              \
            for (int64_t i = 0; i < n; i++) o[i] = CONV(x[i]);                                     \
        } else if (s == 0) {                                                                       \
            const TD v = CONV(x[0]);                                                               \
            for (int64_t i = 0; i < n; i++) o[i] = v;                                              \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++) o[i] = CONV(x[i * s]);                                 \
        }                                                                                          \
    } while (0)
#define AS_IS(v) (v)
#define TRUTH_F(v) (float)((v) != 0)
#define TRUTH_D(v) (double)((v) != 0)
    if (sdt == CN_BOOL) {
        if (T == CN_F32) RUN(float, uint8_t, TRUTH_F);
        else RUN(double, uint8_t, TRUTH_D);
    } else if (T == CN_F32) {
        if (s == 1) memcpy(dst, src, (size_t)n * sizeof(float));
        else RUN(float, float, AS_IS);
    } else {
        if (s == 1) memcpy(dst, src, (size_t)n * sizeof(double));
        else RUN(double, double, AS_IS);
    }
#undef RUN
#undef AS_IS
#undef TRUTH_F
#undef TRUTH_D
}

/* Output elements [b0, b0 + n) of input fi into the block dst: runs along
 * the innermost merged axis. */
static void gather(const fu_input *fi, cn_dtype T, int64_t b0, int64_t n, char *dst) {
    const int nd = fi->ndim;
    const int64_t es = (int64_t)cn_dsize(T), ses = (int64_t)cn_dsize(fi->dt);
    int64_t idx[CN_MAX_DIMS], off = 0, rem = b0;
    for (int d = nd - 1; d >= 0; d--) {
        idx[d] = rem % fi->shape[d];
        rem /= fi->shape[d];
        off += idx[d] * fi->stride[d];
    }
    const int64_t len = fi->shape[nd - 1], s = fi->stride[nd - 1];
    for (int64_t done = 0; done < n;) {
        int64_t m = len - idx[nd - 1];
        if (m > n - done) m = n - done;
        copy_run(dst + done * es, T, fi->base + off * ses, fi->dt, s, m);
        done += m;
        idx[nd - 1] += m;
        off += m * s;
        if (idx[nd - 1] < len) break; /* the block ended inside this run */
        off -= len * s;
        idx[nd - 1] = 0;
        for (int d = nd - 2; d >= 0; d--) {
            off += fi->stride[d];
            if (++idx[d] < fi->shape[d]) break;
            off -= fi->shape[d] * fi->stride[d];
            idx[d] = 0;
        }
    }
}

static void fill(char *dst, cn_dtype T, const void *v, int64_t n) {
    if (T == CN_F32) {
        float x = *(const float *)v;
        for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = x;
    } else {
        double x = *(const double *)v;
        for (int64_t i = 0; i < n; i++) ((double *)dst)[i] = x;
    }
}

static void to_bool(uint8_t *o, cn_dtype T, const char *src, int64_t n) {
    if (T == CN_F32)
        for (int64_t i = 0; i < n; i++) o[i] = ((const float *)src)[i] != 0;
    else
        for (int64_t i = 0; i < n; i++) o[i] = ((const double *)src)[i] != 0;
}

/* Output elements [e0, e1), on the calling thread. A chunk's memory:
 * gather buffers (a block each), filled and stored groups, the last partial
 * group's copies of the inputs and its output, a block for a bool result,
 * the pointer table. */
static void run_range(fu_plan *p, int64_t e0, int64_t e1) {
    const int64_t es = p->es, ge = FU_GROUP / es, bb = FU_BLOCK * es + FU_SLOT_PAD;
    const bool to_mask = p->out_dt == CN_BOOL;
    size_t ngroups = (size_t)(p->nfilled + p->nstored + p->nadv + 1);
    size_t need = (size_t)p->ngather * (size_t)bb + ngroups * FU_GROUP +
                  (to_mask ? (size_t)(FU_BLOCK * es) : 0) + (size_t)p->nreg * sizeof(char *);
    _Alignas(64) char stack[FU_STACK_BYTES];
    char *mem = need <= sizeof stack ? stack : cn_alloc(need);
    if (!mem) {
        atomic_store(&p->oom, true);
        return;
    }
    char *gathered = mem;
    char *filled = gathered + (size_t)p->ngather * (size_t)bb;
    char *stored = filled + (size_t)p->nfilled * FU_GROUP;
    char *tail = stored + (size_t)p->nstored * FU_GROUP; /* nadv inputs, then the output */
    char *maskblk = tail + (size_t)(p->nadv + 1) * FU_GROUP;
    char **ptr = (char **)(maskblk + (to_mask ? FU_BLOCK * es : 0));
    for (int r = 0; r < p->nreg; r++) {
        const fu_reg *rg = &p->reg[r];
        ptr[r] = NULL;
        if (rg->buf == RB_FILLED) {
            ptr[r] = filled + rg->slot * FU_GROUP;
            fill(ptr[r], p->T, rg->sval, ge);
        } else if (rg->buf == RB_STORED) {
            ptr[r] = stored + rg->slot * FU_GROUP;
        }
    }
    /* With nothing to gather or convert, the chunk is one run of groups. */
    const int64_t step = p->ngather == 0 && !to_mask ? e1 - e0 : FU_BLOCK;
    for (int64_t b0 = e0; b0 < e1; b0 += step) {
        const int64_t n = e1 - b0 < step ? e1 - b0 : step;
        char *out = to_mask ? maskblk : p->out + b0 * es;
        for (int i = 0; i < p->nin; i++) {
            const fu_input *fi = &p->in[i];
            if (fi->mode == IN_DIRECT) {
                ptr[i] = (char *)fi->base + b0 * es;
            } else if (fi->mode == IN_GATHER) {
                ptr[i] = gathered + p->reg[i].slot * bb;
                gather(fi, p->T, b0, n, ptr[i]);
            }
        }
        const int64_t full = n / ge, rem = n - full * ge;
        cn_fr_run(p->T, p->code, p->ncode, ptr, p->adv, p->nadv, full, ge, out);
        if (rem > 0) {
            /* The inputs' last elements, padded to a group (the code reads
             * whole groups; the padding's results are dropped). */
            for (int i = 0; i < p->nadv; i++) {
                char *t = tail + i * FU_GROUP;
                memcpy(t, ptr[p->adv[i]], (size_t)(rem * es));
                memset(t + rem * es, 0, (size_t)(FU_GROUP - rem * es));
                ptr[p->adv[i]] = t;
            }
            char *t_out = tail + p->nadv * FU_GROUP;
            cn_fr_run(p->T, p->code, p->ncode, ptr, p->adv, p->nadv, 1, rem, t_out);
            memcpy(out + full * FU_GROUP, t_out, (size_t)(rem * es));
        }
        if (to_mask) to_bool((uint8_t *)p->out + b0, p->T, maskblk, n);
    }
    if (mem != stack) cn_free(mem);
}

static int oom_error(const fu_plan *p) {
    return cn_failc(CN_ENOMEM, "fused: out of memory for a chunk's %d group buffers",
                    p->ngather + p->nfilled + p->nstored);
}

/* Blocks [begin, end) of the output. */
static void run_blocks(void *ctx, int64_t begin, int64_t end) {
    fu_plan *p = ctx;
    int64_t e1 = end * FU_BLOCK;
    run_range(p, begin * FU_BLOCK, e1 < p->numel ? e1 : p->numel);
}

int cn_fused_run(const cn_fused_expr *e, cn_tensor *const *in, cn_tensor *out) {
    fu_plan p = {0};
    _Alignas(64) char stack[FU_PLAN_STACK];
    if (e && e->nin >= 0 && e->ninstr >= 0 && e->nin + e->ninstr <= INT16_MAX &&
        plan_bytes(e->nin, e->ninstr) <= sizeof stack) {
        memset(stack, 0, plan_bytes(e->nin, e->ninstr));
        p.arena = stack;
    }
    int rc = plan_build(&p, e, in, out);
    if (rc < 0 || p.numel == 0) {
        if (p.arena != stack) free(p.arena);
        return rc;
    }
    if (p.fill) {
        const void *v = p.reg[p.result].sval;
        if (p.out_dt == CN_BOOL) {
            uint8_t b = p.T == CN_F32 ? *(const float *)v != 0 : *(const double *)v != 0;
            memset(p.out, b, (size_t)p.numel);
        } else {
            fill(p.out, p.T, v, p.numel);
        }
    } else {
        int64_t nblocks = (p.numel + FU_BLOCK - 1) / FU_BLOCK;
        /* About CN_GRAIN_ELEMWISE element-ops per thread before splitting. */
        int64_t grain = 32 / (p.nsteps > 0 ? p.nsteps : 1);
        cn_parallel_for(nblocks, grain > 0 ? grain : 1, run_blocks, &p);
        if (atomic_load(&p.oom)) rc = oom_error(&p);
    }
    if (p.arena != stack) free(p.arena);
    return rc;
}

bool cn_fused_as_bounds(const cn_fused_expr *e, cn_tensor *const *in, double *lo, double *hi) {
    if (!e || !in || !in[0] || e->nin < 1 || e->ninstr < 1 ||
        e->result != e->nin + e->ninstr - 1)
        return false;
    cn_dtype T = (cn_dtype)in[0]->dtype;
    if (T != CN_F32 && T != CN_F64) return false;
    *lo = -INFINITY, *hi = INFINITY;
    bool have_lo = false, have_hi = false;
    for (int k = 0; k < e->ninstr; k++) {
        const cn_fused_instr *ins = &e->instr[k];
        double l = -INFINITY, h = INFINITY;
        if (ins->a != (k == 0 ? 0 : e->nin + k - 1)) return false; /* a chain on in[0] */
        switch (ins->op) {
        case CN_OP_relu: l = 0; break;
        case CN_OP_clamp:
            l = ins->attrs.f[0], h = ins->attrs.f[1];
            if (l != l || h != h) return false;
            break;
        case CN_OP_maximum:
        case CN_OP_minimum: {
            /* the constant on the right: max(v, c), whose ties keep v */
            const cn_tensor *c = ins->b >= 1 && ins->b < e->nin ? in[ins->b] : NULL;
            if (!c || c->dtype != T || cn_shape_numel(c->ndim, c->shape) != 1 || !c->storage)
                return false;
            double v = T == CN_F32 ? *(const float *)cn_t_ptr(c) : *(const double *)cn_t_ptr(c);
            if (v != v) return false;
            if (ins->op == CN_OP_maximum) l = v;
            else h = v;
            break;
        }
        default: return false;
        }
        bool sets_lo = ins->op != CN_OP_minimum, sets_hi = ins->op == CN_OP_minimum ||
                                                           ins->op == CN_OP_clamp;
        if ((sets_lo && (have_lo || have_hi)) || (sets_hi && have_hi)) return false;
        if (sets_lo) *lo = l, have_lo = true;
        if (sets_hi) *hi = h, have_hi = true;
    }
    return true;
}

/* ---- epilogues (epilogue.h) ---- */

struct cn_epilogue {
    fu_plan p;
    bool taken;
};

cn_epilogue *cn_epilogue_begin(const cn_fused_expr *e, cn_tensor *const *in, cn_tensor *out) {
    cn_epilogue *ep = calloc(1, sizeof *ep);
    if (!ep) {
        cn_clear_error();
        return NULL;
    }
    int rc = plan_build(&ep->p, e, in, out);
    if (rc < 0 || ep->p.numel == 0 || ep->p.fill || ep->p.out_dt == CN_BOOL) {
        if (rc < 0) cn_clear_error();
        free(ep->p.arena);
        free(ep);
        return NULL;
    }
    return ep;
}

static _Thread_local cn_epilogue *offered;

cn_epilogue *cn_epilogue_offer(cn_epilogue *ep) {
    cn_epilogue *prev = offered;
    offered = ep;
    return prev;
}

cn_epilogue *cn_epilogue_take(const cn_tensor *out) {
    cn_epilogue *ep = offered;
    if (!ep || !out || !out->storage || (char *)cn_t_ptr(out) != ep->p.out ||
        (cn_dtype)out->dtype != ep->p.T || cn_shape_numel(out->ndim, out->shape) != ep->p.numel ||
        !cn_is_contiguous(out))
        return NULL;
    offered = NULL;
    ep->taken = true;
    return ep;
}

typedef struct range_job {
    fu_plan *p;
    int64_t lo, hi;
} range_job;

/* Blocks [b0, b1) of the range. */
static void range_blocks(void *ctx, int64_t b0, int64_t b1) {
    const range_job *j = ctx;
    int64_t e1 = j->lo + b1 * FU_BLOCK;
    run_range(j->p, j->lo + b0 * FU_BLOCK, e1 < j->hi ? e1 : j->hi);
}

void cn_epilogue_apply(cn_epilogue *ep, int64_t lo, int64_t hi) {
    if (lo >= hi) return;
    if (cn_in_parallel_region()) {
        run_range(&ep->p, lo, hi);
        return;
    }
    range_job j = {&ep->p, lo, hi};
    int64_t grain = 32 / (ep->p.nsteps > 0 ? ep->p.nsteps : 1); /* as cn_fused_run's */
    cn_parallel_for((hi - lo + FU_BLOCK - 1) / FU_BLOCK, grain > 0 ? grain : 1, range_blocks, &j);
}

void cn_epilogue_block(cn_epilogue *ep, int64_t base, int64_t ld, int64_t i0, int64_t i1,
                       int64_t j0, int64_t j1) {
    if (j0 == 0 && j1 == ld) {
        cn_epilogue_apply(ep, base + i0 * ld, base + i1 * ld);
        return;
    }
    for (int64_t i = i0; i < i1; i++) cn_epilogue_apply(ep, base + i * ld + j0, base + i * ld + j1);
}

bool cn_epilogue_taken(const cn_epilogue *ep) { return ep && ep->taken; }

int cn_epilogue_end(cn_epilogue *ep) {
    if (!ep) return CN_OK;
    int rc = CN_OK;
    if (atomic_load(&ep->p.oom)) rc = oom_error(&ep->p);
    free(ep->p.arena);
    free(ep);
    return rc;
}

void cn_epilogue_piece(cn_epilogue_runs *r, int64_t lo, int64_t hi) {
    if (r->lo < r->hi && lo != r->hi) cn_epilogue_flush(r);
    if (r->lo == r->hi) r->lo = lo;
    r->hi = hi;
    if (r->hi - r->lo >= CN_EPILOGUE_MIN) cn_epilogue_flush(r);
}

void cn_epilogue_flush(cn_epilogue_runs *r) {
    if (r->ep) cn_epilogue_apply(r->ep, r->lo, r->hi);
    r->lo = r->hi;
}
