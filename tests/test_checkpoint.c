/* safetensors checkpoints: round trips of every dtype and layout, files read
 * and written by an independent NumPy implementation of the format, loading
 * into existing tensors with every kind of mismatch, truncated and corrupt
 * files, atomic saves under kill -9, and the JSON reader on malformed input. */
#include "io_util.h"

#include "io/json.h" /* the header parser, tested directly */

#include <signal.h>
#include <sys/wait.h>
#include <time.h>

/* The value of element i of test tensor k (the Python scripts below compute
 * the same). */
static double val(int k, int64_t i) {
    switch (k) {
    case 0: return i * 0.37 - 3.5;          /* f32 */
    case 1: return i * 1.25e-3 - 7;         /* f64 */
    case 2: return (double)(i - 10) * 0.25; /* f16, exact */
    case 3: return (double)(i - 5) * 0.5;   /* bf16, exact */
    case 4: return (double)(i * 7919 - 100000);
    case 5: return (double)(i * 1000000007LL * 1000 - 5); /* beyond 2^32 */
    case 6: return (double)((i * 37) % 256);
    case 7: return (double)(i % 3 == 0);
    default: return 0;
    }
}

#define NT 11
static const char *names[NT] = {"w.f32",
                                "b.f64",
                                "h.f16",
                                "g.bf16",
                                "i.i32",
                                "l.i64",
                                "u.u8",
                                "m.bool",
                                "s.scalar",
                                "e.empty",
                                "\xc3\xbcn\xc3\xaf/\"q\"\\"};

/* Builds the test tensors (in the current scope). */
static void make_tensors(cn_tensor **t) {
    /* f32 [3, 4] as a transposed view of a [4, 3] tensor */
    cn_tensor *base = cn_zeros(CN_F32, CN_SHAPE(4, 3));
    t[0] = cn_transpose(base, 0, 1);
    for (int64_t i = 0; i < 12; i++)
        cn_set(t[0], (int64_t[]){i / 4, i % 4}, val(0, i));
    t[1] = cn_arange(0, 5, 1, CN_F64);
    for (int64_t i = 0; i < 5; i++)
        cn_set(t[1], &i, val(1, i));
    t[2] = cn_zeros(CN_F16, CN_SHAPE(2, 3));
    for (int64_t i = 0; i < 6; i++)
        cn_set(t[2], (int64_t[]){i / 3, i % 3}, val(2, i));
    t[3] = cn_zeros(CN_BF16, CN_SHAPE(7));
    for (int64_t i = 0; i < 7; i++)
        cn_set(t[3], &i, val(3, i));
    t[4] = cn_zeros(CN_I32, CN_SHAPE(2, 2, 2));
    for (int64_t i = 0; i < 8; i++)
        cn_set(t[4], (int64_t[]){i / 4, (i / 2) % 2, i % 2}, val(4, i));
    int64_t l[3];
    for (int64_t i = 0; i < 3; i++)
        l[i] = i * 1000000007LL * 1000 - 5;
    t[5] = cn_from_data(CN_I64, CN_SHAPE(3), l);
    t[6] = cn_zeros(CN_U8, CN_SHAPE(10));
    for (int64_t i = 0; i < 10; i++)
        cn_set(t[6], &i, val(6, i));
    t[7] = cn_zeros(CN_BOOL, CN_SHAPE(4));
    for (int64_t i = 0; i < 4; i++)
        cn_set(t[7], &i, val(7, i));
    t[8] = cn_scalar(CN_F32, 42.5);
    t[9] = cn_zeros(CN_F32, CN_SHAPE(0, 5));
    t[10] = cn_full(CN_F32, CN_SHAPE(1), -1.5);
}

static const char *mkeys[2] = {"format", "note"};
static const char *mvals[2] = {"pt", "line1\nline2 \"quoted\" \xc3\xbcn\xc3\xaf \\ tab\t"};

static void test_round_trip(void) {
    cn_tensor *t[NT];
    make_tensors(t);
    const char *p = io_path("rt.safetensors");
    CHECK(cn_save_safetensors(p, names, t, NT, mkeys, mvals, 2) == CN_OK);
    cn_checkpoint *c = cn_load_safetensors(p);
    CHECK(c != NULL);
    if (!c) return;
    CHECK_EQ_INT(cn_checkpoint_count(c), NT);
    for (int i = 0; i < NT && i < cn_checkpoint_count(c); i++) {
        CHECK_MSG(strcmp(cn_checkpoint_name(c, i), names[i]) == 0, "name %d: %s", i,
                  cn_checkpoint_name(c, i));
        cn_tensor *x = cn_checkpoint_tensor(c, i);
        CHECK(cn_tensor_dtype(x) == cn_tensor_dtype(t[i]));
        CHECK_MSG(cn_equal(x, t[i]), "tensor %s differs", names[i]);
        CHECK(strcmp(cn_get_name(x), names[i]) == 0);
    }
    CHECK(cn_checkpoint_find(c, "h.f16") == cn_checkpoint_tensor(c, 2));
    CHECK_ERROR(cn_checkpoint_find(c, "nope"), "no tensor named 'nope'");
    CHECK_ERROR(cn_checkpoint_tensor(c, NT), "out of range");
    CHECK_EQ_INT(cn_checkpoint_metadata_count(c), 2);
    CHECK(strcmp(cn_checkpoint_metadata(c, "format"), "pt") == 0);
    CHECK(strcmp(cn_checkpoint_metadata(c, "note"), mvals[1]) == 0);
    CHECK(strcmp(cn_checkpoint_metadata_key(c, 1), "note") == 0);
    CHECK(cn_checkpoint_metadata(c, "absent") == NULL);
    /* The checkpoint owns its tensors; a retained one outlives it. */
    cn_tensor *keep = cn_retain(cn_checkpoint_tensor(c, 1));
    cn_checkpoint_free(c);
    CHECK(cn_equal(keep, t[1]));
    cn_release(keep);

    /* The data starts 8-byte aligned, as the reference writer makes it. */
    size_t n;
    unsigned char *b = io_read(p, &n);
    CHECK(b && n > 8);
    if (b) {
        uint64_t hl = 0;
        for (int i = 0; i < 8; i++)
            hl |= (uint64_t)b[i] << (8 * i);
        CHECK_EQ_INT(hl % 8, 0);
        free(b);
    }

    /* Names from the tensors themselves. */
    cn_tensor *a = cn_ones(CN_F32, CN_SHAPE(2)), *bb = cn_zeros(CN_I64, CN_SHAPE(3));
    cn_set_name(a, "alpha");
    cn_set_name(bb, "beta");
    cn_tensor *ab[2] = {a, bb};
    CHECK(cn_save_safetensors(io_path("named.safetensors"), NULL, ab, 2, NULL, NULL, 0) == CN_OK);
    c = cn_load_safetensors(io_path("named.safetensors"));
    CHECK(c && cn_checkpoint_count(c) == 2 && cn_checkpoint_metadata_count(c) == 0);
    if (c) {
        CHECK(cn_equal(cn_checkpoint_find(c, "beta"), bb));
        cn_checkpoint_free(c);
    }
    /* An empty checkpoint. */
    CHECK(cn_save_safetensors(io_path("empty.safetensors"), NULL, NULL, 0, NULL, NULL, 0) == CN_OK);
    c = cn_load_safetensors(io_path("empty.safetensors"));
    CHECK(c && cn_checkpoint_count(c) == 0);
    cn_checkpoint_free(c);
}

/* An independent reader: struct + json + np.frombuffer, checking every
 * tensor against the formula and the metadata. */
static const char *py_reader =
    "import sys, json, struct, numpy as np\n"
    "d = sys.argv[1]\n"
    "raw = open(d + '/rt.safetensors', 'rb').read()\n"
    "n = struct.unpack('<Q', raw[:8])[0]\n"
    "hdr = json.loads(raw[8:8 + n].decode('utf-8'))\n"
    "data = raw[8 + n:]\n"
    "dt = {'F32': '<f4', 'F64': '<f8', 'F16': '<f2', 'BF16': '<u2', 'I32': '<i4', 'I64': '<i8',\n"
    "      'U8': 'u1', 'BOOL': '?'}\n"
    "def val(k, i):\n"
    "    i = np.arange(i, dtype=np.int64)\n"
    "    return [i * 0.37 - 3.5, i * 1.25e-3 - 7, (i - 10) * 0.25, (i - 5) * 0.5, i * 7919 - "
    "100000,\n"
    "            i * 1000000007 * 1000 - 5, (i * 37) % 256, i % 3 == 0][k]\n"
    "exp = {'w.f32': (0, [3, 4], np.float32), 'b.f64': (1, [5], np.float64),\n"
    "       'h.f16': (2, [2, 3], np.float16), 'g.bf16': (3, [7], None),\n"
    "       'i.i32': (4, [2, 2, 2], np.int32), 'l.i64': (5, [3], np.int64),\n"
    "       'u.u8': (6, [10], np.uint8), 'm.bool': (7, [4], np.bool_)}\n"
    "meta = hdr.pop('__metadata__')\n"
    "# the checksum, recomputed bit by bit from its documented definition\n"
    "def crc32c(c, b):\n"
    "    c ^= 0xFFFFFFFF\n"
    "    for x in b:\n"
    "        c ^= x\n"
    "        for _ in range(8):\n"
    "            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1\n"
    "    return c ^ 0xFFFFFFFF\n"
    "saved = meta.pop('chutney.crc32c', None)\n"
    "c = 0\n"
    "for k, v in meta.items():\n"
    "    c = crc32c(c, k.encode() + b'\\0' + v.encode() + b'\\0')\n"
    "for k, e in hdr.items():\n"
    "    c = crc32c(c, k.encode() + b'\\0' + e['dtype'].encode() + b'\\0')\n"
    "    v = [len(e['shape'])] + e['shape'] + e['data_offsets']\n"
    "    c = crc32c(c, struct.pack('<%dQ' % len(v), *v))\n"
    "c = crc32c(c, data)\n"
    "print('crc', 'OK' if saved == '%08x' % c else 'BAD %r %08x' % (saved, c))\n"
    "print('meta', 'OK' if meta == {'format': 'pt', 'note': 'line1\\nline2 \"quoted\" "
    "\\u00fcn\\u00ef \\\\ tab\\t'} else 'BAD %r' % meta)\n"
    "print('count', 'OK' if len(hdr) == 11 else 'BAD')\n"
    "for name, e in hdr.items():\n"
    "    a, b = e['data_offsets']\n"
    "    arr = np.frombuffer(data[a:b], dtype=dt[e['dtype']]).reshape(e['shape'])\n"
    "    if name in exp:\n"
    "        k, shape, t = exp[name]\n"
    "        v = val(k, int(np.prod(shape)))\n"
    "        if t is None:\n"
    "            want = (v.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)\n"
    "        else:\n"
    "            want = v.astype(t)\n"
    "        ok = list(arr.shape) == shape and np.array_equal(arr, want.reshape(shape))\n"
    "    elif name == 's.scalar':\n"
    "        ok = arr.shape == () and arr.dtype == np.float32 and arr == 42.5\n"
    "    elif name == 'e.empty':\n"
    "        ok = arr.shape == (0, 5) and a == b\n"
    "    else:\n"
    "        ok = name == '\\u00fcn\\u00ef/\"q\"\\\\' and arr.tolist() == [-1.5]\n"
    "    print(name.encode('unicode_escape').decode(), 'OK' if ok else 'BAD')\n"
    "# the data is covered exactly, without holes\n"
    "spans = sorted(tuple(e['data_offsets']) for e in hdr.values())\n"
    "pos = 0\n"
    "for a, b in spans:\n"
    "    pos = b if a == pos else -1\n"
    "print('layout', 'OK' if pos == len(data) else 'BAD')\n";

/* An independent writer: keys sorted, a header padded differently. */
static const char *py_writer =
    "import sys, json, struct, numpy as np\n"
    "d = sys.argv[1]\n"
    "ts = {'a': np.arange(6, dtype=np.float32).reshape(2, 3) / 4,\n"
    "      'z': np.array([-3, 2**40, 7, 0], dtype=np.int64),\n"
    "      'h': np.array([0.5, -2, 65504], dtype=np.float16),\n"
    "      'q': np.array([[True, False]], dtype=np.bool_)}\n"
    "hdr, blob = {}, b''\n"
    "for k in sorted(ts):\n"
    "    b = ts[k].tobytes()\n"
    "    dt = {'float32': 'F32', 'int64': 'I64', 'float16': 'F16', 'bool': "
    "'BOOL'}[str(ts[k].dtype)]\n"
    "    hdr[k] = {'dtype': dt, 'shape': list(ts[k].shape), 'data_offsets': [len(blob), len(blob) "
    "+ len(b)]}\n"
    "    blob += b\n"
    "hdr['__metadata__'] = {'epoch': '12'}\n"
    "h = json.dumps(hdr, indent=1).encode() + b'   '\n"
    "open(d + '/py.safetensors', 'wb').write(struct.pack('<Q', len(h)) + h + blob)\n"
    "print('written')\n";

static void test_numpy_interop(void) {
    CHECK_MSG(io_have_numpy(), "NumPy is missing (" PYTHON " -c 'import numpy' failed)");
    if (!io_have_numpy()) return;
    cn_tensor *t[NT];
    make_tensors(t);
    CHECK(cn_save_safetensors(io_path("rt.safetensors"), names, t, NT, mkeys, mvals, 2) == CN_OK);
    char *out = io_python("st_reader", py_reader);
    CHECK(out != NULL);
    if (out) {
        int oks = 0;
        for (char *s = out; (s = strstr(s, " OK")); s++)
            oks++;
        CHECK_MSG(oks == NT + 4 && !strstr(out, "BAD"), "the NumPy reader says:\n%s", out);
        free(out);
    }
    out = io_python("st_writer", py_writer);
    CHECK(out && strstr(out, "written"));
    free(out);
    cn_checkpoint *c = cn_load_safetensors(io_path("py.safetensors"));
    CHECK(c != NULL);
    if (!c) return;
    CHECK_EQ_INT(cn_checkpoint_count(c), 4);
    cn_tensor *a = cn_checkpoint_find(c, "a");
    CHECK_SHAPE(a, 2, 3);
    for (int64_t i = 0; i < 6 && a; i++)
        CHECK_CLOSE(th_at(a, i), i / 4.0, 0, 0);
    cn_tensor *z = cn_checkpoint_find(c, "z");
    CHECK(z && cn_tensor_dtype(z) == CN_I64);
    if (z) {
        CHECK_EQ_INT(cn_get_int(z, (int64_t[]){1}), (int64_t)1 << 40);
        CHECK_EQ_INT(cn_get_int(z, (int64_t[]){0}), -3);
    }
    cn_tensor *h = cn_checkpoint_find(c, "h");
    CHECK(h && cn_tensor_dtype(h) == CN_F16);
    if (h) CHECK_CLOSE(th_at(h, 2), 65504, 0, 0);
    cn_tensor *q = cn_checkpoint_find(c, "q");
    CHECK_SHAPE(q, 1, 2);
    if (q) CHECK(th_at(q, 0) == 1 && th_at(q, 1) == 0);
    CHECK(cn_checkpoint_metadata(c, "epoch") &&
          strcmp(cn_checkpoint_metadata(c, "epoch"), "12") == 0);
    cn_checkpoint_free(c);
}

static void test_load_into(void) {
    const char *p = io_path("into.safetensors");
    cn_tensor *w = cn_rand(CN_F32, CN_SHAPE(3, 4)), *b = cn_rand(CN_F64, CN_SHAPE(4));
    const char *nm[2] = {"w", "b"};
    cn_tensor *src[2] = {w, b};
    CHECK(cn_save_safetensors(p, nm, src, 2, NULL, NULL, 0) == CN_OK);

    /* Into a transposed view (non-contiguous) and a parameter requiring a
     * gradient. */
    cn_tensor *wb = cn_zeros(CN_F32, CN_SHAPE(4, 3));
    cn_tensor *wv = cn_transpose(wb, 0, 1);
    cn_tensor *bd = cn_zeros(CN_F64, CN_SHAPE(4));
    cn_set_requires_grad(bd, true);
    cn_tensor *dst[2] = {wv, bd};
    CHECK(cn_load_safetensors_into(p, nm, dst, 2, 0) == CN_OK);
    CHECK(cn_equal(wv, w));
    CHECK(cn_equal(bd, b));

    /* Each kind of mismatch, and nothing written when any is found. */
    cn_tensor *w_bad = cn_zeros(CN_F32, CN_SHAPE(4, 3));
    cn_tensor *b_f32 = cn_zeros(CN_F32, CN_SHAPE(4));
    cn_tensor *extra = cn_zeros(CN_F32, CN_SHAPE(1));
    cn_tensor *d1[2] = {w_bad, b_f32};
    CHECK_STATUS_ERROR(cn_load_safetensors_into(p, nm, d1, 2, 0),
                       "'w' has shape [3, 4] in the file but [4, 3] here");
    CHECK(strstr(cn_last_error(), "'b' is f64 in the file but f32 here"));
    CHECK(strstr(cn_last_error(), "into.safetensors"));
    CHECK(th_at(b_f32, 0) == 0);

    cn_tensor *d2[1] = {wv};
    CHECK_STATUS_ERROR(cn_load_safetensors_into(p, (const char *[]){"w"}, d2, 1, 0),
                       "unexpected 'b'");
    cn_tensor *d3[3] = {wv, bd, extra};
    CHECK_STATUS_ERROR(cn_load_safetensors_into(p, (const char *[]){"w", "b", "c"}, d3, 3, 0),
                       "missing 'c'");
    CHECK(!strstr(cn_last_error(), "unexpected"));
    /* Allowed by the flags. */
    cn_fill_(wb, 0);
    CHECK(cn_load_safetensors_into(p, (const char *[]){"w"}, d2, 1, CN_CKPT_ALLOW_UNEXPECTED) ==
          CN_OK);
    CHECK(cn_equal(wv, w));
    CHECK(cn_load_safetensors_into(p, (const char *[]){"w", "b", "c"}, d3, 3,
                                   CN_CKPT_ALLOW_MISSING) == CN_OK);
    CHECK(th_at(extra, 0) == 0);
    /* Names from the tensors. */
    cn_set_name(wv, "w");
    cn_set_name(bd, "b");
    CHECK(cn_load_safetensors_into(p, NULL, dst, 2, 0) == CN_OK);
    /* Argument errors. */
    CHECK_STATUS_ERROR(cn_load_safetensors_into(p, (const char *[]){"w", "w"}, dst, 2, 0),
                       "given twice");
    CHECK_STATUS_ERROR(cn_load_safetensors_into(io_path("none.safetensors"), nm, dst, 2, 0),
                       "cannot open");

    /* Many problems: the message stays readable and says how many. */
    enum { M = 60 };
    cn_tensor *many[M];
    const char *mn[M];
    char nb[M][24];
    for (int i = 0; i < M; i++) {
        snprintf(nb[i], sizeof nb[i], "param_%02d", i);
        mn[i] = nb[i];
        many[i] = extra;
    }
    CHECK_STATUS_ERROR(cn_load_safetensors_into(p, mn, many, M, 0), "problems in all");
    CHECK(strstr(cn_last_error(), "62 problems"));
}

/* Saved-file surgery: the header of a valid file replaced by `json`. */
static void write_with_header(const char *path, const char *json, const void *data, size_t n) {
    size_t hl = strlen(json);
    unsigned char *b = malloc(8 + hl + n);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, json, hl);
    if (n) memcpy(b + 8 + hl, data, n);
    io_write(path, b, 8 + hl + n);
    free(b);
}

static void test_bad_files(void) {
    const char *p = io_path("good.safetensors"), *q = io_path("bad.safetensors");
    cn_tensor *w = cn_arange(0, 256, 1, CN_F32);
    CHECK(cn_save_safetensors(p, (const char *[]){"w"}, &w, 1, NULL, NULL, 0) == CN_OK);
    size_t n;
    unsigned char *good = io_read(p, &n);
    CHECK(good && n > 1024);
    if (!good) return;
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++)
        hl |= (uint64_t)good[i] << (8 * i);

    CHECK_ERROR(cn_load_safetensors(io_path("missing.safetensors")), "cannot open");
    CHECK(strstr(cn_last_error(), "missing.safetensors"));
    /* Truncated anywhere: in the length, the header, the data. */
    size_t cuts[] = {0, 5, 8, 8 + (size_t)hl / 2, 8 + (size_t)hl, n - 1};
    for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
        io_write(q, good, cuts[k]);
        cn_clear_error();
        CHECK_MSG(cn_load_safetensors(q) == NULL, "cut at %zu loaded", cuts[k]);
        CHECK_MSG(strstr(cn_last_error(), "truncated") &&
                      strstr(cn_last_error(), "bad.safetensors"),
                  "cut at %zu: %s", cuts[k], cn_last_error());
    }
    /* A truncated file given to load_into is reported the same way. */
    cn_tensor *dst = cn_zeros(CN_F32, CN_SHAPE(256));
    CHECK_STATUS_ERROR(cn_load_safetensors_into(q, (const char *[]){"w"}, &dst, 1, 0), "truncated");
    CHECK(th_at(dst, 5) == 0);
    /* An implausible header length. */
    unsigned char *bad = malloc(n);
    memcpy(bad, good, n);
    bad[6] = 0x7f;
    io_write(q, bad, n);
    CHECK_ERROR(cn_load_safetensors(q), "implausible");
    /* Bad JSON. */
    memcpy(bad, good, n);
    bad[8] = '[';
    io_write(q, bad, n);
    CHECK_ERROR(cn_load_safetensors(q), "bad JSON header");
    memcpy(bad, good, n);
    bad[8 + 3] = 0x01; /* a control character inside the first key */
    io_write(q, bad, n);
    CHECK_ERROR(cn_load_safetensors(q), "bad JSON header");
    free(bad);
    /* Well-formed JSON that is not a valid header. */
    float data[4] = {1, 2, 3, 4};
    struct {
        const char *json, *needle;
    } cases[] = {
        {"[]", "not an object"},
        {"{\"a\":{\"dtype\":\"I16\",\"shape\":[4],\"data_offsets\":[0,8]}}", "dtype I16"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,12]}}", "needs 16 bytes"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}", "truncated"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-4],\"data_offsets\":[0,16]}}", "non-negative"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[16,0]}}", "begin <= end"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":4,\"data_offsets\":[0,16]}}", "shape"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,4],\"data_offsets\":[0,16]}}",
         "at most 8"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4]}}", "data_offsets"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}",
         "appears twice"},
        {"{\"__metadata__\":{\"k\":1}}", "metadata"},
        {"{\"__metadata__\":[]}", "not an object"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,16]}}",
         "needs"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,99999999999999999999]}}",
         "data_offsets"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        write_with_header(q, cases[k].json, data, sizeof data);
        cn_clear_error();
        cn_checkpoint *c = cn_load_safetensors(q);
        CHECK_MSG(!c && strstr(cn_last_error(), cases[k].needle), "header %s: %s", cases[k].json,
                  c ? "loaded" : cn_last_error());
        cn_checkpoint_free(c);
    }
    /* Random damage to the header: an error or a valid load, never a crash
     * (ASan watches). */
    th_seed(7);
    bad = malloc(n);
    int loaded = 0;
    for (int it = 0; it < 300; it++) {
        memcpy(bad, good, n);
        int flips = (int)th_randint(1, 4);
        for (int f = 0; f < flips; f++)
            bad[8 + th_randint(0, (int64_t)hl)] = (unsigned char)th_randint(0, 256);
        io_write(q, bad, n);
        cn_checkpoint *c = cn_load_safetensors(q);
        if (c) loaded++;
        cn_checkpoint_free(c);
    }
    CHECK(loaded < 300);
    free(bad);
    free(good);
}

static void test_save_errors(void) {
    cn_tensor *a = cn_ones(CN_F32, CN_SHAPE(2)), *b = cn_ones(CN_F32, CN_SHAPE(2));
    cn_tensor *ab[2] = {a, b};
    const char *p = io_path("err.safetensors");
    CHECK_STATUS_ERROR(cn_save_safetensors(p, (const char *[]){"x", "x"}, ab, 2, NULL, NULL, 0),
                       "given twice");
    CHECK_STATUS_ERROR(cn_save_safetensors(p, NULL, ab, 2, NULL, NULL, 0), "has no name");
    CHECK_STATUS_ERROR(
        cn_save_safetensors(p, (const char *[]){"__metadata__", "y"}, ab, 2, NULL, NULL, 0),
        "__metadata__");
    CHECK_STATUS_ERROR(
        cn_save_safetensors(p, (const char *[]){"bad\xff", "y"}, ab, 2, NULL, NULL, 0),
        "not valid UTF-8");
    CHECK_STATUS_ERROR(cn_save_safetensors(io_path("no/such/dir/x.safetensors"),
                                           (const char *[]){"x", "y"}, ab, 2, NULL, NULL, 0),
                       "cannot create a temporary file");
    CHECK_STATUS_ERROR(cn_save_safetensors(p, (const char *[]){"x", "y"}, ab, 2,
                                           (const char *[]){"k"}, (const char *[]){NULL}, 1),
                       "metadata entry 0 is NULL");
    cn_tensor *ax[2] = {a, NULL};
    CHECK_STATUS_ERROR(cn_save_safetensors(p, (const char *[]){"x", "y"}, ax, 2, NULL, NULL, 0),
                       "tensor 1 is NULL");
    /* No file appeared from any of these. */
    CHECK(access(p, F_OK) != 0);
}

/* ---- atomic saves ---- */

static int count_tmp_files(const char *prefix) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -c '^%s\\.tmp\\.' ", io_dir, prefix);
    FILE *p = popen(cmd, "r");
    int n = 0;
    if (p) {
        if (fscanf(p, "%d", &n) != 1) n = 0;
        pclose(p);
    }
    return n;
}

/* The checkpoint at path is complete: every element equals its "version"
 * metadata. Returns the version, or -1. */
static int check_version(const char *path, int64_t numel) {
    cn_checkpoint *c = cn_load_safetensors(path);
    if (!c) {
        fprintf(stderr, "load failed: %s\n", cn_last_error());
        return -1;
    }
    int v = -1;
    const char *m = cn_checkpoint_metadata(c, "version");
    cn_tensor *t = cn_checkpoint_count(c) == 2 ? cn_checkpoint_find(c, "big") : NULL;
    if (m && t && cn_numel(t) == numel) {
        v = atoi(m);
        const float *d = cn_data(t);
        for (int64_t i = 0; i < numel; i++)
            if (d[i] != (float)v) {
                v = -1;
                break;
            }
    }
    cn_checkpoint_free(c);
    return v;
}

static void save_version(const char *path, cn_tensor *big, cn_tensor *small, int v) {
    float *d = cn_data(big);
    for (int64_t i = 0; i < cn_numel(big); i++)
        d[i] = (float)v;
    char vs[16];
    snprintf(vs, sizeof vs, "%d", v);
    cn_tensor *ts[2] = {big, small};
    const char *k = "version", *val = vs;
    if (cn_save_safetensors(path, (const char *[]){"big", "small"}, ts, 2, &k, &val, 1) != CN_OK)
        fprintf(stderr, "save failed: %s\n", cn_last_error());
}

static void test_atomic_kill(void) {
    const char *p = io_path("atomic.safetensors");
    const int64_t numel = 1 << 21; /* 8 MB: the kill lands mid-write often */
    cn_tensor *big = cn_zeros(CN_F32, 1, &numel), *small = cn_ones(CN_I64, CN_SHAPE(3));
    save_version(p, big, small, 0);
    CHECK_EQ_INT(check_version(p, numel), 0);

    /* A stale temporary file from an earlier crash changes nothing. */
    char stale[600];
    snprintf(stale, sizeof stale, "%s.tmp.1.2.3", p);
    io_write(stale, "garbage", 7);
    CHECK_EQ_INT(check_version(p, numel), 0);

    srand((unsigned)time(NULL));
    int last = 0, mid_write = 0;
    for (int round = 0; round < 6; round++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            /* Keep writing new versions until killed. */
            for (int v = last + 1;; v++)
                save_version(p, big, small, v);
        }
        CHECK(pid > 0);
        if (pid < 0) break;
        struct timespec ts = {0, (long)(1 + rand() % 40) * 1000000L};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int st;
        waitpid(pid, &st, 0);
        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        /* Whatever the moment of the kill, a complete version is there. */
        int v = check_version(p, numel);
        CHECK_MSG(v >= last, "round %d: version %d after %d (%s)", round, v, last, cn_last_error());
        if (v >= 0) last = v;
        /* The child's unfinished temporary file is left behind. */
        mid_write += count_tmp_files("atomic.safetensors") > 1;
        char cmd[700];
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && for f in atomic.safetensors.tmp.*; do [ \"$f\" = "
                 "atomic.safetensors.tmp.1.2.3 ] || rm -f \"$f\"; done",
                 io_dir);
        if (system(cmd) != 0) fprintf(stderr, "cleanup failed\n");
    }
    fprintf(stderr, "    (%d of 6 kills landed mid-write; last version %d)\n", mid_write, last);
    /* The stale file was not touched, and a save still works. */
    size_t n;
    unsigned char *b = io_read(stale, &n);
    CHECK(b && n == 7 && memcmp(b, "garbage", 7) == 0);
    free(b);
    save_version(p, big, small, 1000);
    CHECK_EQ_INT(check_version(p, numel), 1000);
    CHECK_EQ_INT(count_tmp_files("atomic.safetensors"), 1);
}

/* ---- the JSON reader ---- */

static void test_json(void) {
    char err[256];
    const char *ok =
        " {\"a\": [1, -2, 3.5e2, true, false, null, \"x\\u00e9\\ud83d\\ude00\\n\"],"
        " \"b\": {}, \"c\": [], \"big\": 9223372036854775807, \"neg\": -9223372036854775808,"
        " \"over\": 18446744073709551616 } ";
    cn_json *v = cn_json_parse(ok, strlen(ok), err, sizeof err);
    CHECK_MSG(v != NULL, "%s", err);
    if (v) {
        const cn_json *a = cn_json_get(v, "a");
        CHECK(a && a->kind == CN_JSON_ARRAY && a->n == 7);
        if (a && a->n == 7) {
            CHECK(a->items[0].is_int && a->items[0].integer == 1);
            CHECK(a->items[1].is_int && a->items[1].integer == -2);
            CHECK(!a->items[2].is_int && a->items[2].number == 350);
            CHECK(a->items[3].kind == CN_JSON_BOOL && a->items[3].boolean);
            CHECK(a->items[5].kind == CN_JSON_NULL);
            CHECK(a->items[6].kind == CN_JSON_STRING &&
                  strcmp(a->items[6].str, "x\xc3\xa9\xf0\x9f\x98\x80\n") == 0);
        }
        CHECK(cn_json_get(v, "big")->is_int && cn_json_get(v, "big")->integer == INT64_MAX);
        CHECK(cn_json_get(v, "neg")->is_int && cn_json_get(v, "neg")->integer == INT64_MIN);
        CHECK(!cn_json_get(v, "over")->is_int);
        CHECK(cn_json_get(v, "b")->kind == CN_JSON_OBJECT && cn_json_get(v, "b")->n == 0);
        CHECK(cn_json_get(v, "zz") == NULL);
        cn_json_free(v);
    }
    const char *bad[] = {"",
                         "{",
                         "{\"a\":1,}",
                         "[1,]",
                         "[01]",
                         "[1.]",
                         "[-]",
                         "\"abc",
                         "\"\\x\"",
                         "\"\\ud800\"",
                         "\"\\udc00\"",
                         "\"a\x01\"",
                         "\"\xff\"",
                         "\"\xc0\xaf\"",
                         "tru",
                         "{} x",
                         "{\"a\" 1}",
                         "{1:2}",
                         "[1 2]",
                         "nul",
                         "\"\\u12\"",
                         "[1e]",
                         "\"\xed\xa0\x80\""};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        cn_json *b = cn_json_parse(bad[k], strlen(bad[k]), err, sizeof err);
        CHECK_MSG(b == NULL && err[0], "'%s' was accepted", bad[k]);
        cn_json_free(b);
    }
    /* Deep nesting is refused, not a stack overflow. */
    size_t depth = 100000;
    char *deep = malloc(2 * depth);
    memset(deep, '[', depth);
    memset(deep + depth, ']', depth);
    v = cn_json_parse(deep, 2 * depth, err, sizeof err);
    CHECK(v == NULL && strstr(err, "nested"));
    free(deep);
    /* Length-bounded: bytes after len are not read (no NUL needed). */
    v = cn_json_parse("[1]garbage", 3, err, sizeof err);
    CHECK(v && v->n == 1);
    cn_json_free(v);
    /* Writing escapes what needs escaping and refuses bad UTF-8. */
    char *buf = NULL;
    size_t len = 0, cap = 0;
    CHECK(cn_json_append_string(&buf, &len, &cap, "a\"b\\c\n\x01\xc3\xa9") == 0);
    CHECK(buf && strcmp(buf, "\"a\\\"b\\\\c\\u000a\\u0001\xc3\xa9\"") == 0);
    v = buf ? cn_json_parse(buf, len, err, sizeof err) : NULL;
    CHECK(v && v->kind == CN_JSON_STRING && strcmp(v->str, "a\"b\\c\n\x01\xc3\xa9") == 0);
    cn_json_free(v);
    CHECK(cn_json_append_string(&buf, &len, &cap, "\xe2\x82") == -1);
    free(buf);
}

/* A bit flipped anywhere after the save (data, a metadata value, a tensor's
 * name) is caught by the checksum, by both loaders, before anything is
 * written; a file without a checksum (another writer's) still loads. */
static void test_checksum(void) {
    const char *p = io_path("sum.safetensors"), *q = io_path("flipped.safetensors");
    cn_tensor *w = cn_arange(0, 300, 1, CN_F32);
    CHECK(cn_save_safetensors(p, (const char *[]){"weight"}, &w, 1, (const char *[]){"epoch"},
                              (const char *[]){"17"}, 1) == CN_OK);
    size_t n;
    unsigned char *good = io_read(p, &n);
    CHECK(good != NULL);
    if (!good) return;
    cn_checkpoint *c = cn_load_safetensors(p);
    CHECK(c && cn_checkpoint_metadata_count(c) == 1 && cn_checkpoint_metadata(c, "chutney.crc32c") == NULL);
    cn_checkpoint_free(c);
    CHECK_STATUS_ERROR(cn_save_safetensors(q, (const char *[]){"weight"}, &w, 1,
                                           (const char *[]){"chutney.crc32c"},
                                           (const char *[]){"0"}, 1),
                       "reserved");
    /* Where to flip: the last data byte, a digit of the metadata value, a
     * letter of the tensor's name (the JSON stays valid each time). */
    size_t at[3] = {n - 1, 0, 0};
    for (size_t i = 8; i + 4 < n; i++) {
        if (!at[1] && memcmp(good + i, "\"17\"", 4) == 0) at[1] = i + 2;
        if (!at[2] && memcmp(good + i, "\"weight\"", 8) == 0) at[2] = i + 3;
    }
    CHECK(at[1] && at[2]);
    for (int k = 0; k < 3; k++) {
        if (!at[k]) continue;
        good[at[k]] ^= 0x01;
        io_write(q, good, n);
        good[at[k]] ^= 0x01;
        cn_clear_error();
        CHECK_MSG(cn_load_safetensors(q) == NULL, "flip %d loaded", k);
        CHECK_MSG(strstr(cn_last_error(), "is corrupt") && strstr(cn_last_error(), "flipped"),
                  "flip %d: %s", k, cn_last_error());
        cn_tensor *dst = cn_zeros(CN_F32, CN_SHAPE(300));
        CHECK_STATUS_ERROR(cn_load_safetensors_into(q, (const char *[]){"weight"}, &dst, 1,
                                                    CN_CKPT_ALLOW_MISSING |
                                                        CN_CKPT_ALLOW_UNEXPECTED),
                           "is corrupt");
        CHECK(th_at(dst, 299) == 0);
        cn_release(dst);
    }
    free(good);
    cn_release(w);
}

int main(void) {
    io_init();
    RUN(test_round_trip);
    RUN(test_numpy_interop);
    RUN(test_load_into);
    RUN(test_bad_files);
    RUN(test_checksum);
    RUN(test_save_errors);
    RUN(test_atomic_kill);
    RUN(test_json);
    io_cleanup();
    return th_summary();
}
