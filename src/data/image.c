/* Images to and from tensors through stb_image / stb_image_write (Debian's
 * libstb-dev, header-only here). Without stb every call fails clearly. */
#include "../io/fileio.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>

#ifdef CN_HAVE_STB
/* The implementations are compiled into this file only, static, so they
 * cannot clash with a program that links its own copy of stb. The headers
 * come in as system headers (CMake's SYSTEM include), which keeps their
 * warnings out, except for the static functions this file does not call:
 * GCC reports those at the end of the file. */
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wunused-function"
#endif
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image.h>
#include <stb_image_write.h>
#endif

/* The most pixels (width x height) an image may have, and the variable
 * that changes it: PIL's Image.MAX_IMAGE_PIXELS (1024^3 / 4 / 3, about 89
 * Mpixels: 256 MB as RGB u8, 1 GB as f32). docs/training.md, "Limits". */
#define CN_IMAGE_LIMIT_PIXELS 89478485u
#define CN_IMAGE_LIMIT_ENV "CN_MAX_IMAGE_PIXELS"

static int check_layout(const char *fn, cn_image_layout layout) {
    if (layout != CN_IMAGE_HWC && layout != CN_IMAGE_CHW)
        return cn_failc(CN_EINVAL, "%s: layout %d is neither CN_IMAGE_HWC nor CN_IMAGE_CHW", fn,
                        (int)layout);
    return CN_OK;
}

#ifdef CN_HAVE_STB
/* Whether f (at its start) is a binary PNM, P5 or P6; the position is kept. */
static bool is_pnm(FILE *f) {
    long pos = ftell(f);
    unsigned char m[2] = {0, 0};
    bool r = fread(m, 1, 2, f) == 2 && m[0] == 'P' && (m[1] == '5' || m[1] == '6');
    if (pos < 0 || fseek(f, pos, SEEK_SET) != 0) return false;
    return r;
}

/* stb_image 2.27 decodes a scan with whatever Huffman table memory holds
 * when no DHT segment defined the one the scan names: uninitialised tables
 * send its decoder past its arrays (found by fuzz_image; 2.28 checks).
 * This walks a JPEG's segments (f at its start; the position is kept) and
 * gives NULL, or what is wrong: a scan naming a table not defined before it
 * (a progressive scan needs only the DC tables for its first coefficient,
 * only the AC tables for the others). */
static const char *jpeg_tables_missing(FILE *f) {
    long pos = ftell(f);
    if (pos < 0) return "cannot seek in the file";
    const char *bad = NULL;
    bool defined[2][4] = {{false}}, progressive = false;
    int c = fgetc(f), d = fgetc(f);
    if (c != 0xFF || d != 0xD8) goto done; /* not a JPEG: nothing to check */
    for (;;) {
        c = fgetc(f);
        if (c == EOF) break;
        if (c != 0xFF) continue; /* entropy-coded data: skipped */
        int m = fgetc(f);
        while (m == 0xFF) m = fgetc(f); /* fill bytes */
        if (m == EOF || m == 0xD9) break;
        if (m == 0x00 || m == 0x01 || (m >= 0xD0 && m <= 0xD7)) continue; /* stuffing, TEM, RSTn */
        int hi = fgetc(f), lo = fgetc(f);
        if (lo == EOF) break;
        long len = (long)hi << 8 | lo;
        if (len < 2) break; /* stb refuses it */
        len -= 2;
        if (m == 0xC2) progressive = true;
        if (m == 0xC4) { /* DHT: tables of class (DC 0, AC 1) and id */
            while (len >= 17) {
                int tcth = fgetc(f), n = 0;
                for (int i = 0; i < 16; i++) n += fgetc(f) & 0xFF;
                len -= 17;
                if (tcth == EOF || (tcth >> 4) > 1 || (tcth & 15) > 3 || n > len) break; /* stb refuses it */
                defined[tcth >> 4][tcth & 15] = true;
                if (fseek(f, n, SEEK_CUR) != 0) goto done;
                len -= n;
            }
        } else if (m == 0xDA && len >= 1) { /* SOS: components and their tables */
            int ns = fgetc(f);
            len--;
            unsigned char comp[4][2];
            int k = 0;
            for (; k < ns && k < 4 && len >= 2; k++, len -= 2) {
                comp[k][0] = (unsigned char)fgetc(f);
                comp[k][1] = (unsigned char)fgetc(f);
            }
            int ss = len >= 1 ? fgetc(f) : 0;
            len -= len >= 1;
            for (int i = 0; i < k; i++) {
                int td = comp[i][1] >> 4, ta = comp[i][1] & 15;
                bool dc = !progressive || ss == 0, ac = !progressive || ss != 0;
                if ((dc && (td > 3 || !defined[0][td])) || (ac && (ta > 3 || !defined[1][ta]))) {
                    bad = "a scan uses a Huffman table that no DHT segment defined before it";
                    goto done;
                }
            }
        }
        if (len > 0 && fseek(f, len, SEEK_CUR) != 0) break;
    }
done:
    if (fseek(f, pos, SEEK_SET) != 0 && !bad) bad = "cannot seek in the file";
    return bad;
}

/* n pixels of `from` channels to `to` channels, as stb_image converts
 * (grey is (77 r + 150 g + 29 b) >> 8, a missing alpha is 255). Frees px;
 * NULL when out of memory. */
static unsigned char *convert_channels(unsigned char *px, int from, int to, size_t n) {
    unsigned char *out = malloc(n * (size_t)to);
    if (!out) {
        stbi_image_free(px);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        const unsigned char *s = px + i * (size_t)from;
        unsigned char *d = out + i * (size_t)to;
        bool grey = from < 3;
        unsigned char r = s[0], g = grey ? s[0] : s[1], b = grey ? s[0] : s[2];
        unsigned char a = from == 2 ? s[1] : from == 4 ? s[3] : 255;
        unsigned char y = grey ? s[0] : (unsigned char)((r * 77 + g * 150 + b * 29) >> 8);
        switch (to) {
        case 1: d[0] = y; break;
        case 2: d[0] = y, d[1] = a; break;
        case 3: d[0] = r, d[1] = g, d[2] = b; break;
        default: d[0] = r, d[1] = g, d[2] = b, d[3] = a; break;
        }
    }
    stbi_image_free(px);
    return out;
}
#endif

cn_tensor *cn_load_image(const char *path, int channels, cn_image_layout layout, cn_dtype dt) {
    static const char fn[] = "load_image";
    if (!path) return cn_fail("%s: path is NULL", fn);
    if (channels < 0 || channels > 4)
        return cn_fail("%s: channels is %d; it must be 0 (as in the file) or 1 to 4", fn, channels);
    if (check_layout(fn, layout) != CN_OK) return NULL;
    if (dt != CN_U8 && dt != CN_F32)
        return cn_fail("%s: dtype %s is not supported (u8 or f32)", fn, cn_dtype_name(dt));
#ifndef CN_HAVE_STB
    return cn_fail("%s: cannot read '%s': Chutney was built without stb (install libstb-dev and "
                   "reconfigure)",
                   fn, path);
#else
    FILE *f;
    if (cn_fopen_regular(path, fn, &f, NULL) != CN_OK) return NULL;
    /* The size from the header, before decoding: a few KB of PNG can
     * claim gigapixels (PIL's decompression-bomb limit, the same default). */
    uint64_t max_px;
    if (cn_env_limit(CN_IMAGE_LIMIT_ENV, CN_IMAGE_LIMIT_PIXELS, &max_px, fn) != CN_OK) {
        fclose(f);
        return NULL;
    }
    int w = 0, h = 0, c = 0;
    if (!stbi_info_from_file(f, &w, &h, &c)) {
        fclose(f);
        return cn_fail("%s: cannot decode '%s': %s", fn, path,
                       stbi_failure_reason() ? stbi_failure_reason() : "unknown format");
    }
    if ((uint64_t)w * (uint64_t)h > max_px) {
        fclose(f);
        return cn_fail("%s: '%s' is %d x %d = %llu pixels, more than the limit of %llu (set %s "
                       "to raise it, 0 for no limit)",
                       fn, path, w, h, (unsigned long long)w * (unsigned long long)h,
                       (unsigned long long)max_px, CN_IMAGE_LIMIT_ENV);
    }
    /* stb_image 2.27 converts a 16-bit PNM's channels as if its samples
     * were bytes, then reads the result as 16-bit: past the end of its
     * buffer (found by fuzz_image). Such a file is decoded with its own
     * channels and converted here. */
    const char *bad = jpeg_tables_missing(f);
    if (bad) {
        fclose(f);
        return cn_fail("%s: cannot decode '%s': corrupt JPEG: %s", fn, path, bad);
    }
    int req = channels;
    if (channels && channels != c && stbi_is_16_bit_from_file(f) && is_pnm(f)) req = 0;
    unsigned char *px = stbi_load_from_file(f, &w, &h, &c, req);
    fclose(f);
    if (!px)
        return cn_fail("%s: cannot decode '%s': %s", fn, path,
                       stbi_failure_reason() ? stbi_failure_reason() : "unknown format");
    if (req != channels && !(px = convert_channels(px, c, channels, (size_t)w * (size_t)h)))
        return cn_fail("%s: out of memory converting '%s' to %d channels", fn, path, channels);
    int ch = channels ? channels : c;
    int64_t shape[3];
    if (layout == CN_IMAGE_HWC)
        shape[0] = h, shape[1] = w, shape[2] = ch;
    else
        shape[0] = ch, shape[1] = h, shape[2] = w;
    cn_tensor *t = cn_t_empty(dt, 3, shape);
    if (!t) {
        stbi_image_free(px);
        return NULL;
    }
    size_t hw = (size_t)w * (size_t)h;
    for (size_t p = 0; p < hw; p++)
        for (int k = 0; k < ch; k++) {
            size_t o = layout == CN_IMAGE_HWC ? p * (size_t)ch + (size_t)k : (size_t)k * hw + p;
            unsigned char v = px[p * (size_t)ch + (size_t)k];
            if (dt == CN_U8)
                ((uint8_t *)t->storage->data)[o] = v;
            else
                ((float *)t->storage->data)[o] = (float)v / 255.0f;
        }
    stbi_image_free(px);
    return cn_scope_add(t);
#endif
}

#ifdef CN_HAVE_STB
typedef struct write_ctx {
    FILE *f;
    bool failed;
} write_ctx;

static void write_fn(void *ctx, void *data, int size) {
    write_ctx *w = ctx;
    if (size > 0 && fwrite(data, 1, (size_t)size, w->f) != (size_t)size) w->failed = true;
}
#endif

int cn_save_image(const char *path, const cn_tensor *img, cn_image_layout layout,
                  int jpeg_quality) {
    static const char fn[] = "save_image";
    if (!img) return CN_EINVAL;
    if (!path) return cn_failc(CN_EINVAL, "%s: path is NULL", fn);
    if (check_layout(fn, layout) != CN_OK) return CN_EINVAL;
    if (!img->storage)
        return cn_failc(CN_EINVAL, "%s: the tensor is symbolic (a static graph value)", fn);
    cn_dtype dt = (cn_dtype)img->dtype;
    char b[160];
    if (dt != CN_U8 && !cn_dtype_is_float(dt))
        return cn_failc(CN_EINVAL, "%s: %s %s is neither u8 nor float; cast it first", fn,
                        cn_dtype_name(dt), cn_fmt_shape(b, sizeof b, img->ndim, img->shape));
    int64_t h, w, c;
    if (img->ndim == 2)
        h = img->shape[0], w = img->shape[1], c = 1;
    else if (img->ndim == 3 && layout == CN_IMAGE_HWC)
        h = img->shape[0], w = img->shape[1], c = img->shape[2];
    else if (img->ndim == 3)
        c = img->shape[0], h = img->shape[1], w = img->shape[2];
    else
        return cn_failc(CN_EINVAL, "%s: an image is [H, W] or rank 3 with channels, not %s", fn,
                        cn_fmt_shape(b, sizeof b, img->ndim, img->shape));
    if (c < 1 || c > 4 || h < 1 || w < 1 || h > (1 << 24) || w > (1 << 24) || h * w * c > INT_MAX)
        return cn_failc(CN_EINVAL,
                        "%s: %s in %s layout is not an image of 1 to 4 channels and a positive, "
                        "not huge, size",
                        fn, cn_fmt_shape(b, sizeof b, img->ndim, img->shape),
                        layout == CN_IMAGE_HWC ? "HWC" : "CHW");
    int kind = cn_has_ext(path, ".png")                                ? 0
               : cn_has_ext(path, ".jpg") || cn_has_ext(path, ".jpeg") ? 1
               : cn_has_ext(path, ".bmp")                              ? 2
                                                                       : -1;
    if (kind < 0)
        return cn_failc(CN_EINVAL, "%s: '%s': unknown image extension (.png, .jpg, .jpeg, .bmp)",
                        fn, path);
    if (jpeg_quality < 0 || jpeg_quality > 100)
        return cn_failc(CN_EINVAL, "%s: jpeg_quality %d is not in 1..100 (0: default)", fn,
                        jpeg_quality);
#ifndef CN_HAVE_STB
    return cn_failc(CN_EUNSUPPORTED,
                    "%s: cannot write '%s': Chutney was built without stb (install libstb-dev and "
                    "reconfigure)",
                    fn, path);
#else
    cn_tensor *src = cn_t_host_contiguous((cn_tensor *)img);
    if (!src) return CN_ENOMEM;
    size_t hw = (size_t)(h * w), n = hw * (size_t)c;
    unsigned char *px = malloc(n);
    if (!px) {
        cn_release(src);
        return cn_failc(CN_ENOMEM, "%s: out of memory", fn);
    }
    const void *sp = cn_t_ptr(src);
    bool chw = img->ndim == 3 && layout == CN_IMAGE_CHW;
    for (size_t p = 0; p < hw; p++)
        for (int64_t k = 0; k < c; k++) {
            size_t i = chw ? (size_t)k * hw + p : p * (size_t)c + (size_t)k;
            unsigned char v;
            if (dt == CN_U8) {
                v = ((const uint8_t *)sp)[i];
            } else {
                double x = cn_load_f64(sp, dt, (int64_t)i) * 255.0;
                v = isnan(x) ? 0 : x <= 0 ? 0 : x >= 255 ? 255 : (unsigned char)lround(x);
            }
            px[p * (size_t)c + (size_t)k] = v;
        }
    cn_release(src);
    cn_afile af;
    int status = cn_afile_open(&af, path, fn);
    if (status != CN_OK) {
        free(px);
        return status;
    }
    write_ctx ctx = {af.f, false};
    int ok;
    if (kind == 0)
        ok = stbi_write_png_to_func(write_fn, &ctx, (int)w, (int)h, (int)c, px, (int)(w * c));
    else if (kind == 1)
        ok = stbi_write_jpg_to_func(write_fn, &ctx, (int)w, (int)h, (int)c, px,
                                    jpeg_quality ? jpeg_quality : 90);
    else
        ok = stbi_write_bmp_to_func(write_fn, &ctx, (int)w, (int)h, (int)c, px);
    free(px);
    if (!ok || ctx.failed) {
        char eb[128];
        int err = errno;
        cn_afile_abort(&af);
        return cn_failc(CN_EIO, "%s: writing '%s' failed: %s", fn, path,
                        ctx.failed ? cn_errno_str(err, eb, sizeof eb) : "the encoder failed");
    }
    return cn_afile_commit(&af, fn);
#endif
}
