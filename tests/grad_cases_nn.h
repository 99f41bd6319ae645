/* Gradient cases for convolution and pooling (src/ops/conv.c, pool.c).
 * Small shapes: the numeric check costs two forward passes per input
 * element, in each of five layouts. Max pooling's inputs are continuous
 * random values, so no window has a tie within the step of the differences. */

static cn_tensor *gcf_conv_pad_bias(cn_tensor **x) {
    return cn_conv2d(x[0], x[1], x[2], &(cn_conv_opts){.padding = {1, 1}});
}
static cn_tensor *gcf_conv_strided_groups(cn_tensor **x) {
    cn_conv_opts o = {.stride = {2, 1}, .padding = {1, 0}, .dilation = {1, 2}, .groups = 2};
    return cn_conv2d(x[0], x[1], NULL, &o);
}
static cn_tensor *gcf_conv1d(cn_tensor **x) {
    return cn_conv1d(x[0], x[1], x[2], &(cn_conv_opts){.stride = {2}, .padding = {1}});
}
static cn_tensor *gcf_convt_bias(cn_tensor **x) {
    cn_conv_opts o = {.stride = {2, 2}, .padding = {1, 1}, .output_padding = {1, 1}};
    return cn_conv_transpose2d(x[0], x[1], x[2], &o);
}
static cn_tensor *gcf_convt_groups(cn_tensor **x) {
    cn_conv_opts o = {.stride = {1, 2}, .dilation = {2, 1}, .groups = 2};
    return cn_conv_transpose2d(x[0], x[1], NULL, &o);
}
/* output_padding >= stride (allowed below the dilation): the input
 * gradient, a conv2d, comes out one row and column too big and is cut. */
static cn_tensor *gcf_convt_outpad_dilation(cn_tensor **x) {
    cn_conv_opts o = {.padding = {1, 1}, .dilation = {2, 2}, .output_padding = {1, 1}};
    return cn_conv_transpose2d(x[0], x[1], NULL, &o);
}
static cn_tensor *gcf_conv_wgrad(cn_tensor **x) {
    cn_attrs a = {.i = {1, 3, 3}, .nlist = 6, .list = {1, 1, 1, 1, 1, 1}};
    return cn_op_apply(CN_OP_conv2d_weight_grad, x, 2, &a);
}
static cn_tensor *gcf_conv_wgrad_groups(cn_tensor **x) {
    cn_attrs a = {.i = {2, 2, 3}, .nlist = 6, .list = {2, 1, 0, 1, 1, 2}};
    return cn_op_apply(CN_OP_conv2d_weight_grad, x, 2, &a);
}

static cn_tensor *gcf_max_pool(cn_tensor **x) {
    return cn_max_pool2d(x[0], &(cn_pool_opts){.kernel = {2, 2}});
}
static cn_tensor *gcf_max_pool_ceil(cn_tensor **x) {
    cn_pool_opts o = {.kernel = {3, 2}, .stride = {2, 1}, .padding = {1, 1}, .dilation = {1, 2},
                      .ceil_mode = true};
    return cn_max_pool2d(x[0], &o);
}
static cn_tensor *gcf_max_pool_backward(cn_tensor **x) {
    cn_attrs a = {.i = {1}, .nlist = 8, .list = {3, 2, 2, 1, 1, 1, 1, 2}};
    return cn_op_apply(CN_OP_max_pool2d_backward, x, 2, &a);
}
static cn_tensor *gcf_avg_pool(cn_tensor **x) {
    cn_pool_opts o = {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true};
    return cn_avg_pool2d(x[0], &o);
}
static cn_tensor *gcf_avg_pool_exclude(cn_tensor **x) {
    cn_pool_opts o = {.kernel = {3, 2}, .stride = {2, 1}, .padding = {1, 1}, .exclude_pad = true};
    return cn_avg_pool2d(x[0], &o);
}
static cn_tensor *gcf_avg_pool_divisor(cn_tensor **x) {
    return cn_avg_pool2d(x[0], &(cn_pool_opts){.kernel = {2, 2}, .divisor_override = 3});
}
static cn_tensor *gcf_avg_pool_backward(cn_tensor **x) {
    cn_attrs a = {.i = {1, 1, 0}, .nlist = 8, .list = {3, 3, 2, 2, 1, 1, 5, 5}};
    return cn_op_apply(CN_OP_avg_pool2d_backward, x, 1, &a);
}
static cn_tensor *gcf_adaptive(cn_tensor **x) { return cn_adaptive_avg_pool2d(x[0], 3, 4); }
static cn_tensor *gcf_adaptive_global(cn_tensor **x) { return cn_adaptive_avg_pool2d(x[0], 1, 1); }
static cn_tensor *gcf_adaptive_backward(cn_tensor **x) {
    cn_attrs a = {.nlist = 2, .list = {5, 7}};
    return cn_op_apply(CN_OP_adaptive_avg_pool2d_backward, x, 1, &a);
}

/* layer_norm (src/ops/layer_norm.c) through cn_layer_norm, which composes
 * it on devices without a kernel: affine over an odd row, a weight alone
 * over two axes, and neither. */
static cn_tensor *gcf_layer_norm_affine(cn_tensor **x) {
    return cn_layer_norm(x[0], 1, x[1], x[2], 1e-5);
}
static cn_tensor *gcf_layer_norm_weight(cn_tensor **x) {
    return cn_layer_norm(x[0], 2, x[1], NULL, 1e-3);
}
static cn_tensor *gcf_layer_norm_plain(cn_tensor **x) {
    return cn_layer_norm(x[0], 2, NULL, NULL, 0.1);
}

static const grad_case grad_cases_nn[] = {
    {"layer_norm", "ndim 1, weight and bias, rows of 7", 3,
     {{GC_SHAPE(3, 7), -1, 1}, {GC_SHAPE(7), -1, 1}, {GC_SHAPE(7), -1, 1}},
     gcf_layer_norm_affine},
    {"layer_norm", "ndim 2, weight only", 2,
     {{GC_SHAPE(2, 2, 3), -1, 1}, {GC_SHAPE(2, 3), -1, 1}}, gcf_layer_norm_weight},
    {"layer_norm", "ndim 2, no weight or bias", 1, {{GC_SHAPE(2, 3, 2), -2, 2}},
     gcf_layer_norm_plain},
    {"conv2d", "3x3 pad 1, bias", 3,
     {{GC_SHAPE(2, 2, 4, 5), -1, 1}, {GC_SHAPE(3, 2, 3, 3), -1, 1}, {GC_SHAPE(3), -1, 1}},
     gcf_conv_pad_bias},
    {"conv2d", "stride, dilation, groups", 2,
     {{GC_SHAPE(1, 4, 5, 6), -1, 1}, {GC_SHAPE(4, 2, 2, 3), -1, 1}}, gcf_conv_strided_groups},
    {"conv2d", "conv1d", 3,
     {{GC_SHAPE(2, 2, 7), -1, 1}, {GC_SHAPE(3, 2, 3), -1, 1}, {GC_SHAPE(3), -1, 1}}, gcf_conv1d},
    {"conv_transpose2d", "stride 2, output_padding, bias", 3,
     {{GC_SHAPE(1, 2, 3, 3), -1, 1}, {GC_SHAPE(2, 3, 3, 3), -1, 1}, {GC_SHAPE(3), -1, 1}},
     gcf_convt_bias},
    {"conv_transpose2d", "groups, dilation", 2,
     {{GC_SHAPE(2, 4, 3, 2), -1, 1}, {GC_SHAPE(4, 1, 2, 2), -1, 1}}, gcf_convt_groups},
    {"conv_transpose2d", "output_padding >= stride", 2,
     {{GC_SHAPE(1, 2, 3, 3), -1, 1}, {GC_SHAPE(2, 2, 3, 3), -1, 1}}, gcf_convt_outpad_dilation},
    {"conv2d_weight_grad", "3x3 pad 1", 2,
     {{GC_SHAPE(2, 2, 4, 4), -1, 1}, {GC_SHAPE(2, 3, 4, 4), -1, 1}}, gcf_conv_wgrad},
    {"conv2d_weight_grad", "groups, stride, dilation", 2,
     {{GC_SHAPE(1, 4, 5, 5), -1, 1}, {GC_SHAPE(1, 2, 2, 3), -1, 1}}, gcf_conv_wgrad_groups},
    {"max_pool2d", "2x2", 1, {{GC_SHAPE(2, 2, 4, 5), -1, 1}}, gcf_max_pool},
    {"max_pool2d", "padding, dilation, ceil_mode", 1, {{GC_SHAPE(1, 2, 5, 6), -1, 1}},
     gcf_max_pool_ceil},
    /* zero in x away from ties; linear in dy */
    {"max_pool2d_backward", "padding, dilation, ceil_mode", 2,
     {{GC_SHAPE(1, 2, 5, 6), -1, 1}, {GC_SHAPE(1, 2, 3, 6), -1, 1}}, gcf_max_pool_backward},
    {"avg_pool2d", "3x3 stride 2 pad 1 ceil", 1, {{GC_SHAPE(2, 2, 5, 5), -1, 1}}, gcf_avg_pool},
    {"avg_pool2d", "exclude padding", 1, {{GC_SHAPE(1, 2, 5, 4), -1, 1}}, gcf_avg_pool_exclude},
    {"avg_pool2d", "divisor_override", 1, {{GC_SHAPE(1, 2, 4, 4), -1, 1}}, gcf_avg_pool_divisor},
    {"avg_pool2d_backward", "3x3 stride 2 pad 1 to 5x5", 1, {{GC_SHAPE(2, 2, 3, 3), -1, 1}},
     gcf_avg_pool_backward},
    {"adaptive_avg_pool2d", "5x7 -> 3x4", 1, {{GC_SHAPE(2, 2, 5, 7), -1, 1}}, gcf_adaptive},
    {"adaptive_avg_pool2d", "global", 1, {{GC_SHAPE(2, 3, 3, 4), -1, 1}}, gcf_adaptive_global},
    {"adaptive_avg_pool2d_backward", "3x4 -> 5x7", 1, {{GC_SHAPE(2, 2, 3, 4), -1, 1}},
     gcf_adaptive_backward},
};
