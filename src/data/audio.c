/* Audio to tensors: WAV files through libsndfile, log-mel spectrograms
 * through FFTW's real FFT. The conventions are torchaudio's
 * (MelSpectrogram's defaults: centred frames with reflection padding, a
 * periodic Hann window, the power spectrum, HTK's mel scale without
 * normalisation), so a user can compare with it; docs/training.md, "Audio".
 * Without either library its functions fail with "built without ...". */
#include "../io/fileio.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#ifdef CN_HAVE_SNDFILE
#include <sndfile.h>
#endif
#ifdef CN_HAVE_FFTW
#include <fftw3.h>
#endif

/* The most samples (frames x channels) a file may hold, and the variable
 * that changes it: 2^28 is 1 GiB as f32, about 50 minutes of 44.1 kHz
 * stereo. WAV may hold compressed data (ADPCM, GSM), so the file's size
 * alone does not bound the decoded size. docs/training.md, "Limits". */
#define CN_AUDIO_LIMIT_SAMPLES (UINT64_C(1) << 28)
#define CN_AUDIO_LIMIT_ENV "CN_MAX_AUDIO_SAMPLES"

#define MEL_MAX_FFT (1 << 20)
#define MEL_MAX_MELS 4096
#define CN_PI 3.14159265358979323846

/* ---- WAV ---- */

#ifdef CN_HAVE_SNDFILE
/* libsndfile reads a WAV whose data chunk runs past the end of the file as
 * far as the file goes, silently: a truncated file would become a shorter
 * clip. This walks the RIFF chunks (f at its start) and names the problem,
 * or gives NULL. A data size of 0 or 0xFFFFFFFF is what streaming writers
 * leave when they cannot seek back, and is accepted. */
static const char *riff_truncated(FILE *f, int64_t size, char *buf, size_t n) {
    unsigned char h[12];
    if (fread(h, 1, 12, f) != 12 || memcmp(h, "RIFF", 4) || memcmp(h + 8, "WAVE", 4)) return NULL;
    int64_t pos = 12;
    for (int chunks = 0; chunks < 4096 && pos + 8 <= size; chunks++) {
        if (fseek(f, (long)pos, SEEK_SET) != 0 || fread(h, 1, 8, f) != 8) return NULL;
        uint32_t len = cn_rd_le32(h + 4);
        if (!memcmp(h, "data", 4)) {
            int64_t held = size - pos - 8;
            if (len != 0 && len != UINT32_MAX && (int64_t)len > held) {
                snprintf(buf, n, "truncated: its data chunk announces %u bytes, the file holds %lld",
                         len, (long long)held);
                return buf;
            }
            return NULL;
        }
        pos += 8 + (int64_t)len + (len & 1);
    }
    return NULL;
}

static const char *major_name(int format) {
    SF_FORMAT_INFO fi = {.format = format & SF_FORMAT_TYPEMASK};
    return sf_command(NULL, SFC_GET_FORMAT_MAJOR, &fi, sizeof fi) == 0 && fi.name ? fi.name
                                                                                   : "another format";
}
#endif

cn_tensor *cn_load_wav(const char *path, int *sample_rate) {
    static const char fn[] = "load_wav";
    if (!path) return cn_fail("%s: path is NULL", fn);
#ifndef CN_HAVE_SNDFILE
    (void)sample_rate;
    return cn_fail("%s: cannot read '%s': Chutney was built without libsndfile (install "
                   "libsndfile1-dev and reconfigure)",
                   fn, path);
#else
    FILE *f;
    int64_t size;
    if (cn_fopen_regular(path, fn, &f, &size) != CN_OK) return NULL;
    uint64_t max_samples;
    if (cn_env_limit(CN_AUDIO_LIMIT_ENV, CN_AUDIO_LIMIT_SAMPLES, &max_samples, fn) != CN_OK) {
        fclose(f);
        return NULL;
    }
    if (size == 0) {
        fclose(f);
        return cn_fail("%s: '%s' is empty, not a WAV file", fn, path);
    }
    char why[160];
    const char *bad = riff_truncated(f, size, why, sizeof why);
    /* From the start, by the descriptor: libsndfile reads it directly, past
     * whatever the stream buffered (and a seek within the buffer need not
     * move the descriptor). */
    if (bad || fseek(f, 0, SEEK_SET) != 0 || lseek(fileno(f), 0, SEEK_SET) != 0) {
        fclose(f);
        return cn_fail("%s: cannot read '%s': %s", fn, path, bad ? bad : "cannot seek in the file");
    }
    /* The stream's descriptor, which stays open until fclose: sf_close
     * leaves it alone. */
    SF_INFO info = {0};
    SNDFILE *sf = sf_open_fd(fileno(f), SFM_READ, &info, 0);
    if (!sf) {
        const char *e = sf_strerror(NULL);
        fclose(f);
        return cn_fail("%s: cannot read '%s' as a WAV file: %s", fn, path, e);
    }
    cn_tensor *t = NULL;
    int major = info.format & SF_FORMAT_TYPEMASK;
    if (major != SF_FORMAT_WAV && major != SF_FORMAT_WAVEX && major != SF_FORMAT_RF64) {
        cn_fail("%s: '%s' is %s, not a WAV file", fn, path, major_name(info.format));
        goto out;
    }
    if (info.channels < 1 || info.samplerate < 1 || info.frames < 0) {
        cn_fail("%s: '%s' has %d channels at %d Hz: not a usable WAV file", fn, path,
                info.channels, info.samplerate);
        goto out;
    }
    if ((uint64_t)info.frames > max_samples / (uint64_t)info.channels) {
        cn_fail("%s: '%s' holds %lld frames of %d channels, more than the limit of %llu samples "
                "(set %s to raise it, 0 for no limit)",
                fn, path, (long long)info.frames, info.channels, (unsigned long long)max_samples,
                CN_AUDIO_LIMIT_ENV);
        goto out;
    }
    int64_t frames = info.frames, ch = info.channels;
    t = cn_t_empty(CN_F32, 1, &frames);
    /* Without a limit the product may not fit: then no buffer. */
    bool fits = (uint64_t)frames <= SIZE_MAX / sizeof(float) / (uint64_t)ch;
    size_t nbuf = fits ? (size_t)frames * (size_t)ch : 0;
    float *buf = t && fits ? malloc(sizeof *buf * (nbuf ? nbuf : 1)) : NULL;
    if (t && !buf) cn_fail("%s: out of memory reading '%s'", fn, path);
    sf_count_t got = buf ? sf_readf_float(sf, buf, frames) : 0;
    if (buf && got != frames) {
        cn_fail("%s: cannot read '%s': %lld of its %lld frames could be read (%s)", fn, path,
                (long long)got, (long long)frames, sf_strerror(sf));
        free(buf);
        buf = NULL;
    }
    if (!buf) {
        cn_release(t);
        t = NULL;
        goto out;
    }
    /* Mono as the mean of the channels (torchaudio's and librosa's
     * mix-down), summed in double so the order of channels does not round. */
    float *o = cn_t_ptr(t);
    for (int64_t i = 0; i < frames; i++) {
        double s = 0;
        for (int64_t c = 0; c < ch; c++) s += buf[i * ch + c];
        o[i] = (float)(s / (double)ch);
    }
    free(buf);
    if (sample_rate) *sample_rate = info.samplerate;
out:
    sf_close(sf);
    fclose(f);
    return t ? cn_scope_add(t) : NULL;
#endif
}

/* ---- the mel filter bank ---- */

static double hz_to_mel(double f) { return 2595.0 * log10(1.0 + f / 700.0); }
static double mel_to_hz(double m) { return 700.0 * (pow(10.0, m / 2595.0) - 1.0); }

/* o with its defaults filled in (torchaudio's MelSpectrogram: n_fft 400,
 * hop n_fft / 2, 128 mels, 0 to the Nyquist frequency), checked. */
static int mel_resolve(const char *fn, const cn_mel_opts *in, cn_mel_opts *o) {
    *o = in ? *in : (cn_mel_opts){0};
    if (!in) return cn_failc(CN_EINVAL, "%s: opts is NULL (the sample rate is needed)", fn);
    if (!o->n_fft) o->n_fft = 400;
    if (!o->hop) o->hop = o->n_fft / 2 > 0 ? o->n_fft / 2 : 1;
    if (!o->n_mels) o->n_mels = 128;
    if (!o->fmax) o->fmax = o->sample_rate / 2.0;
    if (!o->floor) o->floor = 1e-10;
    if (o->sample_rate < 1)
        return cn_failc(CN_EINVAL, "%s: sample_rate %d: it must be 1 Hz or more", fn, o->sample_rate);
    if (o->n_fft < 2 || o->n_fft > MEL_MAX_FFT)
        return cn_failc(CN_EINVAL, "%s: n_fft %d is not in 2..%d", fn, o->n_fft, MEL_MAX_FFT);
    if (o->hop < 1) return cn_failc(CN_EINVAL, "%s: hop %d: it must be 1 or more", fn, o->hop);
    if (o->n_mels < 1 || o->n_mels > MEL_MAX_MELS)
        return cn_failc(CN_EINVAL, "%s: n_mels %d is not in 1..%d", fn, o->n_mels, MEL_MAX_MELS);
    if (!(o->fmin >= 0) || !(o->fmax > o->fmin) || !(o->fmax <= o->sample_rate / 2.0))
        return cn_failc(CN_EINVAL,
                        "%s: fmin %g and fmax %g Hz: they need 0 <= fmin < fmax <= %g (half the "
                        "sample rate)",
                        fn, o->fmin, o->fmax, o->sample_rate / 2.0);
    if (!(o->floor > 0) || !isfinite(o->floor))
        return cn_failc(CN_EINVAL, "%s: floor %g: it must be a positive number", fn, o->floor);
    return CN_OK;
}

/* The n_mels x (n_fft/2 + 1) triangles, row-major, in double. */
static double *mel_weights(const cn_mel_opts *o) {
    int nf = o->n_fft / 2 + 1, nm = o->n_mels;
    double *w = malloc(sizeof *w * (size_t)nf * (size_t)nm);
    double *pts = malloc(sizeof *pts * (size_t)(nm + 2));
    if (!w || !pts) {
        free(w);
        free(pts);
        cn_fail("mel_filterbank: out of memory");
        return NULL;
    }
    double m0 = hz_to_mel(o->fmin), m1 = hz_to_mel(o->fmax);
    for (int i = 0; i < nm + 2; i++) pts[i] = mel_to_hz(m0 + (m1 - m0) * i / (nm + 1));
    for (int m = 0; m < nm; m++)
        for (int k = 0; k < nf; k++) {
            double f = (double)k * o->sample_rate / o->n_fft;
            double up = (f - pts[m]) / (pts[m + 1] - pts[m]);
            double down = (pts[m + 2] - f) / (pts[m + 2] - pts[m + 1]);
            double v = up < down ? up : down;
            w[(size_t)m * (size_t)nf + (size_t)k] = v > 0 ? v : 0;
        }
    free(pts);
    return w;
}

cn_tensor *cn_mel_filterbank(const cn_mel_opts *opts) {
    cn_mel_opts o;
    if (mel_resolve("mel_filterbank", opts, &o) != CN_OK) return NULL;
    double *w = mel_weights(&o);
    if (!w) return NULL;
    int64_t shape[2] = {o.n_mels, o.n_fft / 2 + 1};
    cn_tensor *t = cn_t_empty(CN_F32, 2, shape);
    if (t) {
        float *p = cn_t_ptr(t);
        for (int64_t i = 0; i < shape[0] * shape[1]; i++) p[i] = (float)w[i];
    }
    free(w);
    return t ? cn_scope_add(t) : NULL;
}

/* ---- the spectrogram ---- */

#ifdef CN_HAVE_FFTW
/* FFTW's planner is not thread-safe (its manual, "Thread safety"); running
 * a plan is. The loader's workers may make spectrograms at once. */
static pthread_mutex_t plan_lock = PTHREAD_MUTEX_INITIALIZER;
#endif

cn_tensor *cn_log_mel_spectrogram(const cn_tensor *wave, const cn_mel_opts *opts) {
    static const char fn[] = "log_mel_spectrogram";
    if (!wave) return NULL;
    cn_mel_opts o;
    if (mel_resolve(fn, opts, &o) != CN_OK) return NULL;
    char b[128];
    if (wave->ndim != 1 || !cn_dtype_is_float((cn_dtype)wave->dtype))
        return cn_fail("%s: the wave must be a 1-D float tensor of samples, not %s %s", fn,
                       cn_dtype_name((cn_dtype)wave->dtype),
                       cn_fmt_shape(b, sizeof b, wave->ndim, wave->shape));
    if (!wave->storage) return cn_fail("%s: the wave is symbolic (a static graph value)", fn);
    int64_t len = wave->shape[0], pad = o.n_fft / 2;
    /* Reflection needs more samples than the padding (as torch.stft). */
    if (len <= pad)
        return cn_fail("%s: the wave has %lld samples; centred frames of n_fft %d need more than "
                       "%lld (pad the clip first)",
                       fn, (long long)len, o.n_fft, (long long)pad);
#ifndef CN_HAVE_FFTW
    return cn_fail("%s: Chutney was built without FFTW (install libfftw3-dev and reconfigure)", fn);
#else
    int64_t frames = 1 + (len + 2 * pad - o.n_fft) / o.hop;
    int nf = o.n_fft / 2 + 1;
    cn_tensor *src = cn_t_host_contiguous((cn_tensor *)wave);
    double *x = src ? malloc(sizeof *x * (size_t)len) : NULL;
    double *w = x ? mel_weights(&o) : NULL;
    double *win = w ? malloc(sizeof *win * (size_t)o.n_fft) : NULL;
    double *power = win ? malloc(sizeof *power * (size_t)nf) : NULL;
    double *in = power ? fftw_alloc_real((size_t)o.n_fft) : NULL;
    fftw_complex *spec = in ? fftw_alloc_complex((size_t)nf) : NULL;
    int64_t shape[2] = {o.n_mels, frames};
    cn_tensor *t = spec ? cn_t_empty(CN_F32, 2, shape) : NULL;
    fftw_plan plan = NULL;
    if (t) {
        pthread_mutex_lock(&plan_lock);
        plan = fftw_plan_dft_r2c_1d(o.n_fft, in, spec, FFTW_ESTIMATE);
        pthread_mutex_unlock(&plan_lock);
    }
    if (plan) {
        for (int64_t i = 0; i < len; i++) x[i] = cn_load_f64(cn_t_ptr(src), (cn_dtype)src->dtype, i);
        /* Periodic (torch.hann_window's default): a frame of n_fft is one
         * period of a longer window, as spectral analysis wants. */
        for (int n = 0; n < o.n_fft; n++) win[n] = 0.5 - 0.5 * cos(2.0 * CN_PI * n / o.n_fft);
        float *out = cn_t_ptr(t);
        for (int64_t fr = 0; fr < frames; fr++) {
            for (int n = 0; n < o.n_fft; n++) {
                /* Sample j of the signal reflected at both ends (without
                 * repeating the edge sample: torch's "reflect"). */
                int64_t j = fr * o.hop + n - pad;
                if (j < 0) j = -j;
                if (j >= len) j = 2 * (len - 1) - j;
                in[n] = x[j] * win[n];
            }
            fftw_execute_dft_r2c(plan, in, spec);
            for (int k = 0; k < nf; k++)
                power[k] = spec[k][0] * spec[k][0] + spec[k][1] * spec[k][1];
            for (int m = 0; m < o.n_mels; m++) {
                const double *wm = w + (size_t)m * (size_t)nf;
                double s = 0;
                for (int k = 0; k < nf; k++) s += wm[k] * power[k];
                out[(size_t)m * (size_t)frames + (size_t)fr] = (float)log(s > o.floor ? s : o.floor);
            }
        }
        pthread_mutex_lock(&plan_lock);
        fftw_destroy_plan(plan);
        pthread_mutex_unlock(&plan_lock);
    } else if (t) {
        cn_release(t);
        t = cn_fail("%s: FFTW could not plan a real FFT of %d points", fn, o.n_fft);
    } else if (src) {
        cn_fail("%s: out of memory", fn);
    }
    fftw_free(spec);
    fftw_free(in);
    free(power);
    free(win);
    free(w);
    free(x);
    cn_release(src);
    return t ? cn_scope_add(t) : NULL;
#endif
}
