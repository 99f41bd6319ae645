/* Gradient cases for matmul (src/ops/linalg.c) and the joining, indexing and
 * padding ops (src/ops/index.c). Index inputs are drawn so that indices
 * repeat (more positions than the axis has), which checks that the
 * gradients of repeated reads accumulate. */

static cn_tensor *gcf_matmul(cn_tensor **x) { return cn_matmul(x[0], x[1]); }
static cn_tensor *gcf_matmul_sq(cn_tensor **x) { /* non-linear in a, so the rule sees a's values */
    return cn_matmul(cn_square(x[0]), x[1]);
}

static cn_tensor *gcf_concat0(cn_tensor **x) { return cn_concat(x, 3, 1); }
static cn_tensor *gcf_concat1(cn_tensor **x) { return cn_concat(x, 2, -1); }
static cn_tensor *gcf_concat2(cn_tensor **x) { return cn_concat(x, 1, 0); }
static cn_tensor *gcf_stack(cn_tensor **x) { return cn_stack(x, 2, 1); }

static cn_tensor *gcf_gather0(cn_tensor **x) { return cn_gather(x[0], 0, x[1]); }
static cn_tensor *gcf_gather1(cn_tensor **x) { return cn_gather(x[0], 1, x[1]); }
static cn_tensor *gcf_gather_last(cn_tensor **x) { return cn_gather(x[0], -1, x[1]); }

static cn_tensor *gcf_isel0(cn_tensor **x) { return cn_index_select(x[0], 0, x[1]); }
static cn_tensor *gcf_isel1(cn_tensor **x) { return cn_index_select(x[0], 1, x[1]); }
static cn_tensor *gcf_isel_last(cn_tensor **x) { return cn_index_select(x[0], -1, x[1]); }

static cn_tensor *gcf_scatter0(cn_tensor **x) { return cn_scatter_add(x[0], 0, x[1], x[2]); }
static cn_tensor *gcf_scatter1(cn_tensor **x) { return cn_scatter_add(x[0], 1, x[1], x[2]); }

#define GCF_PAD(name, mode, value, ...)                                                            \
    static cn_tensor *gcf_pad_##name(cn_tensor **x) {                                              \
        static const int64_t p[] = {__VA_ARGS__};                                                  \
        return cn_pad(x[0], p, (int)(sizeof p / sizeof p[0]), mode, value);                        \
    }
GCF_PAD(c1, CN_PAD_CONSTANT, 0.5, 2, 1)
GCF_PAD(c2, CN_PAD_CONSTANT, -1, 1, -2, -1, 3)
GCF_PAD(c3, CN_PAD_CONSTANT, 0, 0, 2, 1, 1, 2, 0)
GCF_PAD(f1, CN_PAD_REFLECT, 0, 3, 2)
GCF_PAD(f1neg, CN_PAD_REFLECT, 0, -2, 4)
GCF_PAD(f1neg2, CN_PAD_REFLECT, 0, 3, -4)
GCF_PAD(f2, CN_PAD_REFLECT, 0, 2, 1, 3, 0)
GCF_PAD(f3, CN_PAD_REFLECT, 0, 1, 2, 0, 3, 1, 1)
GCF_PAD(r1, CN_PAD_REPLICATE, 0, 3, 2)
GCF_PAD(r1big, CN_PAD_REPLICATE, 0, 4, 5)
GCF_PAD(r1neg, CN_PAD_REPLICATE, 0, -1, 2)
GCF_PAD(r2, CN_PAD_REPLICATE, 0, 0, 5, 2, 1)
GCF_PAD(r3, CN_PAD_REPLICATE, 0, 1, 1, 2, 0, 1, 3)

static cn_tensor *gcf_tril0(cn_tensor **x) { return cn_tril(x[0], 0); }
static cn_tensor *gcf_tril_m1(cn_tensor **x) { return cn_tril(x[0], -1); }
static cn_tensor *gcf_triu0(cn_tensor **x) { return cn_triu(x[0], 0); }
static cn_tensor *gcf_triu2(cn_tensor **x) { return cn_triu(x[0], 2); }

#define GC_F(...) {GC_SHAPE(__VA_ARGS__), -1, 1}
#define GC_IX(max, ...) {GC_SHAPE(__VA_ARGS__), .is_index = true, .index_max = max}

static const grad_case grad_cases_index[] = {
    /* matmul */
    {"matmul", "2-D", 2, {GC_F(3, 4), GC_F(4, 5)}, gcf_matmul},
    {"matmul", "(2,1,3,4) x (5,4,2)", 2, {GC_F(2, 1, 3, 4), GC_F(5, 4, 2)}, gcf_matmul},
    {"matmul", "(3,4) x (2,1,4,2)", 2, {GC_F(3, 4), GC_F(2, 1, 4, 2)}, gcf_matmul},
    {"matmul", "batched, same batch", 2, {GC_F(2, 3, 4), GC_F(2, 4, 2)}, gcf_matmul},
    {"matmul", "batch x shared matrix", 2, {GC_F(2, 3, 4), GC_F(4, 5)}, gcf_matmul},
    {"matmul", "vector . vector", 2, {GC_F(4), GC_F(4)}, gcf_matmul},
    {"matmul", "matrix . vector", 2, {GC_F(3, 4), GC_F(4)}, gcf_matmul},
    {"matmul", "vector . matrix", 2, {GC_F(4), GC_F(4, 5)}, gcf_matmul},
    {"matmul", "batch . vector", 2, {GC_F(2, 3, 4), GC_F(4)}, gcf_matmul},
    {"matmul", "vector . batch", 2, {GC_F(4), GC_F(2, 4, 3)}, gcf_matmul},
    {"matmul", "square(a) @ b", 2, {GC_F(2, 3), GC_F(3, 2)}, gcf_matmul_sq},
    {"matmul", "b not differentiated", 2, {GC_F(3, 4), {GC_SHAPE(4, 2), -1, 1, .no_grad = true}},
     gcf_matmul},
    /* concat (and stack, built on it) */
    {"concat", "3 inputs, axis 1", 3, {GC_F(2, 1, 3), GC_F(2, 4, 3), GC_F(2, 2, 3)}, gcf_concat0},
    {"concat", "2 inputs, last axis", 2, {GC_F(3, 2), GC_F(3, 5)}, gcf_concat1},
    {"concat", "one input", 1, {GC_F(3, 2)}, gcf_concat2},
    {"concat", "stack", 2, {GC_F(3, 2), GC_F(3, 2)}, gcf_stack},
    {"concat", "middle input constant", 3,
     {GC_F(2, 2), {GC_SHAPE(2, 3), -1, 1, .no_grad = true}, GC_F(2, 1)}, gcf_concat1},
    /* gather: more index positions than the axis has, so indices repeat */
    {"gather", "axis 0", 2, {GC_F(4, 3), GC_IX(4, 6, 3)}, gcf_gather0},
    {"gather", "axis 1, index narrower", 2, {GC_F(3, 5), GC_IX(5, 2, 7)}, gcf_gather1},
    {"gather", "3-D, last axis", 2, {GC_F(2, 3, 4), GC_IX(4, 2, 2, 6)}, gcf_gather_last},
    /* index_select */
    {"index_select", "axis 0", 2, {GC_F(4, 3), GC_IX(4, 7)}, gcf_isel0},
    {"index_select", "axis 1", 2, {GC_F(3, 5), GC_IX(5, 8)}, gcf_isel1},
    {"index_select", "3-D, middle axis", 2, {GC_F(2, 3, 4), GC_IX(3, 5)}, gcf_isel1},
    {"index_select", "3-D, last axis", 2, {GC_F(2, 3, 4), GC_IX(4, 6)}, gcf_isel_last},
    {"index_select", "rank 0", 2, {{.ndim = 0, .lo = -1, .hi = 1}, {.ndim = 0, .is_index = true,
                                                                   .index_max = 1}},
     gcf_isel0},
    /* scatter_add: base and source */
    {"scatter_add", "axis 0, src larger than index", 3,
     {GC_F(4, 3), GC_IX(4, 5, 3), GC_F(6, 4)}, gcf_scatter0},
    {"scatter_add", "axis 1", 3, {GC_F(3, 4), GC_IX(4, 2, 6), GC_F(2, 6)}, gcf_scatter1},
    {"scatter_add", "src only", 3,
     {{GC_SHAPE(3, 4), -1, 1, .no_grad = true}, GC_IX(4, 3, 5), GC_F(3, 5)}, gcf_scatter1},
    /* pad */
    {"pad", "constant 1-D", 1, {GC_F(5)}, gcf_pad_c1},
    {"pad", "constant 2-D, crops", 1, {GC_F(4, 5)}, gcf_pad_c2},
    {"pad", "constant 3-D", 1, {GC_F(2, 3, 4)}, gcf_pad_c3},
    {"pad", "reflect 1-D", 1, {GC_F(5)}, gcf_pad_f1},
    {"pad", "reflect 1-D, crop before", 1, {GC_F(6)}, gcf_pad_f1neg},
    {"pad", "reflect 1-D, crop after", 1, {GC_F(6)}, gcf_pad_f1neg2},
    {"pad", "reflect 2-D", 1, {GC_F(4, 5)}, gcf_pad_f2},
    {"pad", "reflect 3-D, every axis", 1, {GC_F(2, 4, 5)}, gcf_pad_f3},
    {"pad", "replicate 1-D", 1, {GC_F(4)}, gcf_pad_r1},
    {"pad", "replicate 1-D, pads > size", 1, {GC_F(2)}, gcf_pad_r1big},
    {"pad", "replicate 1-D, crop before", 1, {GC_F(4)}, gcf_pad_r1neg},
    {"pad", "replicate 2-D", 1, {GC_F(3, 4)}, gcf_pad_r2},
    {"pad", "replicate 3-D, every axis", 1, {GC_F(2, 3, 4)}, gcf_pad_r3},
    /* tril / triu */
    {"tril", "k 0", 1, {GC_F(4, 5)}, gcf_tril0},
    {"tril", "k -1, batched", 1, {GC_F(2, 3, 4)}, gcf_tril_m1},
    {"triu", "k 0", 1, {GC_F(5, 4)}, gcf_triu0},
    {"triu", "k 2, batched", 1, {GC_F(2, 3, 4)}, gcf_triu2},
};

#undef GC_F
#undef GC_IX
