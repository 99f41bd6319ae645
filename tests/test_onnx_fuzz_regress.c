/* The inputs the ONNX loader's fuzzer (fuzz/) once crashed on, replayed in
 * the normal suite (and so under ASan + UBSan in `make check`): each must
 * load or fail with a message, never crash. The files live in
 * fuzz/regressions/ (CN_FUZZ_REGRESSIONS); each fix also gets a direct
 * check here. The loader's resource bounds (docs/onnx.md, "Limits") are
 * checked here too, on hostile models written byte by byte below (no
 * python3-onnx needed, and most of them no exporter could write). */
#define _DEFAULT_SOURCE /* mmap's MAP_ANONYMOUS */
#include "harness.h"

#include "../fuzz/onnx_fuzz_one.h"

#include <dirent.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static void test_replay(void) {
    const char *dir = getenv("CN_FUZZ_REGRESSIONS");
    CHECK_MSG(dir != NULL, "CN_FUZZ_REGRESSIONS is not set");
    if (!dir) return;
    DIR *d = opendir(dir);
    CHECK_MSG(d != NULL, "cannot open %s", dir);
    if (!d) return;
    int files = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.' || e->d_type == DT_DIR) continue; /* other readers' folders */
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        CHECK_MSG(f != NULL, "cannot open %s", path);
        if (!f) continue;
        static uint8_t buf[1 << 20];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        cn_clear_error();
        /* A model that loads is fine; one that does not must say why. */
        if (!cn_fuzz_onnx_one(buf, n))
            CHECK_MSG(cn_last_error()[0] != '\0', "%s: no error message", e->d_name);
        files++;
    }
    closedir(d);
    CHECK_MSG(files > 0, "no files in %s", dir);
}

/* lrn_size_1e9.onnx: an LRN of size 0x3bffffff padded its input by half a
 * billion channels on each side and summed that many slices (3 GB and
 * minutes); the window now stops one channel past either end, where the
 * padding is all zeros (the replay above loads and runs it). */

/* reshape_size_overflow.onnx: a Reshape whose shape's product overflowed
 * int64 while it was checked. */
static void test_reshape_overflow(void) {
    cn_tensor *x = cn_zeros(CN_F32, CN_SHAPE(9));
    CHECK_ERROR(cn_reshape(x, 2, (int64_t[]){9, INT64_C(7958535001752993796)}), "is too large");
    CHECK_ERROR(cn_reshape(x, 3, (int64_t[]){-1, INT64_C(1) << 40, INT64_C(1) << 40}), "is too large");
}

/* ---- window arithmetic in the ops (any caller, not only ONNX files) ---- */

/* A dilation of 2^62 overflowed int64 in conv2d's output size (UBSan; a
 * Release build got a garbage size); a transposed conv's stride too. */
static void test_conv_size_overflow(void) {
    cn_graph *g = cn_graph_new();
    cn_tensor *x = cn_placeholder(g, "x", CN_F32, CN_SHAPE(1, 1, 5, 5));
    cn_tensor *w = cn_ones(CN_F32, CN_SHAPE(1, 1, 3, 3));
    CHECK_ERROR(cn_conv2d(x, w, NULL, &(cn_conv_opts){.dilation = {INT64_C(1) << 62, 1}}),
                "overflow the output size");
    CHECK_ERROR(cn_conv2d(x, w, NULL, &(cn_conv_opts){.padding = {INT64_MAX / 2 + 1, 0}}),
                "overflow the output size");
    CHECK_ERROR(cn_conv_transpose2d(x, w, NULL, &(cn_conv_opts){.stride = {INT64_C(1) << 62, 1}}),
                "overflow the output size");
    CHECK_ERROR(cn_max_pool2d(x, &(cn_pool_opts){.kernel = {3, 3}, .dilation = {INT64_C(1) << 62, 1}}),
                "overflows int64");
    cn_graph_free(g);
}

/* max_pool2d's check for windows of padding only stepped through every tap
 * of the padding: a kernel of 2^41 with pads of 2^40 (at most half the
 * kernel, so allowed) took an hour to infer a shape. */
static void test_pool_padding_scan(void) {
    cn_graph *g = cn_graph_new();
    cn_tensor *x = cn_placeholder(g, "x", CN_F32, CN_SHAPE(1, 1, 1, 1));
    int64_t k = INT64_C(1) << 41;
    cn_scope_begin();
    cn_tensor *y = cn_max_pool2d(x, &(cn_pool_opts){.kernel = {k, k}, .stride = {1, 1}, .padding = {k / 2, k / 2}});
    CHECK(y != NULL);
    if (y) CHECK_SHAPE(y, 1, 1, 2, 2);
    cn_scope_end();
    /* The check itself still works: the second window of a dilated kernel
     * lies wholly in the padding. */
    CHECK_ERROR(cn_max_pool2d(x, &(cn_pool_opts){.kernel = {2, 1}, .stride = {1, 1}, .padding = {1, 0},
                                                 .dilation = {2, 1}}),
                "covers only padding");
    cn_graph_free(g);
}

/* ---- hostile models, written byte by byte ---- */

/* A growing protobuf message. */
typedef struct pb {
    uint8_t *b;
    size_t n, cap;
} pb;

static void pb_put(pb *p, const void *d, size_t n) {
    if (p->n + n > p->cap) {
        p->cap = (p->n + n) * 2 + 64;
        p->b = realloc(p->b, p->cap);
        if (!p->b) abort();
    }
    memcpy(p->b + p->n, d, n);
    p->n += n;
}

static void pb_varint(pb *p, uint64_t v) {
    uint8_t b[10];
    size_t k = 0;
    do {
        b[k++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    pb_put(p, b, k);
}

static void pb_int(pb *p, int field, int64_t v) {
    pb_varint(p, (uint64_t)field << 3);
    pb_varint(p, (uint64_t)v);
}

static void pb_bytes(pb *p, int field, const void *d, size_t n) {
    pb_varint(p, (uint64_t)field << 3 | 2);
    pb_varint(p, n);
    pb_put(p, d, n);
}

static void pb_str(pb *p, int field, const char *s) { pb_bytes(p, field, s, strlen(s)); }

/* Appends sub as field `field` of p and frees it. */
static void pb_msg(pb *p, int field, pb *sub) {
    pb_bytes(p, field, sub->b ? sub->b : (uint8_t *)"", sub->n);
    free(sub->b);
    *sub = (pb){0};
}

/* TensorProto (dims 1, data_type 2, name 8, raw_data 9). */
static void tensor(pb *t, const char *name, int elem_type, int ndim, const int64_t *dims, const void *raw,
                   size_t nraw) {
    for (int i = 0; i < ndim; i++) pb_int(t, 1, dims[i]);
    pb_int(t, 2, elem_type);
    pb_str(t, 8, name);
    if (raw) pb_bytes(t, 9, raw, nraw);
}

/* An initializer of the graph (field 5). */
static void initializer(pb *g, const char *name, int elem_type, int ndim, const int64_t *dims, const void *raw,
                        size_t nraw) {
    pb t = {0};
    tensor(&t, name, elem_type, ndim, dims, raw, nraw);
    pb_msg(g, 5, &t);
}

/* A graph input (11) or output (12): ValueInfoProto {name 1, type 2 {tensor_type 1 {elem_type 1,
 * shape 2 {dim 1 {dim_value 1}}}}}; ndim < 0: no type. */
static void value(pb *g, int field, const char *name, int elem_type, int ndim, const int64_t *dims) {
    pb v = {0}, ty = {0}, tt = {0}, sh = {0};
    pb_str(&v, 1, name);
    if (ndim >= 0) {
        pb_int(&tt, 1, elem_type);
        for (int i = 0; i < ndim; i++) {
            pb d = {0};
            pb_int(&d, 1, dims[i]);
            pb_msg(&sh, 1, &d);
        }
        pb_msg(&tt, 2, &sh);
        pb_msg(&ty, 1, &tt);
        pb_msg(&v, 2, &ty);
    }
    pb_msg(g, field, &v);
}

/* An attribute (name 1, type 20; i 3, ints 8, t 5) for node(). */
static void attr_int(pb *a, const char *name, int64_t v) {
    pb_str(a, 1, name);
    pb_int(a, 20, 2);
    pb_int(a, 3, v);
}

static void attr_ints(pb *a, const char *name, int n, const int64_t *v) {
    pb_str(a, 1, name);
    pb_int(a, 20, 7);
    for (int i = 0; i < n; i++) pb_int(a, 8, v[i]);
}

/* A node (input 1, output 2, name 3, op_type 4, attribute 5) with up to
 * four attributes, given as messages the attr_* helpers filled. */
static void node(pb *g, const char *op, const char *name, const char *ins, const char *outs, pb *attrs,
                 int nattrs) {
    pb nd = {0};
    char buf[256];
    for (int field = 1; field <= 2; field++) {
        snprintf(buf, sizeof buf, "%s", field == 1 ? ins : outs);
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) pb_str(&nd, field, *tok == '-' ? "" : tok);
    }
    pb_str(&nd, 3, name);
    pb_str(&nd, 4, op);
    for (int i = 0; i < nattrs; i++) pb_msg(&nd, 5, &attrs[i]);
    pb_msg(g, 1, &nd);
}

/* ModelProto {ir_version 1, opset_import 8 {version 2}, graph 7}. */
static pb model_of(pb *g, int opset) {
    pb m = {0}, o = {0};
    pb_int(&m, 1, 8);
    pb_int(&o, 2, opset);
    pb_msg(&m, 8, &o);
    pb_str(g, 2, "g");
    pb_msg(&m, 7, g);
    return m;
}

/* Loads m from memory (external data from dir), frees m, and checks the
 * load failed with a message containing needle (NULL: that it loaded). */
static void check_load(pb *m, const char *dir, const char *needle, int line) {
    cn_clear_error();
    th_checks++;
    cn_onnx_model *mod = cn_onnx_load_buffer(m->b, m->n, dir, NULL);
    if (!needle && !mod)
        th_fail(__FILE__, line, "the model was refused: %s", cn_last_error());
    else if (needle && mod)
        th_fail(__FILE__, line, "the model loaded; expected an error containing \"%s\"", needle);
    else if (needle && !strstr(cn_last_error(), needle))
        th_fail(__FILE__, line, "error \"%s\" does not contain \"%s\"", cn_last_error(), needle);
    cn_onnx_free(mod);
    free(m->b);
    *m = (pb){0};
}
#define CHECK_LOAD(m, dir, needle) check_load(&(m), dir, needle, __LINE__)

/* A model of `triples` levels of graph -> node (If) -> attribute (g) ->
 * graph under the ModelProto and its graph: messages nested 2 + 3 triples
 * deep, a dozen bytes a level. */
static pb nested_model(int triples) {
    pb inner = {0};
    for (int i = 0; i < triples; i++) {
        pb a = {0}, nd = {0}, g = {0};
        pb_msg(&a, 6, &inner);
        pb_str(&nd, 4, "If");
        pb_msg(&nd, 5, &a);
        pb_msg(&g, 1, &nd);
        inner = g;
    }
    return model_of(&inner, 13);
}

/* A 63 KB file of nested graphs overflowed the stack inside protobuf-c;
 * the walk before it refuses more than 100 levels, from exactly 101. */
static void test_deep_nesting(void) {
    pb m = nested_model(4500);
    CHECK_MSG(m.n < 70000, "%zu bytes", m.n);
    CHECK_LOAD(m, NULL, "nests messages more than 100 deep");
    m = nested_model(33); /* 101 deep */
    CHECK_LOAD(m, NULL, "nests messages more than 100 deep");
    m = nested_model(32); /* 98 deep: unpacked, then the If's nameless attribute is refused */
    CHECK_LOAD(m, NULL, "unsupported: If (opset 13): attribute '' is not supported");
    /* Types nest without graphs: sequence(sequence(...)) of a graph input. */
    pb ty = {0};
    for (int i = 0; i < 5000; i++) {
        pb seq = {0}, outer = {0};
        pb_msg(&seq, 1, &ty);
        pb_msg(&outer, 4, &seq);
        ty = outer;
    }
    pb g = {0}, v = {0};
    pb_str(&v, 1, "x");
    pb_msg(&v, 2, &ty);
    pb_msg(&g, 11, &v);
    m = model_of(&g, 13);
    CHECK_LOAD(m, NULL, "nests messages more than 100 deep");
    /* Bytes under a field the schema does not have stay opaque to
     * protobuf-c, so however they nest, they are not counted. */
    pb junk = {0};
    for (int i = 0; i < 3000; i++) {
        pb o = {0};
        pb_msg(&o, 1, &junk);
        junk = o;
    }
    value(&g, 11, "x", 1, 1, (int64_t[]){3});
    value(&g, 12, "y", 1, -1, NULL);
    node(&g, "Relu", "relu", "x", "y", NULL, 0);
    m = model_of(&g, 13);
    pb_msg(&m, 99, &junk);
    CHECK_LOAD(m, NULL, NULL);
}

/* Every message costs protobuf-c a struct: 4M empty nodes (8 MB on disk)
 * would take gigabytes. */
static void test_message_count(void) {
    size_t n = ((size_t)1 << 22) + 1;
    pb g = {0};
    g.cap = 2 * n + 16;
    g.b = malloc(g.cap);
    if (!g.b) return;
    for (size_t i = 0; i < n; i++) g.b[g.n++] = 0x0a, g.b[g.n++] = 0x00; /* node {} */
    pb m = model_of(&g, 13);
    CHECK_LOAD(m, NULL, "holds more than 4194304 protobuf messages");
}

/* A buffer over protobuf's 2 GiB is refused before a byte is read (the
 * mapping is of zero pages, never touched). */
static void test_size_bound(void) {
    size_t n = (size_t)3 << 30;
    void *p = mmap(NULL, n, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return; /* no address space for it: nothing to check */
    CHECK_ERROR(cn_onnx_load_buffer(p, n, NULL, NULL), "more than 2147483648 (2 GiB");
    munmap(p, n);
}

/* Graph input X f32[1, 2, 3, 3] and output y. */
static void xy_graph(pb *g) {
    value(g, 11, "X", 1, 4, (int64_t[]){1, 2, 3, 3});
    value(g, 12, "y", 1, -1, NULL);
}

static void test_conv_attributes(void) {
    float w[4] = {1, 2, 3, 4};
    /* group 0 was read as "unset" by cn_conv_opts and became 1. */
    pb g = {0}, a[2] = {{0}};
    xy_graph(&g);
    initializer(&g, "W", 1, 4, (int64_t[]){2, 2, 1, 1}, w, sizeof w);
    attr_int(&a[0], "group", 0);
    node(&g, "Conv", "conv", "X,W", "y", a, 1);
    pb m = model_of(&g, 13);
    CHECK_LOAD(m, NULL, "Conv (opset 13): node 0 'conv': group is 0 (must be at least 1)");
    /* Dilations of 2^62: refused with the attribute's name, before any
     * arithmetic (the op's own check is test_conv_size_overflow). */
    xy_graph(&g);
    initializer(&g, "W", 1, 4, (int64_t[]){2, 2, 1, 1}, w, sizeof w);
    attr_ints(&a[0], "dilations", 2, (int64_t[]){INT64_C(1) << 62, 1});
    node(&g, "Conv", "conv", "X,W", "y", a, 1);
    m = model_of(&g, 13);
    CHECK_LOAD(m, NULL, "dilations[0] is 4611686018427387904 (0 to 16777216 are accepted)");
    xy_graph(&g);
    initializer(&g, "W", 1, 4, (int64_t[]){2, 2, 1, 1}, w, sizeof w);
    attr_ints(&a[0], "pads", 4, (int64_t[]){0, INT64_C(1) << 40, 0, 0});
    node(&g, "Conv", "conv", "X,W", "y", a, 1);
    m = model_of(&g, 13);
    CHECK_LOAD(m, NULL, "pads[1] is 1099511627776");
    /* MaxPool pads of 2^40 under a kernel of 2^41: an hour in shape
     * inference before; now the kernel is refused at once. */
    xy_graph(&g);
    attr_ints(&a[0], "kernel_shape", 2, (int64_t[]){INT64_C(1) << 41, 1});
    attr_ints(&a[1], "pads", 4, (int64_t[]){INT64_C(1) << 40, 0, INT64_C(1) << 40, 0});
    node(&g, "MaxPool", "pool", "X", "y", a, 2);
    m = model_of(&g, 13);
    CHECK_LOAD(m, NULL, "MaxPool (opset 13): node 0 'pool': kernel_shape[0] is 2199023255552");
}

/* ConstantOfShape from an i64 initializer `s` of the given values. */
static pb constant_of_shape_model(int n, const int64_t *shape) {
    pb g = {0};
    initializer(&g, "s", 7, 1, (int64_t[]){n}, shape, sizeof(int64_t) * (size_t)n);
    value(&g, 12, "y", 1, -1, NULL);
    node(&g, "ConstantOfShape", "big", "s", "y", NULL, 0);
    return model_of(&g, 13);
}

/* A 95-byte model made `chutney info` build an 8 GB constant. */
static void test_constant_budget(void) {
    pb m = constant_of_shape_model(2, (int64_t[]){65536, 32768});
    CHECK(m.n < 120);
    CHECK_LOAD(m, NULL, "ConstantOfShape (opset 13): node 0 'big': the tensors computed while loading "
                        "would take more than the 268435458 elements");
    /* Each input small, the broadcast sum 2^30 elements: refused where it
     * is allocated. */
    pb g = {0};
    initializer(&g, "s1", 7, 1, (int64_t[]){2}, (int64_t[]){1, 32768}, 16);
    initializer(&g, "s2", 7, 1, (int64_t[]){2}, (int64_t[]){32768, 1}, 16);
    value(&g, 12, "y", 1, -1, NULL);
    node(&g, "ConstantOfShape", "a", "s1", "a", NULL, 0);
    node(&g, "ConstantOfShape", "b", "s2", "b", NULL, 0);
    node(&g, "Add", "sum", "a,b", "y", NULL, 0);
    m = model_of(&g, 13);
    CHECK_LOAD(m, NULL, "Add (opset 13): node 2 'sum': the tensors computed while loading");
    /* Range: 2^40 elements from three scalars. */
    float r[3] = {0, 1099511627776.0f, 1};
    initializer(&g, "s", 1, 0, NULL, &r[0], 4);
    initializer(&g, "l", 1, 0, NULL, &r[1], 4);
    initializer(&g, "d", 1, 0, NULL, &r[2], 4);
    value(&g, 12, "y", 1, -1, NULL);
    node(&g, "Range", "range", "s,l,d", "y", NULL, 0);
    m = model_of(&g, 13);
    CHECK_LOAD(m, NULL, "Range (opset 13): node 0 'range': the tensors computed while loading");
    /* CN_ONNX_MAX_ELEMENTS sets the limit: 64 elements need 64 (plus the
     * initializer's 1); 0 lifts it. */
    setenv("CN_ONNX_MAX_ELEMENTS", "62", 1);
    m = constant_of_shape_model(1, (int64_t[]){64});
    CHECK_LOAD(m, NULL, "more than the 63 elements the load may compute (CN_ONNX_MAX_ELEMENTS");
    setenv("CN_ONNX_MAX_ELEMENTS", "63", 1);
    m = constant_of_shape_model(1, (int64_t[]){64});
    CHECK_LOAD(m, NULL, NULL);
    setenv("CN_ONNX_MAX_ELEMENTS", "0", 1);
    m = constant_of_shape_model(1, (int64_t[]){1 << 20});
    CHECK_LOAD(m, NULL, NULL);
    setenv("CN_ONNX_MAX_ELEMENTS", "lots", 1);
    m = constant_of_shape_model(1, (int64_t[]){64});
    CHECK_LOAD(m, NULL, "CN_ONNX_MAX_ELEMENTS is 'lots', not a whole number");
    unsetenv("CN_ONNX_MAX_ELEMENTS");
    m = constant_of_shape_model(1, (int64_t[]){64});
    CHECK_LOAD(m, NULL, NULL);
}

/* What a model must not say, each once accepted. */
static void test_bad_nodes(void) {
    /* Two producers of one value: the second silently replaced the first. */
    pb g = {0};
    value(&g, 11, "x", 1, 1, (int64_t[]){3});
    value(&g, 12, "y", 1, -1, NULL);
    node(&g, "Relu", "first", "x", "y", NULL, 0);
    node(&g, "Neg", "second", "x", "y", NULL, 0);
    pb m = model_of(&g, 13);
    CHECK_LOAD(m, NULL, "Neg (opset 13): node 1 'second': output 'y' is already defined");
    value(&g, 11, "x", 1, 1, (int64_t[]){3});
    value(&g, 12, "x", 1, -1, NULL);
    node(&g, "Relu", "over", "x", "x", NULL, 0);
    m = model_of(&g, 13);
    CHECK_LOAD(m, NULL, "Relu (opset 13): node 0 'over': output 'x' is already defined");
    /* LSTM with hidden_size 0: every gate empty. */
    pb a[1] = {{0}};
    value(&g, 11, "X", 1, 3, (int64_t[]){2, 1, 3});
    value(&g, 12, "y", 1, -1, NULL);
    initializer(&g, "W", 1, 3, (int64_t[]){1, 0, 3}, "", 0);
    initializer(&g, "R", 1, 3, (int64_t[]){1, 0, 0}, "", 0);
    attr_int(&a[0], "hidden_size", 0);
    node(&g, "LSTM", "lstm", "X,W,R", "y", a, 1);
    m = model_of(&g, 13);
    CHECK_LOAD(m, NULL, "LSTM (opset 13): node 0 'lstm': hidden_size is 0 (must be at least 1)");
    /* A NaN limit compared false with everything: an empty range. */
    float r[3] = {0, NAN, 1};
    initializer(&g, "s", 1, 0, NULL, &r[0], 4);
    initializer(&g, "l", 1, 0, NULL, &r[1], 4);
    initializer(&g, "d", 1, 0, NULL, &r[2], 4);
    value(&g, 12, "y", 1, -1, NULL);
    node(&g, "Range", "", "s,l,d", "y", NULL, 0);
    m = model_of(&g, 13);
    CHECK_LOAD(m, NULL, "Range (opset 13): node 0: start 0, limit nan and delta 1 must be finite");
}

/* ---- files: external data and the model itself ---- */

static char tmpdir[64];

static void tmp_path(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", tmpdir, name); }

/* A model whose initializer W f32[2] lives in the external file `loc`. */
static pb external_model(const char *loc) {
    pb g = {0}, t = {0}, kv = {0};
    tensor(&t, "W", 1, 1, (int64_t[]){2}, NULL, 0);
    pb_str(&kv, 1, "location");
    pb_str(&kv, 2, loc);
    pb_msg(&t, 13, &kv);
    pb_int(&t, 14, 1);
    pb_msg(&g, 5, &t);
    value(&g, 12, "W", 1, -1, NULL);
    return model_of(&g, 13);
}

static void test_external_data_files(void) {
    char inside[128], outside_dir[128], outside[160], p[256];
    tmp_path(inside, sizeof inside, "m");
    tmp_path(outside_dir, sizeof outside_dir, "other");
    snprintf(outside, sizeof outside, "%s/secret.bin", outside_dir);
    CHECK(mkdir(inside, 0700) == 0 && mkdir(outside_dir, 0700) == 0);
    float w[2] = {1, 2};
    FILE *f = fopen(outside, "wb");
    CHECK(f && fwrite(w, 1, sizeof w, f) == sizeof w);
    if (f) fclose(f);
    snprintf(p, sizeof p, "%s/data.bin", inside);
    f = fopen(p, "wb");
    CHECK(f && fwrite(w, 1, sizeof w, f) == sizeof w);
    if (f) fclose(f);
    /* A link out of the folder was followed: any readable file could be
     * read as weights. */
    snprintf(p, sizeof p, "%s/link.bin", inside);
    CHECK(symlink(outside, p) == 0);
    pb m = external_model("link.bin");
    CHECK_LOAD(m, inside, "resolves to");
    snprintf(p, sizeof p, "%s/sub", inside);
    CHECK(symlink(outside_dir, p) == 0);
    m = external_model("sub/secret.bin");
    CHECK_LOAD(m, inside, "outside the model's folder");
    /* Links that stay inside are fine. */
    snprintf(p, sizeof p, "%s/alias.bin", inside);
    CHECK(symlink("data.bin", p) == 0);
    m = external_model("alias.bin");
    CHECK_LOAD(m, inside, NULL);
    /* A FIFO there blocked the read forever; a directory failed late. */
    snprintf(p, sizeof p, "%s/fifo.bin", inside);
    CHECK(mkfifo(p, 0600) == 0);
    m = external_model("fifo.bin");
    CHECK_LOAD(m, inside, "is a FIFO (named pipe)");
    snprintf(p, sizeof p, "%s/dir.bin", inside);
    CHECK(mkdir(p, 0700) == 0);
    m = external_model("dir.bin");
    CHECK_LOAD(m, inside, "is a directory");
    /* The model itself: a FIFO blocked cn_onnx_load in open(). */
    snprintf(p, sizeof p, "%s/model.onnx", inside);
    CHECK(mkfifo(p, 0600) == 0);
    CHECK_ERROR(cn_onnx_load(p, NULL), "is a FIFO (named pipe); only regular files are read");
    CHECK_ERROR(cn_onnx_load_tensor(p), "is a FIFO (named pipe)");
    CHECK_ERROR(cn_onnx_load(inside, NULL), "is a directory");
    const char *names[] = {"m/link.bin", "m/sub", "m/alias.bin", "m/fifo.bin", "m/data.bin", "m/model.onnx",
                           "other/secret.bin"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        tmp_path(p, sizeof p, names[i]);
        unlink(p);
    }
    snprintf(p, sizeof p, "%s/dir.bin", inside);
    rmdir(p);
    rmdir(inside);
    rmdir(outside_dir);
}

int main(void) {
    cn_clear_error();
    RUN(test_conv_size_overflow);
    RUN(test_pool_padding_scan);
    if (!cn_onnx_load_buffer("", 0, NULL, NULL) && strstr(cn_last_error(), "built without ONNX")) {
        RUN(test_reshape_overflow);
        return th_summary();
    }
    RUN(test_replay);
    RUN(test_reshape_overflow);
    RUN(test_deep_nesting);
    RUN(test_message_count);
    RUN(test_size_bound);
    RUN(test_conv_attributes);
    RUN(test_constant_budget);
    RUN(test_bad_nodes);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/cn_onnx_files_XXXXXX");
    if (mkdtemp(tmpdir)) {
        RUN(test_external_data_files);
        rmdir(tmpdir);
    }
    return th_summary();
}
