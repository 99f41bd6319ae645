/* acc += a * b, the kernel a backward pass uses to add a product into a
 * gradient sum it owns (mul's vjp_add, src/ops/binary.c). */
#include "binary.h"

#include "iter.h"

/* No fused multiply-add: the build's -ffp-contract=off keeps the
 * product rounded on its own, as when it was a tensor. */
#define ADDMUL_ROW(NAME, T)                                                                        \
    CN_HOT_FN(NAME, (void *ctx, int64_t n, char **p, const int64_t *s), (ctx, n, p, s)) {          \
        (void)ctx;                                                                                 \
        T *restrict o = (T *)p[0];                                                                 \
        const T *restrict x = (const T *)p[1];                                                     \
        const T *restrict y = (const T *)p[2];                                                     \
        if (s[0] == 1 && s[1] == 1 && s[2] == 1) {                                                 \
            for (int64_t i = 0; i < n; i++) o[i] = o[i] + x[i] * y[i];                             \
        } else {                                                                                   \
            const int64_t so = s[0], sx = s[1], sy = s[2];                                         \
            for (int64_t i = 0; i < n; i++) o[i * so] = o[i * so] + x[i * sx] * y[i * sy];         \
        }                                                                                          \
    }
ADDMUL_ROW(addmul_f32, float)
ADDMUL_ROW(addmul_f64, double)

int cn_cpu_addmul(cn_tensor *acc, const cn_tensor *a, const cn_tensor *b) {
    cn_dtype dt = (cn_dtype)acc->dtype;
    if ((dt != CN_F32 && dt != CN_F64) || a->dtype != dt || b->dtype != dt) return CN_EUNSUPPORTED;
    cn_tensor *in[2] = {(cn_tensor *)a, (cn_tensor *)b};
    cn_iter it;
    cn_iter_init(&it, acc, in, 2);
    cn_iter_run(&it, dt == CN_F32 ? addmul_f32 : addmul_f64, NULL);
    return CN_OK;
}
