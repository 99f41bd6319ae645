/* Fused elementwise groups: one OpenCL C kernel generated from a
 * cn_fused_expr (fused_expr.h), one line of C per instruction with the
 * registers as locals, compiled once per distinct source. Masks are held as
 * 0/1 values of the expression's dtype T, as the CPU's register machine
 * does. Formulas are the unary and binary kernels' (gpu_elementwise.c), so
 * a fused group gives what its ops give one by one on this device. */
#include "gpu.h"

#include <stdio.h>
#include <stdlib.h>

#define MAX_JOINT 16

static bool is_cmp(int op) {
    return op == CN_OP_eq || op == CN_OP_ne || op == CN_OP_lt || op == CN_OP_le ||
           op == CN_OP_gt || op == CN_OP_ge;
}
static bool is_logic(int op) {
    return op == CN_OP_logical_and || op == CN_OP_logical_or || op == CN_OP_logical_xor;
}

int cn_gpu_fused_run(const cn_fused_expr *e, cn_tensor *const *in, cn_tensor *out) {
    const char *fn = "fused";
    cn_gpu_dev *dev = cn_gpu_dev_of(out->storage);
    if (!dev) return CN_EINVAL;
    if (!e || e->nin < 0 || e->ninstr < 0 || e->result < 0 || e->result >= e->nin + e->ninstr)
        return cn_failc(CN_EINVAL, "%s: malformed expression", fn);
    /* T: the float dtype of the values (the output's unless it is a mask). */
    cn_dtype T = (cn_dtype)out->dtype;
    if (T == CN_BOOL) {
        T = CN_F32;
        for (int j = 0; j < e->nin; j++)
            if (in[j]->dtype == CN_F64) T = CN_F64;
    }
    if (T != CN_F32 && T != CN_F64)
        return cn_failc(CN_EINVAL, "%s: output dtype %s is not f32, f64 or bool", fn,
                        cn_dtype_name((cn_dtype)out->dtype));
    if (cn_gpu_check_dtype(fn, dev, T) < 0) return CN_EUNSUPPORTED;
    for (int j = 0; j < e->nin; j++) {
        cn_dtype d = (cn_dtype)in[j]->dtype;
        if (d != T && d != CN_BOOL)
            return cn_failc(CN_EINVAL, "%s: input %d is %s, not %s or bool", fn, j,
                            cn_dtype_name(d), cn_dtype_name(T));
        if (!in[j]->storage || in[j]->storage->device_kind != (int)dev->kind ||
            in[j]->storage->device_index != dev->index)
            return cn_failc(CN_EINVAL, "%s: input %d is not on %s", fn, j, dev->label);
    }
    int64_t n = cn_shape_numel(out->ndim, out->shape);
    if (n == 0) return CN_OK;

    int nreg = e->nin + e->ninstr;
    bool *need = calloc((size_t)nreg + 1, sizeof *need);
    cn_gpu_layout *ls = calloc((size_t)e->nin + 1, sizeof *ls);
    if (!need || !ls) {
        free(need);
        free(ls);
        return cn_failc(CN_ENOMEM, "%s: out of memory", fn);
    }
    need[e->result] = true;
    for (int k = e->ninstr - 1; k >= 0; k--) {
        if (!need[e->nin + k]) continue;
        const cn_fused_instr *ins = &e->instr[k];
        int16_t ar[3] = {ins->a, ins->b, ins->c};
        for (int q = 0; q < 3; q++) {
            if (ar[q] >= nreg || ar[q] >= e->nin + k) {
                free(need);
                free(ls);
                return cn_failc(CN_EINVAL, "%s: instruction %d reads register %d, not yet written",
                                fn, k, ar[q]);
            }
            if (ar[q] >= 0) need[ar[q]] = true;
        }
    }
    /* Layouts: jointly collapsed when there are not too many operands. */
    int nops = e->nin + 1;
    bool joint = nops <= MAX_JOINT;
    int nd = 0;
    if (joint) {
        const cn_tensor *ops[MAX_JOINT];
        ops[0] = out;
        for (int j = 0; j < e->nin; j++) ops[j + 1] = in[j];
        nd = cn_gpu_layouts(nops, ops, out->ndim, out->shape, ls);
    } else {
        cn_gpu_layout_of(out, out->ndim, out->shape, &ls[0]);
        for (int j = 0; j < e->nin; j++) cn_gpu_layout_of(in[j], out->ndim, out->shape, &ls[j + 1]);
    }

    const char *TY = cn_gpu_ctype(T);
    cn_gpu_src s = {0};
    cn_gpu_src_add(&s, "/* chutney: fused %s, %d inputs, %d instructions */\n%s",
                   cn_dtype_name(T), e->nin, e->ninstr, cn_gpu_prelude());
    cn_gpu_add_ew_helpers(&s);
    cn_gpu_src_add(&s, "__kernel void cn_fused(long n, __global %s *a0, cn_layout l0",
                   cn_gpu_ctype((cn_dtype)out->dtype));
    for (int j = 0; j < e->nin; j++)
        cn_gpu_src_add(&s, ", __global const %s *a%d, cn_layout l%d",
                       cn_gpu_ctype((cn_dtype)in[j]->dtype), j + 1, j + 1);
    cn_gpu_src_add(&s, ") {\n  for (long i = get_global_id(0); i < n; i += get_global_size(0)) {\n");
    /* offsets */
    for (int j = 0; j < nops; j++) {
        if (j > 0 && !need[j - 1]) continue;
        if (!joint) cn_gpu_src_add(&s, "    long o%d = CN_OFFSET(l%d, i);\n", j, j);
        else if (nd == 0) cn_gpu_src_add(&s, "    long o%d = l%d.offset;\n", j, j);
        else if (nd == 1) cn_gpu_src_add(&s, "    long o%d = l%d.offset + i * l%d.strides[0];\n", j, j, j);
        else cn_gpu_src_add(&s, "    long o%d = l%d.offset;\n", j, j);
    }
    if (joint && nd >= 2) {
        cn_gpu_src_add(&s, "    long r = i, q;\n");
        for (int d = nd - 1; d >= 0; d--) {
            if (d > 0) cn_gpu_src_add(&s, "    q = r %% l0.shape[%d]; r /= l0.shape[%d];\n", d, d);
            else cn_gpu_src_add(&s, "    q = r;\n");
            for (int j = 0; j < nops; j++)
                if (j == 0 || need[j - 1]) cn_gpu_src_add(&s, "    o%d += q * l%d.strides[%d];\n", j, j, d);
        }
    }
    for (int j = 0; j < e->nin; j++) {
        if (!need[j]) continue;
        if (in[j]->dtype == CN_BOOL)
            cn_gpu_src_add(&s, "    %s r%d = (%s)(a%d[o%d] != 0);\n", TY, j, TY, j + 1, j + 1);
        else
            cn_gpu_src_add(&s, "    %s r%d = a%d[o%d];\n", TY, j, j + 1, j + 1);
    }
    int bad = -1;
    for (int k = 0; k < e->ninstr && bad < 0; k++) {
        int dst = e->nin + k;
        if (!need[dst]) continue;
        const cn_fused_instr *ins = &e->instr[k];
        char ra[16], rb[16], rc[16], ex[1024], p0[48], p1[48];
        snprintf(ra, sizeof ra, "r%d", ins->a);
        snprintf(rb, sizeof rb, "r%d", ins->b);
        snprintf(rc, sizeof rc, "r%d", ins->c);
        int op = ins->op;
        const char *x = NULL;
        if (is_cmp(op)) {
            char t[512];
            if (cn_gpu_binary_expr(t, sizeof t, (cn_op_id)op, T, ra, rb))
                snprintf(ex, sizeof ex, "(%s)%s", TY, t), x = ex;
        } else if (is_logic(op)) {
            const char *o = op == CN_OP_logical_and ? "&" : op == CN_OP_logical_or ? "|" : "^";
            snprintf(ex, sizeof ex, "(%s)((%s != 0) %s (%s != 0))", TY, ra, o, rb);
            x = ex;
        } else if (op == CN_OP_logical_not) {
            snprintf(ex, sizeof ex, "(%s)(%s == 0)", TY, ra);
            x = ex;
        } else if (op == CN_OP_where) {
            snprintf(ex, sizeof ex, "(%s != 0 ? %s : %s)", ra, rb, rc);
            x = ex;
        } else if (op == CN_OP_cast) {
            if (ins->attrs.i[0] == CN_BOOL) snprintf(ex, sizeof ex, "(%s)(%s != 0)", TY, ra);
            else snprintf(ex, sizeof ex, "%s", ra);
            x = ex;
        } else if (op == CN_OP_contiguous) {
            snprintf(ex, sizeof ex, "%s", ra);
            x = ex;
        } else if (op == CN_OP_add || op == CN_OP_sub || op == CN_OP_mul || op == CN_OP_div ||
                   op == CN_OP_pow || op == CN_OP_maximum || op == CN_OP_minimum) {
            x = cn_gpu_binary_expr(ex, sizeof ex, (cn_op_id)op, T, ra, rb);
        } else if (op >= 0 && op < CN_OP_COUNT) {
            cn_gpu_literal(p0, ins->attrs.f[0], T);
            cn_gpu_literal(p1, ins->attrs.f[1], T);
            x = cn_gpu_unary_expr(ex, sizeof ex, (cn_op_id)op, &ins->attrs, T, ra, p0, p1);
        }
        if (!x) {
            bad = k;
            break;
        }
        cn_gpu_src_add(&s, "    %s r%d = %s;\n", TY, dst, x);
    }
    if (out->dtype == CN_BOOL)
        cn_gpu_src_add(&s, "    a0[o0] = (uchar)(r%d != 0);\n  }\n}\n", e->result);
    else
        cn_gpu_src_add(&s, "    a0[o0] = r%d;\n  }\n}\n", e->result);
    free(need);
    if (bad >= 0) {
        int op = e->instr[bad].op;
        cn_gpu_src_free(&s);
        free(ls);
        return cn_failc(CN_EINVAL, "%s: instruction %d: op %s cannot be fused", fn, bad,
                        op >= 0 && op < CN_OP_COUNT ? cn_op_names[op] : "?");
    }
    if (s.oom) {
        cn_gpu_src_free(&s);
        free(ls);
        return cn_failc(CN_ENOMEM, "%s: out of memory generating a kernel", fn);
    }
    cn_gpu_kernel k = cn_gpu_kernel_get(dev, s.buf, NULL, "cn_fused");
    cn_gpu_src_free(&s);
    if (!k) {
        free(ls);
        return CN_EUNSUPPORTED;
    }
    int na = 1 + 2 * nops;
    cn_gpu_arg *args = calloc((size_t)na, sizeof *args);
    cn_gpu_buf *mems = calloc((size_t)nops, sizeof *mems);
    if (!args || !mems) {
        free(args);
        free(mems);
        free(ls);
        return cn_failc(CN_ENOMEM, "%s: out of memory", fn);
    }
    int64_t nn = n;
    args[0] = CN_GPU_VAL(nn);
    for (int j = 0; j < nops; j++) {
        mems[j] = cn_gpu_buf_of(j == 0 ? out : in[j - 1]);
        args[1 + 2 * j] = CN_GPU_MEM(mems[j]);
        args[2 + 2 * j] = (cn_gpu_arg){sizeof(cn_gpu_layout), &ls[j]};
    }
    int r = cn_gpu_launch_n(fn, dev, k, na, args, n);
    free(args);
    free(mems);
    free(ls);
    return r;
}
