/* Matrix products: matmul, and the GEMM the convolutions and the
 * LSTM use (gpu_kernels.h). The runtime's vendor BLAS takes the product
 * where it has one that applies (CLBlast, cuBLAS: f32 and f64, each operand
 * a matrix BLAS can address); every other case, and integer dtypes, run a
 * tiled kernel that reads the
 * operands through their strides (16 x 16 tiles in local memory, one
 * output element per work item, the batch on the third axis).
 *
 * Also the helpers the kernel files share: generated-source builds,
 * contiguous temporaries and the index-error flag. */
#include "gpu_kernels.h"
#include "../matmul_geom.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ---- shared helpers ---- */

cn_gpu_kernel cn_gpu_x_kernel(const char *fn, cn_gpu_dev *dev, const char *defs, const char *body,
                          const char *name) {
    /* The first line names the family (the runtime quotes it in build errors). */
    const char *pre = cn_gpu_prelude();
    if (!defs) defs = "";
    size_t n = strlen(fn) + strlen(pre) + strlen(defs) + strlen(body) + 64;
    char *src = malloc(n);
    if (!src) {
        cn_failc(CN_ENOMEM, "%s: out of memory", fn);
        return NULL;
    }
    snprintf(src, n, "/* chutney: %s */\n%s\n%s\n%s", fn, pre, defs, body);
    cn_gpu_kernel k = cn_gpu_kernel_get(dev, src, NULL, name);
    free(src);
    return k;
}

cn_tensor *cn_gpu_x_empty(const cn_tensor *on, cn_dtype dt, int ndim, const int64_t *shape) {
    return cn_t_empty_on(cn_t_device(on), dt, ndim, shape);
}

int cn_gpu_x_copy(cn_tensor *dst, const cn_tensor *src) {
    return cn_backend_of(dst)->copy(dst, src);
}

cn_tensor *cn_gpu_x_contig(const cn_tensor *t) {
    if (!t) return NULL;
    if (cn_is_contiguous(t)) return cn_retain((cn_tensor *)t);
    cn_tensor *c = cn_gpu_x_empty(t, (cn_dtype)t->dtype, t->ndim, t->shape);
    if (c && cn_gpu_x_copy(c, t) < 0) {
        cn_release(c);
        return NULL;
    }
    return c;
}

int cn_gpu_flag_new(const cn_tensor *on, cn_gpu_flag *f) {
    f->t = cn_gpu_x_empty(on, CN_I64, 1, (int64_t[]){2});
    if (!f->t) return CN_ENOMEM;
    f->mem = cn_gpu_buf_of(f->t);
    int64_t zero[2] = {0, 0};
    int rc = cn_backend_of(f->t)->write(f->t->storage, 0, zero, sizeof zero, false);
    if (rc < 0) cn_gpu_flag_free(f);
    return rc < 0 ? rc : CN_OK;
}

int cn_gpu_flag_read(cn_gpu_flag *f, int64_t *value) {
    int64_t v[2];
    int rc = cn_backend_of(f->t)->read(f->t->storage, 0, v, sizeof v);
    if (rc < 0) return rc;
    int32_t hit;
    memcpy(&hit, v, sizeof hit);
    *value = v[1];
    return hit != 0;
}

void cn_gpu_flag_free(cn_gpu_flag *f) {
    cn_release(f->t);
    f->t = NULL;
}

/* ---- the plain GEMM kernel ---- */

static const char gemm_src[] =
    "typedef struct { long nb; long shape[8]; long sa[8]; long sb[8]; long sc[8]; } gbatch;\n"
    "__kernel CN_GROUP_SIZE(TS, TS)\n"
    "void cn_gemm(__global const T *A, long oa, long rsa, long csa,\n"
    "             __global const T *B, long ob, long rsb, long csb,\n"
    "             __global T *C, long oc, long ldc, long M, long N, long K, int acc,\n"
    "             gbatch bt) {\n"
    "    long rem = get_global_id(2);\n"
    "    for (int d = (int)bt.nb - 1; d >= 0; d--) {\n"
    "        long i = rem % bt.shape[d];\n"
    "        rem /= bt.shape[d];\n"
    "        oa += i * bt.sa[d]; ob += i * bt.sb[d]; oc += i * bt.sc[d];\n"
    "    }\n"
    "    int tx = get_local_id(0), ty = get_local_id(1);\n"
    "    long col = get_group_id(0) * TS + tx, row = get_group_id(1) * TS + ty;\n"
    "    __local T As[TS][TS + 1], Bs[TS][TS + 1];\n"
    "    ACC s = 0;\n"
    "    for (long p0 = 0; p0 < K; p0 += TS) {\n"
    "        long pa = p0 + tx, pb = p0 + ty;\n"
    "        As[ty][tx] = row < M && pa < K ? A[oa + row * rsa + pa * csa] : (T)0;\n"
    "        Bs[ty][tx] = pb < K && col < N ? B[ob + pb * rsb + col * csb] : (T)0;\n"
    "        barrier(CLK_LOCAL_MEM_FENCE);\n"
    "        for (int p = 0; p < TS; p++) s += (ACC)As[ty][p] * (ACC)Bs[p][tx];\n"
    "        barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    }\n"
    "    if (row < M && col < N) {\n"
    "        long o = oc + row * ldc + col;\n"
    "        C[o] = acc ? (T)((ACC)C[o] + s) : (T)s;\n"
    "    }\n"
    "}\n";

typedef struct gbatch {
    int64_t nb, shape[8], sa[8], sb[8], sc[8];
} gbatch;

static int gemm_plain(const char *fn, cn_gpu_dev *dev, const cn_gpu_gemm *g) {
    const char *T = cn_gpu_ctype(g->dt), *ACC = T;
    if (g->dt == CN_I32 || g->dt == CN_U8) ACC = "uint";
    else if (g->dt == CN_I64) ACC = "ulong";
    int ts = dev->max_wg >= 256 ? 16 : dev->max_wg >= 64 ? 8 : 4;
    char defs[160];
    snprintf(defs, sizeof defs, "#define T %s\n#define ACC %s\n#define TS %d\n", T, ACC, ts);
    cn_gpu_kernel k = cn_gpu_x_kernel(fn, dev, defs, gemm_src, "cn_gemm");
    if (!k) return CN_EINVAL;
    gbatch bt;
    memset(&bt, 0, sizeof bt);
    int64_t nbatch = 1;
    for (int d = 0; d < g->nb; d++) {
        if (g->bshape[d] == 1) continue;
        bt.shape[bt.nb] = g->bshape[d];
        bt.sa[bt.nb] = g->bsa[d];
        bt.sb[bt.nb] = g->bsb[d];
        bt.sc[bt.nb] = g->bsc[d];
        bt.nb++;
        nbatch *= g->bshape[d];
    }
    int64_t oa = g->oa, rsa = g->rsa, csa = g->csa, ob = g->ob, rsb = g->rsb, csb = g->csb;
    int64_t oc = g->oc, ldc = g->ldc, M = g->m, N = g->n, K = g->k;
    int acc = g->accumulate;
    cn_gpu_buf a = g->a, b = g->b, c = g->c;
    cn_gpu_arg args[] = {CN_GPU_MEM(a), CN_GPU_VAL(oa),  CN_GPU_VAL(rsa), CN_GPU_VAL(csa),
                         CN_GPU_MEM(b), CN_GPU_VAL(ob),  CN_GPU_VAL(rsb), CN_GPU_VAL(csb),
                         CN_GPU_MEM(c), CN_GPU_VAL(oc),  CN_GPU_VAL(ldc), CN_GPU_VAL(M),
                         CN_GPU_VAL(N), CN_GPU_VAL(K),   CN_GPU_VAL(acc), CN_GPU_VAL(bt)};
    size_t local[3] = {(size_t)ts, (size_t)ts, 1};
    size_t global[3] = {cn_gpu_x_round(g->n, (size_t)ts), cn_gpu_x_round(g->m, (size_t)ts),
                        (size_t)nbatch};
    return cn_gpu_launch(fn, dev, k, (int)(sizeof args / sizeof *args), args, 3, global, local);
}

/* ---- the GEMM ---- */

bool cn_gpu_blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, bool *trans,
                        int64_t *ld) {
    int64_t r1 = rows > 1 ? rows : 1, c1 = cols > 1 ? cols : 1;
    int64_t ers = rows == 1 ? c1 : rs, ecs = cols == 1 ? 1 : cs;
    if (ecs == 1 && ers >= c1) {
        *trans = false;
        *ld = ers;
        return true;
    }
    ers = rows == 1 ? 1 : rs;
    ecs = cols == 1 ? r1 : cs;
    if (ers == 1 && ecs >= r1) {
        *trans = true;
        *ld = ecs;
        return true;
    }
    return false;
}

static bool force_plain;

bool cn_gpu_gemm_force_plain(bool on) {
    bool prev = force_plain;
    force_plain = on;
    return prev;
}

int cn_gpu_gemm_run(const char *fn, cn_gpu_dev *dev, const cn_gpu_gemm *g) {
    if (g->m == 0 || g->n == 0) return CN_OK;
    for (int d = 0; d < g->nb; d++)
        if (g->bshape[d] == 0) return CN_OK;
    int rc = cn_gpu_x_fp64(fn, dev, g->dt);
    if (rc < 0) return rc;
    if (dev->rt->gemm && !force_plain && g->k > 0) {
        rc = dev->rt->gemm(fn, dev, g);
        if (rc <= 0) return rc;
    }
    return gemm_plain(fn, dev, g);
}

/* ---- matmul ---- */

int cn_gpu_k_matmul(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *at,
                    cn_tensor *out) {
    (void)id, (void)nin, (void)at;
    const cn_tensor *a = in[0], *b = in[1];
    cn_mm_geom mg;
    cn_mm_geometry(a, b, out, &mg);
    cn_gpu_gemm g;
    memset(&g, 0, sizeof g);
    g.dt = (cn_dtype)out->dtype;
    g.m = mg.m;
    g.k = mg.k;
    g.n = mg.n;
    g.rsa = mg.rsa;
    g.csa = mg.csa;
    g.rsb = mg.rsb;
    g.csb = mg.csb;
    g.a = cn_gpu_buf_of(a);
    g.b = cn_gpu_buf_of(b);
    g.c = cn_gpu_buf_of(out);
    g.oa = a->offset;
    g.ob = b->offset;
    g.oc = out->offset;
    g.ldc = g.n;
    g.nb = mg.nb;
    for (int d = 0; d < mg.nb; d++) {
        g.bshape[d] = mg.shape[d];
        g.bsa[d] = mg.sa[d];
        g.bsb[d] = mg.sb[d];
        g.bsc[d] = mg.sc[d];
    }
    return cn_gpu_gemm_run("matmul", cn_gpu_dev_of(out->storage), &g);
}

cn_gpu_kernel cn_gpu_x_float_kernel(const char *fn, cn_gpu_dev *dev, cn_dtype dt, const char *body,
                                const char *name) {
    if (dt != CN_F32 && dt != CN_F64) {
        cn_failc(CN_EUNSUPPORTED, "%s: no kernel for dtype %s", fn, cn_dtype_name(dt));
        return NULL;
    }
    if (cn_gpu_x_fp64(fn, dev, dt) < 0) return NULL;
    char defs[96];
    snprintf(defs, sizeof defs, "#define T %s\n#define ACC %s\n", cn_gpu_ctype(dt),
             dev->fp64 ? "double" : "float");
    return cn_gpu_x_kernel(fn, dev, defs, body, name);
}

int cn_gpu_x_launch1(const char *fn, cn_gpu_dev *dev, cn_gpu_kernel k, int nargs,
                     const cn_gpu_arg *args, int64_t n) {
    size_t local = 64, global = cn_gpu_x_round(n, local);
    return cn_gpu_launch(fn, dev, k, nargs, args, 1, &global, &local);
}
