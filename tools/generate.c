/* `chutney generate --load CKPT --prompt TEXT`: continues a prompt with a
 * GPT checkpoint of `chutney train --model gpt`, whose metadata holds the
 * model's configuration and its tokenizer. Tokens are printed as they are
 * made, through the KV cache (cn_gpt_generate). */
#include "tools.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct gen_args {
    const char *load, *prompt;
    long long tokens, top_k, threads;
    double temperature, top_p;
    uint64_t seed;
    bool no_cache, json;
} gen_args;

static const char *const gen_options[] = {"--load", "--prompt", "--tokens", "--temperature",
                                          "--top-k", "--top-p", "--seed", "--threads",
                                          "--no-cache", "--json", "--help"};
#define NGEN (int)(sizeof gen_options / sizeof gen_options[0])

static void usage(FILE *f) {
    fprintf(f,
            "usage: chutney generate --load CKPT [--prompt TEXT] [--tokens N] [--temperature T]\n"
            "                        [--top-k K] [--top-p P] [--seed S] [--threads N] [--no-cache]\n"
            "                        [--precision {f32,bf16,f16}] [--json]\n"
            "\n"
            "Continues TEXT with a GPT checkpoint of `chutney train --model gpt --save`\n"
            "(its tokenizer is in the checkpoint) and prints the prompt and the N new\n"
            "tokens (default 200) as they are made. --temperature 0 is greedy (the most\n"
            "likely token); otherwise tokens are drawn from softmax(logits / T) (default\n"
            "0.8), cut to the K most likely (--top-k, 0: all) and to the smallest set\n"
            "whose probability reaches P (--top-p, 1: all); --seed (default 1) fixes the\n"
            "draws, so the same command prints the same text. An empty prompt starts\n"
            "from <|endoftext|>. Each token attends over a key/value cache of the ones\n"
            "before; --no-cache recomputes the whole window instead (same tokens, slower).\n"
            "--precision bf16 or f16: the products in that type (autocast; default f32).\n"
            "--json prints, instead of the text, one line with the prompt's and the new\n"
            "tokens' counts, the time generation took (the model loaded) and tokens/s.\n"
            "Exit status: 0 done, 1 a failure (files), 2 a bad command line.\n");
}

static bool real_opt(const char *k, const char *v, double lo, double *out) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(x) || x < lo) {
        fprintf(stderr, "chutney generate: bad value '%s' for %s: expected a number, %g or more\n",
                v, k, lo);
        return false;
    }
    *out = x;
    return true;
}

/* 0: go on; -1: --help was printed; else the exit status. */
static int parse(int argc, char **argv, gen_args *a) {
    *a = (gen_args){.prompt = "", .tokens = 200, .temperature = 0.8, .top_p = 1, .seed = 1};
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i];
        if (!strcmp(k, "--help") || !strcmp(k, "-h")) {
            usage(stdout);
            return -1;
        }
        if (!strcmp(k, "--no-cache") || !strcmp(k, "--json")) {
            *(k[2] == 'n' ? &a->no_cache : &a->json) = true;
            continue;
        }
        bool known = false;
        for (int j = 0; j < NGEN; j++) known |= !strcmp(gen_options[j], k);
        if (!known) return cn_tool_unknown_option("generate", k, gen_options, NGEN);
        /* The prompt may start with dashes; any other value may not. */
        if (i + 1 >= argc || (strcmp(k, "--prompt") && !strncmp(argv[i + 1], "--", 2)))
            return cn_tool_missing_value("generate", k,
                                         !strcmp(k, "--load") ? "a checkpoint of train --model gpt"
                                                              : "see generate --help");
        const char *v = argv[++i];
        bool ok = true;
        if (!strcmp(k, "--load")) a->load = v;
        else if (!strcmp(k, "--prompt")) a->prompt = v;
        else if (!strcmp(k, "--tokens")) ok = cn_tool_int("generate", k, v, 0, 1 << 24, &a->tokens);
        else if (!strcmp(k, "--top-k")) ok = cn_tool_int("generate", k, v, 0, INT_MAX, &a->top_k);
        else if (!strcmp(k, "--threads")) ok = cn_tool_int("generate", k, v, 1, 65536, &a->threads);
        else if (!strcmp(k, "--temperature")) ok = real_opt(k, v, 0, &a->temperature);
        else if (!strcmp(k, "--top-p")) ok = real_opt(k, v, 0, &a->top_p);
        else if (!strcmp(k, "--seed")) ok = cn_tool_u64("generate", k, v, &a->seed);
        if (!ok) return CN_TOOL_USAGE;
    }
    if (!a->load) {
        fprintf(stderr, "chutney generate: --load CKPT is required: a checkpoint of `chutney "
                        "train --model gpt --save CKPT`\n");
        return CN_TOOL_USAGE;
    }
    return 0;
}

/* The model of the checkpoint, with its weights, and its tokenizer. */
cn_module *cn_tool_gpt_model(const char *path, cn_tokenizer **tok) {
    cn_checkpoint *c = cn_load_safetensors(path);
    if (!c) return NULL;
    const char *model = cn_checkpoint_metadata(c, "model");
    cn_module *m = NULL;
    *tok = NULL;
    if (!model || strcmp(model, "gpt")) {
        cn_tool_fail("%s holds %s%s%s, not a GPT (train one with chutney train --model gpt)", path,
                     model ? "a '" : "no model", model ? model : "", model ? "' model" : "");
        cn_checkpoint_free(c);
        return NULL;
    }
    cn_gpt_config cfg;
    if (cn_tool_gpt_config(c, path, &cfg) < 0) {
        cn_checkpoint_free(c);
        return NULL;
    }
    *tok = cn_tokenizer_from_checkpoint(c);
    cn_checkpoint_free(c);
    if (!*tok) return NULL;
    if (cn_tokenizer_vocab_size(*tok) != cfg.vocab_size) {
        cn_tool_fail("%s: the tokenizer has %d ids, the model %lld", path,
                     cn_tokenizer_vocab_size(*tok), (long long)cfg.vocab_size);
        return NULL;
    }
    m = cn_nn_gpt(&cfg);
    int epochs;
    if (!m || cn_tool_load_checkpoint(path, "gpt", m, NULL, &epochs) < 0) {
        cn_module_free(m);
        return NULL;
    }
    return m;
}

typedef struct printer {
    const cn_tokenizer *tok;
    bool failed;
} printer;

static void print_token(void *ctx, int64_t id) {
    printer *p = ctx;
    size_t len;
    const char *s = cn_tokenizer_token(p->tok, (int32_t)id, &len);
    if (s) fwrite(s, 1, len, stdout);
    else p->failed = true;
    fflush(stdout);
}

int cn_tool_generate(int argc, char **argv) {
    gen_args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    if (!cn_tool_readable("generate", "--load", a.load)) return CN_TOOL_FAILED;
    if (a.threads) cn_set_num_threads((int)a.threads);
    cn_tokenizer *tok = NULL;
    cn_module *m = cn_tool_gpt_model(a.load, &tok);
    if (!m) {
        fprintf(stderr, "chutney generate: cannot load %s: %s\n", a.load, cn_tool_error());
        cn_tokenizer_free(tok);
        return CN_TOOL_FAILED;
    }
    int32_t *ids32 = NULL;
    size_t n = 0;
    int64_t *prompt = NULL, *out = NULL;
    rc = cn_tokenizer_encode(tok, a.prompt, strlen(a.prompt), 0, &ids32, &n);
    if (rc == 0 && n == 0) {
        /* Nothing to continue: start where a document starts. */
        int32_t eot = cn_tokenizer_special_id(tok, CN_EOT_TOKEN);
        if (eot < 0) {
            cn_tool_fail("the prompt is empty and the tokenizer has no %s to start from",
                         CN_EOT_TOKEN);
            rc = -1;
        } else {
            free(ids32);
            ids32 = malloc(sizeof *ids32);
            if (ids32) ids32[0] = eot, n = 1;
            else rc = -1;
        }
    }
    if (rc == 0) {
        prompt = malloc(sizeof *prompt * n);
        out = malloc(sizeof *out * (size_t)(a.tokens ? a.tokens : 1));
        if (!prompt || !out) rc = -1;
        for (size_t i = 0; rc == 0 && i < n; i++) prompt[i] = ids32[i];
    }
    printer pr = {tok, false};
    double t0 = cn_tool_now_s(), c0 = cn_tool_cpu_s();
    if (rc == 0) {
        if (!a.json) fputs(a.prompt, stdout);
        fflush(stdout);
        cn_gpt_generate_opts o = {.temperature = a.temperature,
                                  .top_k = a.top_k,
                                  .top_p = a.top_p,
                                  .seed = a.seed,
                                  .no_cache = a.no_cache,
                                  .on_token = a.json ? NULL : print_token,
                                  .ctx = &pr};
        rc = cn_gpt_generate(m, prompt, (int64_t)n, a.tokens, &o, out);
        double dt = cn_tool_now_s() - t0, cpu = cn_tool_cpu_s() - c0;
        if (!a.json) putchar('\n');
        else if (rc == 0)
            printf("{\"model\":\"gpt\",\"mode\":\"generate\",\"cache\":%s,\"prompt_tokens\":%zu,"
                   "\"new_tokens\":%lld,\"seconds\":%.4f,\"tokens_per_sec\":%.1f,"
                   "\"tokens_per_cpu_sec\":%.1f,\"threads\":%d}\n",
                   a.no_cache ? "false" : "true", n, a.tokens, dt,
                   dt > 0 ? (double)a.tokens / dt : 0, cpu > 0 ? (double)a.tokens / cpu : 0,
                   cn_get_num_threads());
    }
    if (rc < 0 || pr.failed)
        fprintf(stderr, "chutney generate: %s\n", pr.failed ? "a token outside the vocabulary"
                                                            : cn_tool_error());
    free(ids32);
    free(prompt);
    free(out);
    cn_module_free(m);
    cn_tokenizer_free(tok);
    return rc < 0 || pr.failed ? CN_TOOL_FAILED : 0;
}
