/* oneDNN's matmul for autocast's native path (matmul_dnnl.h).
 *
 * As with the convolutions (conv_dnnl.c), oneDNN runs on one thread inside
 * our pool: the rows of a are cut into blocks, one call per block, and a
 * is given in rows (a transposed a is copied first: cn_dnnl_matmul), so
 * the sums of each output element do not depend on the thread count.
 * oneDNN picks its kernel for the CPU (AMX tiles, avx512_bf16's dot
 * products); where it has none it says "unimplemented", which is our
 * run-time check. */
#include "matmul_dnnl.h"

#include "../backend.h"
#include "dnnl_engine.h"
#include "gemm.h"
#include "transpose.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static _Atomic int native_mode = -2; /* -2: not read from the environment yet */

bool cn_autocast_native_choice(int mode, bool cpu_has, bool dnnl_has) {
    if (mode >= 0) return mode == 1;
    return cpu_has && dnnl_has;
}

void cn_autocast_native_mode_set(int mode) { atomic_store(&native_mode, mode); }

static int mode_now(void) {
    int m = atomic_load(&native_mode);
    if (m != -2) return m;
    const char *e = getenv("CN_AUTOCAST_NATIVE");
    m = e && !strcmp(e, "0") ? 0 : e && !strcmp(e, "1") ? 1 : -1;
    int expected = -2;
    if (!atomic_compare_exchange_strong(&native_mode, &expected, m)) m = expected;
    return m;
}

#ifdef CN_HAVE_DNNL

#include <pthread.h>

typedef struct mm_prim {
    cn_dtype dt;
    int64_t m, n, k, rsa, csa, rsb, csb;
    bool bany; /* b in the primitive's own format (a program's pack; rsb, csb 0) */
    dnnl_primitive_t prim;
    dnnl_memory_desc_t md[3], scratch_md;
    size_t scratch;
} mm_prim;

#define CACHE_MAX 64

static struct {
    pthread_mutex_t mu;
    mm_prim *cache[CACHE_MAX];
    int n;
} mc = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void prim_free(mm_prim *p) {
    if (!p) return;
    if (p->prim) dnnl_primitive_destroy(p->prim);
    free(p);
}

static dnnl_data_type_t dnnl_dt(cn_dtype dt) {
    return dt == CN_BF16 ? dnnl_bf16 : dt == CN_F16 ? dnnl_f16 : dnnl_f32;
}

static mm_prim *prim_create(const mm_prim *key) {
    mm_prim *p = malloc(sizeof *p);
    if (!p) return NULL;
    *p = *key;
    p->prim = NULL;
    dnnl_dims_t ad = {key->m, key->k}, as = {key->rsa, key->csa};
    dnnl_dims_t bd = {key->k, key->n}, bs = {key->rsb, key->csb};
    dnnl_memory_desc_t bmd;
    dnnl_dims_t cd = {key->m, key->n}, cs = {key->n, 1};
    dnnl_data_type_t t = dnnl_dt(key->dt);
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_matmul_desc_t d;
    bool ok = dnnl_memory_desc_init_by_strides(&p->md[0], 2, ad, t, as) == dnnl_success &&
              (key->bany ? dnnl_memory_desc_init_by_tag(&bmd, 2, bd, t, dnnl_format_tag_any)
                         : dnnl_memory_desc_init_by_strides(&bmd, 2, bd, t, bs)) == dnnl_success &&
              dnnl_memory_desc_init_by_strides(&p->md[2], 2, cd, dnnl_f32, cs) == dnnl_success &&
              dnnl_matmul_desc_init(&d, &p->md[0], &bmd, NULL, &p->md[2]) == dnnl_success &&
              dnnl_primitive_attr_create(&attr) == dnnl_success &&
              dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) ==
                  dnnl_success &&
              dnnl_primitive_desc_create(&pd, &d, attr, cn_dnnl_engine(), NULL) == dnnl_success;
    if (ok) {
        p->md[1] = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        p->scratch_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        p->scratch = dnnl_memory_desc_get_size(&p->scratch_md);
        ok = dnnl_primitive_create(&p->prim, pd) == dnnl_success;
    }
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (!ok) {
        prim_free(p);
        return NULL;
    }
    return p;
}

static bool same_key(const mm_prim *a, const mm_prim *b) {
    return a->dt == b->dt && a->m == b->m && a->n == b->n && a->k == b->k && a->rsa == b->rsa &&
           a->csa == b->csa && a->rsb == b->rsb && a->csb == b->csb && a->bany == b->bany;
}

/* The cached primitive, or a fresh one the caller frees (*owned) when the
 * cache is full; NULL when oneDNN has no kernel for it. */
static mm_prim *prim_get(const mm_prim *key, bool *owned) {
    *owned = false;
    cn_dnnl_one_thread();
    pthread_mutex_lock(&mc.mu);
    for (int i = 0; i < mc.n; i++)
        if (same_key(mc.cache[i], key)) {
            pthread_mutex_unlock(&mc.mu);
            return mc.cache[i];
        }
    mm_prim *p = prim_create(key);
    if (p && mc.n < CACHE_MAX) mc.cache[mc.n++] = p;
    else *owned = p != NULL;
    pthread_mutex_unlock(&mc.mu);
    return p;
}

static int run(mm_prim *p, const void *a, const void *b, float *c) {
    int rc = CN_ENOMEM;
    dnnl_stream_t s = NULL;
    dnnl_memory_t m[4] = {NULL};
    void *sbuf = NULL;
    if (dnnl_stream_create(&s, cn_dnnl_engine(), dnnl_stream_default_flags) != dnnl_success)
        goto out;
    cn_dnnl_one_thread();
    if (!(m[0] = cn_dnnl_mem(&p->md[0], (void *)a)) || !(m[1] = cn_dnnl_mem(&p->md[1], (void *)b)) ||
        !(m[2] = cn_dnnl_mem(&p->md[2], c)))
        goto out;
    if (!(sbuf = cn_alloc(p->scratch ? p->scratch : 1)) || !(m[3] = cn_dnnl_mem(&p->scratch_md, sbuf)))
        goto out;
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, m[0]},
                               {DNNL_ARG_WEIGHTS, m[1]},
                               {DNNL_ARG_DST, m[2]},
                               {DNNL_ARG_SCRATCHPAD, m[3]}};
    if (dnnl_primitive_execute(p->prim, s, 4, args) == dnnl_success &&
        dnnl_stream_wait(s) == dnnl_success)
        rc = CN_OK;
out:
    for (int i = 0; i < 4; i++)
        if (m[i]) dnnl_memory_destroy(m[i]);
    cn_free(sbuf);
    if (s) dnnl_stream_destroy(s);
    return rc;
}

/* Rows per block: a share of the pool's threads, at least this many. */
#define MIN_ROWS 32

typedef struct mm_blocks {
    mm_prim *full, *last;
    int64_t rows, nblk;
    const char *a, *b;
    size_t es;
    float *c;
    atomic_int failed;
} mm_blocks;

static void block_task(void *ctx, int64_t b0, int64_t b1) {
    mm_blocks *k = ctx;
    for (int64_t i = b0; i < b1; i++) {
        int64_t r0 = i * k->rows;
        mm_prim *p = i == k->nblk - 1 ? k->last : k->full;
        if (run(p, k->a + (size_t)(r0 * p->rsa) * k->es, k->b, k->c + r0 * p->n) != CN_OK)
            atomic_store(&k->failed, 1);
    }
}

/* The rows of each block of a product of m rows. */
static int64_t block_rows(int64_t m) {
    int nt = cn_get_num_threads();
    int64_t rows = (m + nt - 1) / nt;
    if (rows < MIN_ROWS) rows = MIN_ROWS;
    return rows > m ? m : rows;
}

/* What a pack of b was made for: the product's dtype and sizes, b's
 * strides and the primitive's format of b (compared byte for byte). */
typedef struct bpack_key {
    cn_dtype dt;
    int64_t n, k, rsb, csb;
    dnnl_memory_desc_t md;
} bpack_key;

static void bpack_key_of(bpack_key *key, cn_dtype dt, int64_t n, int64_t k, int64_t rsb,
                         int64_t csb, const dnnl_memory_desc_t *md) {
    memset(key, 0, sizeof *key); /* the padding too */
    key->dt = dt;
    key->n = n;
    key->k = k;
    key->rsb = rsb;
    key->csb = csb;
    key->md = *md;
}

/* The primitives of a product's blocks (b in its own format, or as given),
 * NULL in *full when oneDNN has none; the blocks share b's format. */
static void block_prims(mm_blocks *bl, mm_prim *key, int64_t m, bool *own_full, bool *own_last) {
    *own_last = false;
    bl->full = prim_get(key, own_full);
    key->m = m - (bl->nblk - 1) * bl->rows;
    bl->last = key->m == bl->rows ? bl->full : prim_get(key, own_last);
    key->m = bl->rows;
}

/* dst [m, k] (rows of k) = src with row and column strides rs, cs, for
 * elements of es bytes (2 or 4): a transposed matrix in tiles over the
 * pool, any other layout in 32 x 32 tiles. */
static void copy_to_rows(size_t es, int64_t m, int64_t k, const char *src, int64_t rs, int64_t cs,
                         char *dst) {
    if (rs == 1 && cn_transpose_copy(es, m, k, src, cs, dst, k)) return;
    for (int64_t i0 = 0; i0 < m; i0 += 32)
        for (int64_t j0 = 0; j0 < k; j0 += 32)
            for (int64_t i = i0; i < m && i < i0 + 32; i++)
                for (int64_t j = j0; j < k && j < j0 + 32; j++) {
                    const char *s = src + (size_t)(i * rs + j * cs) * es;
                    char *d = dst + (size_t)(i * k + j) * es;
                    if (es == 2) memcpy(d, s, 2);
                    else memcpy(d, s, 4);
                }
}

int cn_dnnl_matmul(cn_dtype dt, int64_t m, int64_t n, int64_t k, const void *a, int64_t rsa,
                   int64_t csa, const void *b, int64_t rsb, int64_t csb, float *c,
                   const cn_gemm_pack *bpk) {
    if (!cn_dnnl_engine() || m < 1 || n < 1 || k < 1) return 1;
    /* An a read along columns (a transposed view: the weight gradient's
     * x^T) is copied to rows first. oneDNN copies such an a itself, call by
     * call, and sums in an order that depends on the call's rows, which
     * follow the thread count: the bits did too (a GPT of width 512 trained
     * in bf16 reached validation losses 0.2% apart at 1 and 2 threads). */
    char *arows = NULL;
    if (csa != 1 && k > 1) {
        size_t es = cn_dsize(dt);
        if (!(arows = cn_alloc(es * (size_t)(m * k))))
            return cn_failc(CN_ENOMEM, "matmul: out of memory copying a %lld x %lld operand",
                            (long long)m, (long long)k);
        copy_to_rows(es, m, k, a, rsa, csa, arows);
        a = arows, rsa = k, csa = 1;
    }
    int64_t rows = block_rows(m);
    mm_blocks bl = {.rows = rows, .nblk = (m + rows - 1) / rows, .a = a, .b = b,
                    .es = cn_dsize(dt), .c = c};
    mm_prim key = {.dt = dt, .m = rows, .n = n, .k = k, .rsa = rsa, .csa = csa, .rsb = rsb,
                   .csb = csb};
    bool own_full = false, own_last = false;
    if (bpk) {
        /* b packed once in the format these blocks' primitives read (it may
         * not be, after a change of thread count: then b as it is) */
        mm_prim pkey = key;
        pkey.bany = true, pkey.rsb = pkey.csb = 0;
        block_prims(&bl, &pkey, m, &own_full, &own_last);
        bpack_key bk;
        const void *data = NULL;
        if (bl.full && bl.last && dnnl_memory_desc_equal(&bl.full->md[1], &bl.last->md[1])) {
            bpack_key_of(&bk, dt, n, k, rsb, csb, &bl.full->md[1]);
            data = cn_gemm_pack_opaque_data(bpk, &bk, sizeof bk);
        }
        if (data) {
            bl.b = data;
        } else {
            if (own_full) prim_free(bl.full);
            if (own_last) prim_free(bl.last);
            bl.full = bl.last = NULL;
        }
    }
    if (!bl.full) block_prims(&bl, &key, m, &own_full, &own_last);
    int rc = 1;
    if (bl.full && bl.last) {
        atomic_init(&bl.failed, 0);
        if (bl.nblk > 1) cn_parallel_tasks(bl.nblk, block_task, &bl);
        else block_task(&bl, 0, 1);
        rc = atomic_load(&bl.failed) ? cn_failc(CN_ENOMEM, "matmul: oneDNN failed on %s %lld x "
                                                           "%lld @ %lld x %lld",
                                                cn_dtype_name(dt), (long long)m, (long long)k,
                                                (long long)k, (long long)n)
                                     : CN_OK;
    }
    if (own_full) prim_free(bl.full);
    if (own_last) prim_free(bl.last);
    cn_free(arows);
    return rc;
}

/* b reordered into format to (a pack under key bk), or NULL. */
static cn_gemm_pack *pack_b(const cn_tensor *b, const dnnl_memory_desc_t *to, const bpack_key *bk) {
    dnnl_memory_desc_t from;
    dnnl_dims_t bd = {b->shape[0], b->shape[1]}, bs = {b->strides[0], b->strides[1]};
    if (dnnl_memory_desc_init_by_strides(&from, 2, bd, dnnl_dt(bk->dt), bs) != dnnl_success)
        return NULL;
    cn_gemm_pack *pk = cn_gemm_pack_opaque(b, dnnl_memory_desc_get_size(to), bk, sizeof *bk);
    if (!pk) return NULL;
    dnnl_primitive_desc_t rpd = NULL;
    dnnl_primitive_t r = NULL;
    dnnl_stream_t s = NULL;
    dnnl_memory_t m[2] = {NULL, NULL};
    cn_dnnl_one_thread();
    bool ok = dnnl_reorder_primitive_desc_create(&rpd, &from, cn_dnnl_engine(), to,
                                                 cn_dnnl_engine(), NULL) == dnnl_success &&
              dnnl_primitive_create(&r, rpd) == dnnl_success &&
              (m[0] = cn_dnnl_mem(&from, cn_t_ptr(b))) &&
              (m[1] = cn_dnnl_mem(to, cn_gemm_pack_opaque_data(pk, bk, sizeof *bk))) &&
              dnnl_stream_create(&s, cn_dnnl_engine(), dnnl_stream_default_flags) == dnnl_success;
    if (ok) {
        dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, m[0]}, {DNNL_ARG_TO, m[1]}};
        ok = dnnl_primitive_execute(r, s, 2, a) == dnnl_success &&
             dnnl_stream_wait(s) == dnnl_success;
    }
    for (int i = 0; i < 2; i++)
        if (m[i]) dnnl_memory_destroy(m[i]);
    if (s) dnnl_stream_destroy(s);
    if (r) dnnl_primitive_destroy(r);
    if (rpd) dnnl_primitive_desc_destroy(rpd);
    if (!ok) {
        cn_gemm_pack_free(pk);
        pk = NULL;
    }
    return pk;
}

cn_gemm_pack *cn_dnnl_matmul_pack(int64_t m, const cn_tensor *b, const cn_gemm_pack *have) {
    cn_dtype dt = (cn_dtype)b->dtype;
    if (!cn_is_half(dt) || b->ndim != 2 || m < 1 || !cn_dnnl_engine()) return NULL;
    int64_t k = b->shape[0], n = b->shape[1], rows = block_rows(m);
    mm_blocks bl = {.rows = rows, .nblk = (m + rows - 1) / rows};
    /* a's rows as a program's activations come: contiguous */
    mm_prim key = {.dt = dt, .m = rows, .n = n, .k = k, .rsa = k, .csa = 1, .bany = true};
    bool own_full, own_last;
    block_prims(&bl, &key, m, &own_full, &own_last);
    cn_gemm_pack *pk = NULL;
    if (bl.full && bl.last && dnnl_memory_desc_equal(&bl.full->md[1], &bl.last->md[1])) {
        bpack_key bk;
        bpack_key_of(&bk, dt, n, k, b->strides[0], b->strides[1], &bl.full->md[1]);
        if (have && cn_gemm_pack_holds(have, b) && cn_gemm_pack_opaque_data(have, &bk, sizeof bk))
            pk = (cn_gemm_pack *)have;
        else
            pk = pack_b(b, &bl.full->md[1], &bk);
    }
    if (own_full) prim_free(bl.full);
    if (own_last) prim_free(bl.last);
    if (!pk) cn_clear_error(); /* the products read b as it is */
    return pk;
}

/* Whether oneDNN makes a low-precision product here: asked once per dtype
 * with a small geometry (it says "unimplemented" without the instructions). */
static bool dnnl_has(cn_dtype dt) {
    if (!cn_dnnl_engine()) return false;
    mm_prim key = {.dt = dt, .m = 16, .n = 16, .k = 16, .rsa = 16, .csa = 1, .rsb = 16, .csb = 1};
    bool owned;
    mm_prim *p = prim_get(&key, &owned);
    if (owned) prim_free(p);
    return p != NULL;
}

#else

int cn_dnnl_matmul(cn_dtype dt, int64_t m, int64_t n, int64_t k, const void *a, int64_t rsa,
                   int64_t csa, const void *b, int64_t rsb, int64_t csb, float *c,
                   const cn_gemm_pack *bpk) {
    (void)dt, (void)m, (void)n, (void)k, (void)a, (void)rsa, (void)csa, (void)b, (void)rsb,
        (void)csb, (void)c, (void)bpk;
    return 1;
}

cn_gemm_pack *cn_dnnl_matmul_pack(int64_t m, const cn_tensor *b, const cn_gemm_pack *have) {
    (void)m, (void)b, (void)have;
    return NULL;
}

static bool dnnl_has(cn_dtype dt) {
    (void)dt;
    return false;
}

#endif

bool cn_autocast_native(cn_dtype dt) {
    if (!cn_is_half(dt)) return false;
    int mode = mode_now();
    if (mode >= 0) return cn_autocast_native_choice(mode, false, false);
    static _Atomic int known[2] = {-1, -1}; /* bf16, f16 */
    int i = dt == CN_F16, v = atomic_load_explicit(&known[i], memory_order_relaxed);
    if (v < 0) {
        cn_cpu_lowp f = cn_cpu_lowp_features();
        bool cpu = dt == CN_BF16 ? f.avx512_bf16 || f.amx_bf16 : f.avx512_fp16 || f.amx_fp16;
        v = cn_autocast_native_choice(mode, cpu, cpu && dnnl_has(dt));
        atomic_store(&known[i], v);
    }
    return v;
}
