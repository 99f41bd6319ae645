/* `chutney train --data DIR` where DIR's class folders hold WAV files: each
 * clip is read (cn_load_wav: mono), padded with silence or cut at the end
 * to one length, and becomes a log-mel spectrogram [1, n_mels, frames], an
 * image of one channel for the cnn. The spectrogram's parameters, the clip
 * length and the rate go into the checkpoint, so eval and predict treat new
 * clips the same; docs/training.md, "Audio".
 *
 * Clips are not resampled: every clip must have the rate of the first (or
 * the checkpoint's), else the message says so and how to convert them. */
#include "dataset.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* Speech-sized defaults: a 512-point window (23 ms at 22.05 kHz) and 40
 * mels, enough for words at a fraction of torchaudio's 128-mel input. */
#define DEFAULT_N_FFT 512
#define DEFAULT_N_MELS 40
#define MAX_CLIP_SECONDS 600.0

static bool wav_ext(const char *name) {
    size_t n = strlen(name);
    return n >= 4 && !strcasecmp(name + n - 4, ".wav");
}

static const char WAV_FILES[] = "WAV files (.wav)";

bool cn_tool_audio_folder(const char *dir) {
    char root[4096];
    struct stat st;
    snprintf(root, sizeof root, "%s/train", dir);
    if (stat(root, &st) != 0 || !S_ISDIR(st.st_mode)) snprintf(root, sizeof root, "%s", dir);
    /* The first class folder that holds files decides. */
    DIR *d = opendir(root);
    bool wav = false, decided = false;
    for (struct dirent *e; d && !decided && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char sub[sizeof root + 260]; /* a name is at most 255 bytes */
        snprintf(sub, sizeof sub, "%s/%s", root, e->d_name);
        DIR *c = stat(sub, &st) == 0 && S_ISDIR(st.st_mode) ? opendir(sub) : NULL;
        for (struct dirent *f; c && (f = readdir(c));) {
            if (f->d_name[0] == '.') continue;
            decided = true;
            if ((wav = wav_ext(f->d_name))) break;
        }
        if (c) closedir(c);
    }
    if (d) closedir(d);
    return wav;
}

/* ---- options ---- */

int cn_tool_audio_option(ds_audio *a, const char *cmd, const char *k, const char *v) {
    long long n = 0;
    double x = 0;
    if (!strcmp(k, "--n-fft")) {
        if (!cn_tool_int(cmd, k, v, 2, 1 << 20, &n)) return -1;
        a->n_fft = (int)n;
    } else if (!strcmp(k, "--hop")) {
        if (!cn_tool_int(cmd, k, v, 1, 1 << 20, &n)) return -1;
        a->hop = (int)n;
    } else if (!strcmp(k, "--n-mels")) {
        if (!cn_tool_int(cmd, k, v, 1, 4096, &n)) return -1;
        a->n_mels = (int)n;
    } else if (!strcmp(k, "--fmin") || !strcmp(k, "--fmax") || !strcmp(k, "--clip-seconds")) {
        char *end;
        errno = 0;
        x = strtod(v, &end);
        bool secs = !strcmp(k, "--clip-seconds");
        if (errno || end == v || *end || !isfinite(x) || x < 0 || (x == 0 && strcmp(k, "--fmin")) ||
            (secs && x > MAX_CLIP_SECONDS)) {
            fprintf(stderr, "chutney %s: bad value '%s' for %s: expected %s\n", cmd, v, k,
                    secs ? "a duration in seconds above 0, at most 600, such as 1.5"
                    : !strcmp(k, "--fmin") ? "a frequency in Hz of 0 or more, such as 20"
                                           : "a frequency in Hz above 0, such as 8000");
            return -1;
        }
        if (secs) a->seconds = x;
        else if (!strcmp(k, "--fmin")) a->fmin = x;
        else a->fmax = x;
    } else {
        return 0;
    }
    return 1;
}

int cn_tool_audio_check(const char *cmd, ds_kind kind, const ds_audio *a) {
    if (kind != DS_AUDIO && (a->n_fft || a->hop || a->n_mels || a->fmin || a->fmax || a->seconds)) {
        fprintf(stderr, "chutney %s: --n-fft, --hop, --n-mels, --fmin, --fmax and --clip-seconds "
                        "are for a folder of WAV clips (class folders of .wav files)\n", cmd);
        return CN_TOOL_USAGE;
    }
    if (a->fmax && a->fmin >= a->fmax) {
        fprintf(stderr, "chutney %s: --fmin %g is not below --fmax %g\n", cmd, a->fmin, a->fmax);
        return CN_TOOL_USAGE;
    }
    return 0;
}

/* ---- clips ---- */

static cn_mel_opts mel_opts(const ds_audio *a) {
    return (cn_mel_opts){.sample_rate = a->rate, .n_fft = a->n_fft, .hop = a->hop,
                         .n_mels = a->n_mels, .fmin = a->fmin, .fmax = a->fmax};
}

static int64_t clip_samples(const ds_audio *a) { return llround(a->seconds * a->rate); }

/* path's samples (in the current scope) at want Hz (0: any, *rate gets
 * it). NULL after cn_tool_fail. */
static cn_tensor *read_clip(const char *path, int want, int *rate) {
    int r = 0;
    cn_tensor *w = cn_load_wav(path, &r);
    if (!w) {
        cn_tool_fail("%s", cn_last_error());
        return NULL;
    }
    if (want && r != want) {
        cn_tool_fail("%s is at %d Hz, the other clips (or the checkpoint's) at %d: convert it "
                     "first, e.g. sox IN.wav -r %d OUT.wav", path, r, want, want);
        return NULL;
    }
    if (rate) *rate = r;
    return w;
}

/* The clip padded with silence or cut at the end to a's length, as a's
 * log-mel spectrogram into out (n_mels x frames floats). -1 with the
 * library's message. */
static int features(cn_tensor *wave, const ds_audio *a, float *out) {
    /* A negative pad cuts. */
    int64_t pads[2] = {0, clip_samples(a) - cn_dim(wave, 0)};
    cn_tensor *x = cn_pad(wave, pads, 2, CN_PAD_CONSTANT, 0.0);
    cn_mel_opts o = mel_opts(a);
    cn_tensor *s = cn_contiguous(cn_log_mel_spectrogram(x, &o));
    if (!s) return -1;
    memcpy(out, cn_data(s), sizeof *out * (size_t)cn_numel(s));
    return 0;
}

/* a's defaults and the checks the library would make later, named with
 * the options a user gives. */
static int resolve(ds_audio *a, int64_t longest) {
    if (!a->n_fft) a->n_fft = DEFAULT_N_FFT;
    if (!a->hop) a->hop = a->n_fft / 2;
    if (!a->n_mels) a->n_mels = DEFAULT_N_MELS;
    if (!a->fmax) a->fmax = a->rate / 2.0;
    if (!a->seconds) a->seconds = (double)longest / a->rate;
    if (a->fmax > a->rate / 2.0 || a->fmin >= a->fmax) {
        cn_tool_fail("--fmin %g and --fmax %g Hz: they need fmin < fmax <= %g, half the clips' "
                     "rate of %d Hz", a->fmin, a->fmax, a->rate / 2.0, a->rate);
        return -1;
    }
    if (clip_samples(a) <= a->n_fft / 2) {
        cn_tool_fail("clips of %g s are %lld samples at %d Hz, too short for --n-fft %d (more "
                     "than %d needed): give a longer --clip-seconds", a->seconds,
                     (long long)clip_samples(a), a->rate, a->n_fft, a->n_fft / 2);
        return -1;
    }
    return 0;
}

static int64_t frames_of(const ds_audio *a) {
    return 1 + (clip_samples(a) + 2 * (a->n_fft / 2) - a->n_fft) / a->hop;
}

/* The clips of s as spectrograms [n, 1, n_mels, frames] f32, and labels. */
static int assemble(const ds_file_set *s, cn_tensor **waves, const ds_audio *a, dataset *d) {
    int64_t per = a->n_mels * frames_of(a);
    d->images = cn_empty(CN_F32, CN_SHAPE(s->n, 1, a->n_mels, frames_of(a)));
    d->labels = cn_from_data(CN_I64, CN_SHAPE(s->n), s->labels);
    if (!d->images || !d->labels) return -1;
    float *o = cn_data(d->images);
    for (int i = 0; i < s->n; i++) {
        cn_scope_begin();
        int rc = features(waves[i], a, o + (size_t)i * (size_t)per);
        cn_scope_end();
        if (rc < 0) {
            cn_tool_fail("%s: %s", s->paths[i], cn_last_error());
            return -1;
        }
    }
    return 0;
}

/* One mean and standard deviation over every value of the training
 * spectrograms: log powers sit far from 0 (about -20 to 5). */
static int standardize(const dataset *tr, ds_info *info) {
    info->nnorm = 1;
    info->mean = calloc(1, sizeof(double));
    info->std = calloc(1, sizeof(double));
    if (!info->mean || !info->std) {
        cn_tool_fail("out of memory");
        return -1;
    }
    cn_tool_mean_std(cn_data(tr->images), cn_numel(tr->images), 1, info->mean, info->std);
    return 0;
}

int cn_tool_audio_load(const ds_spec *sp, bool stats, dataset *tr, dataset *te, ds_info *info) {
    ds_files cf;
    if (cn_tool_class_files(sp->data, wav_ext, WAV_FILES, &cf) < 0) return -1;
    int ntot = cf.set[0].n + cf.set[1].n;
    cn_tensor **waves = calloc((size_t)(ntot ? ntot : 1), sizeof *waves);
    ds_audio a = stats ? info->audio : sp->audio;
    int rc = waves ? 0 : -1;
    int64_t longest = 0;
    for (int i = 0; rc == 0 && i < ntot; i++) {
        const char *p = i < cf.set[0].n ? cf.set[0].paths[i] : cf.set[1].paths[i - cf.set[0].n];
        /* Retained, not kept: released below, not by the enclosing scope. */
        cn_scope_begin();
        waves[i] = cn_retain(read_clip(p, a.rate, &a.rate));
        cn_scope_end();
        if (!waves[i]) rc = -1;
        else if (i < cf.set[0].n && cn_dim(waves[i], 0) > longest) longest = cn_dim(waves[i], 0);
    }
    if (rc == 0 && !stats) rc = resolve(&a, longest);
    dataset all = {0};
    if (rc == 0) rc = assemble(&cf.set[0], waves, &a, cf.split ? tr : &all);
    if (rc == 0 && cf.split) rc = assemble(&cf.set[1], waves + cf.set[0].n, &a, te);
    if (rc == 0 && !cf.split) rc = cn_tool_holdout(all.images, all.labels, sp, tr, te);
    for (int i = 0; waves && i < ntot; i++) cn_release(waves[i]);
    free(waves);
    if (rc == 0) rc = cn_tool_take_classes(sp->data, stats, &cf, info);
    cn_tool_class_files_free(&cf);
    if (rc < 0) return -1;
    info->kind = DS_AUDIO;
    info->ndim = 3;
    info->shape[0] = 1;
    info->shape[1] = a.n_mels;
    info->shape[2] = frames_of(&a);
    info->scale255 = false;
    info->audio = a;
    return stats ? 0 : standardize(tr, info);
}

/* ---- checkpoints and single clips ---- */

static const char *const keys[] = {"audio_sample_rate", "audio_n_fft", "audio_hop",
                                   "audio_n_mels",      "audio_fmin",  "audio_fmax",
                                   "audio_clip_seconds"};

static void values(const ds_audio *a, double v[7]) {
    v[0] = a->rate, v[1] = a->n_fft, v[2] = a->hop, v[3] = a->n_mels;
    v[4] = a->fmin, v[5] = a->fmax, v[6] = a->seconds;
}

void cn_tool_audio_meta(const ds_info *info, ds_meta *m) {
    double v[7];
    values(&info->audio, v);
    for (int i = 0; i < 7; i++) {
        char buf[64];
        snprintf(buf, sizeof buf, "%.17g", v[i]);
        cn_tool_meta_add(m, keys[i], strdup(buf));
    }
}

int cn_tool_audio_from_checkpoint(const char *path, const cn_checkpoint *c, ds_info *info) {
    double v[7];
    for (int i = 0; i < 7; i++) {
        const char *s = cn_checkpoint_metadata(c, keys[i]);
        char *end = NULL;
        v[i] = s ? strtod(s, &end) : NAN;
        if (!s || end == s || *end || !isfinite(v[i]) || v[i] < 0 || v[i] > 1e9 ||
            (i < 4 && (v[i] < 1 || v[i] != floor(v[i])))) {
            cn_tool_fail("%s: metadata %s is missing or damaged (an audio checkpoint has every "
                         "audio_* key)", path, keys[i]);
            return -1;
        }
    }
    ds_audio *a = &info->audio;
    *a = (ds_audio){.rate = (int)v[0], .n_fft = (int)v[1], .hop = (int)v[2], .n_mels = (int)v[3],
                    .fmin = v[4], .fmax = v[5], .seconds = v[6]};
    if (info->ndim != 3 || info->shape[0] != 1 || info->shape[1] != a->n_mels ||
        clip_samples(a) <= a->n_fft / 2 || info->shape[2] != frames_of(a)) {
        cn_tool_fail("%s: its audio metadata does not give its input shape %lldx%lldx%lld (the "
                     "checkpoint is damaged)", path, (long long)info->shape[0],
                     (long long)info->shape[1], (long long)info->shape[2]);
        return -1;
    }
    return 0;
}

int cn_tool_audio_input(const char *path, const ds_info *info, float *out) {
    cn_scope_begin();
    cn_tensor *w = read_clip(path, info->audio.rate, NULL);
    int rc = w ? features(w, &info->audio, out) : -1;
    if (w && rc < 0) cn_tool_fail("%s: %s", path, cn_last_error());
    cn_scope_end();
    if (rc < 0) return -1;
    int64_t n = info->shape[1] * info->shape[2];
    for (int64_t i = 0; info->nnorm && i < n; i++)
        out[i] = (float)((out[i] - info->mean[0]) / info->std[0]);
    return 0;
}
