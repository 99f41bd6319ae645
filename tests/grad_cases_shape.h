/* Gradient cases for views and copies (src/ops/shape.c). */
static cn_tensor *gcf_reshape(cn_tensor **x) { return cn_reshape(x[0], CN_SHAPE(4, -1)); }
static cn_tensor *gcf_permute(cn_tensor **x) { return cn_permute(x[0], (int[]){2, 0, 1}, 3); }
static cn_tensor *gcf_slice(cn_tensor **x) { return cn_slice(x[0], 1, 4, 0, -2); }
static cn_tensor *gcf_slice2(cn_tensor **x) { return cn_slice(x[0], 0, 1, CN_END, 1); }
static cn_tensor *gcf_expand(cn_tensor **x) { return cn_expand(x[0], CN_SHAPE(2, 3, 4)); }
static cn_tensor *gcf_contiguous(cn_tensor **x) { return cn_clone(x[0]); }
static cn_tensor *gcf_cast(cn_tensor **x) { return cn_cast(cn_cast(x[0], CN_F32), CN_F64); }
static cn_tensor *gcf_slice_scatter_base(cn_tensor **x) {
    cn_attrs a = {.i = {1, 0, CN_END, 2}};
    cn_tensor *in[2] = {x[0], x[1]};
    return cn_op_apply(CN_OP_slice_scatter, in, 2, &a);
}

/* The transfer op itself, CPU to CPU (cn_to returns x unchanged when it is
 * already there); across devices: tests/test_backends.c. */
static cn_tensor *gcf_to(cn_tensor **x) {
    cn_attrs a = {.i = {CN_DEVICE_CPU, 0, 0}};
    return cn_op_apply(CN_OP_to, x, 1, &a);
}

static const grad_case grad_cases_shape[] = {
    {"reshape", "2x3x4 -> 4x6", 1, {{GC_SHAPE(2, 3, 4), -1, 1}}, gcf_reshape},
    {"permute", "2x3x4", 1, {{GC_SHAPE(2, 3, 4), -1, 1}}, gcf_permute},
    {"slice", "negative step", 1, {{GC_SHAPE(3, 5), -1, 1}}, gcf_slice},
    {"slice", "from 1", 1, {{GC_SHAPE(3, 2), -1, 1}}, gcf_slice2},
    {"expand", "3x1 -> 2x3x4", 1, {{GC_SHAPE(3, 1), -1, 1}}, gcf_expand},
    {"contiguous", "clone", 1, {{GC_SHAPE(3, 4), -1, 1}}, gcf_contiguous},
    /* f32 round trip: the numeric derivative sees f32 rounding */
    {"cast", "f64->f32->f64", 1, {{GC_SHAPE(5), -1, 1}}, gcf_cast, .rtol = 1e-3, .atol = 1e-4,
     .eps = 1e-2},
    {"slice_scatter", "base and src", 2, {{GC_SHAPE(3, 4), -1, 1}, {GC_SHAPE(3, 2), -1, 1}},
     gcf_slice_scatter_base},
    {"to", "cpu:0 -> cpu:0", 1, {{GC_SHAPE(2, 3), -1, 1}}, gcf_to},
};
