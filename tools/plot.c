/* `chutney plot LOG -o curves.png`: the curves of a `chutney train --log`
 * file drawn with cairo. The left panel is the loss against the step (each
 * step's loss, each epoch's mean training loss and, for a language model,
 * its validation loss at the epoch's last step); the right one the
 * accuracies per epoch (the classifiers) or the validation perplexity (the
 * GPT). A log still being written is read as far as its last whole line. */
#include "tools.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef CN_HAVE_CAIRO /* without it, plot only says so */

/* ---- the log: flat JSON objects, one a line ---- */

typedef struct series {
    double *x, *y;
    int n, cap;
} series;

static int series_add(series *s, double x, double y) {
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 256;
        double *nx = realloc(s->x, sizeof *nx * (size_t)cap);
        if (!nx) return -1;
        s->x = nx;
        double *ny = realloc(s->y, sizeof *ny * (size_t)cap);
        if (!ny) return -1;
        s->y = ny;
        s->cap = cap;
    }
    s->x[s->n] = x;
    s->y[s->n++] = y;
    return 0;
}

enum { S_STEP_LOSS, S_EPOCH_LOSS, S_VAL_LOSS, S_TRAIN_ACC, S_TEST_ACC, S_VAL_PPL, NSERIES };

typedef struct curves {
    series s[NSERIES];
    char model[32], mode[16];
} curves;

/* The keys of one line that the plot uses (NaN: absent or null). */
typedef struct fields {
    char event[16], model[32], mode[16];
    double epoch, step, loss, train_loss, train_accuracy, test_accuracy, val_loss, val_perplexity;
} fields;

static const char *skip_ws(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\r') p++;
    return p;
}

/* A JSON string at p (after its opening quote) into out (may be NULL);
 * returns the character after the closing quote, or NULL. Escapes are kept
 * as the character after the backslash: the plot's keys and values are
 * plain words. */
static const char *parse_string(const char *p, char *out, size_t size) {
    size_t n = 0;
    for (; *p && *p != '"'; p++) {
        if (*p == '\\' && p[1]) p++;
        if (out && n + 1 < size) out[n++] = *p;
    }
    if (out && size) out[n] = '\0';
    return *p == '"' ? p + 1 : NULL;
}

/* A value the plot does not read (an object or array too): after it. */
static const char *skip_value(const char *p) {
    if (*p == '"') return parse_string(p + 1, NULL, 0);
    if (*p == '{' || *p == '[') {
        int depth = 0;
        for (; *p; p++) {
            if (*p == '"') {
                if (!(p = parse_string(p + 1, NULL, 0))) return NULL;
                p--;
            } else if (*p == '{' || *p == '[') depth++;
            else if ((*p == '}' || *p == ']') && --depth == 0) return p + 1;
        }
        return NULL;
    }
    const char *q = p;
    while (*q && *q != ',' && *q != '}' && *q != ' ') q++;
    return q > p ? q : NULL;
}

/* One line into f: 0, or -1 when it is not a flat JSON object. */
static int parse_line(const char *p, fields *f) {
    *f = (fields){.epoch = NAN, .step = NAN, .loss = NAN, .train_loss = NAN,
                  .train_accuracy = NAN, .test_accuracy = NAN, .val_loss = NAN,
                  .val_perplexity = NAN};
    p = skip_ws(p);
    if (*p++ != '{') return -1;
    p = skip_ws(p);
    if (*p == '}') return 0;
    for (;;) {
        char key[32];
        if (*p != '"' || !(p = parse_string(p + 1, key, sizeof key))) return -1;
        p = skip_ws(p);
        if (*p++ != ':') return -1;
        p = skip_ws(p);
        char *str = !strcmp(key, "event") ? f->event
                    : !strcmp(key, "model") ? f->model
                    : !strcmp(key, "mode")  ? f->mode
                                            : NULL;
        size_t str_size = str == f->event ? sizeof f->event
                          : str == f->model ? sizeof f->model
                                            : sizeof f->mode;
        double *num = !strcmp(key, "epoch")            ? &f->epoch
                      : !strcmp(key, "step")           ? &f->step
                      : !strcmp(key, "loss")           ? &f->loss
                      : !strcmp(key, "train_loss")     ? &f->train_loss
                      : !strcmp(key, "train_accuracy") ? &f->train_accuracy
                      : !strcmp(key, "test_accuracy")  ? &f->test_accuracy
                      : !strcmp(key, "val_loss")       ? &f->val_loss
                      : !strcmp(key, "val_perplexity") ? &f->val_perplexity
                                                       : NULL;
        if (str && *p == '"') {
            p = parse_string(p + 1, str, str_size);
        } else if (num && (*p == '-' || (*p >= '0' && *p <= '9'))) {
            char *end;
            *num = strtod(p, &end);
            p = end;
        } else {
            p = skip_value(p);
        }
        if (!p) return -1;
        p = skip_ws(p);
        if (*p == '}') return 0;
        if (*p++ != ',') return -1;
        p = skip_ws(p);
    }
}

/* Reads path into c: 0, or the exit status after a message. */
static int read_log(const char *path, curves *c) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "chutney plot: %s: %s\n", path, strerror(errno));
        return CN_TOOL_FAILED;
    }
    char buf[4096];
    int lineno = 0, rc = 0, nsteps = 0, nepochs = 0;
    while (rc == 0 && fgets(buf, sizeof buf, f)) {
        lineno++;
        size_t len = strlen(buf);
        if (len == 0 || buf[len - 1] != '\n') {
            /* A longer line than the log writes, or the last one being
             * written by a run still going. */
            if (!feof(f)) {
                fprintf(stderr, "chutney plot: %s:%d: a line longer than %zu bytes: not a "
                                "--log file\n", path, lineno, sizeof buf - 1);
                rc = CN_TOOL_FAILED;
            }
            break;
        }
        if (skip_ws(buf)[0] == '\n') continue;
        fields fl;
        if (parse_line(buf, &fl) < 0) {
            fprintf(stderr, "chutney plot: %s:%d: not a JSON object (is it a file of chutney "
                            "train --log?)\n", path, lineno);
            rc = CN_TOOL_FAILED;
            break;
        }
        int e = 0;
        if (!strcmp(fl.event, "start")) {
            snprintf(c->model, sizeof c->model, "%s", fl.model);
            snprintf(c->mode, sizeof c->mode, "%s", fl.mode);
        } else if (!strcmp(fl.event, "step")) {
            nsteps++;
            if (!isnan(fl.loss)) e |= series_add(&c->s[S_STEP_LOSS], fl.step, fl.loss);
        } else if (!strcmp(fl.event, "epoch")) {
            nepochs++;
            if (!isnan(fl.train_loss)) e |= series_add(&c->s[S_EPOCH_LOSS], fl.step, fl.train_loss);
            if (!isnan(fl.val_loss)) e |= series_add(&c->s[S_VAL_LOSS], fl.step, fl.val_loss);
            if (!isnan(fl.train_accuracy))
                e |= series_add(&c->s[S_TRAIN_ACC], fl.epoch, 100 * fl.train_accuracy);
            if (!isnan(fl.test_accuracy))
                e |= series_add(&c->s[S_TEST_ACC], fl.epoch, 100 * fl.test_accuracy);
            if (!isnan(fl.val_perplexity))
                e |= series_add(&c->s[S_VAL_PPL], fl.epoch, fl.val_perplexity);
        }
        if (e) {
            fprintf(stderr, "chutney plot: out of memory\n");
            rc = CN_TOOL_FAILED;
        }
    }
    if (rc == 0 && ferror(f)) {
        fprintf(stderr, "chutney plot: %s: read error\n", path);
        rc = CN_TOOL_FAILED;
    }
    fclose(f);
    if (rc == 0 && nsteps == 0 && nepochs == 0) {
        fprintf(stderr, "chutney plot: %s has no step or epoch lines (written by chutney train "
                        "--log FILE?)\n", path);
        rc = CN_TOOL_FAILED;
    }
    return rc;
}

static void free_curves(curves *c) {
    for (int i = 0; i < NSERIES; i++) {
        free(c->s[i].x);
        free(c->s[i].y);
    }
}

#endif

/* ---- the command line ---- */

static void plot_usage(FILE *f) {
    fprintf(f,
            "usage: chutney plot LOG [-o FILE.png] [--width W] [--height H]\n"
            "\n"
            "Draws the curves of a log written by `chutney train --log LOG`: the loss of\n"
            "every step and each epoch's training loss (and validation loss, --model gpt)\n"
            "against the step, and the training and test accuracy per epoch (gpt: the\n"
            "validation perplexity), as a PNG of W x H pixels (default 1200 x 480).\n"
            "-o (--output) defaults to LOG with its extension replaced by .png.\n"
            "A log still being written is drawn as far as it goes.\n"
            "Exit status: 0 done, 1 a failure (files, a build without cairo), 2 a bad\n"
            "command line.\n");
}

static const char *const plot_options[] = {"-o", "--output", "--width", "--height", "--help"};

#ifdef CN_HAVE_CAIRO
static int draw(const curves *c, const char *path, int width, int height);
#endif

int cn_tool_plot(int argc, char **argv) {
    const char *log = NULL, *out = NULL;
    long long width = 1200, height = 480;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i];
        if (!strcmp(k, "--help") || !strcmp(k, "-h")) {
            plot_usage(stdout);
            return 0;
        }
        bool is_out = !strcmp(k, "-o") || !strcmp(k, "--output");
        if (is_out || !strcmp(k, "--width") || !strcmp(k, "--height")) {
            if (i + 1 >= argc || !strncmp(argv[i + 1], "--", 2))
                return cn_tool_missing_value("plot", k, is_out ? "a .png file to write"
                                                               : "a size in pixels");
            const char *v = argv[++i];
            if (is_out) out = v;
            else if (!cn_tool_int("plot", k, v, 200, 10000, !strcmp(k, "--width") ? &width
                                                                                  : &height))
                return CN_TOOL_USAGE;
        } else if (k[0] == '-' && k[1]) {
            return cn_tool_unknown_option("plot", k, plot_options, 5);
        } else if (!log) {
            log = k;
        } else {
            return cn_tool_unknown_option("plot", k, plot_options, 5);
        }
    }
    if (!log) {
        fprintf(stderr, "chutney plot: which log? chutney plot LOG -o curves.png (LOG: written "
                        "by chutney train --log LOG)\n");
        return CN_TOOL_USAGE;
    }
    char def_out[4096];
    if (!out) {
        /* run.jsonl -> run.png; the extension only of the file's own name. */
        const char *slash = strrchr(log, '/'), *dot = strrchr(log, '.');
        size_t stem = dot && dot > (slash ? slash : log) ? (size_t)(dot - log) : strlen(log);
        if (snprintf(def_out, sizeof def_out, "%.*s.png", (int)stem, log) >= (int)sizeof def_out) {
            fprintf(stderr, "chutney plot: %s: name too long; give -o FILE.png\n", log);
            return CN_TOOL_USAGE;
        }
        out = def_out;
    }
#ifndef CN_HAVE_CAIRO
    (void)width, (void)height;
    fprintf(stderr, "chutney plot: this build has no cairo, which plot draws with (apt-get "
                    "install libcairo2-dev, then rebuild)\n");
    return CN_TOOL_FAILED;
#else
    if (!cn_tool_readable("plot", "LOG", log) || !cn_tool_writable("plot", "-o", out))
        return CN_TOOL_FAILED;
    curves c = {0};
    int rc = read_log(log, &c);
    if (rc == 0) rc = draw(&c, out, (int)width, (int)height);
    if (rc == 0) {
        printf("%s: %d steps, %d epochs\n", out, c.s[S_STEP_LOSS].n,
               c.s[S_EPOCH_LOSS].n > c.s[S_TEST_ACC].n ? c.s[S_EPOCH_LOSS].n : c.s[S_TEST_ACC].n);
    }
    free_curves(&c);
    return rc;
#endif
}

#ifdef CN_HAVE_CAIRO

#include <cairo.h>
#ifdef CN_HAVE_FONTCONFIG
#include <fontconfig/fontconfig.h>
#endif

#ifndef M_PI /* POSIX's, which strict C11 does not declare */
#define M_PI 3.14159265358979323846
#endif

/* ---- drawing ---- */

typedef struct rgb {
    double r, g, b;
} rgb;

/* Matplotlib's first colours (tests/cli/log_cli.sh looks for the step
 * loss's and the test accuracy's exact values in the picture). */
#define RGB(r, g, b) {(r) / 255.0, (g) / 255.0, (b) / 255.0}
static const rgb colours[NSERIES] = {
    [S_STEP_LOSS] = RGB(31, 119, 180),  [S_EPOCH_LOSS] = RGB(255, 127, 14),
    [S_VAL_LOSS] = RGB(44, 160, 44),    [S_TRAIN_ACC] = RGB(148, 103, 189),
    [S_TEST_ACC] = RGB(214, 39, 40),    [S_VAL_PPL] = RGB(214, 39, 40),
};
static const char *const labels[NSERIES] = {
    [S_STEP_LOSS] = "loss per step",       [S_EPOCH_LOSS] = "training loss per epoch",
    [S_VAL_LOSS] = "validation loss",      [S_TRAIN_ACC] = "training accuracy",
    [S_TEST_ACC] = "test accuracy",        [S_VAL_PPL] = "validation perplexity",
};

typedef struct axis {
    double lo, hi, step; /* the range and the tick spacing */
    int decimals;        /* of the tick labels */
} axis;

/* Ticks at 1, 2 or 5 times a power of ten, about `target` of them, over a
 * range that covers [lo, hi]; integer ticks only when `integer`. */
static axis nice_axis(double lo, double hi, int target, bool integer) {
    if (!(hi > lo)) {
        double pad = fabs(lo) > 0 ? fabs(lo) * 0.05 : 1;
        lo -= pad;
        hi += pad;
    }
    double raw = (hi - lo) / target, mag = pow(10, floor(log10(raw))), f = raw / mag;
    double step = (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
    if (integer && step < 1) step = 1;
    axis a = {floor(lo / step) * step, ceil(hi / step) * step, step, 0};
    /* A point on the frame would be half hidden: one more step there. */
    double room = 0.015 * (a.hi - a.lo);
    if (lo - a.lo < room) a.lo -= step;
    if (a.hi - hi < room) a.hi += step;
    if (step < 1) a.decimals = (int)ceil(-log10(step) - 1e-9);
    return a;
}

typedef struct panel {
    double x0, y0, w, h; /* the plotting area, in pixels */
    axis ax, ay;
} panel;

static double px(const panel *p, double x) { return p->x0 + (x - p->ax.lo) / (p->ax.hi - p->ax.lo) * p->w; }
static double py(const panel *p, double y) { return p->y0 + p->h - (y - p->ay.lo) / (p->ay.hi - p->ay.lo) * p->h; }

static void set_rgb(cairo_t *cr, rgb c) { cairo_set_source_rgb(cr, c.r, c.g, c.b); }

static void text_at(cairo_t *cr, double x, double y, const char *s, double align_x,
                    double align_y) {
    cairo_text_extents_t e;
    cairo_text_extents(cr, s, &e);
    cairo_move_to(cr, x - e.width * align_x - e.x_bearing, y - e.height * align_y - e.y_bearing);
    cairo_show_text(cr, s);
}

/* Frame, grid, ticks and their labels, axis titles and the panel's title. */
static void draw_axes(cairo_t *cr, const panel *p, const char *title, const char *xlabel,
                      const char *ylabel) {
    char s[64];
    cairo_set_line_width(cr, 1);
    cairo_set_font_size(cr, 11);
    /* Ticks at the multiples of the step inside the range (which is
     * padded past the data on the epoch axis). */
    for (double v = ceil(p->ax.lo / p->ax.step - 1e-6) * p->ax.step;
         v <= p->ax.hi + p->ax.step * 1e-6; v += p->ax.step) {
        double x = round(px(p, v)) + 0.5;
        cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
        cairo_move_to(cr, x, p->y0);
        cairo_line_to(cr, x, p->y0 + p->h);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        cairo_move_to(cr, x, p->y0 + p->h);
        cairo_line_to(cr, x, p->y0 + p->h + 5);
        cairo_stroke(cr);
        snprintf(s, sizeof s, "%.*f", p->ax.decimals, fabs(v) < p->ax.step * 1e-9 ? 0.0 : v);
        text_at(cr, x, p->y0 + p->h + 8, s, 0.5, 0);
    }
    for (double v = ceil(p->ay.lo / p->ay.step - 1e-6) * p->ay.step;
         v <= p->ay.hi + p->ay.step * 1e-6; v += p->ay.step) {
        double y = round(py(p, v)) + 0.5;
        cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
        cairo_move_to(cr, p->x0, y);
        cairo_line_to(cr, p->x0 + p->w, y);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        cairo_move_to(cr, p->x0 - 5, y);
        cairo_line_to(cr, p->x0, y);
        cairo_stroke(cr);
        snprintf(s, sizeof s, "%.*f", p->ay.decimals, fabs(v) < p->ay.step * 1e-9 ? 0.0 : v);
        text_at(cr, p->x0 - 8, y, s, 1, 0.5);
    }
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    cairo_rectangle(cr, round(p->x0) + 0.5, round(p->y0) + 0.5, round(p->w), round(p->h));
    cairo_stroke(cr);
    cairo_set_font_size(cr, 12);
    text_at(cr, p->x0 + p->w / 2, p->y0 + p->h + 26, xlabel, 0.5, 0);
    cairo_save(cr);
    cairo_translate(cr, p->x0 - 52, p->y0 + p->h / 2);
    cairo_rotate(cr, -M_PI / 2);
    text_at(cr, 0, 0, ylabel, 0.5, 0.5);
    cairo_restore(cr);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD);
    cairo_set_font_size(cr, 14);
    text_at(cr, p->x0 + p->w / 2, p->y0 - 12, title, 0.5, 1);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
}

/* A series as a line (width lw) and, with markers, a dot at each point,
 * clipped to the panel. */
static void draw_series(cairo_t *cr, const panel *p, const series *s, rgb c, double lw,
                        bool markers) {
    if (s->n == 0) return;
    cairo_save(cr);
    cairo_rectangle(cr, p->x0, p->y0, p->w, p->h);
    cairo_clip(cr);
    set_rgb(cr, c);
    cairo_set_line_width(cr, lw);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    for (int i = 0; i < s->n; i++) {
        if (i == 0) cairo_move_to(cr, px(p, s->x[i]), py(p, s->y[i]));
        else cairo_line_to(cr, px(p, s->x[i]), py(p, s->y[i]));
    }
    cairo_stroke(cr);
    if (markers || s->n == 1)
        for (int i = 0; i < s->n; i++) {
            cairo_arc(cr, px(p, s->x[i]), py(p, s->y[i]), 4, 0, 2 * M_PI);
            cairo_fill(cr);
        }
    cairo_restore(cr);
}

/* The legend in the panel's top right corner: a swatch and a label per
 * series shown. */
static void draw_legend(cairo_t *cr, const panel *p, const curves *c, const int *which, int n) {
    cairo_set_font_size(cr, 11);
    double wmax = 0;
    int shown = 0;
    for (int i = 0; i < n; i++) {
        if (!c->s[which[i]].n) continue;
        cairo_text_extents_t e;
        cairo_text_extents(cr, labels[which[i]], &e);
        if (e.x_advance > wmax) wmax = e.x_advance;
        shown++;
    }
    if (!shown) return;
    double bw = wmax + 44, bh = 18.0 * shown + 8;
    /* The corner whose box covers the fewest points of the curves (each
     * segment sampled), top right when they tie. */
    double best_x = 0, best_y = 0;
    int best = -1;
    for (int corner = 0; corner < 4; corner++) {
        double bx = corner & 1 ? p->x0 + 8 : p->x0 + p->w - bw - 8;
        double by = corner & 2 ? p->y0 + p->h - bh - 8 : p->y0 + 8;
        int hits = 0;
        for (int i = 0; i < n; i++) {
            const series *s = &c->s[which[i]];
            for (int k = 0; k < s->n; k++)
                for (int t = 0; t < 8 && (t == 0 || k + 1 < s->n); t++) {
                    double f = t / 8.0;
                    double x = px(p, k + 1 < s->n ? s->x[k] + f * (s->x[k + 1] - s->x[k]) : s->x[k]);
                    double y = py(p, k + 1 < s->n ? s->y[k] + f * (s->y[k + 1] - s->y[k]) : s->y[k]);
                    hits += x >= bx - 4 && x <= bx + bw + 4 && y >= by - 4 && y <= by + bh + 4;
                }
        }
        if (best < 0 || hits < best) {
            best = hits;
            best_x = bx;
            best_y = by;
        }
    }
    double bx = best_x, by = best_y;
    cairo_set_source_rgba(cr, 1, 1, 1, 0.85);
    cairo_rectangle(cr, bx, by, bw, bh);
    cairo_fill_preserve(cr);
    cairo_set_source_rgb(cr, 0.7, 0.7, 0.7);
    cairo_set_line_width(cr, 1);
    cairo_stroke(cr);
    double y = by + 4;
    for (int i = 0; i < n; i++) {
        if (!c->s[which[i]].n) continue;
        set_rgb(cr, colours[which[i]]);
        cairo_rectangle(cr, bx + 8, y + 7, 22, 3);
        cairo_fill(cr);
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        text_at(cr, bx + 36, y + 9, labels[which[i]], 0, 0.5);
        y += 18;
    }
}

/* The range of the given series, x and y. */
static void extent(const curves *c, const int *which, int n, double *xlo, double *xhi,
                   double *ylo, double *yhi) {
    *xlo = *ylo = INFINITY;
    *xhi = *yhi = -INFINITY;
    for (int i = 0; i < n; i++) {
        const series *s = &c->s[which[i]];
        for (int k = 0; k < s->n; k++) {
            if (!isfinite(s->y[k]) || !isfinite(s->x[k])) continue;
            *xlo = fmin(*xlo, s->x[k]);
            *xhi = fmax(*xhi, s->x[k]);
            *ylo = fmin(*ylo, s->y[k]);
            *yhi = fmax(*yhi, s->y[k]);
        }
    }
    if (!isfinite(*xlo)) *xlo = 0, *xhi = 1, *ylo = 0, *yhi = 1;
}

static int draw(const curves *c, const char *path, int width, int height) {
    cairo_surface_t *surf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height);
    cairo_t *cr = cairo_create(surf);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);

    static const int loss_set[] = {S_STEP_LOSS, S_EPOCH_LOSS, S_VAL_LOSS};
    bool acc = c->s[S_TRAIN_ACC].n || c->s[S_TEST_ACC].n;
    static const int acc_set[] = {S_TRAIN_ACC, S_TEST_ACC};
    static const int ppl_set[] = {S_VAL_PPL};
    const int *right = acc ? acc_set : ppl_set;
    int nright = acc ? 2 : 1;
    bool two = acc || c->s[S_VAL_PPL].n;

    const double ml = 80, mr = 24, mt = 40, mb = 58;
    double pw = two ? width / 2.0 : width;
    panel lp = {.x0 = ml, .y0 = mt, .w = pw - ml - mr, .h = height - mt - mb};
    double xlo, xhi, ylo, yhi;
    extent(c, loss_set, 3, &xlo, &xhi, &ylo, &yhi);
    lp.ax = nice_axis(xlo, xhi, 8, true);
    if (lp.ax.lo < 0 && xlo >= 0) lp.ax.lo = 0; /* steps start at 1 */
    lp.ay = nice_axis(ylo, yhi, 6, false);
    char title[96];
    snprintf(title, sizeof title, "%s%s%s%s loss", c->model, *c->mode ? " (" : "", c->mode,
             *c->mode ? ")" : "");
    draw_axes(cr, &lp, *c->model ? title : "loss", "step", "loss");
    draw_series(cr, &lp, &c->s[S_STEP_LOSS], colours[S_STEP_LOSS], 1.5, false);
    draw_series(cr, &lp, &c->s[S_EPOCH_LOSS], colours[S_EPOCH_LOSS], 2, true);
    draw_series(cr, &lp, &c->s[S_VAL_LOSS], colours[S_VAL_LOSS], 2, true);
    draw_legend(cr, &lp, c, loss_set, 3);

    if (two) {
        panel rp = {.x0 = pw + ml, .y0 = mt, .w = pw - ml - mr, .h = height - mt - mb};
        extent(c, right, nright, &xlo, &xhi, &ylo, &yhi);
        /* The epochs' ticks, and a margin so that the first and last
         * markers are not cut by the frame. */
        rp.ax = nice_axis(xlo, xhi, 8, true);
        double pad = fmax(0.25, 0.04 * (xhi - xlo));
        rp.ax.lo = xlo - pad;
        rp.ax.hi = xhi + pad;
        rp.ay = nice_axis(ylo, yhi, 6, false);
        draw_axes(cr, &rp, acc ? "accuracy" : "validation perplexity", "epoch",
                  acc ? "accuracy (%)" : "perplexity");
        for (int i = 0; i < nright; i++)
            draw_series(cr, &rp, &c->s[right[i]], colours[right[i]], 2, true);
        draw_legend(cr, &rp, c, right, nright);
    }

    cairo_status_t st = cairo_status(cr);
    if (st == CAIRO_STATUS_SUCCESS) st = cairo_surface_write_to_png(surf, path);
    cairo_destroy(cr);
    cairo_surface_destroy(surf);
    /* Cairo's and fontconfig's caches, so that a leak checker sees only
     * real leaks. */
    cairo_debug_reset_static_data();
#ifdef CN_HAVE_FONTCONFIG
    FcFini();
#endif
    if (st != CAIRO_STATUS_SUCCESS) {
        fprintf(stderr, "chutney plot: cannot write %s: %s\n", path,
                st == CAIRO_STATUS_WRITE_ERROR ? strerror(errno) : cairo_status_to_string(st));
        return CN_TOOL_FAILED;
    }
    return 0;
}

#endif
