/* The data loader: batching (partial last batch or dropped), the shuffle
 * against a reference Fisher-Yates on the documented Philox draws, epochs,
 * determinism for a seed whatever the prefetching and the thread count,
 * and the transforms (crop with padding, flip, normalise) against naive
 * loops. */
#include "harness.h"

#include "core/core.h" /* cn_philox: the reference shuffle draws from it */

enum { N = 37, C = 2, H = 5, W = 6 };

/* x[n, c, h, w] = n * 1000 + c * 100 + h * 10 + w; y[n] = n. */
static void make_dataset(cn_tensor **x, cn_tensor **y) {
    *x = cn_zeros(CN_F32, CN_SHAPE(N, C, H, W));
    float *d = cn_data(*x);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++)
            for (int h = 0; h < H; h++)
                for (int w = 0; w < W; w++)
                    d[((n * C + c) * H + h) * W + w] = (float)(n * 1000 + c * 100 + h * 10 + w);
    *y = cn_arange(0, N, 1, CN_I64);
}

/* The documented shuffle: Fisher-Yates from the end, draw i of epoch e at
 * Philox(seed, e << 40 | i), j = (lane0 << 32 | lane1) mod (i + 1). */
static void ref_perm(uint64_t seed, int64_t epoch, int64_t n, int64_t *perm) {
    for (int64_t i = 0; i < n; i++)
        perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        uint32_t o[4];
        cn_philox(seed, ((uint64_t)epoch << 40) | (uint64_t)i, o);
        int64_t j = (int64_t)((((uint64_t)o[0] << 32) | o[1]) % (uint64_t)(i + 1));
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

static void test_batching(void) {
    cn_tensor *x, *y;
    make_dataset(&x, &y);
    cn_tensor *ds[2] = {x, y};
    for (int drop = 0; drop < 2; drop++) {
        cn_loader *l = cn_loader_new(ds, 2, &(cn_loader_opts){.batch_size = 8, .drop_last = drop});
        CHECK(l != NULL);
        if (!l) continue;
        CHECK_EQ_INT(cn_loader_num_batches(l), drop ? 4 : 5);
        for (int epoch = 0; epoch < 2; epoch++) {
            CHECK_EQ_INT(cn_loader_epoch(l), epoch);
            int64_t seen = 0;
            cn_tensor *b[2];
            int r, nb = 0;
            while ((r = cn_loader_next(l, b)) == 1) {
                int64_t rows = cn_dim(b[0], 0);
                CHECK_EQ_INT(rows, nb < 4 ? 8 : 5);
                CHECK_SHAPE(b[0], rows, C, H, W);
                CHECK_SHAPE(b[1], rows);
                CHECK(cn_tensor_dtype(b[0]) == CN_F32 && cn_tensor_dtype(b[1]) == CN_I64);
                for (int64_t i = 0; i < rows; i++)
                    CHECK_EQ_INT(th_at(b[1], i), seen + i);
                /* The rows of x are the same samples as those of y. */
                cn_tensor *want = cn_narrow(x, 0, seen, rows);
                CHECK(cn_equal(b[0], want));
                seen += rows;
                nb++;
            }
            CHECK_EQ_INT(r, 0);
            CHECK_EQ_INT(seen, drop ? 32 : 37);
        }
        cn_loader_free(l);
    }
    /* A batch larger than the dataset: one partial batch, or none. */
    cn_loader *l = cn_loader_new(ds, 2, &(cn_loader_opts){.batch_size = 100});
    cn_tensor *b[2];
    CHECK(cn_loader_next(l, b) == 1 && cn_dim(b[0], 0) == N);
    CHECK(cn_loader_next(l, b) == 0);
    cn_loader_free(l);
    l = cn_loader_new(ds, 2, &(cn_loader_opts){.batch_size = 100, .drop_last = true});
    CHECK(cn_loader_num_batches(l) == 0 && cn_loader_next(l, b) == 0 && cn_loader_next(l, b) == 0);
    CHECK_EQ_INT(cn_loader_epoch(l), 2);
    cn_loader_free(l);
}

static void test_shuffle(void) {
    cn_tensor *x, *y;
    make_dataset(&x, &y);
    cn_tensor *ds[2] = {x, y};
    uint64_t st_seed, st_off;
    cn_rng_get_state(&st_seed, &st_off);
    int64_t order[3][N];
    for (int prefetch = 0; prefetch <= 2; prefetch++) {
        cn_loader *l = cn_loader_new(
            ds, 2,
            &(cn_loader_opts){
                .batch_size = 6, .shuffle = true, .seed = 1234, .prefetch = prefetch});
        for (int epoch = 0; epoch < 3; epoch++) {
            int64_t ref[N], k = 0;
            ref_perm(1234, epoch, N, ref);
            cn_tensor *b[2];
            while (cn_loader_next(l, b) == 1) {
                for (int64_t i = 0; i < cn_dim(b[1], 0); i++, k++) {
                    int64_t s = (int64_t)th_at(b[1], i);
                    CHECK_MSG(k < N && s == ref[k],
                              "prefetch %d epoch %d position %lld: %lld, want %lld", prefetch,
                              epoch, (long long)k, (long long)s, (long long)(k < N ? ref[k] : -1));
                    if (k < N) order[epoch][k] = s;
                    /* x follows y */
                    CHECK(th_at(b[0], i * C * H * W + 1 * H * W + 2 * W + 3) ==
                          (double)(s * 1000 + 123));
                }
            }
            CHECK_EQ_INT(k, N);
        }
        cn_loader_free(l);
    }
    /* Each epoch is a permutation, and epochs differ. */
    for (int e = 0; e < 3; e++) {
        int seen[N] = {0};
        for (int k = 0; k < N; k++)
            seen[order[e][k]]++;
        int ok = 1;
        for (int k = 0; k < N; k++)
            ok &= seen[k] == 1;
        CHECK_MSG(ok, "epoch %d is not a permutation", e);
    }
    CHECK(memcmp(order[0], order[1], sizeof order[0]) != 0);
    /* Another seed, another order. */
    cn_loader *l =
        cn_loader_new(ds, 2, &(cn_loader_opts){.batch_size = N, .shuffle = true, .seed = 1235});
    cn_tensor *b[2];
    CHECK(cn_loader_next(l, b) == 1);
    int same = 1;
    for (int k = 0; k < N; k++)
        same &= th_at(b[1], k) == order[0][k];
    CHECK(!same);
    cn_loader_free(l);
    /* The global generator was not used. */
    uint64_t s2, o2;
    cn_rng_get_state(&s2, &o2);
    CHECK(s2 == st_seed && o2 == st_off);
}

/* All batches of `epochs` epochs, concatenated per tensor, as doubles. */
static double *run_all(cn_tensor *const *ds, int prefetch, int threads, int epochs,
                       int64_t start_epoch, bool transforms, size_t *count) {
    cn_set_num_threads(threads);
    cn_loader *l = cn_loader_new(
        ds, 2,
        &(cn_loader_opts){.batch_size = 5, .shuffle = true, .seed = 99, .prefetch = prefetch});
    if (!l) return NULL;
    if (transforms) {
        cn_loader_random_crop(l, 0, 4, 4, 2);
        cn_loader_random_hflip(l, 0, 0.5);
        cn_loader_normalize(l, 0, (double[]){3, 7}, (double[]){2, 0.5}, 2);
    }
    if (start_epoch) cn_loader_set_epoch(l, start_epoch);
    size_t cap = 1 << 16, n = 0;
    double *v = malloc(cap * sizeof *v);
    for (int e = 0; e < epochs; e++) {
        cn_tensor *b[2];
        cn_scope_begin();
        while (cn_loader_next(l, b) == 1)
            for (int t = 0; t < 2; t++)
                for (int64_t i = 0; i < cn_numel(b[t]); i++) {
                    if (n == cap) v = realloc(v, (cap *= 2) * sizeof *v);
                    v[n++] = th_at(b[t], i);
                }
        cn_scope_end();
    }
    cn_loader_free(l);
    *count = n;
    return v;
}

static void test_determinism(void) {
    cn_tensor *x, *y;
    make_dataset(&x, &y);
    cn_tensor *ds[2] = {x, y};
    int threads0 = cn_get_num_threads();
    for (int tr = 0; tr < 2; tr++) {
        size_t n0, n;
        double *ref = run_all(ds, 0, 1, 3, 0, tr, &n0);
        CHECK(ref && n0 > 0);
        const int configs[][2] = {{0, 4}, {1, 1}, {1, 3}, {2, 2}, {2, 1}};
        for (size_t k = 0; k < sizeof configs / sizeof configs[0]; k++) {
            double *v = run_all(ds, configs[k][0], configs[k][1], 3, 0, tr, &n);
            CHECK_MSG(v && n == n0 && memcmp(v, ref, n * sizeof *v) == 0,
                      "transforms %d, prefetch %d, %d threads: batches differ", tr, configs[k][0],
                      configs[k][1]);
            free(v);
        }
        /* Starting at epoch 2 gives the third epoch of the run. */
        double *v = run_all(ds, 2, 2, 1, 2, tr, &n);
        CHECK(v && n == n0 / 3 && memcmp(v, ref + 2 * (n0 / 3), n * sizeof *v) == 0);
        free(v);
        free(ref);
    }
    cn_set_num_threads(threads0);
}

/* A sample of x after crop + flip: find the (oy, ox, flip) that explains
 * it. Returns the number of explanations (1 expected; 0 means wrong). */
static int explain(const float *out, int64_t n, int64_t ch, int64_t hh, int64_t ww, int64_t pad,
                   int *oy_out, int *ox_out, int *flip_out) {
    int found = 0;
    for (int oy = 0; oy <= H + 2 * pad - hh; oy++)
        for (int ox = 0; ox <= W + 2 * pad - ww; ox++)
            for (int f = 0; f < 2; f++) {
                bool ok = true;
                for (int64_t c = 0; c < ch && ok; c++)
                    for (int64_t yy = 0; yy < hh && ok; yy++)
                        for (int64_t xx = 0; xx < ww && ok; xx++) {
                            int64_t sx = f ? ww - 1 - xx : xx; /* flip after crop */
                            int64_t py = oy + yy - pad, px = ox + sx - pad;
                            double want = py < 0 || py >= H || px < 0 || px >= W
                                              ? 0
                                              : (double)(n * 1000 + c * 100 + py * 10 + px);
                            ok = out[(c * hh + yy) * ww + xx] == want;
                        }
                if (ok) {
                    found++;
                    *oy_out = oy, *ox_out = ox, *flip_out = f;
                }
            }
    return found;
}

static void test_transforms(void) {
    cn_tensor *x, *y;
    make_dataset(&x, &y);
    cn_tensor *ds[2] = {x, y};
    /* Crop with padding then flip, on a dataset of values that are unique
     * per position: every output sample must be one window of the padded
     * sample, mirrored or not. */
    cn_loader *l = cn_loader_new(
        ds, 2, &(cn_loader_opts){.batch_size = 8, .shuffle = true, .seed = 5, .prefetch = 1});
    CHECK(cn_loader_random_crop(l, 0, 4, 5, 2) == CN_OK);
    CHECK(cn_loader_random_hflip(l, 0, 0.5) == CN_OK);
    int flips = 0, total = 0, offsets = 0;
    int seen_off[16][16] = {{0}};
    for (int epoch = 0; epoch < 6; epoch++) {
        cn_tensor *b[2];
        while (cn_loader_next(l, b) == 1) {
            CHECK_SHAPE(b[0], cn_dim(b[1], 0), C, 4, 5);
            const float *d = cn_data(b[0]);
            for (int64_t i = 0; i < cn_dim(b[1], 0); i++) {
                int64_t n = (int64_t)th_at(b[1], i);
                int oy = 0, ox = 0, f = 0;
                int e = explain(d + i * C * 4 * 5, n, C, 4, 5, 2, &oy, &ox, &f);
                CHECK_MSG(e >= 1, "sample %lld is no crop of its source", (long long)n);
                if (e == 1) {
                    flips += f;
                    total++;
                    if (!seen_off[oy][ox]++) offsets++;
                }
            }
        }
    }
    cn_loader_free(l);
    /* 6 x 6 = 36 possible windows; 222 samples should visit most of them,
     * and about half should be flipped. */
    CHECK_MSG(offsets > 30, "only %d distinct crop offsets", offsets);
    CHECK_MSG(total > 200 && flips > total * 0.35 && flips < total * 0.65, "%d of %d flipped",
              flips, total);

    /* p = 0 and p = 1; a crop without padding of the full size is the
     * identity. */
    for (int p = 0; p < 2; p++) {
        l = cn_loader_new(ds, 2, &(cn_loader_opts){.batch_size = N, .shuffle = false});
        cn_loader_random_crop(l, 0, H, W, 0);
        cn_loader_random_hflip(l, 0, p);
        cn_tensor *b[2];
        CHECK(cn_loader_next(l, b) == 1);
        cn_tensor *want = p ? cn_slice(x, 3, CN_END, CN_BEGIN, -1) : x;
        CHECK(cn_equal(b[0], want));
        cn_loader_free(l);
    }

    /* Normalise: u8 in, f32 out, per channel, against a double loop. */
    cn_tensor *u = cn_zeros(CN_U8, CN_SHAPE(10, 3, 2, 2));
    uint8_t *ud = cn_data(u);
    for (int i = 0; i < 120; i++)
        ud[i] = (uint8_t)(i * 29 % 256);
    double mean[3] = {125.3, 122.9, 113.8}, sd[3] = {63.0, 62.1, 66.7};
    l = cn_loader_new(&u, 1, &(cn_loader_opts){.batch_size = 4, .prefetch = 2});
    CHECK(cn_loader_normalize(l, 0, mean, sd, 3) == CN_OK);
    cn_tensor *b[1];
    int64_t row = 0;
    int bad = 0;
    while (cn_loader_next(l, b) == 1) {
        CHECK(cn_tensor_dtype(b[0]) == CN_F32);
        for (int64_t i = 0; i < cn_numel(b[0]); i++) {
            int64_t g = row * 12 + i, c = (g / 4) % 3;
            double want = (ud[g] - mean[c]) / sd[c];
            bad += fabs(th_at(b[0], i) - want) > 1e-6 * fabs(want) + 1e-7;
        }
        row += cn_dim(b[0], 0);
    }
    CHECK_EQ_INT(row, 10);
    CHECK_EQ_INT(bad, 0);
    cn_loader_free(l);
    /* One mean and std for every channel; [H, W] samples. */
    cn_tensor *g2 = cn_arange(0, 24, 1, CN_I32);
    cn_tensor *g3 = cn_reshape(g2, CN_SHAPE(2, 3, 4));
    l = cn_loader_new(&g3, 1, &(cn_loader_opts){.batch_size = 2});
    CHECK(cn_loader_normalize(l, 0, (double[]){10}, (double[]){4}, 1) == CN_OK);
    CHECK(cn_loader_next(l, b) == 1);
    CHECK_SHAPE(b[0], 2, 3, 4);
    if (b[0]) CHECK_CLOSE(th_at(b[0], 23), (23 - 10) / 4.0, 0, 0);
    cn_loader_free(l);
}

/* u8 samples, as data sets are stored, normalised batch by batch: every
 * byte value in every channel gives exactly (float)((v - mean) / std) in
 * double, the same as the same samples given as i32; mean 0 and std 255
 * give v / 255 in f32, cn_load_fashion_mnist's pixels. */
static void test_normalize_u8(void) {
    enum { NS = 300, NC = 2, NH = 3, NW = 4, PER = NC * NH * NW };
    cn_tensor *u = cn_zeros(CN_U8, CN_SHAPE(NS, NC, NH, NW));
    uint8_t *ud = cn_data(u);
    for (int i = 0; i < NS * PER; i++)
        ud[i] = (uint8_t)(i * 37 % 256); /* 37 is odd: all 256 values, in both channels */
    cn_tensor *wide = cn_cast(u, CN_I32);
    const double mean[2] = {0, 125.3}, sd[2] = {255, 62.1};
    cn_loader *lu = cn_loader_new(&u, 1, &(cn_loader_opts){.batch_size = 64, .prefetch = 1});
    cn_loader *li = cn_loader_new(&wide, 1, &(cn_loader_opts){.batch_size = 64});
    CHECK(cn_loader_normalize(lu, 0, mean, sd, 2) == CN_OK);
    CHECK(cn_loader_normalize(li, 0, mean, sd, 2) == CN_OK);
    cn_tensor *bu[1], *bi[1];
    int64_t row = 0;
    int bad = 0, bad_i32 = 0, bad_scaled = 0;
    while (cn_loader_next(lu, bu) == 1 && cn_loader_next(li, bi) == 1) {
        CHECK(cn_tensor_dtype(bu[0]) == CN_F32);
        const float *o = cn_data(bu[0]), *oi = cn_data(bi[0]);
        for (int64_t i = 0; i < cn_numel(bu[0]); i++) {
            int64_t g = row * PER + i, c = (g / (NH * NW)) % NC;
            bad += o[i] != (float)((ud[g] - mean[c]) / sd[c]);
            bad_i32 += o[i] != oi[i];
            if (c == 0) bad_scaled += o[i] != (float)ud[g] / 255.0f;
        }
        row += cn_dim(bu[0], 0);
    }
    CHECK_EQ_INT(row, NS);
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(bad_i32, 0);
    CHECK_EQ_INT(bad_scaled, 0);
    cn_loader_free(lu);
    cn_loader_free(li);

    /* After a crop the samples are still u8, then normalised (the crop is
     * the whole sample here, so every value is known). */
    cn_loader *l = cn_loader_new(&u, 1, &(cn_loader_opts){.batch_size = 7});
    CHECK(cn_loader_random_crop(l, 0, NH, NW, 0) == CN_OK);
    CHECK(cn_loader_normalize(l, 0, mean + 1, sd + 1, 1) == CN_OK);
    cn_tensor *b[1];
    bad = 0;
    for (row = 0; cn_loader_next(l, b) == 1; row += cn_dim(b[0], 0)) {
        const float *o = cn_data(b[0]);
        for (int64_t i = 0; i < cn_numel(b[0]); i++)
            bad += o[i] != (float)((ud[row * PER + i] - mean[1]) / sd[1]);
    }
    CHECK_EQ_INT(row, NS);
    CHECK_EQ_INT(bad, 0);
    cn_loader_free(l);
}

/* On a device: the same batches as on the CPU, arriving on the device,
 * with and without prefetching; an absent device is refused at creation. */
static void test_device(void) {
    cn_tensor *x, *y;
    make_dataset(&x, &y);
    cn_tensor *ds[2] = {x, y};
    cn_device nodev = CN_DEVICE(CN_DEVICE_OPENCL, 99);
    CHECK_ERROR(cn_loader_new(ds, 2, &(cn_loader_opts){.batch_size = 4, .device = nodev}),
                "opencl:99");
    if (cn_device_count(CN_DEVICE_OPENCL) == 0) {
        printf("skipped: no OpenCL platform (the loader on a device)\n");
        return;
    }
    cn_device dev = CN_DEVICE(CN_DEVICE_OPENCL, 0);
    for (int prefetch = 0; prefetch <= 2; prefetch++) {
        cn_loader_opts o = {.batch_size = 8, .shuffle = true, .seed = 5, .prefetch = prefetch};
        cn_loader *host = cn_loader_new(ds, 2, &o);
        o.device = dev;
        cn_loader *ondev = cn_loader_new(ds, 2, &o);
        CHECK(host && ondev);
        for (int b = 0; host && ondev && b < 6; b++) {
            cn_scope_begin();
            cn_tensor *hb[2], *db[2];
            int rh = cn_loader_next(host, hb), rd = cn_loader_next(ondev, db);
            CHECK(rh == rd);
            if (rh == 1 && rd == 1) {
                for (int c = 0; c < 2; c++) {
                    CHECK(cn_device_equal(cn_tensor_device(db[c]), dev));
                    cn_tensor *back = cn_to(db[c], CN_CPU);
                    CHECK_MSG(back && cn_equal(back, hb[c]), "prefetch %d batch %d tensor %d",
                              prefetch, b, c);
                }
            }
            cn_scope_end();
        }
        cn_loader_free(host);
        cn_loader_free(ondev);
    }
}

static void test_errors(void) {
    cn_tensor *x, *y;
    make_dataset(&x, &y);
    cn_tensor *ds[2] = {x, y};
    CHECK_ERROR(cn_loader_new(ds, 2, &(cn_loader_opts){.batch_size = 0}), "batch_size is 0");
    CHECK_ERROR(cn_loader_new(ds, 2, &(cn_loader_opts){.batch_size = 1, .prefetch = 3}),
                "prefetch is 3");
    CHECK_ERROR(cn_loader_new(ds, 0, &(cn_loader_opts){.batch_size = 1}), "0 tensors");
    CHECK_ERROR(cn_loader_new(ds, 2, NULL), "opts is NULL");
    cn_tensor *short_y = cn_arange(0, N - 1, 1, CN_I64);
    cn_tensor *mism[2] = {x, short_y};
    CHECK_ERROR(cn_loader_new(mism, 2, &(cn_loader_opts){.batch_size = 1}),
                "different numbers of samples");
    cn_tensor *sc = cn_scalar(CN_F32, 1);
    CHECK_ERROR(cn_loader_new(&sc, 1, &(cn_loader_opts){.batch_size = 1}), "rank 0");
    cn_loader *l = cn_loader_new(ds, 2, &(cn_loader_opts){.batch_size = 4, .prefetch = 2});
    CHECK_STATUS_ERROR(cn_loader_random_crop(l, 0, 10, 4, 2), "does not fit");
    CHECK_STATUS_ERROR(cn_loader_random_crop(l, 2, 4, 4, 0), "out of range");
    CHECK_STATUS_ERROR(cn_loader_random_crop(l, 1, 4, 4, 0), "transforms take [C, H, W] or [H, W]");
    CHECK_STATUS_ERROR(cn_loader_random_hflip(l, 0, 1.5), "not in [0, 1]");
    CHECK_STATUS_ERROR(cn_loader_normalize(l, 0, (double[]){0, 0, 0}, (double[]){1, 1, 1}, 3),
                       "3 means and stds for samples of 2 channels");
    CHECK_STATUS_ERROR(cn_loader_normalize(l, 0, (double[]){0}, (double[]){0}, 1), "non-zero");
    CHECK_STATUS_ERROR(cn_loader_next(l, NULL), "batch is NULL");
    cn_tensor *b[2];
    CHECK(cn_loader_next(l, b) == 1);
    CHECK_STATUS_ERROR(cn_loader_random_hflip(l, 0, 0.5), "before the first");
    CHECK_STATUS_ERROR(cn_loader_set_epoch(l, -1), "epoch -1");
    /* Freed with batches still queued: nothing leaks (ASan checks). */
    cn_loader_free(l);
    cn_loader_free(NULL);
    CHECK(cn_loader_next(NULL, b) == CN_EINVAL);
}

/* Workers share a batch's transforms: the batches are the same with 1, 3
 * or 8 of them; jitter keeps samples in [0, 1] and changes some; the
 * loader's wait time is counted and non-negative. */
static void epoch_with_workers(cn_tensor *x, cn_tensor *y, int workers, float *out) {
    cn_tensor *ds[2] = {x, y};
    cn_loader *l = cn_loader_new(ds, 2, &(cn_loader_opts){.batch_size = 8, .shuffle = true,
                                                          .seed = 11, .prefetch = workers % 2,
                                                          .workers = workers});
    CHECK(l && cn_loader_random_crop(l, 0, H, W, 1) == 0 && cn_loader_random_hflip(l, 0, 0.5) == 0);
    static const double mean[1] = {0}, sd[1] = {9000};
    CHECK(cn_loader_normalize(l, 0, mean, sd, 1) == 0);
    CHECK(cn_loader_color_jitter(l, 0, 0.3, 0.3) == 0);
    CHECK_STATUS_ERROR(cn_loader_color_jitter(l, 0, 2, 0), "must be in [0, 1]");
    int64_t k = 0;
    for (;;) {
        cn_scope_begin();
        cn_tensor *b[2];
        int r = cn_loader_next(l, b);
        if (r == 1) {
            memcpy(out + k, cn_data(b[0]), sizeof(float) * (size_t)cn_numel(b[0]));
            k += cn_numel(b[0]);
        }
        cn_scope_end();
        if (r != 1) break;
    }
    CHECK_EQ_INT(k, (int64_t)N * C * H * W);
    CHECK(cn_loader_wait_seconds(l) >= 0);
    cn_loader_free(l);
}

static void test_workers_jitter(void) {
    cn_tensor *x, *y;
    make_dataset(&x, &y);
    size_t n = (size_t)N * C * H * W;
    float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n);
    epoch_with_workers(x, y, 1, a);
    for (int w = 3; w <= 8; w += 5) {
        epoch_with_workers(x, y, w, b);
        CHECK_MSG(memcmp(a, b, sizeof(float) * n) == 0, "%d workers: batches differ", w);
    }
    int changed = 0, inside = 1;
    for (size_t i = 0; i < n; i++) {
        inside &= a[i] >= 0 && a[i] <= 1;
        changed += a[i] != 0;
    }
    CHECK(inside && changed > 0);
    /* u8 or f32 outside [0, 1] before normalising: refused. */
    cn_tensor *ds[2] = {x, y};
    cn_loader *l = cn_loader_new(ds, 2, &(cn_loader_opts){.batch_size = 4});
    cn_tensor *u = cn_zeros(CN_U8, CN_SHAPE(N, C, H, W));
    cn_tensor *ds2[2] = {u, y};
    cn_loader *l2 = cn_loader_new(ds2, 2, &(cn_loader_opts){.batch_size = 4});
    CHECK_STATUS_ERROR(cn_loader_color_jitter(l2, 0, 0.1, 0.1), "jitter takes f32");
    cn_loader_free(l);
    cn_loader_free(l2);
    free(a);
    free(b);
}

int main(void) {
    RUN(test_workers_jitter);
    RUN(test_batching);
    RUN(test_shuffle);
    RUN(test_determinism);
    RUN(test_transforms);
    RUN(test_normalize_u8);
    RUN(test_errors);
    RUN(test_device);
    return th_summary();
}
