/* Data files: IDX (plain and gzip; the real Fashion-MNIST against Python's
 * gzip), CSV, .npy (against NumPy both ways) and images (against a PNG
 * codec written in plain Python), with the errors of missing, truncated and
 * corrupt files. */
#include "io_util.h"

/* ---- IDX ---- */

/* Element i of the IDX test file of type code `code`. */
static double idx_val(int code, int64_t i) {
    switch (code) {
    case 0x08: return (double)((i * 7) % 256);
    case 0x09: return (double)((i * 7) % 256 - 128);
    case 0x0B: return (double)(i * 300 - 20000);
    case 0x0C: return (double)(i * 100003 - 5000000);
    case 0x0D: return i * 0.5 - 3.25;
    default: return i * 1e-3 + 0.1;
    }
}

static size_t idx_esize(int code) {
    return code == 0x08 || code == 0x09 ? 1 : code == 0x0B ? 2 : code == 0x0E ? 8 : 4;
}

/* Writes an IDX file by hand: big-endian sizes and values. */
static void write_idx(const char *path, int code, int ndim, const uint32_t *dims, size_t extra,
                      size_t cut) {
    size_t numel = 1;
    for (int i = 0; i < ndim; i++)
        numel *= dims[i];
    size_t es = idx_esize(code), n = 4 + 4 * (size_t)ndim + numel * es + extra;
    unsigned char *b = calloc(n, 1), *p = b;
    *p++ = 0, *p++ = 0, *p++ = (unsigned char)code, *p++ = (unsigned char)ndim;
    for (int i = 0; i < ndim; i++)
        for (int k = 3; k >= 0; k--)
            *p++ = (unsigned char)(dims[i] >> (8 * k));
    for (size_t i = 0; i < numel; i++) {
        double v = idx_val(code, (int64_t)i);
        uint64_t bits = 0;
        if (code == 0x0D) {
            float f = (float)v;
            uint32_t u;
            memcpy(&u, &f, 4);
            bits = u;
        } else if (code == 0x0E) {
            memcpy(&bits, &v, 8);
        } else {
            bits = (uint64_t)(int64_t)v;
        }
        for (int k = (int)es - 1; k >= 0; k--)
            *p++ = (unsigned char)(bits >> (8 * k));
    }
    io_write(path, b, cut ? cut : n);
    free(b);
}

/* gzip every *.idx file of the directory with Python's gzip module. */
static const char *py_gzip = "import gzip, sys, os\n"
                             "d = sys.argv[1]\n"
                             "for f in sorted(os.listdir(d)):\n"
                             "    if f.endswith('.idx'):\n"
                             "        open(os.path.join(d, f + '.gz'), "
                             "'wb').write(gzip.compress(open(os.path.join(d, f), 'rb').read()))\n"
                             "print('ok')\n";

static void check_idx(const char *path, int code, int ndim, const uint32_t *dims) {
    cn_tensor *t = cn_load_idx(path);
    CHECK_MSG(t != NULL, "%s: %s", path, cn_last_error());
    if (!t) return;
    cn_dtype want = code == 0x08 ? CN_U8 : code == 0x0D ? CN_F32 : code == 0x0E ? CN_F64 : CN_I32;
    CHECK_MSG(cn_tensor_dtype(t) == want, "%s: dtype %s", path, cn_dtype_name(cn_tensor_dtype(t)));
    CHECK_EQ_INT(cn_ndim(t), ndim);
    for (int i = 0; i < ndim && i < cn_ndim(t); i++)
        CHECK_EQ_INT(cn_dim(t, i), dims[i]);
    int bad = 0;
    for (int64_t i = 0; i < cn_numel(t); i++) {
        double w = idx_val(code, i);
        if (code == 0x0D) w = (float)w;
        bad += th_at(t, i) != w;
    }
    CHECK_MSG(bad == 0, "%s: %d values differ", path, bad);
}

static void test_idx_round_trip(void) {
    const int codes[] = {0x08, 0x09, 0x0B, 0x0C, 0x0D, 0x0E};
    const uint32_t dims[3] = {3, 4, 5};
    char name[64];
    for (int k = 0; k < 6; k++) {
        snprintf(name, sizeof name, "t%02x.idx", codes[k]);
        write_idx(io_path(name), codes[k], 3, dims, 0, 0);
    }
    const uint32_t d1[1] = {1000};
    write_idx(io_path("labels.idx"), 0x08, 1, d1, 0, 0);
    write_idx(io_path("scalar.idx"), 0x0D, 0, NULL, 0, 0);
    const uint32_t dz[2] = {0, 28};
    write_idx(io_path("empty.idx"), 0x08, 2, dz, 0, 0);
    char *out = io_python("gzip", py_gzip);
    CHECK(out != NULL);
    free(out);
    for (int gz = 0; gz < 2; gz++) {
        for (int k = 0; k < 6; k++) {
            snprintf(name, sizeof name, gz ? "t%02x.idx.gz" : "t%02x.idx", codes[k]);
#ifndef CN_HAVE_ZLIB
            if (gz) {
                CHECK_ERROR(cn_load_idx(io_path(name)), "no zlib");
                continue;
            }
#endif
            check_idx(io_path(name), codes[k], 3, dims);
        }
#ifndef CN_HAVE_ZLIB
        if (gz) continue;
#endif
        check_idx(io_path(gz ? "labels.idx.gz" : "labels.idx"), 0x08, 1, d1);
        check_idx(io_path(gz ? "scalar.idx.gz" : "scalar.idx"), 0x0D, 0, NULL);
        check_idx(io_path(gz ? "empty.idx.gz" : "empty.idx"), 0x08, 2, dz);
    }
}

static void test_idx_errors(void) {
    const uint32_t dims[2] = {50, 40};
    const char *p = io_path("bad.idx");
    CHECK_ERROR(cn_load_idx(io_path("nothing.idx")), "cannot open");
    CHECK(strstr(cn_last_error(), "nothing.idx") && strstr(cn_last_error(), "No such file"));
    /* Truncated in the data, in the sizes, in the magic. */
    write_idx(p, 0x08, 2, dims, 0, 4 + 8 + 1999);
    CHECK_ERROR(cn_load_idx(p), "is truncated");
    CHECK(strstr(cn_last_error(), "bad.idx") && strstr(cn_last_error(), "[50, 40]"));
    write_idx(p, 0x08, 2, dims, 0, 6);
    CHECK_ERROR(cn_load_idx(p), "truncated in its header");
    write_idx(p, 0x08, 2, dims, 0, 3);
    CHECK_ERROR(cn_load_idx(p), "truncated");
    io_write(p, "", 0);
    CHECK_ERROR(cn_load_idx(p), "truncated");
    /* Trailing bytes. */
    write_idx(p, 0x08, 2, dims, 3, 0);
    CHECK_ERROR(cn_load_idx(p), "wrong size");
    /* Bad magic: not zero, unknown type code, too many axes. */
    io_write(p, "\x01\x00\x08\x01\x00\x00\x00\x01x", 9);
    CHECK_ERROR(cn_load_idx(p), "bad magic");
    io_write(p, "\x00\x00\x07\x01\x00\x00\x00\x01x", 9);
    CHECK_ERROR(cn_load_idx(p), "bad magic");
    io_write(p, "\x00\x00\x08\x09", 4);
    CHECK_ERROR(cn_load_idx(p), "rank 9");
    /* A header claiming terabytes fails without trying to allocate them. */
    io_write(p, "\x00\x00\x08\x03\xff\xff\xff\xff\xff\xff\xff\xff\x00\x00\x00\x10", 16);
    CHECK_ERROR(cn_load_idx(p), "implausible shape");
    io_write(p, "\x00\x00\x08\x02\x00\x10\x00\x00\x00\x10\x00\x00", 12);
    CHECK_ERROR(cn_load_idx(p), "truncated");

    /* Compressed: truncated stream, damaged stream, trailing data. */
    write_idx(io_path("gz_src.idx"), 0x0C, 2, dims, 0, 0);
    write_idx(io_path("gz_long.idx"), 0x08, 2, dims, 5, 0);
    /* Compressed files whose headers claim 512 MiB and 2 GiB but hold 1000
     * bytes: the first is read into a tensor of the claimed size (reserved,
     * never touched), the second, beyond what is trusted, into a growing
     * buffer; both must say they are truncated. */
    unsigned char claim[16 + 1000] = {0, 0, 0x08, 2, 0, 0, 0x02, 0, 0, 0x10, 0, 0};
    for (int i = 0; i < 1000; i++)
        claim[12 + i] = (unsigned char)i;
    io_write(io_path("claim_512m.idx"), claim, 12 + 1000);
    claim[6] = 0x08;
    io_write(io_path("claim_2g.idx"), claim, 12 + 1000);
    char *out = io_python("gzip2", py_gzip);
    CHECK(out != NULL);
    free(out);
    size_t n;
    unsigned char *gz = io_read(io_path("gz_src.idx.gz"), &n);
    CHECK(gz && n > 100);
    if (!gz) return;
#ifdef CN_HAVE_ZLIB
    const char *q = io_path("cut.idx.gz");
    size_t cuts[] = {n / 2, n - 4, n - 1, 12};
    for (size_t k = 0; k < 4; k++) {
        io_write(q, gz, cuts[k]);
        cn_clear_error();
        CHECK_MSG(cn_load_idx(q) == NULL && strstr(cn_last_error(), "truncated") &&
                      strstr(cn_last_error(), "cut.idx.gz"),
                  "cut at %zu of %zu: %s", cuts[k], n, cn_last_error());
    }
    /* Damage inside the deflate data, and in the CRC of the trailer. */
    unsigned char *bad = malloc(n);
    memcpy(bad, gz, n);
    for (size_t i = 20; i < 40; i++)
        bad[i] ^= 0x5a;
    io_write(q, bad, n);
    CHECK_ERROR(cn_load_idx(q), "cut.idx.gz");
    memcpy(bad, gz, n);
    bad[n - 6] ^= 0xff;
    io_write(q, bad, n);
    CHECK_ERROR(cn_load_idx(q), "cut.idx.gz");
    free(bad);
    CHECK_ERROR(cn_load_idx(io_path("gz_long.idx.gz")), "wrong size");
    CHECK_ERROR(cn_load_idx(io_path("claim_512m.idx.gz")), "is truncated");
    CHECK(strstr(cn_last_error(), "[512, 1048576]") && strstr(cn_last_error(), "holds 1000"));
    /* 2 GiB is over the default decompressed-size budget (refused from the
     * header); with the budget raised, the growing buffer finds the end. */
    CHECK_ERROR(cn_load_idx(io_path("claim_2g.idx.gz")), "CN_MAX_DECOMPRESSED_MB");
    setenv("CN_MAX_DECOMPRESSED_MB", "4096", 1);
    CHECK_ERROR(cn_load_idx(io_path("claim_2g.idx.gz")), "is truncated");
    CHECK(strstr(cn_last_error(), "[2048, 1048576]") && strstr(cn_last_error(), "holds 1000"));
    unsetenv("CN_MAX_DECOMPRESSED_MB");
#else
    CHECK_ERROR(cn_load_idx(io_path("gz_src.idx.gz")), "no zlib");
#endif
    free(gz);
}

/* The real files, against Python's gzip reading of the same files. */
#ifdef CN_HAVE_ZLIB
static const char *py_fashion =
    "import gzip, sys\n"
    "import numpy as np\n"
    "d = '/usr/share/datasets/fashion-mnist/'\n"
    "def rd(n): return np.frombuffer(gzip.open(d + n).read(), dtype=np.uint8)\n"
    "tl = rd('train-labels-idx1-ubyte.gz')[8:]\n"
    "ti = rd('train-images-idx3-ubyte.gz')[16:]\n"
    "el = rd('t10k-labels-idx1-ubyte.gz')[8:]\n"
    "ei = rd('t10k-images-idx3-ubyte.gz')[16:]\n"
    "print(len(tl), len(ti), len(el), len(ei))\n"
    "print(*tl[:10], tl[-1], int(tl.astype(np.int64).sum()))\n"
    "print(*el[:10], el[-1], int(el.astype(np.int64).sum()))\n"
    "print(int(ti.astype(np.int64).sum()), int(ei.astype(np.int64).sum()))\n"
    "print(ei[14 * 28 + 14], ei[9999 * 784 + 400], ti[123 * 784 + 300])\n";
#endif

static void test_fashion_mnist(void) {
    const char *dir = "/usr/share/datasets/fashion-mnist";
    CHECK_MSG(access("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz", R_OK) == 0,
              "Fashion-MNIST is missing (apt-get install dataset-fashion-mnist)");
#ifndef CN_HAVE_ZLIB
    cn_tensor *a, *b;
    CHECK_STATUS_ERROR(cn_load_fashion_mnist(dir, false, &a, &b), "no zlib");
    return;
#else
    CHECK_MSG(io_have_numpy(), "NumPy is missing");
    char *out = io_python("fashion", py_fashion);
    CHECK(out != NULL);
    if (!out) return;
    long long v[64];
    int nv = 0;
    for (char *s = out; nv < 64;) {
        char *e;
        long long x = strtoll(s, &e, 10);
        if (e == s) break;
        v[nv++] = x;
        s = e;
    }
    free(out);
    CHECK_EQ_INT(nv, 4 + 12 + 12 + 2 + 3);
    if (nv != 33) return;
    CHECK_EQ_INT(v[0], 60000);
    CHECK_EQ_INT(v[2], 10000);

    /* The raw file through cn_load_idx. */
    cn_tensor *tl = cn_load_idx("/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz");
    CHECK_SHAPE(tl, 60000);
    if (tl) {
        CHECK(cn_tensor_dtype(tl) == CN_U8);
        for (int i = 0; i < 10; i++)
            CHECK_EQ_INT(th_at(tl, i), v[4 + i]);
        CHECK_EQ_INT(th_at(tl, 59999), v[14]);
        CHECK_EQ_INT(cn_item(cn_sum(tl, NULL, 0, false)), v[15]);
    }
    /* Both sets through the convenience loader. */
    for (int train = 0; train < 2; train++) {
        cn_scope_begin();
        cn_tensor *img = NULL, *lab = NULL;
        CHECK(cn_load_fashion_mnist(dir, train, &img, &lab) == CN_OK);
        int64_t n = train ? 60000 : 10000;
        CHECK_SHAPE(img, n, 1, 28, 28);
        CHECK_SHAPE(lab, n);
        if (img && lab) {
            CHECK(cn_tensor_dtype(img) == CN_F32 && cn_tensor_dtype(lab) == CN_I64);
            const long long *lv = train ? v + 4 : v + 16;
            for (int i = 0; i < 10; i++)
                CHECK_EQ_INT(th_at(lab, i), lv[i]);
            CHECK_EQ_INT(th_at(lab, n - 1), lv[10]);
            CHECK_EQ_INT(cn_item(cn_sum(lab, NULL, 0, false)), lv[11]);
            /* Pixels are the bytes / 255: the sum of round(255 x) is the
             * byte sum. */
            const float *px = cn_data(img);
            long long sum = 0;
            float lo = 1, hi = 0;
            for (int64_t i = 0; i < n * 784; i++) {
                sum += (long long)lroundf(px[i] * 255.0f);
                lo = px[i] < lo ? px[i] : lo;
                hi = px[i] > hi ? px[i] : hi;
            }
            CHECK_EQ_INT(sum, train ? v[28] : v[29]);
            CHECK(lo == 0.0f && hi == 1.0f);
            if (train) {
                CHECK_CLOSE(px[123 * 784 + 300], v[32] / 255.0, 1e-7, 0);
            } else {
                CHECK_CLOSE(px[14 * 28 + 14], v[30] / 255.0, 1e-7, 0);
                CHECK_CLOSE(px[9999 * 784 + 400], v[31] / 255.0, 1e-7, 0);
            }
        }
        /* The bytes as stored: the same labels, and pixels whose f32 form is
         * exactly the f32 loader's. */
        cn_tensor *u8 = NULL, *lab8 = NULL;
        CHECK(cn_load_fashion_mnist_u8(dir, train, &u8, &lab8) == CN_OK);
        CHECK_SHAPE(u8, n, 1, 28, 28);
        CHECK_SHAPE(lab8, n);
        if (u8 && lab8 && img && lab) {
            CHECK(cn_tensor_dtype(u8) == CN_U8 && cn_tensor_dtype(lab8) == CN_I64);
            CHECK(cn_equal(lab8, lab));
            const uint8_t *b8 = cn_data(u8);
            const float *px = cn_data(img);
            long long sum = 0;
            int64_t differ = 0;
            for (int64_t i = 0; i < n * 784; i++) {
                sum += b8[i];
                differ += px[i] != (float)b8[i] / 255.0f;
            }
            CHECK_EQ_INT(sum, train ? v[28] : v[29]);
            CHECK_EQ_INT(differ, 0);
            if (train) {
                CHECK_EQ_INT(b8[123 * 784 + 300], v[32]);
            } else {
                CHECK_EQ_INT(b8[14 * 28 + 14], v[30]);
                CHECK_EQ_INT(b8[9999 * 784 + 400], v[31]);
            }
        }
        cn_scope_end();
    }
    cn_tensor *a = NULL, *b = NULL;
    CHECK_STATUS_ERROR(cn_load_fashion_mnist(io_dir, true, &a, &b), "train-images-idx3-ubyte");
    CHECK(strstr(cn_last_error(), "dataset-fashion-mnist") && a == NULL && b == NULL);
    CHECK_STATUS_ERROR(cn_load_fashion_mnist_u8(io_dir, false, &a, &b), "t10k-images-idx3-ubyte");
    CHECK(strstr(cn_last_error(), "load_fashion_mnist_u8") && a == NULL && b == NULL);
    CHECK_STATUS_ERROR(cn_load_fashion_mnist_u8(dir, true, NULL, &b), "images or labels is NULL");
#endif
}

/* ---- CSV ---- */

static void write_text(const char *name, const char *text) {
    io_write(io_path(name), text, strlen(text));
}

static void test_csv(void) {
    write_text("a.csv", "x,y,z\r\n1,2.5,-3\r\n\r\n 4 , \"5e1\" ,6\r\nnan,inf,-0\n");
    cn_tensor *t = cn_load_csv(io_path("a.csv"), NULL);
    CHECK_SHAPE(t, 3, 3);
    if (t) {
        double want[9] = {1, 2.5, -3, 4, 50, 6, NAN, INFINITY, 0};
        CHECK(cn_tensor_dtype(t) == CN_F32);
        for (int i = 0; i < 9; i++)
            CHECK_CLOSE(th_at(t, i), want[i], 0, 0);
    }
    /* No header, f64, semicolons, no final newline. */
    write_text("b.csv", "0.1;0.2\n0.3;1e-300");
    t = cn_load_csv(io_path("b.csv"), &(cn_csv_opts){.delimiter = ';', .dtype = CN_F64});
    CHECK_SHAPE(t, 2, 2);
    if (t) CHECK(th_at(t, 0) == 0.1 && th_at(t, 3) == 1e-300);
    /* Integers, exactly. */
    write_text("c.csv", "9007199254740993,-2\n5,6\n");
    t = cn_load_csv(io_path("c.csv"), &(cn_csv_opts){.dtype = CN_I64});
    CHECK_SHAPE(t, 2, 2);
    if (t) CHECK(cn_get_int(t, (int64_t[]){0, 0}) == 9007199254740993LL);
    /* A forced header; an empty file; only a header. */
    write_text("d.csv", "1,2\n3,4\n");
    t = cn_load_csv(io_path("d.csv"), &(cn_csv_opts){.header = CN_CSV_HEADER_YES});
    CHECK_SHAPE(t, 1, 2);
    write_text("e.csv", "");
    t = cn_load_csv(io_path("e.csv"), NULL);
    CHECK_SHAPE(t, 0, 0);
    write_text("f.csv", "p,q,r\n");
    t = cn_load_csv(io_path("f.csv"), NULL);
    CHECK_SHAPE(t, 0, 3);

    /* Errors name the file, line and column. */
    write_text("g.csv", "a,b\n1,2\n3,x7\n");
    CHECK_ERROR(cn_load_csv(io_path("g.csv"), NULL), "line 3, column 2");
    CHECK(strstr(cn_last_error(), "g.csv") && strstr(cn_last_error(), "\"x7\" is not a number"));
    CHECK_ERROR(cn_load_csv(io_path("g.csv"), &(cn_csv_opts){.header = CN_CSV_HEADER_NO}),
                "line 1, column 1");
    write_text("h.csv", "1,2\n3,,4\n");
    CHECK_ERROR(cn_load_csv(io_path("h.csv"), NULL), "line 2, column 2: the cell \"\" is empty");
    write_text("i.csv", "1,2\n3\n");
    CHECK_ERROR(cn_load_csv(io_path("i.csv"), NULL), "line 2 has 1 columns, but line 1 has 2");
    write_text("j.csv", "1,2.5\n");
    CHECK_ERROR(cn_load_csv(io_path("j.csv"), &(cn_csv_opts){.dtype = CN_I32}), "line 1, column 2");
    write_text("k.csv", "1,\"2\n");
    CHECK_ERROR(cn_load_csv(io_path("k.csv"), NULL), "unterminated quote");
    write_text("l.csv", "1,1e999\n");
    CHECK_ERROR(cn_load_csv(io_path("l.csv"), NULL), "column 2");
    CHECK_ERROR(cn_load_csv(io_path("nope.csv"), NULL), "cannot open");
    CHECK_ERROR(cn_load_csv(io_path("a.csv"), &(cn_csv_opts){.dtype = CN_U8}), "not supported");
}

/* ---- .npy ---- */

static double npy_val(int k, int64_t i) {
    switch (k) {
    case 0: return (float)(i * 0.37 - 3.5);
    case 1: return i * 1.25e-3 - 7;
    case 2: return (double)(i - 10) * 0.25;
    case 3: return (double)(i * 7919 - 100000);
    case 4: return (double)(i * 1000000007LL * 1000 - 5);
    case 5: return (double)((i * 37) % 256);
    default: return (double)(i % 3 == 0);
    }
}

static const char *py_npy_write =
    "import sys, numpy as np\n"
    "d = sys.argv[1] + '/'\n"
    "i = np.arange(24, dtype=np.int64)\n"
    "f32 = (i * 0.37 - 3.5).astype(np.float32)\n"
    "np.save(d + 'f32.npy', f32.reshape(2, 3, 4))\n"
    "np.save(d + 'f64.npy', (i * 1.25e-3 - 7).reshape(4, 6))\n"
    "np.save(d + 'f16.npy', ((i - 10) * 0.25).astype(np.float16))\n"
    "np.save(d + 'i32.npy', (i * 7919 - 100000).astype(np.int32).reshape(6, 4))\n"
    "np.save(d + 'i64.npy', i * 1000000007 * 1000 - 5)\n"
    "np.save(d + 'u8.npy', ((i * 37) % 256).astype(np.uint8).reshape(2, 12))\n"
    "np.save(d + 'bool.npy', (i % 3 == 0).reshape(3, 8))\n"
    "np.save(d + 'be.npy', f32.astype('>f4').reshape(2, 3, 4))\n"
    "np.save(d + 'bei8.npy', (i * 1000000007 * 1000 - 5).astype('>i8'))\n"
    "np.save(d + 'fortran.npy', np.asfortranarray(f32.reshape(2, 3, 4)))\n"
    "np.save(d + 'scalar.npy', np.float64(2.75))\n"
    "np.save(d + 'empty.npy', np.zeros((0, 3), np.float32))\n"
    "with open(d + 'v2.npy', 'wb') as f:\n"
    "    np.lib.format.write_array(f, (i * 1.25e-3 - 7).reshape(4, 6), version=(2, 0))\n"
    "np.save(d + 'i16.npy', i.astype(np.int16))\n"
    "np.save(d + 'c64.npy', i.astype(np.complex64))\n"
    "print('ok')\n";

static const char *py_npy_read =
    "import sys, numpy as np\n"
    "d = sys.argv[1] + '/'\n"
    "i = np.arange(24, dtype=np.int64)\n"
    "want = {'w_f32': (i * 0.37 - 3.5).astype(np.float32).reshape(2, 3, 4),\n"
    "        'w_t32': (i * 0.37 - 3.5).astype(np.float32).reshape(2, 3, 4),\n"
    "        'w_f64': (i * 1.25e-3 - 7).reshape(4, 6),\n"
    "        'w_f16': ((i - 10) * 0.25).astype(np.float16),\n"
    "        'w_i32': (i * 7919 - 100000).astype(np.int32).reshape(6, 4),\n"
    "        'w_i64': i * 1000000007 * 1000 - 5,\n"
    "        'w_u8': ((i * 37) % 256).astype(np.uint8).reshape(2, 12),\n"
    "        'w_bool': (i % 3 == 0).reshape(3, 8),\n"
    "        'w_scalar': np.array(2.75, dtype=np.float32),\n"
    "        'w_empty': np.zeros((0, 3), np.int32)}\n"
    "for k, w in want.items():\n"
    "    a = np.load(d + k + '.npy')\n"
    "    ok = a.dtype == w.dtype and a.shape == w.shape and np.array_equal(a, w)\n"
    "    print(k, 'OK' if ok else 'BAD %s %s %s' % (a.dtype, a.shape, a))\n";

static void test_npy(void) {
    CHECK_MSG(io_have_numpy(), "NumPy is missing");
    if (!io_have_numpy()) return;
    char *out = io_python("npy_write", py_npy_write);
    CHECK(out != NULL);
    free(out);
    struct {
        const char *file;
        int k;
        cn_dtype dt;
        int ndim;
        int64_t shape[3];
    } cases[] = {
        {"f32.npy", 0, CN_F32, 3, {2, 3, 4}}, {"f64.npy", 1, CN_F64, 2, {4, 6}},
        {"f16.npy", 2, CN_F16, 1, {24}},      {"i32.npy", 3, CN_I32, 2, {6, 4}},
        {"i64.npy", 4, CN_I64, 1, {24}},      {"u8.npy", 5, CN_U8, 2, {2, 12}},
        {"bool.npy", 6, CN_BOOL, 2, {3, 8}},  {"be.npy", 0, CN_F32, 3, {2, 3, 4}},
        {"bei8.npy", 4, CN_I64, 1, {24}},     {"fortran.npy", 0, CN_F32, 3, {2, 3, 4}},
        {"v2.npy", 1, CN_F64, 2, {4, 6}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        cn_tensor *t = cn_load_npy(io_path(cases[c].file));
        CHECK_MSG(t != NULL, "%s: %s", cases[c].file, cn_last_error());
        if (!t) continue;
        CHECK_MSG(cn_tensor_dtype(t) == cases[c].dt &&
                      th_same_shape(t, cases[c].ndim, cases[c].shape),
                  "%s: wrong dtype or shape", cases[c].file);
        int bad = 0;
        for (int64_t i = 0; i < cn_numel(t); i++)
            bad += th_at(t, i) != npy_val(cases[c].k, i);
        if (cases[c].dt == CN_I64)
            for (int64_t i = 0; i < cn_numel(t); i++)
                bad += cn_get_int(t, &i) != i * 1000000007LL * 1000 - 5;
        CHECK_MSG(bad == 0, "%s: %d values differ", cases[c].file, bad);
        CHECK(cn_is_contiguous(t));
    }
    cn_tensor *s = cn_load_npy(io_path("scalar.npy"));
    CHECK(s && cn_ndim(s) == 0 && cn_item(s) == 2.75);
    cn_tensor *e = cn_load_npy(io_path("empty.npy"));
    CHECK_SHAPE(e, 0, 3);
    CHECK_ERROR(cn_load_npy(io_path("i16.npy")), "'<i2', which is not supported");
    CHECK_ERROR(cn_load_npy(io_path("c64.npy")), "not supported");

    /* Chutney writes, NumPy reads. */
    cn_tensor *w[10];
    const char *wn[10] = {"w_f32", "w_t32", "w_f64",  "w_f16",    "w_i32",
                          "w_i64", "w_u8",  "w_bool", "w_scalar", "w_empty"};
    int ks[10] = {0, 0, 1, 2, 3, 4, 5, 6, -1, -1};
    int64_t shapes[10][3] = {{2, 3, 4}, {2, 3, 4}, {4, 6}, {24}, {6, 4}, {24}, {2, 12}, {3, 8}};
    int nd[10] = {3, 3, 2, 1, 2, 1, 2, 2, 0, 2};
    cn_dtype dts[10] = {CN_F32, CN_F32, CN_F64,  CN_F16, CN_I32,
                        CN_I64, CN_U8,  CN_BOOL, CN_F32, CN_I32};
    for (int j = 0; j < 10; j++) {
        if (j == 8) {
            w[j] = cn_scalar(CN_F32, 2.75);
        } else if (j == 9) {
            w[j] = cn_zeros(CN_I32, CN_SHAPE(0, 3));
        } else if (j == 1) {
            /* a non-contiguous view: [4, 3, 2] permuted */
            int64_t rs[3] = {4, 3, 2};
            cn_tensor *b = cn_zeros(CN_F32, 3, rs);
            w[j] = cn_permute(b, (int[]){2, 1, 0}, 3);
            for (int64_t i = 0; i < 24; i++) {
                int64_t idx[3];
                th_unravel(i, 3, shapes[j], idx);
                cn_set(w[j], idx, npy_val(0, i));
            }
        } else {
            w[j] = cn_zeros(dts[j], nd[j], shapes[j]);
            for (int64_t i = 0; i < 24; i++) {
                int64_t idx[3];
                th_unravel(i, nd[j], shapes[j], idx);
                cn_set(w[j], idx, npy_val(ks[j], i));
            }
            if (dts[j] == CN_I64)
                for (int64_t i = 0; i < 24; i++)
                    ((int64_t *)cn_data(w[j]))[i] = i * 1000000007LL * 1000 - 5;
        }
        char fname[64];
        snprintf(fname, sizeof fname, "%s.npy", wn[j]);
        CHECK_MSG(cn_save_npy(io_path(fname), w[j]) == CN_OK, "%s: %s", fname, cn_last_error());
        /* and back */
        cn_tensor *r = cn_load_npy(io_path(fname));
        CHECK_MSG(r && cn_equal(r, w[j]), "%s does not read back", fname);
    }
    out = io_python("npy_read", py_npy_read);
    CHECK(out != NULL);
    if (out) {
        int oks = 0;
        for (char *p = out; (p = strstr(p, " OK")); p++)
            oks++;
        CHECK_MSG(oks == 10 && !strstr(out, "BAD"), "NumPy says:\n%s", out);
        free(out);
    }

    /* Errors. */
    CHECK_STATUS_ERROR(cn_save_npy(io_path("x.npy"), cn_zeros(CN_BF16, CN_SHAPE(2))),
                       "NumPy has no bf16");
    CHECK_ERROR(cn_load_npy(io_path("missing.npy")), "cannot open");
    write_text("junk.npy", "PK\x03\x04 this is a zip");
    CHECK_ERROR(cn_load_npy(io_path("junk.npy")), "bad magic");
    CHECK_ERROR(cn_load_npy(io_path("junk.npy")), "junk.npy");
    size_t n;
    unsigned char *b = io_read(io_path("f64.npy"), &n);
    CHECK(b != NULL);
    if (b) {
        io_write(io_path("cut.npy"), b, n - 8);
        CHECK_ERROR(cn_load_npy(io_path("cut.npy")),
                    "truncated: shape [4, 6] of f64 needs 192 bytes");
        io_write(io_path("cut.npy"), b, 40);
        CHECK_ERROR(cn_load_npy(io_path("cut.npy")), "truncated in its header");
        io_write(io_path("cut.npy"), b, 7);
        CHECK_ERROR(cn_load_npy(io_path("cut.npy")), "truncated");
        unsigned char *c = malloc(n + 4);
        memcpy(c, b, n);
        memset(c + n, 0, 4);
        io_write(io_path("long.npy"), c, n + 4);
        CHECK_ERROR(cn_load_npy(io_path("long.npy")), "4 bytes after the data");
        /* Headers that are not the dict NumPy writes. */
        const char *hdrs[][2] = {
            {"{'descr': '<f8', 'shape': (4, 6), }", "lacks"},
            {"{'descr': '<f8', 'fortran_order': False, 'shape': (4, 6), 'x': 1}", "unknown key"},
            {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4, 6), }", "structured"},
            {"{'descr': '<f8', 'fortran_order': Maybe, 'shape': (4, 6), }", "True or False"},
            {"{'descr': '<f8', 'fortran_order': False, 'shape': (4, -6), }", "sizes"},
            {"['descr']", "not a Python dict"},
            {"{'descr': '<f8', 'fortran_order': False, 'shape': (4, 6), } x", "after the header"},
        };
        size_t hl = (size_t)b[8] | (size_t)b[9] << 8;
        for (size_t k = 0; k < sizeof hdrs / sizeof hdrs[0]; k++) {
            memcpy(c, b, n);
            memset(c + 10, ' ', hl - 1);
            memcpy(c + 10, hdrs[k][0], strlen(hdrs[k][0]));
            io_write(io_path("hdr.npy"), c, n);
            CHECK_ERROR(cn_load_npy(io_path("hdr.npy")), hdrs[k][1]);
        }
        memcpy(c, b, n);
        c[6] = 9;
        io_write(io_path("ver.npy"), c, n);
        CHECK_ERROR(cn_load_npy(io_path("ver.npy")), "version 9");
        free(c);
        free(b);
    }
}

/* ---- images ---- */

#ifdef CN_HAVE_STB
/* A PNG encoder and decoder in plain Python (zlib + struct), independent of
 * stb: it writes test images and decodes what Chutney writes, with all five
 * row filters. */
static const char *py_png =
    "import sys, zlib, struct\n"
    "d = sys.argv[1] + '/'\n"
    "def png(w, h, ch, px):\n"
    "    ct = {1: 0, 2: 4, 3: 2, 4: 6}[ch]\n"
    "    raw = b''.join(b'\\x00' + bytes(px[y * w * ch:(y + 1) * w * ch]) for y in range(h))\n"
    "    def chunk(t, b): return struct.pack('>I', len(b)) + t + b + struct.pack('>I', "
    "zlib.crc32(t + b))\n"
    "    return (b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, ct, "
    "0, 0, 0))\n"
    "            + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b''))\n"
    "def unpng(b):\n"
    "    assert b[:8] == b'\\x89PNG\\r\\n\\x1a\\n'\n"
    "    p, idat = 8, b''\n"
    "    while p < len(b):\n"
    "        n, t = struct.unpack('>I4s', b[p:p + 8])\n"
    "        if t == b'IHDR': w, h, bd, ct = struct.unpack('>IIBB', b[p + 8:p + 18])\n"
    "        if t == b'IDAT': idat += b[p + 8:p + 8 + n]\n"
    "        p += 12 + n\n"
    "    ch = {0: 1, 4: 2, 2: 3, 6: 4}[ct]\n"
    "    raw, out, prev, s = zlib.decompress(idat), [], [0] * (w * ch), w * ch\n"
    "    for y in range(h):\n"
    "        f, row = raw[y * (s + 1)], list(raw[y * (s + 1) + 1:(y + 1) * (s + 1)])\n"
    "        for x in range(s):\n"
    "            a = row[x - ch] if x >= ch else 0\n"
    "            c = prev[x - ch] if x >= ch else 0\n"
    "            u = prev[x]\n"
    "            if f == 1: row[x] = (row[x] + a) & 255\n"
    "            elif f == 2: row[x] = (row[x] + u) & 255\n"
    "            elif f == 3: row[x] = (row[x] + (a + u) // 2) & 255\n"
    "            elif f == 4:\n"
    "                pp = a + u - c\n"
    "                pa, pb, pc = abs(pp - a), abs(pp - u), abs(pp - c)\n"
    "                row[x] = (row[x] + (a if pa <= pb and pa <= pc else u if pb <= pc else c)) & "
    "255\n"
    "        out += row\n"
    "        prev = row\n"
    "    return w, h, ch, out\n"
    "def val(i): return (i * 37 + (i // 7) * 11) % 256\n"
    "if sys.argv[2] == 'write':\n"
    "    for ch in (1, 2, 3, 4):\n"
    "        w, h = 7, 5\n"
    "        open(d + 'py%d.png' % ch, 'wb').write(png(w, h, ch, [val(i) for i in range(w * h * "
    "ch)]))\n"
    "else:\n"
    "    for ch in (1, 3, 4):\n"
    "        w, h, c, px = unpng(open(d + 'c%d.png' % ch, 'rb').read())\n"
    "        ok = (w, h, c) == (13, 6, ch) and px == [val(i) for i in range(w * h * c)]\n"
    "        print('c%d' % ch, 'OK' if ok else 'BAD %r' % ((w, h, c),))\n";

static int img_val(int64_t i) { return (int)((i * 37 + (i / 7) * 11) % 256); }

static char *run_png(const char *mode) {
    char script[64];
    snprintf(script, sizeof script, "png_%s", mode);
    /* io_python passes only the directory: append the mode. */
    char sp[512], cmd[1200];
    snprintf(sp, sizeof sp, "%s/%s.py", io_dir, script);
    io_write(sp, py_png, strlen(py_png));
    snprintf(cmd, sizeof cmd, PYTHON " '%s' '%s' %s", sp, io_dir, mode);
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    char *out = calloc(1, 4096);
    size_t n = fread(out, 1, 4095, p);
    out[n] = '\0';
    if (pclose(p) != 0) {
        fprintf(stderr, "png script failed:\n%s\n", out);
        free(out);
        return NULL;
    }
    return out;
}

#endif

static void test_images(void) {
#ifndef CN_HAVE_STB
    CHECK_ERROR(cn_load_image(io_path("x.png"), 0, CN_IMAGE_HWC, CN_U8), "built without stb");
    CHECK_STATUS_ERROR(
        cn_save_image(io_path("x.png"), cn_zeros(CN_U8, CN_SHAPE(2, 2)), CN_IMAGE_HWC, 0),
        "built without stb");
    return;
#else
    char *out = run_png("write");
    CHECK(out != NULL);
    free(out);
    /* Files from the Python encoder, every channel count, both layouts,
     * both dtypes. */
    for (int ch = 1; ch <= 4; ch++) {
        char name[32];
        snprintf(name, sizeof name, "py%d.png", ch);
        cn_tensor *hwc = cn_load_image(io_path(name), 0, CN_IMAGE_HWC, CN_U8);
        CHECK_SHAPE(hwc, 5, 7, ch);
        cn_tensor *chw = cn_load_image(io_path(name), 0, CN_IMAGE_CHW, CN_U8);
        CHECK_SHAPE(chw, ch, 5, 7);
        cn_tensor *f = cn_load_image(io_path(name), 0, CN_IMAGE_CHW, CN_F32);
        if (!hwc || !chw || !f) continue;
        int bad = 0;
        for (int64_t y = 0; y < 5; y++)
            for (int64_t x = 0; x < 7; x++)
                for (int64_t c = 0; c < ch; c++) {
                    int want = img_val((y * 7 + x) * ch + c);
                    bad += cn_get(hwc, (int64_t[]){y, x, c}) != want;
                    bad += cn_get(chw, (int64_t[]){c, y, x}) != want;
                    bad += cn_get(f, (int64_t[]){c, y, x}) != (float)want / 255.0f;
                }
        CHECK_MSG(bad == 0, "%s: %d values differ", name, bad);
    }
    /* Channel conversion: RGB to RGBA adds an opaque alpha. */
    cn_tensor *rgba = cn_load_image(io_path("py3.png"), 4, CN_IMAGE_HWC, CN_U8);
    CHECK_SHAPE(rgba, 5, 7, 4);
    if (rgba)
        CHECK(cn_get(rgba, (int64_t[]){2, 3, 3}) == 255 &&
              cn_get(rgba, (int64_t[]){2, 3, 1}) == img_val((2 * 7 + 3) * 3 + 1));
    cn_tensor *grey = cn_load_image(io_path("py3.png"), 1, CN_IMAGE_CHW, CN_U8);
    CHECK_SHAPE(grey, 1, 5, 7);

    /* Chutney writes, the Python decoder reads: grey [H, W], RGB in CHW
     * from floats, RGBA in HWC. */
    const int64_t H = 6, W = 13;
    cn_tensor *g = cn_zeros(CN_U8, CN_SHAPE(H, W));
    cn_tensor *c3 = cn_zeros(CN_F32, CN_SHAPE(3, H, W));
    cn_tensor *c4 = cn_zeros(CN_U8, CN_SHAPE(H, W, 4));
    for (int64_t y = 0; y < H; y++)
        for (int64_t x = 0; x < W; x++) {
            cn_set(g, (int64_t[]){y, x}, img_val(y * W + x));
            for (int64_t c = 0; c < 3; c++)
                cn_set(c3, (int64_t[]){c, y, x}, img_val((y * W + x) * 3 + c) / 255.0);
            for (int64_t c = 0; c < 4; c++)
                cn_set(c4, (int64_t[]){y, x, c}, img_val((y * W + x) * 4 + c));
        }
    CHECK(cn_save_image(io_path("c1.png"), g, CN_IMAGE_HWC, 0) == CN_OK);
    CHECK(cn_save_image(io_path("c3.png"), c3, CN_IMAGE_CHW, 0) == CN_OK);
    CHECK(cn_save_image(io_path("c4.png"), c4, CN_IMAGE_HWC, 0) == CN_OK);
    out = run_png("read");
    CHECK(out != NULL);
    if (out) {
        int oks = 0;
        for (char *p = out; (p = strstr(p, " OK")); p++)
            oks++;
        CHECK_MSG(oks == 3 && !strstr(out, "BAD"), "the Python decoder says:\n%s", out);
        free(out);
    }
    /* Round trips: PNG and BMP exact, JPEG close. */
    cn_tensor *back = cn_load_image(io_path("c4.png"), 0, CN_IMAGE_HWC, CN_U8);
    CHECK(back && cn_equal(back, c4));
    CHECK(cn_save_image(io_path("c3.bmp"), c3, CN_IMAGE_CHW, 0) == CN_OK);
    back = cn_load_image(io_path("c3.bmp"), 3, CN_IMAGE_CHW, CN_F32);
    CHECK(back && cn_allclose(back, c3, 0, 1e-6));
    cn_tensor *smooth = cn_zeros(CN_U8, CN_SHAPE(32, 32, 3));
    for (int64_t y = 0; y < 32; y++)
        for (int64_t x = 0; x < 32; x++)
            for (int64_t c = 0; c < 3; c++)
                cn_set(smooth, (int64_t[]){y, x, c}, 60 + 4 * x + 2 * y + 10 * c);
    CHECK(cn_save_image(io_path("s.jpg"), smooth, CN_IMAGE_HWC, 95) == CN_OK);
    back = cn_load_image(io_path("s.jpg"), 3, CN_IMAGE_HWC, CN_U8);
    CHECK_SHAPE(back, 32, 32, 3);
    if (back) {
        double err = 0;
        for (int64_t i = 0; i < 32 * 32 * 3; i++)
            err += fabs(th_at(back, i) - th_at(smooth, i));
        CHECK_MSG(err / (32 * 32 * 3) < 3, "JPEG mean error %g", err / (32 * 32 * 3));
    }
    /* Float values outside [0, 1] are clamped. */
    cn_tensor *wild = cn_full(CN_F32, CN_SHAPE(2, 2), 3.0);
    cn_set(wild, (int64_t[]){0, 0}, -1);
    CHECK(cn_save_image(io_path("w.png"), wild, CN_IMAGE_HWC, 0) == CN_OK);
    back = cn_load_image(io_path("w.png"), 0, CN_IMAGE_HWC, CN_U8);
    CHECK(back && th_at(back, 0) == 0 && th_at(back, 1) == 255);

    /* Errors. */
    CHECK_ERROR(cn_load_image(io_path("none.png"), 0, CN_IMAGE_HWC, CN_U8), "cannot open");
    write_text("bad.png", "\x89PNG\r\n\x1a\n garbage garbage");
    CHECK_ERROR(cn_load_image(io_path("bad.png"), 0, CN_IMAGE_HWC, CN_U8), "cannot decode");
    CHECK(strstr(cn_last_error(), "bad.png"));
    CHECK_ERROR(cn_load_image(io_path("py3.png"), 5, CN_IMAGE_HWC, CN_U8), "channels is 5");
    CHECK_ERROR(cn_load_image(io_path("py3.png"), 0, CN_IMAGE_HWC, CN_I32), "not supported");
    CHECK_STATUS_ERROR(cn_save_image(io_path("x.gif"), g, CN_IMAGE_HWC, 0),
                       "unknown image extension");
    CHECK_STATUS_ERROR(
        cn_save_image(io_path("x.png"), cn_zeros(CN_U8, CN_SHAPE(2, 2, 5)), CN_IMAGE_HWC, 0),
        "1 to 4 channels");
    CHECK_STATUS_ERROR(
        cn_save_image(io_path("x.png"), cn_zeros(CN_I64, CN_SHAPE(2, 2)), CN_IMAGE_HWC, 0),
        "neither u8 nor float");
    CHECK_STATUS_ERROR(cn_save_image(io_path("x.jpg"), g, CN_IMAGE_HWC, 101), "jpeg_quality");
    CHECK(access(io_path("x.png"), F_OK) != 0);
#endif
}

int main(void) {
    io_init();
    RUN(test_idx_round_trip);
    RUN(test_idx_errors);
    RUN(test_fashion_mnist);
    RUN(test_csv);
    RUN(test_npy);
    RUN(test_images);
    io_cleanup();
    return th_summary();
}
