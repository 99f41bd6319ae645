/* The BPE tokenizer's speed on a corpus (docs/text.md, "Speed"): training
 * time per vocabulary size, then encoding and decoding throughput, on one
 * thread (neither uses the pool). Checks the round trip on the way.
 *
 * Usage: bench_bpe CORPUS [--vocab N]... [--repeats N]
 *   e.g. scripts/text-corpus.sh fortunes > /tmp/fortunes.txt
 *        build/bench/bench_bpe /tmp/fortunes.txt --vocab 1024 --vocab 4096 */
#include "bench_util.h"

#include <chutney.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) {
            char *q = realloc(buf, cap *= 2);
            if (!q) free(buf);
            buf = q;
        }
    }
    fclose(f);
    *len = n;
    return buf;
}

int main(int argc, char **argv) {
    const char *path = NULL;
    int vocabs[16], nv = 0, repeats = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--vocab") && i + 1 < argc && nv < 16)
            vocabs[nv++] = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--repeats") && i + 1 < argc)
            repeats = atoi(argv[++i]);
        else if (argv[i][0] != '-' && !path)
            path = argv[i];
        else {
            fprintf(stderr, "usage: %s CORPUS [--vocab N]... [--repeats N]\n", argv[0]);
            return 2;
        }
    }
    if (!path || repeats < 1) {
        fprintf(stderr, "usage: %s CORPUS [--vocab N]... [--repeats N]\n", argv[0]);
        return 2;
    }
    if (!nv) {
        vocabs[nv++] = 1024;
        vocabs[nv++] = 4096;
    }
    size_t len;
    char *text = read_file(path, &len);
    if (!text) {
        fprintf(stderr, "bench_bpe: cannot read %s\n", path);
        return 1;
    }
    printf("corpus %s: %.2f MB\n", path, (double)len / 1e6);
    printf("%6s %9s %8s %12s %10s %12s %12s\n", "vocab", "merges", "train_s", "tokens",
           "bytes/tok", "encode_tok/s", "decode_MB/s");
    int rc = 0;
    for (int v = 0; v < nv; v++) {
        double tt[32], te[32], td[32];
        cn_tokenizer *tok = NULL;
        int32_t *ids = NULL;
        size_t n = 0;
        int r = repeats < 32 ? repeats : 32;
        for (int k = 0; k < r; k++) {
            cn_tokenizer_free(tok);
            double t0 = bench_now_s();
            tok = cn_bpe_train(text, len, vocabs[v], NULL);
            tt[k] = bench_now_s() - t0;
            if (!tok) {
                fprintf(stderr, "bench_bpe: %s\n", cn_last_error());
                return 1;
            }
        }
        for (int k = 0; k < r; k++) {
            free(ids);
            double t0 = bench_now_s();
            if (cn_tokenizer_encode(tok, text, len, CN_TOKENIZE_SPECIAL, &ids, &n) != 0) {
                fprintf(stderr, "bench_bpe: %s\n", cn_last_error());
                return 1;
            }
            te[k] = bench_now_s() - t0;
        }
        char *back = NULL;
        size_t blen = 0;
        for (int k = 0; k < r; k++) {
            free(back);
            double t0 = bench_now_s();
            if (cn_tokenizer_decode(tok, ids, n, &back, &blen) != 0) {
                fprintf(stderr, "bench_bpe: %s\n", cn_last_error());
                return 1;
            }
            td[k] = bench_now_s() - t0;
        }
        if (blen != len || memcmp(back, text, len) != 0) {
            fprintf(stderr, "bench_bpe: the round trip differs at vocab %d\n", vocabs[v]);
            rc = 1;
        }
        double mt = bench_median(tt, r), me = bench_median(te, r), md = bench_median(td, r);
        printf("%6d %9d %8.3f %12zu %10.3f %12.3g %12.1f\n", cn_tokenizer_vocab_size(tok),
               cn_tokenizer_num_merges(tok), mt, n, (double)len / (double)n, (double)n / me,
               (double)len / 1e6 / md);
        free(back);
        free(ids);
        cn_tokenizer_free(tok);
    }
    free(text);
    return rc;
}
