/* The copying ops of src/ops/shape.c on the CPU: contiguous and cast (one
 * strided copy, converting), slice_scatter and full_like. The views
 * (reshape, permute, slice, expand) have no kernel: they only set strides. */
#include "kernels.h"

#include <string.h>

/* contiguous and cast: out (contiguous, of the result dtype) = in[0]. */
int cn_cpu_k_copy(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                  cn_tensor *out) {
    (void)id;
    (void)nin;
    (void)a;
    return cn_copy_strided(out, in[0]);
}

/* slice_scatter: out = base (in[0]), then out's slice = src (in[1]). The
 * slice's attributes are canonical (infer): i[0] axis, i[1] start (an
 * index in range), i[3] step; the view is the slice op's (src/ops/shape.c). */
int cn_cpu_k_slice_scatter(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                           cn_tensor *out) {
    (void)id;
    (void)nin;
    cn_copy_strided(out, in[0]);
    cn_tensor view = *out;
    view.ndim = in[1]->ndim;
    memcpy(view.shape, in[1]->shape, sizeof view.shape);
    int ax = (int)a->i[0];
    memcpy(view.strides, out->strides, sizeof view.strides);
    view.strides[ax] = out->strides[ax] * a->i[3];
    view.offset = out->offset + a->i[1] * out->strides[ax];
    return cn_copy_strided(&view, in[1]);
}

/* full_like: f[0] everywhere, converted to out's dtype. */
int cn_cpu_k_full_like(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                       cn_tensor *out) {
    (void)id;
    (void)in;
    (void)nin;
    cn_tensor *v = cn_t_scalar((cn_dtype)out->dtype, a->f[0]);
    if (!v) return CN_ENOMEM;
    int r = cn_copy_strided(out, v);
    cn_release(v);
    return r;
}
