/* The text pipeline: the byte-level BPE tokenizer (training against a naive
 * reference that recounts every pair for every merge, encoding against the
 * merges applied one by one, exact round trips, the file format and its
 * errors, checkpoints) and the token windows and their loader. All text is
 * made here; nothing is downloaded. */
#include "io_util.h"

#include "data/bpe.h" /* the pre-tokeniser, shared with the reference */

/* ---- a synthetic corpus ---- */

/* Words with repeats worth merging, overlapping pairs ("aaaa", "abab"),
 * UTF-8 in several scripts, contractions, digits and punctuation. */
static const char *const kWords[] = {
    "the", "a", "and", "of", "to", "banana", "bandana", "aaaa", "aaa", "abababab", "don", "it",
    "naïve", "café", "über", "日本語", "слово", "🙂", "lorem", "ipsum", "dolor", "sit", "amet",
    "Tokens", "tokenizer", "token", "BPE", "x", "zz", "Mississippi", "2024", "42", "3.14"};
static const char *const kSeps[] = {" ", " ", " ", " ", ", ", ". ", "\n", "\n\n", "  ", "\t",
                                    "'s ", "'t ", "! ", " -- ", "?\n"};

/* About `target` bytes of text (malloc'd, NUL-terminated). Word frequencies
 * fall off like a power law, as in real text. */
static char *make_text(uint64_t seed, size_t target, size_t *len) {
    th_seed(seed);
    size_t cap = target + 64, n = 0;
    char *t = malloc(cap);
    const int nw = (int)(sizeof kWords / sizeof *kWords), ns = (int)(sizeof kSeps / sizeof *kSeps);
    while (n < target) {
        double u = th_uniform(0, 1);
        const char *w = kWords[(int)(nw * u * u * u)];
        const char *s = kSeps[th_randint(0, ns)];
        size_t a = strlen(w), b = strlen(s);
        if (n + a + b + 1 > cap) break;
        memcpy(t + n, w, a);
        memcpy(t + n + a, s, b);
        n += a + b;
    }
    t[n] = 0;
    *len = n;
    return t;
}

/* ---- the naive reference ---- */

typedef struct seq {
    int32_t *s;
    size_t n;
} seq;

/* Every chunk occurrence of text (split at "<|endoftext|>" first, which is
 * never learned from), as byte sequences. */
static seq *ref_chunks(const char *text, size_t len, size_t *count) {
    const char *eot = CN_EOT_TOKEN;
    size_t el = strlen(eot), cap = 1024, k = 0;
    seq *out = malloc(cap * sizeof *out);
    const unsigned char *u = (const unsigned char *)text;
    size_t i = 0;
    while (i < len) {
        size_t p = i;
        while (p < len && !(p + el <= len && memcmp(text + p, eot, el) == 0))
            p++;
        for (size_t c = i; c < p;) {
            size_t e = cn_bpe_chunk_end(u, p, c);
            if (k == cap) out = realloc(out, (cap *= 2) * sizeof *out);
            out[k].n = e - c;
            out[k].s = malloc((e - c) * sizeof(int32_t));
            for (size_t j = c; j < e; j++)
                out[k].s[j - c] = u[j];
            k++;
            c = e;
        }
        i = p < len ? p + el : len;
    }
    *count = k;
    return out;
}

static void free_seqs(seq *v, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(v[i].s);
    free(v);
}

/* Replace (a, b) by z left to right, as training and encoding must. */
static void apply_merge(seq *w, int32_t a, int32_t b, int32_t z) {
    size_t j = 0;
    for (size_t i = 0; i < w->n;) {
        if (i + 1 < w->n && w->s[i] == a && w->s[i + 1] == b) {
            w->s[j++] = z;
            i += 2;
        } else {
            w->s[j++] = w->s[i++];
        }
    }
    w->n = j;
}

/* Up to want merges by recounting every pair of every chunk each time: the
 * most frequent pair, ties to the smallest (left, right). Returns how many. */
static int ref_train(const char *text, size_t len, int want, int64_t min_freq, int32_t *merges) {
    size_t nc;
    seq *ch = ref_chunks(text, len, &nc);
    size_t V = 256 + (size_t)want;
    int64_t *cnt = malloc(V * V * sizeof *cnt);
    int m = 0;
    for (; m < want; m++) {
        memset(cnt, 0, V * V * sizeof *cnt);
        for (size_t c = 0; c < nc; c++)
            for (size_t i = 0; i + 1 < ch[c].n; i++)
                cnt[(size_t)ch[c].s[i] * V + (size_t)ch[c].s[i + 1]]++;
        size_t best = 0;
        for (size_t p = 1; p < V * V; p++)
            if (cnt[p] > cnt[best]) best = p;
        if (cnt[best] < min_freq) break;
        merges[2 * m] = (int32_t)(best / V);
        merges[2 * m + 1] = (int32_t)(best % V);
        for (size_t c = 0; c < nc; c++)
            apply_merge(&ch[c], merges[2 * m], merges[2 * m + 1], 256 + m);
    }
    free(cnt);
    free_seqs(ch, nc);
    return m;
}

/* The text's ids by applying the tokenizer's merges one after the other to
 * each chunk (no special tokens recognised). */
static int32_t *ref_encode(const cn_tokenizer *tok, const char *text, size_t len, size_t *n) {
    size_t cap = len + 1, k = 0;
    int32_t *out = malloc(cap * sizeof *out);
    const unsigned char *u = (const unsigned char *)text;
    int nm = cn_tokenizer_num_merges(tok);
    int32_t *buf = malloc((len + 1) * sizeof *buf);
    for (size_t c = 0; c < len;) {
        size_t e = cn_bpe_chunk_end(u, len, c);
        seq w = {buf, e - c};
        for (size_t j = c; j < e; j++)
            buf[j - c] = u[j];
        for (int m = 0; m < nm && w.n > 1; m++) {
            int32_t a, b;
            cn_tokenizer_merge(tok, m, &a, &b);
            apply_merge(&w, a, b, 256 + m);
        }
        memcpy(out + k, w.s, w.n * sizeof *out);
        k += w.n;
        c = e;
    }
    free(buf);
    *n = k;
    return out;
}

static bool same_ids(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    return na == nb && (na == 0 || memcmp(a, b, na * sizeof *a) == 0);
}

/* The tokenizer's text, or "" (for comparisons). */
static char *tok_text(const cn_tokenizer *t) {
    char *s = t ? cn_tokenizer_to_string(t, NULL) : NULL;
    return s ? s : calloc(1, 1);
}

/* ---- pre-tokenisation ---- */

static void check_chunks(const char *text, const char *const *want, int nwant) {
    const unsigned char *u = (const unsigned char *)text;
    size_t n = strlen(text), i = 0;
    int k = 0;
    while (i < n) {
        size_t e = cn_bpe_chunk_end(u, n, i);
        CHECK_MSG(k < nwant && e - i == strlen(want[k]) && memcmp(text + i, want[k], e - i) == 0,
                  "chunk %d of \"%s\" is \"%.*s\", expected \"%s\"", k, text, (int)(e - i),
                  text + i, k < nwant ? want[k] : "(none)");
        i = e;
        k++;
    }
    CHECK_EQ_INT(k, nwant);
}

static void test_pretokenize(void) {
    const char *a[] = {"Hello", " world", ",", " it", "'s", " ", " 42", " times", "!", "\n\n ",
                       " ok"};
    check_chunks("Hello world, it's  42 times!\n\n  ok", a, 11);
    /* Bytes >= 0x80 are letters: an emoji joins the word before it. */
    const char *b[] = {"naïve", " café", " 日本語🙂", "..."};
    check_chunks("naïve café 日本語🙂...", b, 4);
    const char *c[] = {"we", "'ll", " see", " '", "em", "\t", "x", " \n"};
    check_chunks("we'll see 'em\tx \n", c, 8);
    /* A whitespace run that does not end with a space stays whole. */
    const char *e[] = {"a", " \n", "b"};
    check_chunks("a \nb", e, 3);
}

/* ---- training ---- */

static void check_against_reference(const char *text, size_t len, int vocab, int64_t min_freq) {
    int want = vocab - 257; /* one special token: the end of text */
    int32_t *ref = malloc(2 * (size_t)want * sizeof *ref);
    int nref = ref_train(text, len, want, min_freq, ref);
    cn_bpe_train_opts o = {.min_frequency = min_freq};
    cn_tokenizer *tok = cn_bpe_train(text, len, vocab, &o);
    CHECK(tok != NULL);
    if (!tok) {
        free(ref);
        return;
    }
    CHECK_EQ_INT(cn_tokenizer_num_merges(tok), nref);
    CHECK_EQ_INT(cn_tokenizer_vocab_size(tok), 256 + nref + 1);
    int first_bad = -1;
    for (int m = 0; m < nref && m < cn_tokenizer_num_merges(tok); m++) {
        int32_t a, b;
        CHECK_EQ_INT(cn_tokenizer_merge(tok, m, &a, &b), 256 + m);
        if (first_bad < 0 && (a != ref[2 * m] || b != ref[2 * m + 1])) first_bad = m;
    }
    CHECK_MSG(first_bad < 0, "merge %d differs from the reference (of %d)", first_bad, nref);
    cn_tokenizer_free(tok);
    free(ref);
}

static void test_train_reference(void) {
    size_t len;
    char *text = make_text(1, 20000, &len);
    check_against_reference(text, len, 256 + 1 + 150, 2);
    /* The first merges by hand: "aaaa" and "abab" words make overlapping
     * pairs; (a, a) occurs 3 times in "aaaa" and 2 in "aaa". */
    const char *small = "aaaa aaaa aaa ab ab ab abab";
    cn_tokenizer *tok = cn_bpe_train(small, strlen(small), 256 + 1 + 2, NULL);
    CHECK(tok != NULL);
    if (tok) {
        int32_t a, b;
        /* (a, a): 3 + 3 + 2 = 8 positions, more than (a, b) or (' ', a). */
        cn_tokenizer_merge(tok, 0, &a, &b);
        CHECK(a == 'a' && b == 'a');
        /* Then "aa aa" leaves (a, b) at 5, (' ', a) at 4, (aa, aa) at 2. */
        cn_tokenizer_merge(tok, 1, &a, &b);
        CHECK(a == 'a' && b == 'b');
    }
    cn_tokenizer_free(tok);
    check_against_reference(small, strlen(small), 300, 2);
    free(text);
}

static void test_train_stops_and_ties(void) {
    /* A vocabulary larger than the text can fill: training stops when no
     * pair occurs twice, exactly where the reference does. */
    size_t len;
    char *text = make_text(7, 3000, &len);
    check_against_reference(text, len, 256 + 1 + 400, 2);
    check_against_reference(text, len, 256 + 1 + 60, 5);
    /* Ties only: every pair occurs once per word "xy", "zw"... with equal
     * counts; the smallest pair goes first. */
    const char *t = "zw zw xy xy cd cd";
    cn_tokenizer *tok = cn_bpe_train(t, strlen(t), 256 + 1 + 1, NULL);
    int32_t a = 0, b = 0;
    CHECK(tok && cn_tokenizer_merge(tok, 0, &a, &b) == 256);
    CHECK_MSG(a == ' ' && b == 'c', "first merge (%d, %d), expected (' ', 'c')", a, b);
    cn_tokenizer_free(tok);
    /* Deterministic: the same text twice gives the same tokenizer. */
    cn_tokenizer *t1 = cn_bpe_train(text, len, 400, NULL), *t2 = cn_bpe_train(text, len, 400, NULL);
    char *s1 = tok_text(t1), *s2 = tok_text(t2);
    CHECK(t1 && t2 && strcmp(s1, s2) == 0);
    free(s1);
    free(s2);
    cn_tokenizer_free(t1);
    cn_tokenizer_free(t2);
    free(text);
}

static void test_train_special_and_errors(void) {
    /* The end-of-text token is not learned from: without the cut, "<|" and
     * "|>" would be merged here. */
    const char *t = "<|endoftext|><|endoftext|><|endoftext|>ab ab ab";
    cn_tokenizer *tok = cn_bpe_train(t, strlen(t), 256 + 1 + 10, NULL);
    CHECK(tok != NULL);
    if (tok) {
        CHECK_EQ_INT(cn_tokenizer_num_merges(tok), 2); /* (a, b) and (' ', ab) */
        CHECK_EQ_INT(cn_tokenizer_special_id(tok, CN_EOT_TOKEN), 256 + 2);
        CHECK_EQ_INT(cn_tokenizer_num_special(tok), 1);
        CHECK_STATUS_ERROR(cn_tokenizer_special_id(tok, "<pad>"), "no special token");
    }
    cn_tokenizer_free(tok);
    /* Several special tokens, and none. */
    const char *sp[] = {"<pad>", "<|endoftext|>", "<s>"};
    cn_bpe_train_opts o = {.special_tokens = sp, .n_special = 3};
    tok = cn_bpe_train(t, strlen(t), 256 + 3 + 10, &o);
    CHECK(tok && cn_tokenizer_special_id(tok, "<s>") == 256 + cn_tokenizer_num_merges(tok) + 2);
    cn_tokenizer_free(tok);
    cn_bpe_train_opts none = {.special_tokens = sp, .n_special = 0};
    tok = cn_bpe_train(t, strlen(t), 256 + 5, &none);
    CHECK(tok && cn_tokenizer_num_special(tok) == 0 && cn_tokenizer_num_merges(tok) == 5);
    cn_tokenizer_free(tok);
    CHECK_ERROR(cn_bpe_train(t, strlen(t), 256, NULL), "vocab_size 256");
    const char *dup[] = {"<a>", "<a>"};
    cn_bpe_train_opts od = {.special_tokens = dup, .n_special = 2};
    CHECK_ERROR(cn_bpe_train(t, strlen(t), 300, &od), "repeats special token 0");
    const char *empty[] = {""};
    cn_bpe_train_opts oe = {.special_tokens = empty, .n_special = 1};
    CHECK_ERROR(cn_bpe_train(t, strlen(t), 300, &oe), "special token 0 is NULL or empty");
    CHECK_ERROR(cn_bpe_train(NULL, 5, 300, NULL), "text is NULL");
    /* Empty text: no merges, still a tokenizer. */
    tok = cn_bpe_train("", 0, 300, NULL);
    CHECK(tok && cn_tokenizer_num_merges(tok) == 0 && cn_tokenizer_vocab_size(tok) == 257);
    cn_tokenizer_free(tok);
    CHECK_ERROR(cn_bpe_train_file("/nonexistent/corpus.txt", 300, NULL), "cannot open");
}

/* ---- encoding and decoding ---- */

static void check_roundtrip(const cn_tokenizer *tok, const char *text, size_t len, unsigned flags) {
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK(cn_tokenizer_encode(tok, text, len, flags, &ids, &n) == 0);
    char *back = NULL;
    size_t blen = 0;
    CHECK(cn_tokenizer_decode(tok, ids, n, &back, &blen) == 0);
    CHECK_MSG(back && blen == len && memcmp(back, text, len) == 0 && back[blen] == 0,
              "the round trip of %zu bytes gives %zu bytes back", len, blen);
    free(ids);
    free(back);
}

static void test_encode_reference_and_roundtrip(void) {
    size_t len;
    char *train = make_text(3, 30000, &len);
    cn_tokenizer *tok = cn_bpe_train(train, len, 256 + 1 + 200, NULL);
    CHECK(tok != NULL);
    if (!tok) {
        free(train);
        return;
    }
    /* Other text of the same kind, then random bytes (invalid UTF-8, NULs,
     * long runs of high bytes that make long chunks). */
    size_t len2;
    char *other = make_text(4, 20000, &len2);
    size_t nr = 40000;
    char *rnd = malloc(nr);
    th_seed(99);
    for (size_t i = 0; i < nr; i++)
        rnd[i] = (char)(th_next() & 0xff);
    /* A long run of one letter and of spaces: chunks of thousands of bytes
     * (not cached) whose merges overlap. */
    size_t nl = 5000;
    char *longrun = malloc(2 * nl);
    memset(longrun, 'a', nl);
    memset(longrun + nl, ' ', nl);
    const struct {
        const char *p;
        size_t n;
    } cases[] = {{train, len}, {other, len2}, {rnd, nr}, {longrun, 2 * nl}};
    for (int c = 0; c < 4; c++) {
        size_t nref, n;
        int32_t *ref = ref_encode(tok, cases[c].p, cases[c].n, &nref), *ids = NULL;
        CHECK(cn_tokenizer_encode(tok, cases[c].p, cases[c].n, 0, &ids, &n) == 0);
        CHECK_MSG(same_ids(ids, n, ref, nref), "case %d: %zu ids, the reference %zu", c, n, nref);
        check_roundtrip(tok, cases[c].p, cases[c].n, 0);
        check_roundtrip(tok, cases[c].p, cases[c].n, CN_TOKENIZE_SPECIAL);
        free(ref);
        free(ids);
    }
    /* The training text compresses: fewer ids than bytes. */
    int32_t *ids;
    size_t n;
    CHECK(cn_tokenizer_encode(tok, train, len, 0, &ids, &n) == 0 && n < len / 2);
    free(ids);
    /* UTF-8 and empty input. */
    const char *u = "Größe — 日本語のテキスト, emoji 🙂🙃 and naïve café.";
    check_roundtrip(tok, u, strlen(u), 0);
    check_roundtrip(tok, "", 0, 0);
    CHECK(cn_tokenizer_encode(tok, "", 0, 0, &ids, &n) == 0 && n == 0 && ids != NULL);
    free(ids);
    free(rnd);
    free(longrun);
    free(other);
    free(train);
    cn_tokenizer_free(tok);
}

static void test_encode_special(void) {
    size_t len;
    char *train = make_text(5, 5000, &len);
    cn_tokenizer *tok = cn_bpe_train(train, len, 300, NULL);
    CHECK(tok != NULL);
    if (!tok) {
        free(train);
        return;
    }
    int32_t eot = cn_tokenizer_special_id(tok, CN_EOT_TOKEN);
    CHECK_EQ_INT(eot, cn_tokenizer_vocab_size(tok) - 1);
    const char *t = "the banana<|endoftext|>the<|endoftext|>";
    int32_t *ids;
    size_t n;
    CHECK(cn_tokenizer_encode(tok, t, strlen(t), CN_TOKENIZE_SPECIAL, &ids, &n) == 0);
    int neot = 0;
    for (size_t i = 0; i < n; i++)
        neot += ids[i] == eot;
    CHECK_EQ_INT(neot, 2);
    CHECK(n > 0 && ids[n - 1] == eot);
    free(ids);
    /* Without the flag it is plain text. */
    CHECK(cn_tokenizer_encode(tok, t, strlen(t), 0, &ids, &n) == 0);
    neot = 0;
    for (size_t i = 0; i < n; i++)
        neot += ids[i] == eot;
    CHECK_EQ_INT(neot, 0);
    free(ids);
    check_roundtrip(tok, t, strlen(t), CN_TOKENIZE_SPECIAL);
    /* The token's bytes. */
    size_t tl;
    const char *tb = cn_tokenizer_token(tok, eot, &tl);
    CHECK(tb && tl == strlen(CN_EOT_TOKEN) && memcmp(tb, CN_EOT_TOKEN, tl) == 0);
    tb = cn_tokenizer_token(tok, 'A', &tl);
    CHECK(tb && tl == 1 && tb[0] == 'A');
    CHECK_ERROR(cn_tokenizer_token(tok, cn_tokenizer_vocab_size(tok), &tl), "out of range");
    /* Bad ids, bad arguments. */
    int32_t bad[] = {1, 2, 100000};
    char *s;
    size_t sl;
    CHECK_STATUS_ERROR(cn_tokenizer_decode(tok, bad, 3, &s, &sl), "ids[2] = 100000");
    int32_t neg[] = {-1};
    CHECK_STATUS_ERROR(cn_tokenizer_decode(tok, neg, 1, &s, &sl), "ids[0] = -1");
    CHECK_STATUS_ERROR(cn_tokenizer_encode(tok, NULL, 3, 0, &ids, &n), "text is NULL");
    CHECK_STATUS_ERROR(cn_tokenizer_encode(tok, "x", 1, 8, &ids, &n), "unknown flags");
    /* Tensors. */
    cn_tensor *tt = cn_tokenizer_encode_tensor(tok, t, strlen(t), CN_TOKENIZE_SPECIAL);
    CHECK(tt && cn_tensor_dtype(tt) == CN_I64 && cn_ndim(tt) == 1);
    CHECK(cn_tokenizer_decode_tensor(tok, tt, &s, &sl) == 0 && sl == strlen(t) &&
          memcmp(s, t, sl) == 0);
    free(s);
    int64_t shp[2] = {2, 2};
    cn_tensor *ft = cn_zeros(CN_F32, 2, shp);
    CHECK_STATUS_ERROR(cn_tokenizer_decode_tensor(tok, ft, &s, &sl), "integer tensor");
    cn_tensor *bigid = cn_full(CN_I64, 2, shp, 1e6);
    CHECK_STATUS_ERROR(cn_tokenizer_decode_tensor(tok, bigid, &s, &sl), "out of range");
    free(train);
    cn_tokenizer_free(tok);
}

/* ---- files ---- */

static bool same_tokenizer(const cn_tokenizer *a, const cn_tokenizer *b) {
    char *x = tok_text(a), *y = tok_text(b);
    bool same = a && b && strcmp(x, y) == 0;
    free(x);
    free(y);
    return same;
}

static void test_save_load(void) {
    size_t len;
    char *train = make_text(11, 20000, &len);
    /* Special tokens that need escaping: a quote, a backslash, a newline,
     * a high byte. */
    const char *sp[] = {CN_EOT_TOKEN, "<\"q\\>", "line\nbreak", "\xff\x01"};
    cn_bpe_train_opts o = {.special_tokens = sp, .n_special = 4};
    cn_tokenizer *tok = cn_bpe_train(train, len, 256 + 4 + 120, &o);
    CHECK(tok != NULL);
    if (!tok) {
        free(train);
        return;
    }
    const char *path = io_path("tok.bpe");
    CHECK(cn_tokenizer_save(tok, path) == 0);
    cn_tokenizer *back = cn_tokenizer_load(path);
    CHECK(back && same_tokenizer(tok, back));
    CHECK(back && cn_tokenizer_special_id(back, "line\nbreak") ==
                      256 + cn_tokenizer_num_merges(back) + 2);
    int32_t *i1, *i2;
    size_t n1, n2;
    CHECK(cn_tokenizer_encode(tok, train, len, CN_TOKENIZE_SPECIAL, &i1, &n1) == 0);
    CHECK(back && cn_tokenizer_encode(back, train, len, CN_TOKENIZE_SPECIAL, &i2, &n2) == 0);
    CHECK(back && same_ids(i1, n1, i2, n2));
    free(i1);
    if (back) free(i2);
    cn_tokenizer_free(back);
    /* The file is printable ASCII, and begins as documented. */
    size_t fl = 0;
    unsigned char *f = io_read(path, &fl);
    bool ascii = f != NULL;
    for (size_t i = 0; f && i < fl; i++)
        ascii &= (f[i] >= 0x20 && f[i] < 0x7f) || f[i] == '\n' || f[i] == '\t';
    CHECK(ascii);
    CHECK(f && fl > 40 && memcmp(f, "chutney-bpe 1\npretokenizer chutney-1\n", 37) == 0);
    free(f);
    /* No temporary file is left behind. */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -q 'tmp'", io_dir);
    CHECK(system(cmd) != 0);

    /* Next to the model in a checkpoint: the metadata string. */
    char *str = cn_tokenizer_to_string(tok, NULL);
    const char *keys[] = {"step", CN_TOKENIZER_METADATA_KEY};
    const char *vals[] = {"10", str};
    int64_t shp[1] = {3};
    cn_tensor *w = cn_full(CN_F32, 1, shp, 1.5);
    const char *names[] = {"w"};
    const char *ck = io_path("model.safetensors");
    CHECK(cn_save_safetensors(ck, names, &w, 1, keys, vals, 2) == 0);
    cn_checkpoint *c = cn_load_safetensors(ck);
    CHECK(c != NULL);
    cn_tokenizer *fc = cn_tokenizer_from_checkpoint(c);
    CHECK(fc && same_tokenizer(tok, fc));
    cn_tokenizer_free(fc);
    cn_checkpoint_free(c);
    CHECK(cn_save_safetensors(ck, names, &w, 1, keys, vals, 1) == 0);
    c = cn_load_safetensors(ck);
    CHECK_ERROR(cn_tokenizer_from_checkpoint(c), "no \"tokenizer\" metadata");
    cn_checkpoint_free(c);
    free(str);
    free(train);
    cn_tokenizer_free(tok);
}

static void test_corrupt(void) {
    const char *good = "chutney-bpe 1\npretokenizer chutney-1\nvocab_size 259\nmerges 2\n"
                       "97 98\t# \"ab\"\n256 99\n"
                       "specials 1\n\"<|endoftext|>\"\nend\n";
    cn_tokenizer *t = cn_tokenizer_from_string(good, strlen(good));
    CHECK(t && cn_tokenizer_vocab_size(t) == 259);
    size_t tl;
    const char *tb = t ? cn_tokenizer_token(t, 257, &tl) : NULL;
    CHECK(tb && tl == 3 && memcmp(tb, "abc", 3) == 0);
    cn_tokenizer_free(t);
    static const struct {
        const char *text, *needle;
    } bad[] = {
        {"", "empty"},
        {"hello\n", "not a chutney BPE tokenizer"},
        {"chutney-bpe 2\n", "this build reads version 1"},
        {"chutney-bpe 1\npretokenizer gpt2\n", "pre-tokeniser \"gpt2\" is unknown"},
        {"chutney-bpe 1\npretokenizer chutney-1\nvocab_size x\n", "line 3: expected \"vocab_size N\""},
        {"chutney-bpe 1\npretokenizer chutney-1\nvocab_size 259\nmerges 2\n97 98\n",
         "ends after 1 of 2 merges"},
        {"chutney-bpe 1\npretokenizer chutney-1\nvocab_size 258\nmerges 1\n97 300\n",
         "line 5: merge 0 joins tokens 97 and 300"},
        {"chutney-bpe 1\npretokenizer chutney-1\nvocab_size 259\nmerges 2\n97 98\n97 98\n"
         "specials 1\n\"<x>\"\nend\n",
         "merge 1 joins tokens 97 and 98, as merge 0 already does"},
        {"chutney-bpe 1\npretokenizer chutney-1\nvocab_size 258\nmerges 1\n97 98 99\n",
         "line 5: unexpected"},
        {"chutney-bpe 1\npretokenizer chutney-1\nvocab_size 258\nmerges 1\n-1 98\n",
         "line 5: expected a merge"},
        {"chutney-bpe 1\npretokenizer chutney-1\nvocab_size 258\nmerges 1\n97 98\nspecials 1\n",
         "ends after 0 of 1 special tokens"},
        {"chutney-bpe 1\npretokenizer chutney-1\nvocab_size 258\nmerges 1\n97 98\nspecials 1\n"
         "<x>\nend\n",
         "line 7: expected a special token in double quotes"},
        {"chutney-bpe 1\npretokenizer chutney-1\nvocab_size 258\nmerges 1\n97 98\nspecials 1\n"
         "\"a\\qb\"\nend\n",
         "bad escape"},
        {"chutney-bpe 1\npretokenizer chutney-1\nvocab_size 258\nmerges 1\n97 98\nspecials 1\n"
         "\"\\x00\"\nend\n",
         "NUL byte"},
        {"chutney-bpe 1\npretokenizer chutney-1\nvocab_size 258\nmerges 1\n97 98\nspecials 1\n"
         "\"<x>\"\n",
         "expected \"end\""},
        {"chutney-bpe 1\npretokenizer chutney-1\nvocab_size 258\nmerges 1\n97 98\nspecials 1\n"
         "\"<x>\"\nend\nmore\n",
         "text after \"end\""},
        {"chutney-bpe 1\npretokenizer chutney-1\nvocab_size 300\nmerges 1\n97 98\nspecials 1\n"
         "\"<x>\"\nend\n",
         "vocab_size 300 is not 256 + 1 merges + 1 special tokens"},
        {"chutney-bpe 1\npretokenizer chutney-1\nvocab_size 99999999999999\n", "line 3"},
        {"chutney-bpe 1\npretokenizer chutney-1\nvocab_size 10\nmerges 99999999\n", "line 4"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cn_clear_error();
        cn_tokenizer *b = cn_tokenizer_from_string(bad[i].text, strlen(bad[i].text));
        CHECK_MSG(!b && strstr(cn_last_error(), bad[i].needle),
                  "case %zu: \"%s\" not in the error \"%s\"", i, bad[i].needle, cn_last_error());
        cn_tokenizer_free(b);
    }
    /* Merges that double a token's length every line: refused before the
     * bytes are allocated. */
    char big[4096];
    size_t n = (size_t)snprintf(big, sizeof big,
                                "chutney-bpe 1\npretokenizer chutney-1\nvocab_size 296\nmerges 40\n"
                                "97 97\n");
    for (int i = 1; i < 40; i++)
        n += (size_t)snprintf(big + n, sizeof big - n, "%d %d\n", 255 + i, 255 + i);
    n += (size_t)snprintf(big + n, sizeof big - n, "specials 0\nend\n");
    CHECK_ERROR(cn_tokenizer_from_string(big, n), "limited to 1 MiB");
    /* Files: missing, truncated at every few bytes, a directory. */
    const char *path = io_path("good.bpe");
    io_write(path, good, strlen(good));
    t = cn_tokenizer_load(path);
    CHECK(t != NULL);
    cn_tokenizer_free(t);
    CHECK_ERROR(cn_tokenizer_load(io_path("missing.bpe")), "cannot open");
    CHECK_ERROR(cn_tokenizer_load(io_dir), "is a directory"); /* refused at the open */
    const char *cut = io_path("cut.bpe");
    int refused = 0, cuts = 0;
    for (size_t k = 0; k + 1 < strlen(good); k += 3) {
        io_truncate_copy(path, cut, k);
        cn_clear_error();
        cn_tokenizer *c = cn_tokenizer_load(cut);
        cuts++;
        refused += !c && strstr(cn_last_error(), "good.bpe") == NULL &&
                   strstr(cn_last_error(), "cut.bpe") != NULL;
        cn_tokenizer_free(c);
    }
    CHECK_EQ_INT(refused, cuts);
    /* Random corruption: any outcome but a crash (ASan watches). */
    th_seed(5);
    size_t gl = strlen(good);
    char *m = malloc(gl);
    for (int r = 0; r < 2000; r++) {
        memcpy(m, good, gl);
        int flips = (int)th_randint(1, 4);
        for (int k = 0; k < flips; k++)
            m[th_randint(0, (int64_t)gl)] = (char)th_randint(0, 256);
        cn_tokenizer *c = cn_tokenizer_from_string(m, (size_t)th_randint(0, (int64_t)gl + 1));
        if (c) check_roundtrip(c, "abcabc", 6, CN_TOKENIZE_SPECIAL);
        cn_tokenizer_free(c);
    }
    free(m);
    CHECK_ERROR(cn_tokenizer_from_string(NULL, 0), "s is NULL");
    CHECK_STATUS_ERROR(cn_tokenizer_save(NULL, path), "tok is NULL");
}

static void test_encode_file(void) {
    size_t len;
    char *text = make_text(21, 8000, &len);
    cn_tokenizer *tok = cn_bpe_train(text, len, 320, NULL);
    const char *path = io_path("corpus.txt");
    io_write(path, text, len);
    cn_tokenizer *t2 = cn_bpe_train_file(path, 320, NULL);
    CHECK(tok && t2 && same_tokenizer(tok, t2));
    cn_tensor *ids = tok ? cn_tokenizer_encode_file(tok, path, 0) : NULL;
    cn_tensor *ref = tok ? cn_tokenizer_encode_tensor(tok, text, len, 0) : NULL;
    CHECK(ids && ref && cn_numel(ids) == cn_numel(ref) &&
          memcmp(cn_data(ids), cn_data(ref), (size_t)cn_numel(ids) * 8) == 0);
    CHECK_ERROR(cn_tokenizer_encode_file(tok, io_path("nope.txt"), 0), "cannot open");
    cn_tokenizer_free(tok);
    cn_tokenizer_free(t2);
    free(text);
}

/* ---- windows ---- */

static void test_split_windows(void) {
    int64_t n = 1000, T = 16;
    cn_tensor *tok = cn_arange(0, (double)n, 1, CN_I64);
    cn_tensor *tr, *va;
    CHECK(cn_text_split(tok, 0.1, &tr, &va) == 0);
    CHECK_EQ_INT(cn_numel(tr), 900);
    CHECK_EQ_INT(cn_numel(va), 100);
    CHECK_EQ_INT(((int64_t *)cn_data(va))[0], 900);
    CHECK(cn_text_split(tok, 0, &tr, &va) == 0 && cn_numel(tr) == n && cn_numel(va) == 0);
    CHECK(cn_text_split(tok, 0.00099, &tr, &va) == 0 && cn_numel(va) == 0);
    CHECK_STATUS_ERROR(cn_text_split(tok, 1.0, &tr, &va), "not in [0, 1)");
    cn_tensor *x, *y;
    CHECK(cn_text_windows(tok, T, 0, &x, &y) == 0);
    int64_t W = (n - 1) / T;
    CHECK(cn_ndim(x) == 2 && cn_shape(x)[0] == W && cn_shape(x)[1] == T);
    CHECK(cn_ndim(y) == 2 && cn_shape(y)[0] == W && cn_shape(y)[1] == T);
    CHECK(cn_is_contiguous(x) && cn_is_contiguous(y));
    bool ok = true;
    const int64_t *xd = cn_data(x), *yd = cn_data(y);
    for (int64_t i = 0; i < W * T; i++)
        ok &= xd[i] == i && yd[i] == i + 1;
    CHECK(ok);
    /* An offset, on the validation part (a view with an offset itself). */
    CHECK(cn_text_split(tok, 0.1, &tr, &va) == 0);
    CHECK(cn_text_windows(va, 8, 3, &x, &y) == 0);
    CHECK(cn_shape(x)[0] == (100 - 3 - 1) / 8);
    CHECK_EQ_INT(((int64_t *)cn_data(x))[0], 903);
    CHECK_EQ_INT(((int64_t *)cn_data(y))[8], 912);
    /* Errors. */
    CHECK_STATUS_ERROR(cn_text_windows(va, 100, 0, &x, &y), "make no window of 100");
    CHECK(cn_text_windows(va, 99, 0, &x, &y) == 0 && cn_shape(x)[0] == 1);
    CHECK_STATUS_ERROR(cn_text_windows(tok, 0, 0, &x, &y), "give T >= 1");
    int64_t s2[2] = {4, 4};
    CHECK_STATUS_ERROR(cn_text_windows(cn_zeros(CN_I64, 2, s2), 2, 0, &x, &y), "1-D integer");
    CHECK_STATUS_ERROR(cn_text_split(cn_arange(0, 10, 1, CN_F32), 0.1, &tr, &va), "1-D integer");
}

/* One epoch: the first token of every window seen (window i starts at iT),
 * checking shapes and the shift on the way. */
static int64_t epoch_of(cn_loader *l, int64_t W, int64_t T, int64_t B, int64_t *order) {
    cn_tensor *b[2];
    int64_t seen = 0;
    int r;
    while ((r = cn_loader_next(l, b)) == 1) {
        int64_t rows = cn_shape(b[0])[0];
        CHECK(cn_tensor_dtype(b[0]) == CN_I64 && cn_tensor_dtype(b[1]) == CN_I64);
        CHECK(cn_ndim(b[0]) == 2 && cn_shape(b[0])[1] == T && cn_shape(b[1])[0] == rows);
        CHECK(rows == B || (rows == W % B && seen + rows == W));
        const int64_t *x = cn_data(b[0]), *y = cn_data(b[1]);
        bool ok = true;
        for (int64_t i = 0; i < rows * T; i++)
            ok &= y[i] == x[i] + 1;
        CHECK(ok);
        for (int64_t i = 0; i < rows && seen < W; i++)
            order[seen++] = x[i * T] / T;
    }
    CHECK_EQ_INT(r, 0);
    return seen;
}

static void test_loader(void) {
    int64_t n = 2000, T = 10, B = 16;
    int64_t W = (n - 1) / T;
    cn_tensor *tok = cn_arange(0, (double)n, 1, CN_I64);
    cn_loader_opts o = {.batch_size = B, .shuffle = true, .seed = 1234};
    cn_loader *l = cn_text_loader_new(tok, T, &o);
    CHECK(l != NULL);
    if (!l) return;
    CHECK_EQ_INT(cn_loader_num_batches(l), (W + B - 1) / B);
    int64_t *e0 = malloc(sizeof(int64_t) * (size_t)W), *e1 = malloc(sizeof(int64_t) * (size_t)W);
    int64_t *again = malloc(sizeof(int64_t) * (size_t)W);
    cn_scope_begin();
    CHECK_EQ_INT(epoch_of(l, W, T, B, e0), W);
    CHECK_EQ_INT(epoch_of(l, W, T, B, e1), W);
    cn_scope_end();
    /* Every window exactly once per epoch; shuffled; epochs differ. */
    char *hit = calloc((size_t)W, 1);
    bool once = true, sorted = true, differ = false;
    for (int64_t i = 0; i < W; i++) {
        once &= e0[i] >= 0 && e0[i] < W && !hit[e0[i]];
        if (e0[i] >= 0 && e0[i] < W) hit[e0[i]] = 1;
        sorted &= e0[i] == i;
        differ |= e0[i] != e1[i];
    }
    CHECK(once && !sorted && differ);
    /* The same seed again, with prefetching: the same batches. */
    cn_loader_opts o2 = o;
    o2.prefetch = 2;
    cn_loader *l2 = cn_text_loader_new(tok, T, &o2);
    cn_scope_begin();
    CHECK(l2 && epoch_of(l2, W, T, B, again) == W && memcmp(again, e0, sizeof(int64_t) * W) == 0);
    cn_scope_end();
    cn_loader_free(l2);
    /* Another seed: another order. */
    o2.seed = 99;
    o2.prefetch = 0;
    l2 = cn_text_loader_new(tok, T, &o2);
    cn_scope_begin();
    CHECK(l2 && epoch_of(l2, W, T, B, again) == W && memcmp(again, e0, sizeof(int64_t) * W) != 0);
    cn_scope_end();
    cn_loader_free(l2);
    /* i32 tokens are given as i64 batches. */
    cn_tensor *t32 = cn_arange(0, (double)n, 1, CN_I32);
    l2 = cn_text_loader_new(t32, T, &o);
    cn_scope_begin();
    CHECK(l2 && epoch_of(l2, W, T, B, again) == W && memcmp(again, e0, sizeof(int64_t) * W) == 0);
    cn_scope_end();
    cn_loader_free(l2);
    CHECK_ERROR(cn_text_loader_new(tok, n, &o), "make no window");
    free(hit);
    free(e0);
    free(e1);
    free(again);
    cn_loader_free(l);
}

int main(void) {
    io_init();
    RUN(test_pretokenize);
    RUN(test_train_reference);
    RUN(test_train_stops_and_ties);
    RUN(test_train_special_and_errors);
    RUN(test_encode_reference_and_roundtrip);
    RUN(test_encode_special);
    RUN(test_save_load);
    RUN(test_corrupt);
    RUN(test_encode_file);
    RUN(test_split_windows);
    RUN(test_loader);
    io_cleanup();
    return th_summary();
}
