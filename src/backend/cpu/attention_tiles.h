/* The tile loops of scaled dot-product attention for one float type,
 * included by attention_tiles.c with T (the type), SFX (f32 or f64) and
 * EXPT (its exp) defined. Every GEMM is the CPU's (gemm.h: OpenBLAS when the
 * build has it), called from inside a task of the pool, so it runs serially
 * on the task's thread.
 *
 * Forward (rows i0 .. i0 + bm of batch b): for each block of keys, the
 * score block s = scale q k^T + mask (one GEMM), then the online softmax:
 * the running max m and sum l of each row, the accumulated P V rescaled by
 * e^(m_old - m_new) whenever the max grows (one GEMM per block for P V).
 * Only the rows' logsumexp m + log l is kept for the backward pass.
 *
 * Backward: P = exp(s - lse) is recomputed block by block. Query side
 * (part 0/1): dP = dO v^T, dS = P (dP - D), dq = scale dS k summed over the
 * key blocks (and dS itself is the float mask's gradient). Key side (part
 * 2): dv = P^T dO and dk = scale dS^T q summed over the query blocks. With
 * dropout, P's dropped entries are zero in P v and in dv, and dP is taken
 * through the same bits. D = rowsum(dO O) - dlse (the logsumexp column's
 * gradient). */

#define SDPA_CAT_(a, b) a##_##b
#define SDPA_CAT(a, b) SDPA_CAT_(a, b)
#define F(name) SDPA_CAT(name, SFX)

/* The masked score block of rows [i0, i0 + bm) x keys [j0, j0 + bn) into s
 * (row stride bn): masked entries are -inf. */
static int F(scores)(const sdpa_geom *g, const sdpa_off *o, int64_t i0, int64_t bm, int64_t j0,
                     int64_t bn, T *restrict s) {
    const T *q = (const T *)g->q.p + o->q + i0 * g->q.rs;
    const T *k = (const T *)g->k.p + o->k + j0 * g->k.rs;
    int rc = cn_gemm(g->dt, bm, bn, g->E, q, g->q.rs, 1, k, 1, g->k.rs, s, bn);
    if (rc < 0) return rc;
    const T scale = (T)g->scale;
    for (int64_t r = 0; r < bm; r++) {
        T *sr = s + r * bn;
        int64_t i = i0 + r;
        if (g->mask == 2) {
            const T *mr = (const T *)g->m.p + o->m + i * g->m.rs + j0 * g->m.cs;
            const int64_t cs = g->m.cs;
            for (int64_t c = 0; c < bn; c++) sr[c] = sr[c] * scale + mr[c * cs];
        } else {
            for (int64_t c = 0; c < bn; c++) sr[c] *= scale;
            if (g->mask == 1) {
                const uint8_t *mr = (const uint8_t *)g->m.p + o->m + i * g->m.rs + j0 * g->m.cs;
                const int64_t cs = g->m.cs;
                for (int64_t c = 0; c < bn; c++)
                    if (!mr[c * cs]) sr[c] = -INFINITY;
            }
        }
        if (g->causal) /* key j takes part for query i when j <= i */
            for (int64_t c = i - j0 + 1 > 0 ? i - j0 + 1 : 0; c < bn; c++) sr[c] = -INFINITY;
    }
    return CN_OK;
}

/* How many of the block's leading keys [j0, j0 + bn) query i may see: with
 * the causal mask the rest are -inf (scores), whose exp is 0. Taking exp of
 * the live prefix only halves the exps of a causal model's attention
 * (9% of a small GPT's training step); the rest is written as zeros, the
 * same bits (the row sums add the same terms in the same order; a row whose
 * logsumexp is NaN is taken whole, below). */
static inline int64_t F(live)(const sdpa_geom *g, int64_t i, int64_t j0, int64_t bn) {
    if (!g->causal) return bn;
    int64_t n = i - j0 + 1;
    return n < 0 ? 0 : n > bn ? bn : n;
}

/* The row sums and maxima in SDPA_LANES lanes of GCC's vector types,
 * element c into lane c % SDPA_LANES, the lanes combined by a fixed tree:
 * the same bits at every instruction-set level (a level with narrower
 * registers runs a lane vector as several). Kept in order (one running
 * sum, one running max), GCC cannot vectorise them without reassociating:
 * it ran the sum as a chain of scalar adds, 4 cycles an element (with the
 * max, 30% of ViT-B/16's attention on an AVX-512 Xeon). Other compilers
 * run the same lanes as plain loops. */
#define SDPA_LANES 16
#if defined(__GNUC__)
typedef T F(lanes) __attribute__((vector_size(SDPA_LANES * sizeof(T))));
typedef T F(lanes_u) __attribute__((vector_size(SDPA_LANES * sizeof(T)), aligned(sizeof(T)),
                                    may_alias));
typedef IT F(lanes_i) __attribute__((vector_size(SDPA_LANES * sizeof(T))));
#else
typedef struct {
    T v[SDPA_LANES];
} F(lanes);
#endif

/* The lanes' sum: halves added pairwise, 16 -> 8 -> 4 -> 2 -> 1. */
static inline T F(lanes_sum)(const T *h) {
    T t[SDPA_LANES];
    memcpy(t, h, sizeof t);
    for (int w = SDPA_LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) t[l] += t[l + w];
    return t[0];
}

/* s[c] = e^(s[c] - m); returns the sum. The exps in loops of SDPA_LANES
 * the compiler vectorises whole (vmath's exp for f32), the row's tail too
 * in f32, padded in a buffer: left to the scalar epilogue of one plain
 * loop, the 5 elements of ViT-B/16's rows of 197 took about as long as the
 * other 192 (exp_row was 24% of its attention's forward). Then their sum
 * in lanes. */
SDPA_HOT(F(exp_row), (T *restrict s, int64_t n, T m, T *sum), (s, n, m, sum)) {
    int64_t c = 0;
    for (; c + SDPA_LANES <= n; c += SDPA_LANES)
        for (int l = 0; l < SDPA_LANES; l++) s[c + l] = EXPT(s[c + l] - m);
    if (c < n && sizeof(T) == sizeof(float)) {
        T t[SDPA_LANES];
        for (int l = 0; l < SDPA_LANES; l++) t[l] = c + l < n ? s[c + l] : m;
        for (int l = 0; l < SDPA_LANES; l++) t[l] = EXPT(t[l] - m);
        memcpy(s + c, t, sizeof(T) * (size_t)(n - c));
    } else {
        for (; c < n; c++) s[c] = EXPT(s[c] - m); /* f64: libm's exp, never vectorised */
    }
    c = 0;
#if defined(__GNUC__)
    F(lanes) acc = {0};
    for (; c + SDPA_LANES <= n; c += SDPA_LANES) acc += *(const F(lanes_u) *)(s + c);
    if (c < n) { /* the tail into the first lanes, zeros in the others */
        F(lanes) t = {0};
        memcpy(&t, s + c, sizeof(T) * (size_t)(n - c));
        acc += t;
    }
    T h[SDPA_LANES];
    memcpy(h, &acc, sizeof h);
#else
    T h[SDPA_LANES] = {0};
    for (int l = 0; c < n; c++, l = (l + 1) % SDPA_LANES) h[l] += s[c];
#endif
    *sum = F(lanes_sum)(h);
}

/* The max of s[0..n) and m; NaN if any is NaN. The maximum is exact in
 * any order (but for which of +0 and -0 wins a tie, which no use of it
 * can see: s - m and e^(s - m) are the same for either). */
SDPA_HOT(F(row_max), (const T *restrict s, int64_t n, T *m), (s, n, m)) {
    T mx = *m;
    int nan = 0;
    int64_t c = 0;
#if defined(__GNUC__)
    F(lanes) vm = (F(lanes)){0} + mx;
    F(lanes_i) vn = {0}; /* lane-wise masks: -1 where NaN */
    for (; c + SDPA_LANES <= n; c += SDPA_LANES) {
        F(lanes) v = *(const F(lanes_u) *)(s + c);
        F(lanes_i) gt = v > vm; /* v > vm ? v : vm, lane by lane */
        vm = (F(lanes))(((F(lanes_i))v & gt) | ((F(lanes_i))vm & ~gt));
        vn |= v != v;
    }
    T hm[SDPA_LANES];
    IT hn[SDPA_LANES];
    memcpy(hm, &vm, sizeof hm);
    memcpy(hn, &vn, sizeof hn);
    for (int l = 0; l < SDPA_LANES; l++) {
        mx = hm[l] > mx ? hm[l] : mx;
        nan |= hn[l] != 0;
    }
#endif
    for (; c < n; c++) {
        mx = s[c] > mx ? s[c] : mx;
        nan |= s[c] != s[c];
    }
    *m = nan ? (T)NAN : mx;
}

static void F(drop_row)(const sdpa_geom *g, T *restrict p, const uint8_t *keep, int64_t n) {
    const T ds = (T)g->dscale;
    for (int64_t c = 0; c < n; c++) p[c] = keep[c] ? p[c] * ds : 0;
}

int F(cn_sdpa_fwd)(const sdpa_geom *g, int64_t b, int64_t i0, int64_t bm, sdpa_scratch *w) {
    sdpa_off o;
    cn_sdpa_offsets(g, b, &o);
    const int64_t S = g->S, Ev = g->Ev;
    T *s = w->s, *acc = w->acc, *tmp = w->tmp, *mx = w->rowa, *l = w->rowb;
    for (int64_t r = 0; r < bm; r++) mx[r] = -INFINITY, l[r] = 0;
    memset(acc, 0, sizeof(T) * (size_t)(bm * Ev));
    /* causal: no row of the block sees a key past its last row */
    int64_t jend = g->causal ? (S < i0 + bm ? S : i0 + bm) : S;
    const int64_t keys = sdpa_keys(g);
    bool first = true;
    for (int64_t j0 = 0; j0 < jend; j0 += keys) {
        int64_t bn = jend - j0 < keys ? jend - j0 : keys;
        int rc = F(scores)(g, &o, i0, bm, j0, bn, s);
        if (rc < 0) return rc;
        bool any = false;
        for (int64_t r = 0; r < bm; r++) {
            T *sr = s + r * bn, m = mx[r];
            int64_t n = F(live)(g, i0 + r, j0, bn);
            F(row_max)(sr, n, &m);
            if (m == -INFINITY) { /* nothing unmasked yet: the row adds nothing */
                memset(sr, 0, sizeof(T) * (size_t)bn);
                continue;
            }
            T sum;
            F(exp_row)(sr, n, m, &sum);
            memset(sr + n, 0, sizeof(T) * (size_t)(bn - n));
            /* On the row's first unmasked block l and acc are still 0
             * and stay so: no rescaling. (Its factor, e^-inf, came out of
             * exp's clamp as an underflow, and the multiply by it took a
             * microcode assist on Intel: two thirds of this function's
             * time in a single block of 128 keys.) */
            if (mx[r] != m && mx[r] != -INFINITY) {
                T alpha = EXPT(mx[r] - m);
                l[r] *= alpha;
                T *ar = acc + r * Ev;
                for (int64_t e = 0; e < Ev; e++) ar[e] *= alpha;
            }
            mx[r] = m;
            l[r] += sum;
            if (g->drop) {
                cn_sdpa_keep_bits(g, b, i0 + r, j0, bn, w->keep);
                F(drop_row)(g, sr, w->keep, bn);
            }
            any = true;
        }
        if (!any) continue;
        const T *v = (const T *)g->v.p + o.v + j0 * g->v.rs;
        /* The first block's P V is the sums themselves (acc holds zeros):
         * no pass adding it (bench_attention, 128 keys in one block, 12
         * heads: the forward 0.77 -> 0.74 ms). */
        T *pv = first ? acc : tmp;
        if ((rc = cn_gemm(g->dt, bm, Ev, bn, s, bn, 1, v, g->v.rs, 1, pv, Ev)) < 0) return rc;
        if (!first)
            for (int64_t x = 0; x < bm * Ev; x++) acc[x] += tmp[x];
        first = false;
    }
    T *y = (T *)g->out + (b * g->orows + i0) * g->ow;
    for (int64_t r = 0; r < bm; r++, y += g->ow) {
        const T *ar = acc + r * Ev;
        if (l[r] == 0) { /* every key masked: zeros, and +inf so that exp(s - lse) = 0 */
            for (int64_t e = 0; e < Ev; e++) y[e] = 0;
            y[Ev] = INFINITY;
            continue;
        }
        T inv = 1 / l[r];
        for (int64_t e = 0; e < Ev; e++) y[e] = ar[e] * inv;
        y[Ev] = mx[r] + (T)log((double)l[r]);
    }
    return CN_OK;
}

/* P = exp(s - lse) of one recomputed block (rows from i0, keys from j0),
 * in place. */
static void F(probs)(const sdpa_geom *g, T *restrict s, const T *lse, int64_t i0, int64_t bm,
                     int64_t j0, int64_t bn) {
    for (int64_t r = 0; r < bm; r++) {
        T sum, *sr = s + r * bn;
        /* a NaN row (lse NaN) keeps its NaNs everywhere, as exp(-inf - NaN) */
        int64_t n = lse[r] != lse[r] ? bn : F(live)(g, i0 + r, j0, bn);
        F(exp_row)(sr, n, lse[r], &sum);
        memset(sr + n, 0, sizeof(T) * (size_t)(bn - n));
    }
}

/* D of one row: rowsum(dO O) - dlse, in double. */
static T F(row_d)(const T *y, const T *dy, int64_t Ev) {
    double d = 0;
    for (int64_t e = 0; e < Ev; e++) d += (double)dy[e] * (double)y[e];
    return (T)(d - (double)dy[Ev]);
}

void F(cn_sdpa_rowd)(const sdpa_geom *g, int64_t r0, int64_t r1, void *Dv) {
    T *D = Dv;
    for (int64_t r = r0; r < r1; r++) {
        sdpa_off o;
        int64_t b = r / g->L, i = r % g->L;
        cn_sdpa_offsets(g, b, &o);
        D[r] = F(row_d)((const T *)g->y.p + o.y + i * g->y.rs,
                        (const T *)g->dy.p + o.dy + i * g->dy.rs, g->Ev);
    }
}

/* dS = P (dP - D) from dP (dO v^T, in dp) and P (in s), written to s;
 * dropout takes dP through the kept bits. */
static void F(dscores)(const sdpa_geom *g, int64_t b, int64_t i0, int64_t bm, int64_t j0,
                       int64_t bn, T *restrict s, T *restrict dp, const T *D, sdpa_scratch *w) {
    for (int64_t r = 0; r < bm; r++) {
        T *sr = s + r * bn, *pr = dp + r * bn, d = D[r];
        if (g->drop) {
            cn_sdpa_keep_bits(g, b, i0 + r, j0, bn, w->keep);
            F(drop_row)(g, pr, w->keep, bn);
        }
        for (int64_t c = 0; c < bn; c++) sr[c] = sr[c] * (pr[c] - d);
    }
}

/* Row i of batch index b's query-side result, and key j's row of the
 * key-side result. */
static T *F(dq_row)(const sdpa_geom *g, int64_t b, int64_t i) {
    return (T *)g->out + (b * g->orows + i) * g->ow;
}
static T *F(dkv_row)(const sdpa_geom *g, int64_t b, int64_t j) {
    return (T *)g->out + (b * g->orows + g->kv0 + j) * g->ow;
}

int F(cn_sdpa_dq)(const sdpa_geom *g, int64_t b, int64_t i0, int64_t bm, sdpa_scratch *w) {
    sdpa_off o;
    cn_sdpa_offsets(g, b, &o);
    const int64_t S = g->S, E = g->E, Ev = g->Ev;
    T *s = w->s, *dp = w->p, *acc = w->acc, *tmp = w->tmp, *D = w->rowa, *lse = w->rowb;
    const T *y = (const T *)g->y.p + o.y + i0 * g->y.rs;
    const T *dy = (const T *)g->dy.p + o.dy + i0 * g->dy.rs;
    for (int64_t r = 0; r < bm; r++) {
        D[r] = F(row_d)(y + r * g->y.rs, dy + r * g->dy.rs, Ev);
        lse[r] = y[r * g->y.rs + Ev];
    }
    memset(acc, 0, sizeof(T) * (size_t)(bm * E));
    bool dmask = g->part == 1;
    /* causal: the key blocks up to the block's last row, whole (the
     * one-pass scheme sums the same blocks) */
    int64_t jend = g->causal ? (S < i0 + bm ? S : i0 + bm) : S, jdone = 0;
    const int64_t keys = sdpa_keys(g);
    for (int64_t j0 = 0; j0 < jend; j0 = jdone) {
        int64_t bn = S - j0 < keys ? S - j0 : keys;
        jdone = j0 + bn;
        int rc = F(scores)(g, &o, i0, bm, j0, bn, s);
        if (rc < 0) return rc;
        F(probs)(g, s, lse, i0, bm, j0, bn);
        const T *v = (const T *)g->v.p + o.v + j0 * g->v.rs;
        if ((rc = cn_gemm(g->dt, bm, bn, Ev, dy, g->dy.rs, 1, v, 1, g->v.rs, dp, bn)) < 0)
            return rc;
        F(dscores)(g, b, i0, bm, j0, bn, s, dp, D, w);
        if (dmask)
            for (int64_t r = 0; r < bm; r++)
                memcpy(F(dq_row)(g, b, i0 + r) + E + j0, s + r * bn, sizeof(T) * (size_t)bn);
        const T *k = (const T *)g->k.p + o.k + j0 * g->k.rs;
        if ((rc = cn_gemm(g->dt, bm, E, bn, s, bn, 1, k, g->k.rs, 1, tmp, E)) < 0) return rc;
        for (int64_t x = 0; x < bm * E; x++) acc[x] += tmp[x];
    }
    const T scale = (T)g->scale;
    for (int64_t r = 0; r < bm; r++) {
        T *orow = F(dq_row)(g, b, i0 + r);
        for (int64_t e = 0; e < E; e++) orow[e] = acc[r * E + e] * scale;
        /* part 1: keys no row of the block sees (causal); part 3: padding */
        for (int64_t c = dmask ? E + jdone : E; c < g->ow; c++) orow[c] = 0;
    }
    return CN_OK;
}

/* One block of query rows [i0, i0 + bm) against keys [j0, j0 + bn): dv +=
 * Pd^T dO and dk += dS^T q (unscaled), and with dq (part 3) dq's rows +=
 * dS k. D holds the rows' D from i0 on. */
static int F(kv_step)(const sdpa_geom *g, const sdpa_off *o, int64_t b, int64_t j0, int64_t bn,
                      int64_t i0, int64_t bm, const T *D, T *dk, T *dv, bool dq, sdpa_scratch *w) {
    const int64_t E = g->E, Ev = g->Ev;
    T *s = w->s, *pd = w->p, *tmp = w->tmp, *lse = w->rowb;
    const T *y = (const T *)g->y.p + o->y + i0 * g->y.rs;
    const T *dy = (const T *)g->dy.p + o->dy + i0 * g->dy.rs;
    const T *q = (const T *)g->q.p + o->q + i0 * g->q.rs;
    const T *k = (const T *)g->k.p + o->k + j0 * g->k.rs;
    const T *v = (const T *)g->v.p + o->v + j0 * g->v.rs;
    for (int64_t r = 0; r < bm; r++) lse[r] = y[r * g->y.rs + Ev];
    int rc = F(scores)(g, o, i0, bm, j0, bn, s);
    if (rc < 0) return rc;
    F(probs)(g, s, lse, i0, bm, j0, bn);
    /* dv += Pd^T dO, Pd = P with dropout applied */
    memcpy(pd, s, sizeof(T) * (size_t)(bm * bn));
    if (g->drop)
        for (int64_t r = 0; r < bm; r++) {
            cn_sdpa_keep_bits(g, b, i0 + r, j0, bn, w->keep);
            F(drop_row)(g, pd + r * bn, w->keep, bn);
        }
    if ((rc = cn_gemm(g->dt, bn, Ev, bm, pd, 1, bn, dy, g->dy.rs, 1, tmp, Ev)) < 0) return rc;
    for (int64_t x = 0; x < bn * Ev; x++) dv[x] += tmp[x];
    /* dS = P (dO v^T - D), then dk += dS^T q */
    if ((rc = cn_gemm(g->dt, bm, bn, Ev, dy, g->dy.rs, 1, v, 1, g->v.rs, pd, bn)) < 0) return rc;
    F(dscores)(g, b, i0, bm, j0, bn, s, pd, D, w);
    if ((rc = cn_gemm(g->dt, bn, E, bm, s, 1, bn, q, g->q.rs, 1, tmp, E)) < 0) return rc;
    for (int64_t x = 0; x < bn * E; x++) dk[x] += tmp[x];
    if (!dq) return CN_OK;
    if ((rc = cn_gemm(g->dt, bm, E, bn, s, bn, 1, k, g->k.rs, 1, tmp, E)) < 0) return rc;
    for (int64_t r = 0; r < bm; r++) {
        T *orow = F(dq_row)(g, b, i0 + r);
        for (int64_t e = 0; e < E; e++) orow[e] += tmp[r * E + e];
    }
    return CN_OK;
}

/* dk (scaled) and dv of keys [j0, j0 + bn) from their accumulators. */
static void F(kv_write)(const sdpa_geom *g, int64_t b, int64_t j0, int64_t bn, const T *dk,
                        const T *dv) {
    const T scale = (T)g->scale;
    for (int64_t r = 0; r < bn; r++) {
        T *orow = F(dkv_row)(g, b, j0 + r);
        for (int64_t e = 0; e < g->E; e++) orow[e] = dk[r * g->E + e] * scale;
        memcpy(orow + g->E, dv + r * g->Ev, sizeof(T) * (size_t)g->Ev);
    }
}

int F(cn_sdpa_dkv)(const sdpa_geom *g, int64_t b, int64_t j0, int64_t bn, sdpa_scratch *w) {
    sdpa_off o;
    cn_sdpa_offsets(g, b, &o);
    T *dk = w->acc, *dv = w->acc2;
    const T *D = (const T *)g->D + b * g->L;
    memset(dk, 0, sizeof(T) * (size_t)(bn * g->E));
    memset(dv, 0, sizeof(T) * (size_t)(bn * g->Ev));
    /* causal: query rows before j0 see none of these keys */
    for (int64_t i0 = g->causal ? j0 : 0; i0 < g->L; i0 += SDPA_ROWS) {
        int64_t bm = g->L - i0 < SDPA_ROWS ? g->L - i0 : SDPA_ROWS;
        int rc = F(kv_step)(g, &o, b, j0, bn, i0, bm, D + i0, dk, dv, false, w);
        if (rc < 0) return rc;
    }
    F(kv_write)(g, b, j0, bn, dk, dv);
    return CN_OK;
}

/* Flash attention's backward in one pass: for each key block, the row
 * blocks that see it give dk and dv, and add to dq (kept in the result,
 * scaled at the end); dq's rows get their key blocks in the order the
 * query-side pass adds them, so both schemes give the same bits. */
int F(cn_sdpa_dall)(const sdpa_geom *g, int64_t b, sdpa_scratch *w) {
    sdpa_off o;
    cn_sdpa_offsets(g, b, &o);
    const int64_t L = g->L, S = g->S, E = g->E, keys = sdpa_keys(g);
    T *dk = w->acc, *dv = w->acc2;
    const T *D = (const T *)g->D + b * L;
    for (int64_t i = 0; i < L; i++) memset(F(dq_row)(g, b, i), 0, sizeof(T) * (size_t)g->ow);
    for (int64_t j0 = 0; j0 < S; j0 += keys) {
        int64_t bn = S - j0 < keys ? S - j0 : keys;
        memset(dk, 0, sizeof(T) * (size_t)(bn * E));
        memset(dv, 0, sizeof(T) * (size_t)(bn * g->Ev));
        for (int64_t i0 = g->causal ? j0 : 0; i0 < L; i0 += SDPA_ROWS) {
            int64_t bm = L - i0 < SDPA_ROWS ? L - i0 : SDPA_ROWS;
            int rc = F(kv_step)(g, &o, b, j0, bn, i0, bm, D + i0, dk, dv, true, w);
            if (rc < 0) return rc;
        }
        F(kv_write)(g, b, j0, bn, dk, dv);
    }
    const T scale = (T)g->scale;
    for (int64_t i = 0; i < L; i++) {
        T *orow = F(dq_row)(g, b, i);
        for (int64_t e = 0; e < E; e++) orow[e] *= scale;
    }
    return CN_OK;
}

#undef F
#undef SDPA_CAT
#undef SDPA_CAT_
