/* Matrix products on the CPU: BLAS for f32/f64 when the build has it, and a
 * built-in blocked GEMM (packed panels, a register-tiled micro-kernel, split
 * over the pool) for every other case and for builds without BLAS.
 *
 * Every function takes each operand as a pointer and two strides in
 * elements, any sign, zero allowed: A is m x k with element (i, p) at
 * a[i*rsa + p*csa]; B is k x n with (p, j) at b[p*rsb + j*csb]. C is m x n,
 * row-major with row stride ldc >= n, and is overwritten (k = 0 gives zeros).
 * They return 0, or CN_ENOMEM after cn_fail when a buffer cannot be had.
 * Called from inside a parallel region they run serially. */
#ifndef CN_CPU_GEMM_H
#define CN_CPU_GEMM_H

#include "../../core/core.h"

/* dt: f32, f64 (BLAS when built with it), i32, i64, u8 (wrapping, like
 * PyTorch's integer matmul). Operands BLAS cannot read in place (no unit
 * stride, or a negative one) are copied first. */
int cn_gemm(cn_dtype dt, int64_t m, int64_t n, int64_t k, const void *a, int64_t rsa,
             int64_t csa, const void *b, int64_t rsb, int64_t csb, void *c, int64_t ldc);

/* Whether cn_gemm hands f32/f64 products to BLAS on this CPU (the built-in
 * kernels when false). CN_GEMM=blas|builtin in the environment forces a
 * choice; by default BLAS, unless OpenBLAS chose kernels without AVX2+FMA
 * for a CPU whose built-in tile has them: a CPU newer than the library
 * gets an old core's kernels (Debian's OpenBLAS 0.3.21 runs an Emerald
 * Rapids Xeon with Prescott's SSE3 ones, a fifth of the built-in GEMM's
 * speed there). Decided on the first call; *why, when given, names the
 * choice and its reason. */
bool cn_gemm_uses_blas(const char **why);
/* The rule behind it: whether OpenBLAS's core `name` (openblas_get_corename)
 * has no AVX2+FMA kernels, compared case-insensitively; unknown names are
 * trusted. */
bool cn_gemm_blas_core_narrow(const char *name);
/* The whole choice from its inputs (CN_GEMM's value or NULL, whether the
 * build has BLAS, OpenBLAS's core or NULL, the instruction-set level):
 * true for BLAS; why gets the reason cn_cpu_gemm reports. */
bool cn_gemm_blas_choose(const char *env, bool have_blas, const char *core, int isa, char *why,
                         size_t why_size);

/* The built-in kernels only (never BLAS): what cn_gemm uses without BLAS. */
int cn_gemm_builtin(cn_dtype dt, int64_t m, int64_t n, int64_t k, const void *a, int64_t rsa,
                    int64_t csa, const void *b, int64_t rsb, int64_t csb, void *c, int64_t ldc);

/* An operand that stays the same from call to call (a model's weights)
 * packed once into the built-in GEMM's panels, so products skip packing it:
 * the A side (b_side false: rows = m, element (i, p) at src[i*rs + p*cs])
 * or the B side (rows = n, (p, j) at src[p*rs + j*cs]), of count matrices
 * gstride elements apart (a convolution's groups). t, when given, is the
 * tensor whose data src is: cn_gemm_pack_current says whether it still
 * holds what was packed (same storage, offset and version). */
typedef struct cn_gemm_pack cn_gemm_pack;
cn_gemm_pack *cn_gemm_pack_new(cn_dtype dt, bool b_side, int64_t rows, int64_t k,
                               const cn_tensor *t, const void *src, int64_t rs, int64_t cs,
                               int64_t count, int64_t gstride);
/* A pack another implementation fills in its own format (oneDNN's weight
 * layouts, conv_dnnl.c): bytes of data under a key that says what it was
 * made for (compared byte for byte), t's version kept as any pack's. The
 * built-in GEMM never reads it. */
cn_gemm_pack *cn_gemm_pack_opaque(const cn_tensor *t, size_t bytes, const void *key,
                                  size_t key_bytes);
/* Its data when pk is an opaque pack made under this key, else NULL. */
void *cn_gemm_pack_opaque_data(const cn_gemm_pack *pk, const void *key, size_t key_bytes);
void cn_gemm_pack_free(cn_gemm_pack *pk);
size_t cn_gemm_pack_bytes(const cn_gemm_pack *pk);
bool cn_gemm_pack_current(const cn_gemm_pack *pk, const cn_tensor *t); /* a GEMM pack */
/* Whether pk was made with these arguments of cn_gemm_pack_new (side, sizes,
 * strides, groups): a program's step whose shapes changed may want its
 * weight packed for the other side (a convolution made transposed). */
bool cn_gemm_pack_made_as(const cn_gemm_pack *pk, bool b_side, int64_t rows, int64_t k,
                          int64_t rs, int64_t cs, int64_t count, int64_t gstride);
/* Does pk, a GEMM or an opaque pack, still hold t (same storage, offset
 * and version)? What a program asks of all its packs before a run. */
bool cn_gemm_pack_holds(const cn_gemm_pack *pk, const cn_tensor *t);

/* What the built-in GEMM does to C's values once they are final: a
 * convolution's bias and the activation after it, applied to each panel of
 * MR rows as soon as the tiles have written its last k block (the panel is
 * in L1 then), rather than in passes of their own over the output (at
 * batch 1 those passes, a bias add and a fused ReLU6, were 10% of
 * MobileNetV2). Not on each register tile: applied there, inlined, it
 * slowed the tile's own loop by 5% on products with partial tiles
 * (960 x 49 x 160).
 * C[i][j] + bias[i] when bias is given; then, with clamp, max with lo and
 * min with hi, each written bound > v ? bound : v (bound < v for the min),
 * which keeps a NaN: the bits of the unfused bias add, relu, clamp, and
 * maximum/minimum with a constant on their right. */
typedef struct cn_gemm_out {
    const void *bias; /* one per row of C, in C's dtype; or NULL */
    bool clamp;
    double lo, hi;    /* -inf, inf: that side is left alone */
    bool taken;       /* set by cn_gemm_out_take */
} cn_gemm_out;

/* cn_gemm_builtin with matrix g of pk in place of the operand of its side,
 * when that operand is the one packed (same pointer, sizes and strides) and
 * the tile is still the one packed for; otherwise, and for vectors (m or n
 * 1), plain cn_gemm_builtin. The result is the same bits either way. pk
 * may be NULL. eo, when given, is applied to all of C. */
int cn_gemm_packed(cn_dtype dt, int64_t m, int64_t n, int64_t k, const void *a, int64_t rsa,
                   int64_t csa, const void *b, int64_t rsb, int64_t csb, void *c, int64_t ldc,
                   const cn_gemm_pack *pk, int64_t g, const cn_gemm_out *eo);
/* eo over an m x n matrix c of dtype dt (f32, f64) with row stride ldc. */
void cn_gemm_out_apply(cn_dtype dt, void *c, int64_t m, int64_t n, int64_t ldc,
                       const cn_gemm_out *eo);

/* A program offers the bounds of a fused step whose head is a convolution
 * to the head's kernel this way (as it hands over packs, below): set
 * around the kernel call, NULL after. A kernel that applies them to every
 * element of its output (its bias too, then) takes them on entry, which
 * marks the offer taken; the program runs its own pass otherwise. */
cn_gemm_out *cn_gemm_out_offer(cn_gemm_out *eo);
/* Copies the offer into *eo and takes it; false if there is none. */
bool cn_gemm_out_take(cn_gemm_out *eo);

/* A program hands the pack of the step it runs to the step's kernel this
 * way (the kernel signature has no room for it): set before the kernel
 * call on the calling thread, restored after; kernels read it on entry and
 * check it with cn_gemm_pack_current. */
const cn_gemm_pack *cn_gemm_pack_set_step(const cn_gemm_pack *pk);
const cn_gemm_pack *cn_gemm_pack_step(void);

/* Register tiles of the built-in f32/f64 GEMM. The default is picked by the
 * CPU (AVX-512, AVX2, other); tests and benchmarks may force one. Returns the
 * name of tile i ("6x64", ...), or NULL when i is out of range; i = -1
 * restores the automatic choice and returns its name. Not thread-safe: call
 * it before products run. */
const char *cn_gemm_select_tile(cn_dtype dt, int i);
/* The rows (*mr) and columns (*nr) of the register tile products of dtype
 * dt (f32, f64) run on now (C's edges are computed in whole tiles), but
 * for the 7x32 tile the AVX-512 f32 products take where their rows fill
 * tiles of 7 better (gemm.c). */
void cn_gemm_tile_dims(cn_dtype dt, int *mr, int *nr);

#endif
