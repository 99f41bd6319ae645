/* Autoregressive generation with a GPT: the next token is drawn from the
 * last position's logits on the host (temperature, top-k, top-p), with
 * Philox keyed by (seed, step) so a seed fixes the text everywhere. The
 * model sees a window of at most context_length tokens, fed through the
 * key/value cache or, for reference, recomputed whole every step. */
#include "transformer.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

typedef struct cand {
    double p;
    int64_t id;
} cand;

/* Most likely first; ties by id, so the order (and the draw) is fixed. */
static int cand_cmp(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static double uniform01(uint64_t seed, uint64_t step) {
    uint32_t r[4];
    cn_philox(seed, step, r);
    uint64_t bits = ((uint64_t)r[1] << 32 | r[0]) >> 11;
    return (double)bits * (1.0 / 9007199254740992.0); /* [0, 1) */
}

/* The next token from logits l[0..V) (changed in place); c is scratch. */
static int64_t sample(double *l, cand *c, int64_t V, const cn_gpt_generate_opts *o, uint64_t step) {
    int64_t best = 0;
    for (int64_t i = 1; i < V; i++)
        if (l[i] > l[best]) best = i;
    if (!(o->temperature > 0)) return best;
    /* Softmax of l / T, stable around the maximum. */
    double mx = l[best], sum = 0;
    for (int64_t i = 0; i < V; i++) {
        c[i].id = i;
        c[i].p = exp((l[i] - mx) / o->temperature);
        sum += c[i].p;
    }
    for (int64_t i = 0; i < V; i++) c[i].p /= sum;
    qsort(c, (size_t)V, sizeof *c, cand_cmp);
    int64_t n = V;
    if (o->top_k > 0 && o->top_k < n) n = o->top_k;
    double kept = 0;
    for (int64_t i = 0; i < n; i++) kept += c[i].p;
    if (o->top_p > 0 && o->top_p < 1) {
        /* The smallest head of the (top-k) distribution whose mass, renormalised,
         * reaches top_p; never empty. */
        double cum = 0;
        int64_t m = 0;
        while (m < n && (m == 0 || cum < o->top_p * kept)) cum += c[m++].p;
        n = m;
        kept = cum;
    }
    double u = uniform01(o->seed, step) * kept, acc = 0;
    for (int64_t i = 0; i < n; i++) {
        acc += c[i].p;
        if (u < acc) return c[i].id;
    }
    return c[n - 1].id; /* u within rounding of the total */
}

/* The last row of logits [1, T, V] as doubles. */
static int last_row(cn_tensor *logits, double *row, int64_t V) {
    if (!logits) return CN_EINVAL;
    int64_t T = cn_shape(logits)[1];
    return cn_copy_to_buffer(cn_narrow(logits, 1, T - 1, 1), CN_F64, row, sizeof(double) * (size_t)V);
}

/* seq[from, to) as ids [1, to - from]. */
static cn_tensor *ids_of(const int64_t *seq, int64_t from, int64_t to) {
    return cn_from_data(CN_I64, 2, (int64_t[]){1, to - from}, seq + from);
}

int cn_gpt_generate(cn_module *gpt, const int64_t *prompt, int64_t n_prompt, int64_t n_new,
                    const cn_gpt_generate_opts *opts, int64_t *out) {
    cn_gpt_config cfg;
    if (cn_gpt_get_config(gpt, &cfg) < 0) return CN_EINVAL;
    cn_gpt_generate_opts d = {0};
    if (!opts) opts = &d;
    if (!prompt || n_prompt < 1 || n_new < 0 || (n_new > 0 && !out))
        return cn_failc(CN_EINVAL, "gpt_generate: needs a prompt of at least one token (got %" PRId64
                                   ") and room for %" PRId64 " tokens", n_prompt, n_new);
    if (!(opts->temperature >= 0) || !isfinite(opts->temperature) || opts->top_k < 0 ||
        !(opts->top_p >= 0))
        return cn_failc(CN_EINVAL, "gpt_generate: temperature %g, top_k %" PRId64 " and top_p %g "
                                   "must be >= 0", opts->temperature, opts->top_k, opts->top_p);
    for (int64_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= cfg.vocab_size)
            return cn_failc(CN_EINVAL, "gpt_generate: prompt token %" PRId64 " is %" PRId64
                                       ", outside the vocabulary of %" PRId64, i, prompt[i],
                            cfg.vocab_size);
    int64_t V = cfg.vocab_size, C = cfg.context_length, half = C / 2 > 0 ? C / 2 : 1;
    int64_t *seq = malloc(sizeof *seq * (size_t)(n_prompt + n_new));
    double *row = malloc(sizeof *row * (size_t)V);
    cand *scratch = malloc(sizeof *scratch * (size_t)V);
    cn_gpt_cache *cache = opts->no_cache ? NULL : cn_gpt_cache_new(gpt, 1);
    int rc = CN_OK;
    if (!seq || !row || !scratch) rc = cn_failc(CN_ENOMEM, "gpt_generate: out of memory");
    else if (!opts->no_cache && !cache) rc = CN_EINVAL;
    bool training = gpt->training;
    cn_module_train(gpt, false);
    cn_no_grad_begin();
    if (rc == CN_OK) {
        memcpy(seq, prompt, sizeof *seq * (size_t)n_prompt);
        int64_t n = n_prompt, ws = n > C ? n - C : 0; /* the window: seq[ws, n) */
        /* The prompt's window first. */
        cn_scope_begin();
        cn_tensor *ids = ids_of(seq, ws, n);
        rc = last_row(cache ? cn_gpt_forward_cached(gpt, cache, ids) : cn_module_forward(gpt, ids),
                      row, V);
        cn_scope_end();
        for (int64_t i = 0; i < n_new && rc == CN_OK; i++) {
            int64_t next = sample(row, scratch, V, opts, (uint64_t)i);
            seq[n++] = next;
            out[i] = next;
            if (opts->on_token) opts->on_token(opts->ctx, next);
            if (i + 1 == n_new) break;
            cn_scope_begin();
            if (n - ws > C) {
                /* The window is full: restart it from its last C/2 tokens,
                 * in a fresh cache (or the same window, recomputed). */
                ws = n - half;
                cn_gpt_cache_reset(cache);
                ids = ids_of(seq, ws, n);
            } else {
                ids = cache ? ids_of(seq, n - 1, n) : ids_of(seq, ws, n);
            }
            rc = last_row(cache ? cn_gpt_forward_cached(gpt, cache, ids)
                                : cn_module_forward(gpt, ids), row, V);
            cn_scope_end();
        }
    }
    cn_no_grad_end();
    cn_module_train(gpt, training);
    cn_gpt_cache_free(cache);
    free(seq);
    free(row);
    free(scratch);
    return rc;
}
