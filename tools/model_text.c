/* The text format of models (docs/model-format.md): an `input` line, then a
 * layer per line with positional and key=value arguments. Each layer is
 * built as soon as it is read and applied to a placeholder of the shape so
 * far, so the library itself says what a layer gives (no second copy of the
 * convolution arithmetic here) and the first layer that does not fit is the
 * line reported. */
#include "model_text.h"
#include "train.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ARGS 8

typedef enum {
    L_INPUT, L_LINEAR, L_CONV2D, L_MAXPOOL2D, L_AVGPOOL2D, L_BATCHNORM1D, L_BATCHNORM2D,
    L_LAYERNORM, L_DROPOUT, L_FLATTEN, L_RESHAPE, L_RELU, L_GELU, L_SILU, L_TANH, L_SIGMOID,
    L_LEAKYRELU, L_ELU, L_LSTM, L_GRU, L_RNN, L_COUNT
} layer_kind;

/* A layer's arguments, in the order they may be given positionally;
 * `variadic` layers take a list of whole numbers instead. */
typedef struct layer_def {
    const char *name;
    const char *args[MAX_ARGS];
    int nrequired; /* the first n must be given */
    bool variadic;
    const char *example; /* a line using it, for "needs" */
} layer_def;

static const layer_def defs[L_COUNT] = {
    [L_INPUT] = {"input", {0}, 0, true, NULL},
    [L_LINEAR] = {"linear", {"out", "bias"}, 1, false, "linear 10"},
    [L_CONV2D] = {"conv2d", {"out", "kernel", "stride", "padding", "dilation", "groups", "bias"}, 2,
                  false, "conv2d 32 kernel=3 padding=1"},
    [L_MAXPOOL2D] = {"maxpool2d", {"kernel", "stride", "padding"}, 1, false, "maxpool2d 2"},
    [L_AVGPOOL2D] = {"avgpool2d", {"kernel", "stride", "padding"}, 1, false, "avgpool2d 2"},
    [L_BATCHNORM1D] = {"batchnorm1d", {"eps", "momentum"}, 0, false, NULL},
    [L_BATCHNORM2D] = {"batchnorm2d", {"eps", "momentum"}, 0, false, NULL},
    [L_LAYERNORM] = {"layernorm", {"eps"}, 0, false, NULL},
    [L_DROPOUT] = {"dropout", {"p"}, 0, false, NULL},
    [L_FLATTEN] = {"flatten", {0}, 0, false, NULL},
    [L_RESHAPE] = {"reshape", {0}, 0, true, NULL},
    [L_RELU] = {"relu", {0}, 0, false, NULL},
    [L_GELU] = {"gelu", {"approximate"}, 0, false, NULL},
    [L_SILU] = {"silu", {0}, 0, false, NULL},
    [L_TANH] = {"tanh", {0}, 0, false, NULL},
    [L_SIGMOID] = {"sigmoid", {0}, 0, false, NULL},
    [L_LEAKYRELU] = {"leakyrelu", {"slope"}, 0, false, NULL},
    [L_ELU] = {"elu", {"alpha"}, 0, false, NULL},
    [L_LSTM] = {"lstm", {"hidden", "layers", "bidirectional", "output", "dropout"}, 1, false,
             "lstm 128"},
    [L_GRU] = {"gru", {"hidden", "layers", "bidirectional", "output", "dropout"}, 1, false,
             "gru 128"},
    [L_RNN] = {"rnn", {"hidden", "layers", "bidirectional", "output", "dropout"}, 1, false,
             "rnn 128"},
};

/* ---- the two layers the nn library has no module for ---- */

typedef struct reshape_layer {
    cn_module base;
    int ndim;
    int64_t shape[CN_MAX_DIMS]; /* [0] is the batch: -1 */
} reshape_layer;

static cn_tensor *reshape_forward(cn_module *m, cn_tensor *x) {
    const reshape_layer *r = (const reshape_layer *)m;
    return cn_reshape(x, r->ndim, r->shape);
}

static const cn_module_vtable reshape_vt = {"Reshape", reshape_forward, NULL};

/* A recurrent layer over [N, T, F] whose output is every step's, or only
 * the last step's (a sequence classifier's usual head). */
typedef struct seq_layer {
    cn_module base;
    bool last;
} seq_layer;

static cn_tensor *seq_forward(cn_module *m, cn_tensor *x) {
    cn_tensor *out = NULL;
    if (cn_rnn_forward(cn_module_child(m, "rnn"), x, NULL, NULL, &out, NULL, NULL) < 0) return NULL;
    if (!((seq_layer *)m)->last) return out;
    int64_t t = cn_shape(out)[1];
    return cn_squeeze(cn_narrow(out, 1, t - 1, 1), 1);
}

static const cn_module_vtable seq_vt = {"Sequence", seq_forward, NULL};

/* ---- reading ---- */

typedef struct reader {
    const char *name; /* the file, for messages */
    int line;
    const char *layer;
    int nargs, dropouts_unset;
    double params; /* the layers' parameters so far (a double: sums of huge sizes do not wrap) */
    const char *key[MAX_ARGS]; /* the def's argument name for each value */
    const char *val[MAX_ARGS];
} reader;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void fail_at(const reader *r, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cn_tool_fail("%s:%d: %s", r->name, r->line, msg);
}

/* Every size is bounded one by one, but a few large layers together could
 * still ask for terabytes: the model's parameters are counted before each
 * layer is made, against CN_MAX_MODEL_PARAMS (default 2^30, 4 GiB of f32;
 * 0: no limit), so a file cannot make the process allocate without bound
 * (docs/reliability.md). */
static bool params_fit(reader *r, double n) {
    double limit = (double)(1u << 30);
    const char *env = getenv("CN_MAX_MODEL_PARAMS");
    if (env && *env) {
        char *end;
        double v = strtod(env, &end);
        if (*end || !(v >= 0)) {
            fail_at(r, "CN_MAX_MODEL_PARAMS='%.40s' is not a whole number of parameters", env);
            return false;
        }
        limit = v > 0 ? v : INFINITY;
    }
    r->params += n;
    if (r->params <= limit) return true;
    fail_at(r, "%s makes the model %.4g parameters, more than the %.4g CN_MAX_MODEL_PARAMS "
               "allows (set it higher, or to 0 for no limit)", r->layer, r->params, limit);
    return false;
}

static const char *arg(const reader *r, const char *key) {
    for (int i = 0; i < r->nargs; i++)
        if (!strcmp(r->key[i], key)) return r->val[i];
    return NULL;
}

static bool get_int(const reader *r, const char *key, long long dflt, long long lo, long long hi,
                    int64_t *out) {
    const char *s = arg(r, key);
    if (!s) {
        *out = dflt;
        return true;
    }
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi) {
        fail_at(r, "%s: %s=%s is not a whole number from %lld to %lld", r->layer, key, s, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

/* A real number in [lo, hi) (hi_open) or [lo, hi]. */
static bool get_real(const reader *r, const char *key, double dflt, double lo, double hi,
                     bool hi_open, double *out) {
    const char *s = arg(r, key);
    if (!s) {
        *out = dflt;
        return true;
    }
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v) || v < lo || v > hi || (hi_open && v == hi)) {
        fail_at(r, "%s: %s=%s is not a number from %g to %s%g", r->layer, key, s, lo,
                hi_open ? "below " : "", hi);
        return false;
    }
    *out = v;
    return true;
}

static bool get_choice(const reader *r, const char *key, const char *const *choices, int n,
                       int *out) {
    const char *s = arg(r, key);
    *out = 0;
    if (!s) return true;
    for (int i = 0; i < n; i++)
        if (!strcmp(s, choices[i])) {
            *out = i;
            return true;
        }
    char list[128] = "";
    for (int i = 0; i < n; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", choices[i]);
    fail_at(r, "%s: %s=%s is not one of %s", r->layer, key, s, list);
    return false;
}

static bool get_bool(const reader *r, const char *key, bool dflt, bool *out) {
    const char *s = arg(r, key);
    *out = dflt;
    if (!s) return true;
    if (cn_tool_bool(s, out)) return true;
    fail_at(r, "%s: %s=%s is not true or false (or 1 or 0)", r->layer, key, s);
    return false;
}

static void shape_str(int nd, const int64_t *s, char *buf, size_t size) {
    size_t k = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < nd && k < size; i++)
        k += (size_t)snprintf(buf + k, size - k, "%s%lld", i ? ", " : "", (long long)s[i]);
    if (k < size) snprintf(buf + k, size - k, "]");
}

/* The line's words after the layer name into r (positional, then key=value). */
static bool split_args(reader *r, const layer_def *d, char **words, int nwords) {
    r->nargs = 0;
    bool named = false;
    int npos = 0;
    while (npos < MAX_ARGS && d->args[npos]) npos++;
    for (int i = 0; i < nwords; i++) {
        char *eq = strchr(words[i], '=');
        const char *key;
        if (eq) {
            *eq = '\0';
            key = NULL;
            for (int k = 0; k < npos; k++)
                if (!strcmp(d->args[k], words[i])) key = d->args[k];
            if (!key) {
                const char *s = cn_tool_suggest(words[i], d->args, npos);
                char list[160] = "";
                for (int k = 0; k < npos; k++)
                    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k ? ", " : "",
                             d->args[k]);
                if (npos == 0) fail_at(r, "%s takes no arguments (got %s=)", d->name, words[i]);
                else if (s) fail_at(r, "%s has no argument '%s' (did you mean %s?); it takes %s",
                                    d->name, words[i], s, list);
                else fail_at(r, "%s has no argument '%s'; it takes %s", d->name, words[i], list);
                return false;
            }
            for (int k = 0; k < r->nargs; k++)
                if (r->key[k] == key) {
                    fail_at(r, "%s: %s is given twice", d->name, key);
                    return false;
                }
            named = true;
            r->key[r->nargs] = key;
            r->val[r->nargs++] = eq + 1;
        } else {
            if (named) {
                fail_at(r, "%s: '%s' comes after key=value arguments; positional ones go first",
                        d->name, words[i]);
                return false;
            }
            if (r->nargs >= npos) {
                if (npos == 0) fail_at(r, "%s takes no arguments (got '%s')", d->name, words[i]);
                else fail_at(r, "%s takes at most %d positional argument%s (got '%s')", d->name,
                             npos, npos == 1 ? "" : "s", words[i]);
                return false;
            }
            r->key[r->nargs] = d->args[r->nargs];
            r->val[r->nargs] = words[i];
            r->nargs++;
        }
    }
    for (int k = 0; k < d->nrequired; k++)
        if (!arg(r, d->args[k])) {
            fail_at(r, "%s needs %s (as in '%s')", d->name, d->args[k], d->example);
            return false;
        }
    return true;
}

/* A list of whole numbers (input, reshape): at least one, each >= 1. */
static bool get_dims(const reader *r, char **words, int nwords, int max, int *nd, int64_t *dims) {
    if (nwords < 1 || nwords > max) {
        fail_at(r, "%s needs 1 to %d sizes, such as %s", r->layer, max,
                !strcmp(r->layer, "input") ? "'input 1 28 28' (C H W) or 'input 20' (features)"
                                           : "'reshape 28 28'");
        return false;
    }
    for (int i = 0; i < nwords; i++) {
        char *end;
        errno = 0;
        long long v = strtoll(words[i], &end, 10);
        if (!*words[i] || *end || errno || v < 1 || v > (1LL << 31)) {
            fail_at(r, "%s: '%s' is not a size (a whole number, 1 or more)", r->layer, words[i]);
            return false;
        }
        dims[i] = v;
    }
    *nd = nwords;
    return true;
}

/* The module of one layer for samples of shape [nd: s]; NULL after fail_at. */
static cn_module *build_layer(reader *r, layer_kind k, char **words, int nwords, int nd,
                              const int64_t *s, double dropout) {
    char sh[96];
    shape_str(nd, s, sh, sizeof sh);
    const char *want = NULL; /* the input this layer needs, when the shape does not fit */
    switch (k) {
    case L_CONV2D: case L_MAXPOOL2D: case L_AVGPOOL2D: case L_BATCHNORM2D:
        if (nd != 3) want = "images [C, H, W]";
        break;
    case L_BATCHNORM1D:
        if (nd != 1 && nd != 2) want = "features [C] or [C, L]";
        break;
    case L_LSTM: case L_GRU: case L_RNN:
        if (nd != 2) want = "a sequence [T, F] (steps x features; 'reshape T F' makes one)";
        break;
    default:
        break;
    }
    if (want) {
        fail_at(r, "%s needs %s; its input here is %s", r->layer, want, sh);
        return NULL;
    }
    switch (k) {
    case L_LINEAR: {
        int64_t out;
        bool bias;
        if (!get_int(r, "out", 0, 1, 1 << 24, &out) || !get_bool(r, "bias", true, &bias) ||
            !params_fit(r, ((double)s[nd - 1] + bias) * (double)out))
            return NULL;
        return cn_nn_linear(s[nd - 1], out, bias);
    }
    case L_CONV2D: {
        int64_t out, kk, st, pad, dil, groups;
        bool bias;
        if (!get_int(r, "out", 0, 1, 1 << 20, &out) || !get_int(r, "kernel", 0, 1, 1024, &kk) ||
            !get_int(r, "stride", 1, 1, 1024, &st) || !get_int(r, "padding", 0, 0, 1024, &pad) ||
            !get_int(r, "dilation", 1, 1, 1024, &dil) || !get_int(r, "groups", 1, 1, 1 << 20, &groups) ||
            !get_bool(r, "bias", true, &bias))
            return NULL;
        if (s[0] % groups || out % groups) {
            fail_at(r, "conv2d: groups=%lld must divide the input's %lld channels and out=%lld",
                    (long long)groups, (long long)s[0], (long long)out);
            return NULL;
        }
        if (!params_fit(r, (double)out * ((double)(s[0] / groups) * (double)kk * (double)kk + bias)))
            return NULL;
        cn_conv_opts o = {.stride = {st, st}, .padding = {pad, pad}, .dilation = {dil, dil},
                          .groups = groups};
        return cn_nn_conv2d(s[0], out, kk, kk, &o, bias);
    }
    case L_MAXPOOL2D: case L_AVGPOOL2D: {
        int64_t kk, st, pad;
        if (!get_int(r, "kernel", 0, 1, 1024, &kk) || !get_int(r, "stride", 0, 1, 1024, &st) ||
            !get_int(r, "padding", 0, 0, 512, &pad))
            return NULL;
        cn_pool_opts o = {.kernel = {kk, kk}, .stride = {st, st}, .padding = {pad, pad}};
        return k == L_MAXPOOL2D ? cn_nn_max_pool2d(&o) : cn_nn_avg_pool2d(&o);
    }
    case L_BATCHNORM1D: case L_BATCHNORM2D: {
        double eps, mom;
        if (!get_real(r, "eps", 1e-5, 1e-300, 1, false, &eps) ||
            !get_real(r, "momentum", 0.1, 1e-300, 1, false, &mom))
            return NULL;
        if (!params_fit(r, 4.0 * (double)s[0])) return NULL; /* weight, bias, mean, variance */
        cn_batch_norm_opts o = {.eps = eps, .momentum = mom};
        return k == L_BATCHNORM1D ? cn_nn_batch_norm1d(s[0], &o) : cn_nn_batch_norm2d(s[0], &o);
    }
    case L_LAYERNORM: {
        double eps;
        if (!get_real(r, "eps", 1e-5, 1e-300, 1, false, &eps) || !params_fit(r, 2.0 * (double)s[nd - 1]))
            return NULL;
        return cn_nn_layer_norm(1, &s[nd - 1], eps, true);
    }
    case L_DROPOUT: {
        double p;
        if (!arg(r, "p")) r->dropouts_unset++;
        if (!get_real(r, "p", dropout, 0, 1, true, &p)) return NULL;
        return cn_nn_dropout(p);
    }
    case L_FLATTEN:
        return cn_nn_flatten(1, -1);
    case L_RESHAPE: {
        reshape_layer tmp;
        if (!get_dims(r, words, nwords, CN_MAX_DIMS - 1, &tmp.ndim, tmp.shape + 1)) return NULL;
        int64_t a = 1, b = 1;
        for (int i = 0; i < nd; i++) a *= s[i];
        for (int i = 1; i <= tmp.ndim; i++) b *= tmp.shape[i];
        char to[96];
        shape_str(tmp.ndim, tmp.shape + 1, to, sizeof to);
        if (a != b) {
            fail_at(r, "reshape %s: its input %s has %lld values per sample, not %lld", to, sh,
                    (long long)a, (long long)b);
            return NULL;
        }
        cn_module *m = cn_module_new(&reshape_vt, sizeof(reshape_layer));
        if (!m) return NULL;
        reshape_layer *rl = (reshape_layer *)m;
        rl->ndim = tmp.ndim + 1;
        rl->shape[0] = -1;
        memcpy(rl->shape + 1, tmp.shape + 1, sizeof(int64_t) * (size_t)tmp.ndim);
        return m;
    }
    case L_RELU: return cn_nn_relu();
    case L_SILU: return cn_nn_silu();
    case L_TANH: return cn_nn_tanh();
    case L_SIGMOID: return cn_nn_sigmoid();
    case L_GELU: {
        static const char *const approx[] = {"none", "tanh"};
        int a;
        return get_choice(r, "approximate", approx, 2, &a) ? cn_nn_gelu(a == 1) : NULL;
    }
    case L_LEAKYRELU: {
        double slope;
        return get_real(r, "slope", 0.01, 0, 1e6, false, &slope) ? cn_nn_leaky_relu(slope) : NULL;
    }
    case L_ELU: {
        double alpha;
        return get_real(r, "alpha", 1, 0, 1e6, false, &alpha) ? cn_nn_elu(alpha) : NULL;
    }
    case L_LSTM: case L_GRU: case L_RNN: {
        static const char *const outs[] = {"last", "all"};
        int64_t hidden, layers;
        bool bidir;
        int out;
        double p;
        if (!get_int(r, "hidden", 0, 1, 1 << 20, &hidden) || !get_int(r, "layers", 1, 1, 64, &layers) ||
            !get_bool(r, "bidirectional", false, &bidir) || !get_choice(r, "output", outs, 2, &out) ||
            !get_real(r, "dropout", 0, 0, 1, true, &p))
            return NULL;
        /* Per layer and direction: gates x (input + hidden + 2 biases) x hidden; the
         * layers after the first read 2 hidden when bidirectional. */
        double gates = k == L_LSTM ? 4 : k == L_GRU ? 3 : 1, dirs = bidir ? 2 : 1;
        double first = gates * ((double)s[1] + (double)hidden + 2) * (double)hidden;
        double rest = gates * (dirs * (double)hidden + (double)hidden + 2) * (double)hidden;
        if (!params_fit(r, dirs * (first + (double)(layers - 1) * rest))) return NULL;
        cn_rnn_opts o = {.num_layers = (int)layers, .batch_first = true, .bidirectional = bidir,
                         .dropout = p};
        cn_module *rnn = k == L_LSTM ? cn_nn_lstm(s[1], hidden, &o)
                         : k == L_GRU ? cn_nn_gru(s[1], hidden, &o)
                                      : cn_nn_rnn(s[1], hidden, &o);
        cn_module *m = rnn ? cn_module_new(&seq_vt, sizeof(seq_layer)) : NULL;
        if (!m || cn_module_add_child(m, "rnn", rnn) < 0) {
            if (!m) cn_module_free(rnn);
            cn_module_free(m);
            return NULL;
        }
        ((seq_layer *)m)->last = out == 0;
        return m;
    }
    default:
        return NULL;
    }
}

static const char *layer_names[L_COUNT];

static int find_layer(const char *w) {
    for (int i = 0; i < L_COUNT; i++)
        if (!strcmp(defs[i].name, w)) return i;
    return -1;
}

/* The spellings of PyTorch and of Chutney's own constructors that people
 * will type, pointed at this format's name. */
static const char *alias_of(const char *w) {
    static const char *const map[][2] = {
        {"maxpool", "maxpool2d"}, {"max_pool2d", "maxpool2d"}, {"avgpool", "avgpool2d"},
        {"avg_pool2d", "avgpool2d"}, {"batch_norm2d", "batchnorm2d"}, {"batchnorm", "batchnorm2d"},
        {"batch_norm1d", "batchnorm1d"}, {"layer_norm", "layernorm"}, {"leaky_relu", "leakyrelu"},
        {"conv", "conv2d"}, {"dense", "linear"}, {"fc", "linear"}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(map[i][0], w)) return map[i][1];
    return NULL;
}

cn_module *cn_tool_model_text_parse(const char *text, const char *name, double dropout,
                                    cn_tool_text_shape *shape) {
    for (int i = 0; i < L_COUNT; i++) layer_names[i] = defs[i].name;
    *shape = (cn_tool_text_shape){0};
    size_t len = strlen(text);
    char *buf = malloc(len + 1);
    if (!buf) {
        cn_tool_fail("%s: out of memory", name);
        return NULL;
    }
    memcpy(buf, text, len + 1);
    reader r = {.name = name};
    cn_module *seq = cn_nn_sequential(NULL, 0);
    cn_graph *g = cn_graph_new();
    cn_tensor *x = NULL; /* the placeholder carried through the layers */
    int nd = 0, nlayers = 0;
    int64_t s[CN_MAX_DIMS] = {0};
    bool ok = seq && g;
    cn_scope_begin();
    char *save = NULL;
    int line = 0;
    for (char *p = buf, *next; ok && p; p = next) {
        next = strchr(p, '\n');
        if (next) *next++ = '\0';
        line++;
        r.line = line;
        char *hash = strchr(p, '#');
        if (hash) *hash = '\0';
        char *words[MAX_ARGS + CN_MAX_DIMS + 2];
        int nw = 0;
        for (char *w = strtok_r(p, " \t\r", &save); w; w = strtok_r(NULL, " \t\r", &save)) {
            if (nw == (int)(sizeof words / sizeof words[0])) {
                fail_at(&r, "too many words on one line (at most %d)", nw);
                ok = false;
                break;
            }
            words[nw++] = w;
        }
        if (!ok) break;
        if (nw == 0) continue;
        int k = find_layer(words[0]);
        r.layer = words[0];
        if (k < 0) {
            const char *s2 = alias_of(words[0]);
            if (!s2) s2 = cn_tool_suggest(words[0], layer_names, L_COUNT);
            if (s2) fail_at(&r, "unknown layer '%s' (did you mean %s?)", words[0], s2);
            else fail_at(&r, "unknown layer '%s' (docs/model-format.md lists the layers)", words[0]);
            ok = false;
            break;
        }
        if (k == L_INPUT) {
            if (x) {
                fail_at(&r, "a second input line (the model has one, before its layers)");
                ok = false;
                break;
            }
            if (!(ok = get_dims(&r, words + 1, nw - 1, 3, &nd, s))) break;
            if (nd == 2) {
                fail_at(&r, "input: give C H W for images or F for a table of features (a "
                            "sequence is an image's rows: 'reshape T F' after 'input 1 T F')");
                ok = false;
                break;
            }
            int64_t xs[CN_MAX_DIMS] = {-1};
            memcpy(xs + 1, s, sizeof(int64_t) * (size_t)nd);
            x = cn_placeholder(g, "images", CN_F32, nd + 1, xs);
            memcpy(shape->in, s, sizeof(int64_t) * (size_t)nd);
            shape->in_ndim = nd;
            ok = x != NULL;
            continue;
        }
        if (!x) {
            fail_at(&r, "%s before the input line: the file starts with 'input C H W' (or "
                        "'input F'), the shape of one sample", words[0]);
            ok = false;
            break;
        }
        if (!defs[k].variadic && !(ok = split_args(&r, &defs[k], words + 1, nw - 1))) break;
        cn_module *m = build_layer(&r, (layer_kind)k, words + 1, nw - 1, nd, s, dropout);
        if (!m) {
            /* A library refusal (a constructor's check) is its message. */
            if (*cn_last_error()) fail_at(&r, "%s: %s", words[0], cn_last_error());
            ok = false;
            break;
        }
        if (cn_nn_sequential_append(seq, m) < 0) {
            ok = false;
            break;
        }
        nlayers++;
        cn_tensor *y = cn_module_forward(m, x);
        if (!y) {
            char sh[96];
            shape_str(nd, s, sh, sizeof sh);
            fail_at(&r, "%s does not fit its input %s: %s", words[0], sh, cn_last_error());
            ok = false;
            break;
        }
        nd = cn_ndim(y) - 1;
        for (int i = 0; i < nd; i++) {
            s[i] = cn_shape(y)[i + 1];
            if (s[i] < 1) {
                char sh[96];
                shape_str(nd, s, sh, sizeof sh);
                fail_at(&r, "%s leaves nothing: its output would be %s per sample", words[0], sh);
                ok = false;
                break;
            }
        }
        x = y;
        shape->last_line = line;
    }
    cn_scope_end();
    cn_graph_free(g);
    free(buf);
    if (ok && !shape->in_ndim) {
        cn_tool_fail("%s: no input line: a model file starts with 'input C H W' (or 'input F'), "
                     "then its layers", name);
        ok = false;
    } else if (ok && nlayers == 0) {
        cn_tool_fail("%s: no layers after the input line", name);
        ok = false;
    }
    if (!ok) {
        cn_module_free(seq);
        return NULL;
    }
    shape->dropouts_unset = r.dropouts_unset;
    shape->out_ndim = nd;
    memcpy(shape->out, s, sizeof(int64_t) * (size_t)nd);
    return seq;
}

int cn_tool_model_text_fits(const cn_tool_text_shape *s, const char *name, int ndim,
                            const int64_t *in, int64_t nout) {
    char a[96], b[96];
    bool same = s->in_ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = s->in[i] == in[i];
    if (!same) {
        shape_str(s->in_ndim, s->in, a, sizeof a);
        shape_str(ndim, in, b, sizeof b);
        cn_tool_fail("%s: its input line says samples of %s, and the data's are %s", name, a, b);
        return -1;
    }
    if (s->out_ndim != 1 || s->out[0] != nout) {
        shape_str(s->out_ndim, s->out, a, sizeof a);
        cn_tool_fail("%s:%d: the last layer gives %s per sample, and the data needs [%lld] (%s); "
                     "end with 'linear %lld'%s", name, s->last_line, a, (long long)nout,
                     nout == 1 ? "a regression's one output" : "a score per class",
                     (long long)nout, s->out_ndim > 1 ? " after 'flatten'" : "");
        return -1;
    }
    return 0;
}

bool cn_tool_checkpoint_model(const char *path, char *buf, size_t size) {
    cn_checkpoint *c = cn_load_safetensors(path);
    if (!c) {
        cn_tool_fail("%s", cn_last_error());
        return false;
    }
    const char *fmt = cn_checkpoint_metadata(c, "format"), *m = cn_checkpoint_metadata(c, "model");
    bool text = m && !strcmp(m, CN_TOOL_TEXT_MODEL) && cn_checkpoint_metadata(c, "model_text");
    bool onnx = m && !strcmp(m, "onnx"); /* train --model-file M.onnx (tools/train_onnx.c) */
    bool ok = fmt && !strcmp(fmt, "chutney-train-1") && m && (cn_tool_known_model(m) || text || onnx);
    if (ok) snprintf(buf, size, "%s", m);
    else cn_tool_fail("%s is not a checkpoint written by chutney train", path);
    cn_checkpoint_free(c);
    return ok;
}

cn_module *cn_tool_model_for_checkpoint(const char *model, const char *ckpt, double dropout,
                                        int ndim, const int64_t *in, int64_t nout) {
    /* The ONNX model the checkpoint names (its hash checked); one output is a regression's. */
    if (!strcmp(model, "onnx")) return cn_tool_onnx_model_of(ckpt, ndim, in, nout, nout == 1);
    if (strcmp(model, CN_TOOL_TEXT_MODEL)) return cn_tool_make_model_for(model, ndim, in, nout);
    cn_checkpoint *c = cn_load_safetensors(ckpt);
    if (!c) {
        cn_tool_fail("%s", cn_last_error());
        return NULL;
    }
    const char *text = cn_checkpoint_metadata(c, "model_text");
    cn_module *m = NULL;
    cn_tool_text_shape s;
    char name[512];
    snprintf(name, sizeof name, "%s (its model text)", ckpt);
    if (!text) cn_tool_fail("%s has no model_text: it was not trained with --model-file", ckpt);
    else if ((m = cn_tool_model_text_parse(text, name, dropout, &s)) &&
             cn_tool_model_text_fits(&s, name, ndim, in, nout) < 0) {
        cn_module_free(m);
        m = NULL;
    }
    cn_checkpoint_free(c);
    return m;
}
