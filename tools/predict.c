/* `chutney predict`: a checkpoint of `chutney train` classifies image files
 * (PNG, JPEG, BMP, PNM, ... through cn_load_image), each made to look like
 * a Fashion-MNIST picture first: grey, light on dark, square, 28x28; or,
 * for a checkpoint of WAV clips, WAV files. */
#include "tools.h"
#include "dataset.h"
#include "model_text.h"
#include "train.h"

#include <math.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIDE 28 /* Fashion-MNIST's pictures are 28x28 */
#define NCLASSES 10

static void predict_usage(FILE *f) {
    fprintf(f,
            "usage: chutney predict --load CKPT [--model {mlp,cnn,lstm}] [--top K]\n"
            "                       [--invert {auto,yes,no}] [--numbers]\n"
            "                       [--precision {f32,bf16,f16}] IMAGE...\n"
            "\n"
            "Classifies each image (PNG, JPEG, BMP, GIF, TGA, PNM) with a checkpoint\n"
            "written by `chutney train --save`, and prints the K most likely classes\n"
            "(default 3) with their probabilities, one line per image:\n"
            "  shoe.png: Sneaker 91.2%%, Sandal 6.1%%, Ankle boot 2.5%%\n"
            "The model is the one the checkpoint holds (--model only checks it).\n"
            "Each image is made to look like Fashion-MNIST's: grey, padded to a square\n"
            "(keeping its proportions), averaged down (or up) to 28x28. Fashion-MNIST's\n"
            "pictures are light garments on black: --invert auto (the default) inverts\n"
            "an image whose border is light (a photo on white); yes or no forces it.\n"
            "The class names are Fashion-MNIST's; --numbers prints the labels 0-9\n"
            "instead (a model trained on MNIST digits with --data).\n"
            "--precision bf16 or f16: the products in that type (autocast; default f32).\n"
            "A checkpoint of your own data reads files as training read its data: images\n"
            "at its size and channels, or, trained on WAV clips, WAV files at the clips'\n"
            "rate, padded or cut to their length (docs/training.md, \"Audio\").\n"
            "Exit status: 0 done, 1 a failure (files, images), 2 a bad command line.\n");
}

typedef struct predict_args {
    const char *load, *model;
    int top;
    int invert; /* -1 auto, 0 no, 1 yes */
    bool numbers;
    const char **images; /* room for argc */
    int nimages;
} predict_args;

static const char *const predict_options[] = {"--load", "--model", "--top", "--invert", "--numbers",
                                              "--help"};
static const char *const invert_modes[] = {"auto", "yes", "no"};

static int predict_option(predict_args *p, const char *k, const char *v) {
    if (!strcmp(k, "--load")) {
        p->load = v;
    } else if (!strcmp(k, "--model")) {
        p->model = v;
        if (cn_tool_choice("predict", k, "model", v, cn_tool_models, 3) < 0) return CN_TOOL_USAGE;
    } else if (!strcmp(k, "--top")) {
        long long n;
        if (!cn_tool_int("predict", k, v, 1, NCLASSES, &n)) return CN_TOOL_USAGE;
        p->top = (int)n;
    } else {
        int m = cn_tool_choice("predict", k, NULL, v, invert_modes, 3);
        if (m < 0) return CN_TOOL_USAGE;
        p->invert = m == 0 ? -1 : m == 1;
    }
    return 0;
}

/* 0: go on; -1: --help was printed; else the exit status. The checkpoint
 * and every image are checked before anything is loaded. */
static int predict_parse(int argc, char **argv, predict_args *p) {
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i];
        if (!strcmp(k, "--help") || !strcmp(k, "-h")) {
            predict_usage(stdout);
            return -1;
        }
        if (k[0] != '-') { /* an image, wherever it comes among the options */
            p->images[p->nimages++] = k;
            continue;
        }
        if (!strcmp(k, "--numbers")) {
            p->numbers = true;
            continue;
        }
        bool known = false;
        for (int o = 0; o < 4; o++) known |= !strcmp(k, predict_options[o]);
        if (!known) return cn_tool_unknown_option("predict", k, predict_options, 6);
        if (i + 1 >= argc || !strncmp(argv[i + 1], "--", 2))
            return cn_tool_missing_value("predict", k, !strcmp(k, "--load") ? "a checkpoint of train --save"
                                                       : !strcmp(k, "--model") ? "mlp, cnn or lstm"
                                                       : !strcmp(k, "--top") ? "a number from 1 to 10"
                                                                             : "auto, yes or no");
        int rc = predict_option(p, k, argv[++i]);
        if (rc) return rc;
    }
    if (!p->load || !p->nimages) {
        fprintf(stderr, "chutney predict: %s\n",
                !p->load ? "--load CKPT is required (a checkpoint of train --save)" : "no image given");
        predict_usage(stderr);
        return CN_TOOL_USAGE;
    }
    if (!cn_tool_readable("predict", "--load", p->load)) return CN_TOOL_FAILED;
    for (int i = 0; i < p->nimages; i++)
        if (!cn_tool_readable("predict", "image", p->images[i])) return CN_TOOL_FAILED;
    return 0;
}

/* ---- images as Fashion-MNIST pictures ---- */

/* The mean of the outermost rows and columns: the background. */
static double border_mean(const float *px, int64_t h, int64_t w) {
    double sum = 0;
    int64_t n = 0;
    for (int64_t y = 0; y < h; y++)
        for (int64_t x = 0; x < w; x++)
            if (y == 0 || x == 0 || y == h - 1 || x == w - 1) {
                sum += px[y * w + x];
                n++;
            }
    return n ? sum / (double)n : 0;
}

/* px (h x w grey in [0, 1]) as a 28x28 picture in out: inverted if asked,
 * centred on a black square of the longer side (proportions kept), each
 * output pixel the mean of the square's pixels it covers (an area
 * average, as adaptive average pooling; it enlarges small images too). */
static void to_picture(const float *px, int64_t h, int64_t w, bool invert, float *out) {
    int64_t side = h > w ? h : w, oy = (side - h) / 2, ox = (side - w) / 2;
    for (int i = 0; i < SIDE; i++)
        for (int j = 0; j < SIDE; j++) {
            int64_t y0 = i * side / SIDE, y1 = ((i + 1) * side + SIDE - 1) / SIDE;
            int64_t x0 = j * side / SIDE, x1 = ((j + 1) * side + SIDE - 1) / SIDE;
            double sum = 0;
            for (int64_t y = y0; y < y1; y++)
                for (int64_t x = x0; x < x1; x++) {
                    int64_t sy = y - oy, sx = x - ox;
                    bool inside = sy >= 0 && sy < h && sx >= 0 && sx < w;
                    double v = inside ? px[sy * w + sx] : (invert ? 1.0 : 0.0);
                    sum += invert ? 1.0 - v : v;
                }
            out[i * SIDE + j] = (float)(sum / (double)((y1 - y0) * (x1 - x0)));
        }
}

/* Image i into its 28x28 slot of batch; false after a message. */
static bool load_picture(const predict_args *p, int i, float *slot, bool *inverted) {
    cn_scope_begin();
    cn_tensor *img = cn_contiguous(cn_load_image(p->images[i], 1, CN_IMAGE_HWC, CN_F32));
    bool ok = img != NULL;
    if (!ok) {
        fprintf(stderr, "chutney predict: %s\n", cn_last_error());
    } else {
        int64_t h = cn_dim(img, 0), w = cn_dim(img, 1);
        const float *px = cn_data(img);
        *inverted = p->invert < 0 ? border_mean(px, h, w) > 0.5 : p->invert == 1;
        to_picture(px, h, w, *inverted, slot);
    }
    cn_scope_end();
    return ok;
}

/* ---- the command ---- */

static void print_top(const predict_args *p, int i, const float *prob, bool inverted) {
    bool used[NCLASSES] = {false};
    printf("%s:", p->images[i]);
    for (int k = 0; k < p->top; k++) {
        int best = -1;
        for (int c = 0; c < NCLASSES; c++)
            if (!used[c] && (best < 0 || prob[c] > prob[best])) best = c;
        used[best] = true;
        if (p->numbers) printf("%s %d %.1f%%", k ? "," : "", best, 100.0 * prob[best]);
        else printf("%s %s %.1f%%", k ? "," : "", cn_tool_fashion_classes[best], 100.0 * prob[best]);
    }
    printf("%s\n", inverted ? " (inverted: light background)" : "");
}

/* The model's probabilities for the batch, [n, 10] in probs. */
static bool classify(cn_module *m, const float *batch, int n, float *probs) {
    cn_scope_begin();
    cn_no_grad_begin();
    cn_tensor *x = cn_from_data(CN_F32, CN_SHAPE(n, 1, SIDE, SIDE), batch);
    cn_tensor *y = cn_contiguous(cn_softmax(cn_module_forward(m, x), 1));
    bool ok = y && cn_dim(y, 1) == NCLASSES;
    if (ok) memcpy(probs, cn_data(y), sizeof *probs * (size_t)n * NCLASSES);
    else fprintf(stderr, "chutney predict: %s\n", cn_last_error());
    cn_no_grad_end();
    cn_scope_end();
    return ok;
}

static int predict_run(const predict_args *p, cn_module *m) {
    size_t n = (size_t)p->nimages;
    float *batch = malloc(sizeof *batch * n * SIDE * SIDE);
    float *probs = malloc(sizeof *probs * n * NCLASSES);
    bool *inverted = calloc(n, sizeof *inverted);
    bool ok = batch && probs && inverted;
    if (!ok) fprintf(stderr, "chutney predict: out of memory\n");
    for (int i = 0; ok && i < p->nimages; i++)
        ok = load_picture(p, i, batch + (size_t)i * SIDE * SIDE, &inverted[i]);
    ok = ok && classify(m, batch, p->nimages, probs);
    for (int i = 0; ok && i < p->nimages; i++) print_top(p, i, probs + (size_t)i * NCLASSES, inverted[i]);
    free(batch);
    free(probs);
    free(inverted);
    return ok ? 0 : CN_TOOL_FAILED;
}

/* A checkpoint trained on other images (an image folder, .npy images) or
 * WAV clips: each file as training read them (an image's channels and
 * size, [0, 1]; a clip's spectrogram; the checkpoint's standardisation),
 * and the checkpoint's class names. */
static int predict_data(const predict_args *p, const char *model, const ds_info *info) {
    if (info->ndim != 3) {
        fprintf(stderr, "chutney predict: %s was trained on a table of %lld features, not on "
                        "images; `chutney eval` scores it on its data\n", p->load,
                (long long)info->shape[0]);
        return CN_TOOL_FAILED;
    }
    const char *want = p->model ? p->model : model;
    int64_t nout = info->regress ? 1 : info->nclasses;
    cn_module *m = cn_tool_model_for_checkpoint(want, p->load, 0.5, 3, info->shape, nout);
    int epochs = 0;
    if (!m || cn_tool_load_checkpoint(p->load, want, m, NULL, &epochs) < 0) {
        fprintf(stderr, "chutney predict: cannot load %s: %s\n", p->load, cn_tool_error());
        cn_module_free(m);
        return CN_TOOL_FAILED;
    }
    cn_module_train(m, false);
    size_t per = (size_t)(info->shape[0] * info->shape[1] * info->shape[2]);
    float *batch = malloc(sizeof *batch * per * (size_t)p->nimages);
    bool ok = batch != NULL;
    for (int i = 0; ok && i < p->nimages; i++)
        if (cn_tool_file_input(p->images[i], info, batch + per * (size_t)i) < 0) {
            fprintf(stderr, "chutney predict: %s\n", cn_tool_error());
            ok = false;
        }
    cn_scope_begin();
    cn_no_grad_begin();
    cn_tensor *y = NULL;
    if (ok) {
        cn_tensor *x = cn_from_data(CN_F32, CN_SHAPE(p->nimages, info->shape[0], info->shape[1],
                                                     info->shape[2]), batch);
        cn_tensor *out = cn_module_forward(m, x);
        y = cn_contiguous(info->regress ? out : cn_softmax(out, 1));
        if (!y) {
            fprintf(stderr, "chutney predict: %s\n", cn_last_error());
            ok = false;
        }
    }
    const float *v = y ? cn_data(y) : NULL;
    int top = p->top < nout ? p->top : (int)nout;
    for (int i = 0; ok && i < p->nimages; i++) {
        const float *pr = v + (size_t)i * (size_t)nout;
        printf("%s:", p->images[i]);
        if (info->regress) {
            printf(" %.6g\n", pr[0] * info->y_std + info->y_mean);
            continue;
        }
        bool *used = calloc((size_t)nout, sizeof *used);
        for (int k = 0; used && k < top; k++) {
            int64_t best = -1;
            for (int64_t c = 0; c < nout; c++)
                if (!used[c] && (best < 0 || pr[c] > pr[best])) best = c;
            used[best] = true;
            if (p->numbers || !info->classes) printf("%s %lld %.1f%%", k ? "," : "", (long long)best, 100.0 * pr[best]);
            else printf("%s %s %.1f%%", k ? "," : "", info->classes[best], 100.0 * pr[best]);
        }
        free(used);
        printf("\n");
    }
    cn_no_grad_end();
    cn_scope_end();
    free(batch);
    cn_module_free(m);
    return ok ? 0 : CN_TOOL_FAILED;
}

/* The checkpoint's model, loaded, classifies the images: the exit status. */
static int predict_model(const predict_args *p) {
    char model[16];
    if (!cn_tool_checkpoint_model(p->load, model, sizeof model)) {
        fprintf(stderr, "chutney predict: cannot load %s: %s\n", p->load, cn_tool_error());
        return CN_TOOL_FAILED;
    }
    /* --model names what the user expects: a different one is the
     * checkpoint loader's "holds a 'cnn' model, not 'mlp'". */
    ds_info info;
    if (cn_tool_data_from_checkpoint(p->load, NULL, &info, NULL, 0) < 0) {
        fprintf(stderr, "chutney predict: cannot load %s: %s\n", p->load, cn_tool_error());
        return CN_TOOL_FAILED;
    }
    if (info.kind != DS_IDX) {
        int rc = predict_data(p, model, &info);
        cn_tool_data_info_free(&info);
        return rc;
    }
    const char *want = p->model ? p->model : model;
    cn_module *m = cn_tool_model_for_checkpoint(want, p->load, 0.5, 3, (const int64_t[]){1, 28, 28}, 10);
    int epochs = 0;
    if (!m || cn_tool_load_checkpoint(p->load, want, m, NULL, &epochs) < 0) {
        fprintf(stderr, "chutney predict: cannot load %s: %s\n", p->load, cn_tool_error());
        cn_module_free(m);
        return CN_TOOL_FAILED;
    }
    cn_module_train(m, false);
    int rc = predict_run(p, m);
    cn_module_free(m);
    return rc;
}

int cn_tool_predict(int argc, char **argv) {
    predict_args p = {.top = 3, .invert = -1, .images = calloc((size_t)argc, sizeof(char *))};
    if (!p.images) return CN_TOOL_FAILED;
    int rc = predict_parse(argc, argv, &p);
    if (rc == 0) rc = predict_model(&p);
    free(p.images);
    return rc < 0 ? 0 : rc;
}
