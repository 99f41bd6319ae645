/* `chutney train --data` beyond Fashion-MNIST: a folder of class folders of
 * images, a CSV table, a pair of .npy files. Each becomes the same thing,
 * a training and a test split of samples and labels, plus what a
 * checkpoint must hold to read such data again the same way (input shape,
 * classes, normalisation), so that eval and predict need nothing else.
 *
 * Data sets this size are read whole, up front: decoding once costs less
 * than decoding every epoch, and the per-epoch work (augmentation) runs on
 * the loader's threads. */
#include "dataset.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* The held-out split's order is fixed, not the run's --seed: eval must
 * find the same test samples whatever seed trained the model. */
#define SPLIT_SEED 0x5eed5eedULL
#define DEFAULT_VAL_SPLIT 0.2
#define DS_MAX_CLASSES 4096

static bool is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static bool ends_with(const char *s, const char *ext) {
    size_t n = strlen(s), k = strlen(ext);
    return n >= k && !strcasecmp(s + n - k, ext);
}

static char *join(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s/%s", a, b);
    return s;
}

ds_kind cn_tool_data_kind(const char *path, const char *labels) {
    if (labels || ends_with(path, ".npy")) return DS_NPY;
    if (ends_with(path, ".csv")) return DS_CSV;
    if (!is_dir(path)) return DS_IDX; /* the IDX reader names what is missing */
    char *x = join(path, "x.npy");
    bool npy = x && is_file(x);
    free(x);
    if (npy) return DS_NPY;
    static const char *const idx[] = {"train-images-idx3-ubyte", "train-images-idx3-ubyte.gz",
                                      "t10k-images-idx3-ubyte", "t10k-images-idx3-ubyte.gz"};
    for (int i = 0; i < 4; i++) {
        char *p = join(path, idx[i]);
        bool there = p && is_file(p);
        free(p);
        if (there) return DS_IDX;
    }
    /* A folder with sub-folders is a folder of classes; anything else is
     * left to the IDX reader, whose message names the files it wants. */
    DIR *d = opendir(path);
    bool sub = false;
    for (struct dirent *e; d && !sub && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char *p = join(path, e->d_name);
        sub = p && is_dir(p);
        free(p);
    }
    if (d) closedir(d);
    return !sub ? DS_IDX : cn_tool_audio_folder(path) ? DS_AUDIO : DS_IMAGES;
}

/* ---- small helpers ---- */

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Rows of x (and y) picked by idx[0..n) as new tensors in the scope. */
static cn_tensor *pick(cn_tensor *x, const int64_t *idx, int64_t n) {
    cn_tensor *i = cn_from_data(CN_I64, CN_SHAPE(n), idx);
    return cn_contiguous(cn_index_select(x, 0, i));
}

/* Split d into a training part and a held-out fraction f (the last rows
 * of a fixed shuffle), in place of *tr and *te. */
static int holdout(cn_tensor *x, cn_tensor *y, double f, dataset *tr, dataset *te) {
    int64_t n = cn_dim(x, 0);
    int64_t nte = (int64_t)llround((double)n * f);
    if (f > 0 && nte == 0 && n > 1) nte = 1;
    if (nte >= n) {
        cn_tool_fail("--val-split %g leaves no training samples out of %lld", f, (long long)n);
        return -1;
    }
    int64_t *perm = malloc(sizeof *perm * (size_t)(n ? n : 1));
    if (!perm) {
        cn_tool_fail("out of memory");
        return -1;
    }
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    uint64_t s = SPLIT_SEED;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(splitmix(&s) % (uint64_t)(i + 1));
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    int64_t ntr = n - nte;
    tr->images = pick(x, perm, ntr);
    tr->labels = pick(y, perm, ntr);
    te->images = nte ? pick(x, perm + ntr, nte) : cn_narrow(x, 0, 0, 0);
    te->labels = nte ? pick(y, perm + ntr, nte) : cn_narrow(y, 0, 0, 0);
    free(perm);
    return tr->images && tr->labels && te->images && te->labels ? 0 : -1;
}

/* ---- images ---- */

/* px (c channels of h x w, CHW u8) as C channels of H x W: grey from
 * colour as stb converts (77 R + 150 G + 29 B) / 256, alpha dropped, each
 * output pixel the mean of the input pixels it covers (an area average;
 * it enlarges too, and is the identity at the same size). */
static void convert_resize(const uint8_t *px, int c, int64_t h, int64_t w, int C, int64_t H,
                           int64_t W, uint8_t *out) {
    for (int k = 0; k < C; k++)
        for (int64_t i = 0; i < H; i++)
            for (int64_t j = 0; j < W; j++) {
                int64_t y0 = i * h / H, y1 = ((i + 1) * h + H - 1) / H;
                int64_t x0 = j * w / W, x1 = ((j + 1) * w + W - 1) / W;
                uint32_t sum = 0;
                for (int64_t y = y0; y < y1; y++)
                    for (int64_t x = x0; x < x1; x++) {
                        size_t p = (size_t)(y * w + x), hw = (size_t)(h * w);
                        uint32_t v;
                        if (c >= 3 && C == 1)
                            v = (77u * px[p] + 150u * px[hw + p] + 29u * px[2 * hw + p]) >> 8;
                        else if (c >= 3)
                            v = px[(size_t)k * hw + p];
                        else
                            v = px[p];
                        sum += v;
                    }
                uint32_t cnt = (uint32_t)((y1 - y0) * (x1 - x0));
                out[((size_t)k * (size_t)H + (size_t)i) * (size_t)W + (size_t)j] =
                    (uint8_t)((sum + cnt / 2) / cnt);
            }
}

static bool image_ext(const char *name) {
    static const char *const ext[] = {".png", ".jpg", ".jpeg", ".bmp", ".gif",
                                      ".tga", ".pgm", ".ppm", ".pnm"};
    for (size_t i = 0; i < sizeof ext / sizeof *ext; i++)
        if (ends_with(name, ext[i])) return true;
    return false;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in dir (no dot files) that are directories (want NULL) or
 * files that want takes, sorted: a malloc'd array of malloc'd strings. -1
 * after a message. */
static void free_list(char **v, int n);

static int list_dir(const char *dir, bool (*want)(const char *name), char ***out) {
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d) {
        cn_tool_fail("cannot read the folder %s: %s", dir, strerror(errno));
        return -1;
    }
    int n = 0, cap = 0;
    char **v = NULL;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char *p = join(dir, e->d_name);
        bool take = p && (!want ? is_dir(p) : is_file(p) && want(e->d_name));
        free(p);
        if (!take) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **nv = realloc(v, sizeof *v * (size_t)cap);
            if (!nv) break;
            v = nv;
        }
        v[n++] = strdup(e->d_name);
    }
    closedir(d);
    for (int i = 0; i < n; i++)
        if (!v[i]) {
            free_list(v, n);
            cn_tool_fail("out of memory listing %s", dir);
            return -1;
        }
    if (n > 1) qsort(v, (size_t)n, sizeof *v, cmp_str);
    *out = v;
    return n;
}

static void free_list(char **v, int n) {
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

/* The files of root/CLASS/ that want takes (what: their kind, for a
 * message), for each class (test: root's folders must be among them). -1
 * after a message. */
static int collect(const char *root, bool (*want)(const char *), const char *what,
                   char **classes, int *nclasses, bool test, ds_file_set *s) {
    char **dirs;
    int nd = list_dir(root, NULL, &dirs);
    if (nd < 0) return -1;
    if (!test) {
        if (nd == 0) {
            cn_tool_fail("%s has no class folders (one folder of %s per class)", root, what);
            free_list(dirs, nd);
            return -1;
        }
        if (nd > DS_MAX_CLASSES) {
            cn_tool_fail("%s has %d class folders; at most %d are read", root, nd, DS_MAX_CLASSES);
            free_list(dirs, nd);
            return -1;
        }
        for (int i = 0; i < nd; i++) classes[i] = strdup(dirs[i]);
        *nclasses = nd;
    }
    for (int i = 0; i < nd; i++) {
        int label = -1;
        for (int k = 0; k < *nclasses; k++)
            if (!strcmp(classes[k], dirs[i])) label = k;
        if (label < 0) {
            cn_tool_fail("%s/%s: a class the training folder does not have", root, dirs[i]);
            free_list(dirs, nd);
            return -1;
        }
        char *cdir = join(root, dirs[i]);
        char **files;
        int nf = cdir ? list_dir(cdir, want, &files) : -1;
        if (nf == 0) cn_tool_fail("%s: no %s in this class folder", cdir, what);
        for (int f = 0; f < nf; f++) {
            if (s->n == s->cap) {
                s->cap = s->cap ? 2 * s->cap : 256;
                s->paths = realloc(s->paths, sizeof *s->paths * (size_t)s->cap);
                s->labels = realloc(s->labels, sizeof *s->labels * (size_t)s->cap);
                if (!s->paths || !s->labels) {
                    cn_tool_fail("out of memory");
                    nf = -1;
                    break;
                }
            }
            s->paths[s->n] = join(cdir, files[f]);
            s->labels[s->n++] = label;
        }
        if (nf > 0) free_list(files, nf);
        free(cdir);
        if (nf <= 0) {
            free_list(dirs, nd);
            return -1;
        }
    }
    free_list(dirs, nd);
    return 0;
}

static void free_set(ds_file_set *s) {
    for (int i = 0; i < s->n; i++) free(s->paths[i]);
    free(s->paths);
    free(s->labels);
}

/* Every image of s decoded (kept as in the file): tensors in decoded[]. */
static int decode_all(ds_file_set *s, cn_tensor **decoded) {
    for (int i = 0; i < s->n; i++) {
        cn_scope_begin();
        /* Retained, not kept: the caller releases each (the enclosing
         * scope must not release them again). */
        decoded[i] = cn_retain(cn_load_image(s->paths[i], 0, CN_IMAGE_CHW, CN_U8));
        cn_scope_end();
        if (!decoded[i]) {
            cn_tool_fail("%s", cn_last_error());
            return -1;
        }
    }
    return 0;
}

/* The decoded images of s at C x H x W, u8, and their labels. */
static int assemble(ds_file_set *s, cn_tensor **decoded, int C, int64_t H, int64_t W,
                    dataset *d) {
    d->images = cn_empty(CN_U8, CN_SHAPE(s->n, C, H, W));
    d->labels = cn_from_data(CN_I64, CN_SHAPE(s->n), s->labels);
    if (!d->images || !d->labels) return -1;
    uint8_t *o = cn_data(d->images);
    for (int i = 0; i < s->n; i++) {
        cn_tensor *t = decoded[i];
        convert_resize(cn_data(t), (int)cn_dim(t, 0), cn_dim(t, 1), cn_dim(t, 2), C, H, W,
                       o + (size_t)i * (size_t)(C * H * W));
    }
    return 0;
}

int cn_tool_class_files(const char *data, bool (*want)(const char *name), const char *what,
                        ds_files *f) {
    memset(f, 0, sizeof *f);
    char *trdir = join(data, "train"), *tedir = NULL;
    if (trdir && is_dir(trdir)) {
        tedir = join(data, "test");
        if (tedir && !is_dir(tedir)) {
            free(tedir);
            tedir = join(data, "val");
            if (tedir && !is_dir(tedir)) {
                free(tedir);
                tedir = NULL;
            }
        }
    } else {
        free(trdir);
        trdir = strdup(data);
    }
    f->split = tedir != NULL;
    f->classes = calloc(DS_MAX_CLASSES, sizeof *f->classes);
    int rc = f->classes && trdir ? 0 : -1;
    if (rc < 0) cn_tool_fail("out of memory");
    if (rc == 0) rc = collect(trdir, want, what, f->classes, &f->nclasses, false, &f->set[0]);
    if (rc == 0 && tedir)
        rc = collect(tedir, want, what, f->classes, &f->nclasses, true, &f->set[1]);
    free(trdir);
    free(tedir);
    if (rc < 0) cn_tool_class_files_free(f);
    return rc;
}

void cn_tool_class_files_free(ds_files *f) {
    for (int i = 0; f->classes && i < f->nclasses; i++) free(f->classes[i]);
    free(f->classes);
    free_set(&f->set[0]);
    free_set(&f->set[1]);
    memset(f, 0, sizeof *f);
}

int cn_tool_take_classes(const char *data, bool stats, ds_files *f, ds_info *info) {
    if (stats) {
        /* The checkpoint's classes stand; the folder's must be the same. */
        bool same = f->nclasses == info->nclasses;
        for (int i = 0; same && i < f->nclasses; i++)
            same = info->classes && !strcmp(info->classes[i], f->classes[i]);
        if (!same) {
            cn_tool_fail("%s: its class folders are not the %lld classes the checkpoint was "
                         "trained on", data, (long long)info->nclasses);
            return -1;
        }
        return 0;
    }
    info->nclasses = f->nclasses;
    info->classes = f->classes;
    f->classes = NULL;
    f->nclasses = 0;
    return 0;
}

int cn_tool_holdout(cn_tensor *x, cn_tensor *y, const ds_spec *sp, dataset *tr, dataset *te) {
    return holdout(x, y, sp->val_split < 0 ? DEFAULT_VAL_SPLIT : sp->val_split, tr, te);
}

static const char IMAGE_FILES[] = "images (PNG, JPEG, BMP, GIF, TGA or PNM files)";

static int load_images(const ds_spec *sp, bool stats, dataset *tr, dataset *te, ds_info *info) {
    ds_files cf;
    int rc = cn_tool_class_files(sp->data, image_ext, IMAGE_FILES, &cf);
    ds_file_set *s = cf.set;
    int ntot = s[0].n + s[1].n;
    cn_tensor **dec = rc == 0 ? calloc((size_t)(ntot ? ntot : 1), sizeof *dec) : NULL;
    if (rc == 0 && !dec) rc = -1;
    if (rc == 0) rc = decode_all(&s[0], dec);
    if (rc == 0) rc = decode_all(&s[1], dec + s[0].n);
    int C = sp->channels;
    int64_t H = sp->height, W = sp->width;
    if (rc == 0 && stats) {
        C = (int)info->shape[0];
        H = info->shape[1];
        W = info->shape[2];
    }
    if (rc == 0 && !C) {
        C = 1;
        for (int i = 0; i < ntot; i++)
            if (cn_dim(dec[i], 0) >= 3) C = 3;
    }
    if (rc == 0 && !H) {
        H = cn_dim(dec[0], 1);
        W = cn_dim(dec[0], 2);
        const char *first = s[0].paths[0];
        for (int i = 1; i < ntot && rc == 0; i++)
            if (cn_dim(dec[i], 1) != H || cn_dim(dec[i], 2) != W) {
                const char *p = i < s[0].n ? s[0].paths[i] : s[1].paths[i - s[0].n];
                cn_tool_fail("the images differ in size (%s is %lldx%lld, %s is %lldx%lld); give "
                             "--image-size HxW to resize them all", first, (long long)H,
                             (long long)W, p, (long long)cn_dim(dec[i], 1),
                             (long long)cn_dim(dec[i], 2));
                rc = -1;
            }
    }
    dataset all = {0};
    if (rc == 0) rc = assemble(&s[0], dec, C, H, W, cf.split ? tr : &all);
    if (rc == 0 && cf.split) rc = assemble(&s[1], dec + s[0].n, C, H, W, te);
    if (rc == 0 && !cf.split) rc = cn_tool_holdout(all.images, all.labels, sp, tr, te);
    for (int i = 0; dec && i < ntot; i++) cn_release(dec[i]);
    free(dec);
    if (rc == 0) rc = cn_tool_take_classes(sp->data, stats, &cf, info);
    cn_tool_class_files_free(&cf);
    if (rc < 0) return -1;
    info->kind = DS_IMAGES;
    info->ndim = 3;
    info->shape[0] = C;
    info->shape[1] = H;
    info->shape[2] = W;
    info->scale255 = true;
    if (stats) return 0;
    if (sp->standardize) {
        /* Per channel, of the training pixels in [0, 1]. */
        int64_t n = cn_dim(tr->images, 0), hw = H * W;
        const uint8_t *px = cn_data(tr->images);
        info->nnorm = C;
        info->mean = calloc((size_t)C, sizeof(double));
        info->std = calloc((size_t)C, sizeof(double));
        for (int c = 0; c < C; c++) {
            double sum = 0, sq = 0;
            for (int64_t i = 0; i < n; i++)
                for (int64_t p = 0; p < hw; p++) {
                    double v = px[(i * C + c) * hw + p] / 255.0;
                    sum += v;
                    sq += v * v;
                }
            double cnt = (double)(n * hw), m = cnt ? sum / cnt : 0;
            double var = cnt ? sq / cnt - m * m : 0;
            info->mean[c] = m;
            info->std[c] = var > 1e-12 ? sqrt(var) : 1;
        }
    }
    return 0;
}

/* ---- tables: features [N, F] f32 and a target ---- */

void cn_tool_mean_std(const float *x, int64_t n, int64_t stride, double *mean, double *std) {
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < n; i++) {
        sum += x[i * stride];
        sq += (double)x[i * stride] * x[i * stride];
    }
    double m = n ? sum / (double)n : 0, var = n ? sq / (double)n - m * m : 0;
    *mean = m;
    /* A constant column stays at 0 instead of dividing by 0. */
    *std = var > 1e-12 ? sqrt(var) : 1;
}

/* Standardise x's columns with the training split's statistics (computed
 * here unless stats), and a regression target likewise. */
static int standardize_table(bool stats, dataset *tr, dataset *te, ds_info *info) {
    int64_t F = cn_dim(tr->images, 1);
    if (!stats) {
        info->nnorm = (int)F;
        info->mean = calloc((size_t)(F ? F : 1), sizeof(double));
        info->std = calloc((size_t)(F ? F : 1), sizeof(double));
        if (!info->mean || !info->std) return -1;
        int64_t n = cn_dim(tr->images, 0);
        const float *x = cn_data(tr->images);
        for (int64_t f = 0; f < F; f++) cn_tool_mean_std(x + f, n, F, &info->mean[f], &info->std[f]);
        if (info->regress)
            cn_tool_mean_std(cn_data(tr->labels), n, 1, &info->y_mean, &info->y_std);
    } else if (info->nnorm != F) {
        cn_tool_fail("the data has %lld features, the checkpoint's model %d", (long long)F,
                     info->nnorm);
        return -1;
    }
    dataset *ds[2] = {tr, te};
    for (int k = 0; k < 2; k++) {
        int64_t n = cn_dim(ds[k]->images, 0);
        float *x = cn_data(ds[k]->images);
        for (int64_t i = 0; i < n; i++)
            for (int64_t f = 0; f < F; f++)
                x[i * F + f] = (float)((x[i * F + f] - info->mean[f]) / info->std[f]);
        if (info->regress) {
            float *y = cn_data(ds[k]->labels);
            for (int64_t i = 0; i < n; i++) y[i] = (float)((y[i] - info->y_mean) / info->y_std);
        }
    }
    return 0;
}

/* ---- CSV ---- */

typedef struct table {
    int64_t rows, cols;
    char **cells;     /* rows x cols, malloc'd strings */
    int64_t *line;    /* each row's line in the file */
    char **header;    /* cols names, or NULL */
} table;

static void free_table(table *t) {
    for (int64_t i = 0; t->cells && i < t->rows * t->cols; i++) free(t->cells[i]);
    for (int64_t i = 0; t->header && i < t->cols; i++) free(t->header[i]);
    free(t->cells);
    free(t->header);
    free(t->line);
}

/* The cells of line [p, e): quoted cells may hold commas and "" quotes. */
static int split_line(const char *p, const char *e, char ***out, int64_t *n) {
    int64_t cap = 8, k = 0;
    char **v = malloc(sizeof *v * (size_t)cap);
    if (!v) return -1;
    for (;;) {
        while (p < e && (*p == ' ' || *p == '\t')) p++;
        char *cell = malloc((size_t)(e - p) + 1);
        char **nv = k == cap ? realloc(v, sizeof *v * (size_t)(cap *= 2)) : v;
        if (!cell || !nv) {
            free(cell);
            for (int64_t i = 0; i < k; i++) free(v[i]);
            free(nv ? nv : v);
            return -1;
        }
        v = nv;
        size_t len = 0;
        if (p < e && *p == '"') {
            p++;
            while (p < e) {
                if (*p == '"' && p + 1 < e && p[1] == '"') {
                    cell[len++] = '"';
                    p += 2;
                } else if (*p == '"') {
                    p++;
                    break;
                } else {
                    cell[len++] = *p++;
                }
            }
            while (p < e && *p != ',') p++;
        } else {
            while (p < e && *p != ',') cell[len++] = *p++;
            while (len > 0 && (cell[len - 1] == ' ' || cell[len - 1] == '\t')) len--;
        }
        cell[len] = '\0';
        v[k++] = cell;
        if (p >= e) break;
        p++; /* the comma */
    }
    *out = v;
    *n = k;
    return 0;
}

static bool number(const char *s, double *v) {
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (end == s || *end || (errno == ERANGE && isinf(x)) || !isfinite(x)) return false;
    *v = x;
    return true;
}

static int read_table(const char *path, table *t) {
    memset(t, 0, sizeof *t);
    FILE *f = cn_tool_fopen_regular(path);
    if (!f) return -1;
    size_t n = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    fclose(f);
    if (!buf) {
        cn_tool_fail("%s: out of memory", path);
        return -1;
    }
    int64_t line = 0, rcap = 0;
    const char *end = buf + n;
    for (const char *p = buf; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        const char *next = nl ? nl + 1 : end;
        if (le > p && le[-1] == '\r') le--;
        line++;
        const char *q = p;
        while (q < le && (*q == ' ' || *q == '\t')) q++;
        if (q == le) {
            p = next;
            continue;
        }
        char **cells;
        int64_t k;
        if (split_line(p, le, &cells, &k) < 0) {
            free(buf);
            cn_tool_fail("%s: out of memory", path);
            return -1;
        }
        p = next;
        if (!t->header && t->rows == 0 && t->cols == 0) {
            /* A first line with a cell that is not a number names the columns. */
            bool text = false;
            double v;
            for (int64_t i = 0; i < k; i++) text |= cells[i][0] && !number(cells[i], &v);
            t->cols = k;
            if (text) {
                t->header = cells;
                continue;
            }
        }
        if (k != t->cols) {
            cn_tool_fail("%s line %lld has %lld cells, the first line %lld", path,
                         (long long)line, (long long)k, (long long)t->cols);
            for (int64_t i = 0; i < k; i++) free(cells[i]);
            free(cells);
            free(buf);
            return -1;
        }
        if (t->rows == rcap) {
            rcap = rcap ? 2 * rcap : 1024;
            char **nc = realloc(t->cells, sizeof *t->cells * (size_t)(rcap * t->cols));
            if (nc) t->cells = nc;
            int64_t *nl = nc ? realloc(t->line, sizeof *t->line * (size_t)rcap) : NULL;
            if (nl) t->line = nl;
            if (!nc || !nl) {
                for (int64_t i = 0; i < k; i++) free(cells[i]);
                free(cells);
                free(buf);
                cn_tool_fail("%s: out of memory", path);
                return -1;
            }
        }
        memcpy(t->cells + t->rows * t->cols, cells, sizeof *cells * (size_t)k);
        free(cells);
        t->line[t->rows++] = line;
    }
    free(buf);
    if (t->rows == 0) {
        cn_tool_fail("%s has no rows of data", path);
        return -1;
    }
    return 0;
}

/* A column by header name or by 0-based index; -1 after a message. */
static int64_t find_column(const char *path, const table *t, const char *name, const char *opt) {
    for (int64_t c = 0; t->header && c < t->cols; c++)
        if (!strcmp(t->header[c], name)) return c;
    char *end;
    long long i = strtoll(name, &end, 10);
    if (*name && !*end && i >= 0 && i < t->cols) return i;
    char cols[512] = "";
    size_t len = 0;
    for (int64_t c = 0; t->header && c < t->cols && len < sizeof cols - 64; c++)
        len += (size_t)snprintf(cols + len, sizeof cols - len, "%s%s", c ? ", " : "", t->header[c]);
    if (t->header)
        cn_tool_fail("%s: %s '%s': no such column (the columns are %s; or give a 0-based index)",
                     path, opt, name, cols);
    else
        cn_tool_fail("%s: %s '%s': the file has no header row; give a column index from 0 to %lld",
                     path, opt, name, (long long)t->cols - 1);
    return -1;
}

static const char *col_name(const table *t, int64_t c, char *buf, size_t size) {
    if (t->header) return t->header[c];
    snprintf(buf, size, "%lld", (long long)c);
    return buf;
}

static int cmp_num_str(const void *a, const void *b) {
    double x = strtod(*(char *const *)a, NULL), y = strtod(*(char *const *)b, NULL);
    return x < y ? -1 : x > y;
}

static int load_csv(const ds_spec *sp, bool stats, dataset *tr, dataset *te, ds_info *info) {
    table t;
    if (read_table(sp->data, &t) < 0) {
        free_table(&t);
        return -1;
    }
    int rc = -1;
    int64_t *fcols = NULL, nf = 0;
    char **distinct = NULL;
    int64_t ndist = 0;
    char nb[32];
    int64_t tc = find_column(sp->data, &t, sp->target, "--target");
    if (tc < 0) goto out;
    fcols = malloc(sizeof *fcols * (size_t)t.cols);
    if (sp->features && *sp->features) {
        char *list = strdup(sp->features);
        for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok;
             tok = strtok_r(NULL, ",", &save)) {
            int64_t c = find_column(sp->data, &t, tok, "--features");
            if (c < 0) {
                free(list);
                goto out;
            }
            if (c == tc) {
                cn_tool_fail("%s: --features names the target column '%s'", sp->data, tok);
                free(list);
                goto out;
            }
            fcols[nf++] = c;
        }
        free(list);
    } else {
        for (int64_t c = 0; c < t.cols; c++)
            if (c != tc) fcols[nf++] = c;
    }
    if (nf == 0) {
        cn_tool_fail("%s: no feature columns besides the target", sp->data);
        goto out;
    }
    /* The task: a text or whole-number target is classes, else a regression. */
    bool numeric = true, whole = true;
    for (int64_t r = 0; r < t.rows; r++) {
        double v;
        const char *s = t.cells[r * t.cols + tc];
        if (!number(s, &v)) numeric = false;
        else if (v != floor(v)) whole = false;
    }
    bool regress = stats ? info->regress : sp->task >= 0 ? sp->task == 1 : numeric && !whole;
    if (regress && !numeric) {
        for (int64_t r = 0; r < t.rows; r++) {
            double v;
            const char *s = t.cells[r * t.cols + tc];
            if (!number(s, &v)) {
                cn_tool_fail("%s line %lld, column '%s': \"%.40s\" is not a number (a "
                             "regression target must be)",
                             sp->data, (long long)t.line[r], col_name(&t, tc, nb, sizeof nb), s);
                goto out;
            }
        }
    }
    cn_tensor *x = cn_empty(CN_F32, CN_SHAPE(t.rows, nf));
    cn_tensor *y = regress ? cn_empty(CN_F32, CN_SHAPE(t.rows, 1)) : cn_empty(CN_I64, CN_SHAPE(t.rows));
    if (!x || !y) goto out;
    float *xp = cn_data(x);
    for (int64_t r = 0; r < t.rows; r++)
        for (int64_t f = 0; f < nf; f++) {
            const char *s = t.cells[r * t.cols + fcols[f]];
            double v;
            if (!number(s, &v)) {
                cn_tool_fail("%s line %lld, column '%s': \"%.40s\" %s", sp->data,
                             (long long)t.line[r], col_name(&t, fcols[f], nb, sizeof nb), s,
                             *s ? "is not a number" : "is empty");
                goto out;
            }
            xp[r * nf + f] = (float)v;
        }
    if (regress) {
        float *yp = cn_data(y);
        for (int64_t r = 0; r < t.rows; r++) yp[r] = (float)strtod(t.cells[r * t.cols + tc], NULL);
    } else {
        if (stats) {
            distinct = info->classes;
            ndist = info->nclasses;
        } else {
            /* The classes: the column's distinct values, in numeric order if
             * all are numbers, else in byte order. */
            distinct = malloc(sizeof *distinct * (size_t)t.rows);
            for (int64_t r = 0; r < t.rows; r++) {
                const char *s = t.cells[r * t.cols + tc];
                bool seen = false;
                for (int64_t k = 0; k < ndist && !seen; k++) seen = !strcmp(distinct[k], s);
                if (!seen) distinct[ndist++] = strdup(s);
            }
            qsort(distinct, (size_t)ndist, sizeof *distinct, numeric ? cmp_num_str : cmp_str);
        }
        int64_t *yp = cn_data(y);
        for (int64_t r = 0; r < t.rows; r++) {
            const char *s = t.cells[r * t.cols + tc];
            yp[r] = -1;
            for (int64_t k = 0; k < ndist && yp[r] < 0; k++)
                if (!strcmp(distinct[k], s)) yp[r] = k;
            if (yp[r] < 0) {
                cn_tool_fail("%s line %lld, column '%s': \"%.40s\" is not one of the classes "
                             "the checkpoint was trained on", sp->data, (long long)t.line[r],
                             col_name(&t, tc, nb, sizeof nb), s);
                goto out;
            }
        }
    }
    info->kind = DS_CSV;
    info->regress = regress;
    info->ndim = 1;
    info->shape[0] = nf;
    if (!stats) {
        info->nclasses = regress ? 1 : ndist;
        info->classes = regress ? NULL : distinct;
        if (regress) free(distinct);
        distinct = NULL;
    } else {
        distinct = NULL; /* the checkpoint's */
    }
    if (cn_tool_holdout(x, y, sp, tr, te) < 0) goto out;
    rc = standardize_table(stats, tr, te, info);
out:
    if (distinct && !stats) {
        for (int64_t k = 0; k < ndist; k++) free(distinct[k]);
        free(distinct);
    }
    free(fcols);
    free_table(&t);
    return rc;
}

/* ---- .npy ---- */

/* x as the model's input: [N, F] features, or images [N, C, H, W] ([N, H,
 * W] gets C = 1); u8 kept (the loader scales it), anything else f32. */
static cn_tensor *npy_inputs(cn_tensor *x, const char *path) {
    int nd = cn_ndim(x);
    char b[128];
    if (nd == 3) x = cn_unsqueeze(x, 1);
    else if (nd != 2 && nd != 4) {
        cn_tool_fail("%s is %s: expected [N, features], [N, H, W] or [N, C, H, W]", path,
                     cn_shape_str(x, b, sizeof b));
        return NULL;
    }
    if (cn_tensor_dtype(x) == CN_U8 && cn_ndim(x) == 4) return cn_contiguous(x);
    return cn_contiguous(cn_cast(x, CN_F32));
}

static int npy_pair(const char *xp, const char *yp, bool regress, cn_tensor **x, cn_tensor **y) {
    *x = cn_load_npy(xp);
    *y = *x ? cn_load_npy(yp) : NULL;
    if (!*x || !*y) {
        cn_tool_fail("%s", cn_last_error());
        return -1;
    }
    char b[128];
    if (cn_ndim(*y) == 2 && cn_dim(*y, 1) == 1) *y = cn_reshape(*y, 1, (int64_t[]){-1});
    if (cn_ndim(*y) != 1) {
        cn_tool_fail("%s is %s: the labels must be [N] (or [N, 1])", yp, cn_shape_str(*y, b, sizeof b));
        return -1;
    }
    if (cn_dim(*x, 0) != cn_dim(*y, 0)) {
        cn_tool_fail("%s has %lld samples but %s has %lld labels", xp, (long long)cn_dim(*x, 0),
                     yp, (long long)cn_dim(*y, 0));
        return -1;
    }
    if (!(*x = npy_inputs(*x, xp))) return -1;
    if (regress) {
        *y = cn_contiguous(cn_reshape(cn_cast(*y, CN_F32), 2, (int64_t[]){-1, 1}));
        return *y ? 0 : -1;
    }
    /* Classes: whole numbers from 0. */
    cn_tensor *yd = cn_contiguous(cn_cast(*y, CN_F64));
    const double *v = cn_data(yd);
    for (int64_t i = 0; i < cn_dim(yd, 0); i++)
        if (v[i] < 0 || v[i] != floor(v[i]) || v[i] > 1e6) {
            cn_tool_fail("%s: label %lld is %g; class labels are whole numbers from 0 (or use "
                         "--task regress)", yp, (long long)i, v[i]);
            return -1;
        }
    *y = cn_contiguous(cn_cast(*y, CN_I64));
    return *y ? 0 : -1;
}

static int load_npy(const ds_spec *sp, bool stats, dataset *tr, dataset *te, ds_info *info) {
    char *xp, *yp, *xt = NULL, *yt = NULL;
    if (sp->labels) {
        xp = strdup(sp->data);
        yp = strdup(sp->labels);
    } else {
        xp = join(sp->data, "x.npy");
        yp = join(sp->data, "y.npy");
        xt = join(sp->data, "x_test.npy");
        yt = join(sp->data, "y_test.npy");
        if (!is_file(xt) || !is_file(yt)) {
            free(xt);
            free(yt);
            xt = yt = NULL;
        }
    }
    int rc = -1;
    if (!is_file(yp)) {
        cn_tool_fail("%s: no labels (y.npy beside x.npy, or --labels FILE.npy)", yp);
        goto out;
    }
    /* The task from y's dtype unless --task says: floats are a regression. */
    bool regress;
    if (stats) {
        regress = info->regress;
    } else if (sp->task >= 0) {
        regress = sp->task == 1;
    } else {
        cn_tensor *y = cn_load_npy(yp);
        if (!y) {
            cn_tool_fail("%s", cn_last_error());
            goto out;
        }
        regress = cn_dtype_is_float(cn_tensor_dtype(y));
    }
    cn_tensor *x, *y;
    if (npy_pair(xp, yp, regress, &x, &y) < 0) goto out;
    if (xt) {
        cn_tensor *x2, *y2;
        if (npy_pair(xt, yt, regress, &x2, &y2) < 0) goto out;
        char b1[128], b2[128];
        bool same = cn_ndim(x) == cn_ndim(x2) && cn_tensor_dtype(x) == cn_tensor_dtype(x2);
        for (int k = 1; same && k < cn_ndim(x); k++) same = cn_dim(x, k) == cn_dim(x2, k);
        if (!same) {
            cn_tool_fail("%s is %s but %s is %s: the samples must have the same shape", xt,
                         cn_shape_str(x2, b1, sizeof b1), xp, cn_shape_str(x, b2, sizeof b2));
            goto out;
        }
        *tr = (dataset){x, y};
        *te = (dataset){x2, y2};
    } else if (cn_tool_holdout(x, y, sp, tr, te) < 0) {
        goto out;
    }
    info->kind = DS_NPY;
    info->regress = regress;
    info->ndim = cn_ndim(x) == 4 ? 3 : 1;
    for (int k = 0; k < info->ndim; k++) info->shape[k] = cn_dim(x, k + 1);
    info->scale255 = cn_tensor_dtype(x) == CN_U8;
    if (!stats) {
        int64_t ncls = 1;
        if (!regress) {
            /* As many classes as the largest label says, in either split. */
            for (int k = 0; k < 2; k++) {
                cn_tensor *l = k ? te->labels : tr->labels;
                const int64_t *v = cn_data(l);
                for (int64_t i = 0; i < cn_dim(l, 0); i++)
                    if (v[i] + 1 > ncls) ncls = v[i] + 1;
            }
            if (ncls < 2) ncls = 2;
        }
        info->nclasses = ncls;
    }
    rc = 0;
    /* Tables are standardised as CSV's are; images are left as given. */
    if (info->ndim == 1) {
        tr->images = cn_contiguous(cn_clone(tr->images));
        te->images = cn_contiguous(cn_clone(te->images));
        if (info->regress) {
            tr->labels = cn_contiguous(cn_clone(tr->labels));
            te->labels = cn_contiguous(cn_clone(te->labels));
        }
        rc = standardize_table(stats, tr, te, info);
    }
out:
    free(xp);
    free(yp);
    free(xt);
    free(yt);
    return rc;
}

/* ---- the entry points ---- */

int cn_tool_data_load(const ds_spec *s, int64_t limit, bool stats, dataset *tr, dataset *te,
                      ds_info *info) {
    tr->images = tr->labels = te->images = te->labels = NULL;
    cn_scope_begin();
    ds_kind k = cn_tool_data_kind(s->data, s->labels);
    int rc = k == DS_IMAGES ? load_images(s, stats, tr, te, info)
             : k == DS_CSV  ? load_csv(s, stats, tr, te, info)
             : k == DS_NPY  ? load_npy(s, stats, tr, te, info)
             : k == DS_AUDIO ? cn_tool_audio_load(s, stats, tr, te, info)
                            : -1;
    if (rc == 0 && (!tr->images || !te->images || !tr->labels || !te->labels)) {
        cn_tool_fail("%s", cn_last_error());
        rc = -1;
    }
    if (rc == 0 && cn_dim(tr->images, 0) == 0) {
        cn_tool_fail("%s: no training samples", s->data);
        rc = -1;
    }
    if (rc == 0 && !info->regress && info->nclasses < 2) {
        cn_tool_fail("%s: only one class; classification needs two or more", s->data);
        rc = -1;
    }
    dataset *d[2] = {tr, te};
    for (int i = 0; i < 2 && rc == 0; i++) {
        if (limit > 0 && limit < cn_dim(d[i]->images, 0)) {
            d[i]->images = cn_clone(cn_narrow(d[i]->images, 0, 0, limit));
            d[i]->labels = cn_clone(cn_narrow(d[i]->labels, 0, 0, limit));
        }
        d[i]->images = cn_keep(cn_contiguous(d[i]->images));
        d[i]->labels = cn_keep(cn_contiguous(d[i]->labels));
    }
    if (rc < 0) tr->images = tr->labels = te->images = te->labels = NULL;
    cn_scope_end();
    return rc;
}

void cn_tool_data_info_free(ds_info *info) {
    for (int64_t i = 0; info->classes && i < info->nclasses; i++) free(info->classes[i]);
    free(info->classes);
    free(info->mean);
    free(info->std);
    info->classes = NULL;
    info->mean = info->std = NULL;
}

static const char *const kind_names[] = {"idx", "images", "csv", "npy", "audio"};
#define NKINDS (int)(sizeof kind_names / sizeof *kind_names)

static void add(ds_meta *m, const char *k, char *v) {
    m->keys[m->n] = k;
    m->vals[m->n] = v ? v : "";
    m->owned[m->n++] = v;
}

void cn_tool_meta_add(ds_meta *m, const char *key, char *value) { add(m, key, value); }

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    char buf[128];
    int n = vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    return n >= 0 && (size_t)n < sizeof buf ? strdup(buf) : NULL;
}

static char *join_doubles(const double *v, int n) {
    size_t cap = (size_t)n * 26 + 1, len = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    s[0] = '\0';
    for (int i = 0; i < n; i++) len += (size_t)snprintf(s + len, cap - len, "%s%.17g", i ? "," : "", v[i]);
    return s;
}

int cn_tool_data_meta(const ds_spec *s, const ds_info *info, ds_meta *m) {
    memset(m, 0, sizeof *m);
    if (info->kind == DS_IDX) return 0; /* Fashion-MNIST's checkpoints stay as they were */
    add(m, "data_kind", strdup(kind_names[info->kind]));
    add(m, "data", strdup(s->data));
    add(m, "task", strdup(info->regress ? "regress" : "classify"));
    add(m, "input_shape", info->ndim == 3 ? fmt("%lldx%lldx%lld", (long long)info->shape[0],
                                                (long long)info->shape[1], (long long)info->shape[2])
                                          : fmt("%lld", (long long)info->shape[0]));
    add(m, "num_classes", fmt("%lld", (long long)info->nclasses));
    if (info->classes) {
        size_t len = 1;
        for (int64_t i = 0; i < info->nclasses; i++) len += strlen(info->classes[i]) + 1;
        char *c = malloc(len);
        if (c) {
            c[0] = '\0';
            for (int64_t i = 0; i < info->nclasses; i++) {
                if (i) strcat(c, "\n");
                strcat(c, info->classes[i]);
            }
        }
        add(m, "classes", c);
    }
    if (info->nnorm) {
        add(m, "norm_mean", join_doubles(info->mean, info->nnorm));
        add(m, "norm_std", join_doubles(info->std, info->nnorm));
    }
    if (info->regress) {
        add(m, "target_mean", fmt("%.17g", info->y_mean));
        add(m, "target_std", fmt("%.17g", info->y_std));
    }
    if (s->labels) add(m, "labels", strdup(s->labels));
    if (s->target) add(m, "target", strdup(s->target));
    if (s->features) add(m, "features", strdup(s->features));
    add(m, "val_split", fmt("%.17g", s->val_split < 0 ? DEFAULT_VAL_SPLIT : s->val_split));
    add(m, "pixels_scaled", strdup(info->scale255 ? "255" : "1"));
    if (info->kind == DS_AUDIO) cn_tool_audio_meta(info, m);
    return m->n;
}

void cn_tool_data_meta_free(ds_meta *m) {
    for (int i = 0; i < m->n; i++) free(m->owned[i]);
    m->n = 0;
}

static int parse_doubles(const char *path, const char *key, const char *s, double **out) {
    int n = 1;
    for (const char *p = s; *p; p++) n += *p == ',';
    double *v = malloc(sizeof *v * (size_t)n);
    const char *p = s;
    for (int i = 0; v && i < n; i++) {
        char *end;
        v[i] = strtod(p, &end);
        if (end == p || (*end && *end != ',') || !isfinite(v[i])) {
            free(v);
            cn_tool_fail("%s: metadata %s is not a list of numbers (the checkpoint is damaged)",
                         path, key);
            return -1;
        }
        p = *end ? end + 1 : end;
    }
    *out = v;
    return n;
}

void cn_tool_data_from_checkpoint_defaults(ds_info *info) {
    memset(info, 0, sizeof *info);
    info->kind = DS_IDX;
    info->ndim = 3;
    info->shape[0] = 1;
    info->shape[1] = info->shape[2] = 28;
    info->nclasses = 10;
    info->scale255 = true;
}

int cn_tool_data_from_checkpoint(const char *path, ds_spec *s, ds_info *info, char *data_buf,
                                 size_t data_size) {
    cn_tool_data_from_checkpoint_defaults(info);
    cn_checkpoint *c = cn_load_safetensors(path);
    if (!c) {
        cn_tool_fail("%s", cn_last_error());
        return -1;
    }
    int rc = -1;
    const char *kind = cn_checkpoint_metadata(c, "data_kind");
    if (!kind) {
        rc = 0;
        goto out;
    }
    int k = -1;
    for (int i = 0; i < NKINDS; i++)
        if (!strcmp(kind, kind_names[i])) k = i;
    const char *task = cn_checkpoint_metadata(c, "task"), *shape = cn_checkpoint_metadata(c, "input_shape");
    const char *ncls = cn_checkpoint_metadata(c, "num_classes");
    long long a = 0, b = 0, d = 0;
    int got = shape ? sscanf(shape, "%lldx%lldx%lld", &a, &b, &d) : 0;
    if (k < 0 || !task || !ncls || !(got == 1 || got == 3) || a < 1 || (got == 3 && (b < 1 || d < 1))) {
        cn_tool_fail("%s: its data metadata (data_kind, task, input_shape, num_classes) is "
                     "missing or damaged", path);
        goto out;
    }
    info->kind = (ds_kind)k;
    info->regress = !strcmp(task, "regress");
    info->ndim = got == 3 ? 3 : 1;
    info->shape[0] = a;
    info->shape[1] = b;
    info->shape[2] = d;
    info->nclasses = strtoll(ncls, NULL, 10);
    if (info->nclasses < 1 || info->nclasses > 1000000) {
        cn_tool_fail("%s: metadata num_classes '%s' is out of range", path, ncls);
        goto out;
    }
    const char *cl = cn_checkpoint_metadata(c, "classes");
    if (cl) {
        info->classes = calloc((size_t)info->nclasses, sizeof(char *));
        const char *p = cl;
        for (int64_t i = 0; i < info->nclasses; i++) {
            const char *e = strchr(p, '\n');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            info->classes[i] = strndup(p, len);
            p = e ? e + 1 : p + len;
        }
    }
    const char *nm = cn_checkpoint_metadata(c, "norm_mean"), *ns = cn_checkpoint_metadata(c, "norm_std");
    if (nm && ns) {
        int n1 = parse_doubles(path, "norm_mean", nm, &info->mean);
        int n2 = n1 > 0 ? parse_doubles(path, "norm_std", ns, &info->std) : -1;
        if (n1 < 0 || n2 != n1) goto out;
        info->nnorm = n1;
    }
    const char *ym = cn_checkpoint_metadata(c, "target_mean"), *ys = cn_checkpoint_metadata(c, "target_std");
    info->y_mean = ym ? strtod(ym, NULL) : 0;
    info->y_std = ys ? strtod(ys, NULL) : 1;
    const char *px = cn_checkpoint_metadata(c, "pixels_scaled");
    info->scale255 = !px || !strcmp(px, "255");
    if (info->kind == DS_AUDIO && cn_tool_audio_from_checkpoint(path, c, info) < 0) goto out;
    const char *data = cn_checkpoint_metadata(c, "data");
    if (data && s && data_buf) {
        snprintf(data_buf, data_size, "%s", data);
        if (!s->data) s->data = data_buf;
    }
    if (s) {
        /* Strings the spec points to must outlive the checkpoint. */
        static char target[256], features[1024], labels[4096];
        const char *v;
        if ((v = cn_checkpoint_metadata(c, "target")) && !s->target) {
            snprintf(target, sizeof target, "%s", v);
            s->target = target;
        }
        if ((v = cn_checkpoint_metadata(c, "features")) && !s->features) {
            snprintf(features, sizeof features, "%s", v);
            s->features = features;
        }
        if ((v = cn_checkpoint_metadata(c, "labels")) && !s->labels) {
            snprintf(labels, sizeof labels, "%s", v);
            s->labels = labels;
        }
        if ((v = cn_checkpoint_metadata(c, "val_split"))) s->val_split = strtod(v, NULL);
        s->task = info->regress;
    }
    rc = 0;
out:
    cn_checkpoint_free(c);
    return rc;
}

int cn_tool_file_input(const char *path, const ds_info *info, float *out) {
    if (info->kind == DS_AUDIO) return cn_tool_audio_input(path, info, out);
    if (info->ndim != 3) {
        cn_tool_fail("the checkpoint's model reads %lld features, not images",
                     (long long)info->shape[0]);
        return -1;
    }
    int C = (int)info->shape[0];
    int64_t H = info->shape[1], W = info->shape[2];
    cn_scope_begin();
    cn_tensor *t = cn_load_image(path, 0, CN_IMAGE_CHW, CN_U8);
    uint8_t *px = t ? malloc((size_t)(C * H * W)) : NULL;
    if (px) {
        convert_resize(cn_data(t), (int)cn_dim(t, 0), cn_dim(t, 1), cn_dim(t, 2), C, H, W, px);
        for (int c = 0; c < C; c++)
            for (int64_t i = 0; i < H * W; i++) {
                double v = px[c * H * W + i] / (info->scale255 ? 255.0 : 1.0);
                if (info->nnorm) {
                    int k = info->nnorm == 1 ? 0 : c;
                    v = (v - info->mean[k]) / info->std[k];
                }
                out[c * H * W + i] = (float)v;
            }
    }
    if (!t) cn_tool_fail("%s", cn_last_error());
    free(px);
    cn_scope_end();
    return t ? 0 : -1;
}
