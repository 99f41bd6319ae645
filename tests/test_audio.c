/* Audio: WAV files written here byte by byte (16-bit PCM, float, stereo)
 * read back through cn_load_wav; damaged files refused; the mel filter
 * bank and the log-mel spectrogram against a reference computed here in
 * double from the definitions (a direct DFT, the triangles from their
 * formula), not through FFTW. */
#include "io_util.h"

#include <math.h>

static const double PI = 3.14159265358979323846;

/* ---- WAV files by hand ---- */

static void put16(unsigned char *p, unsigned v) {
    p[0] = (unsigned char)(v & 255);
    p[1] = (unsigned char)(v >> 8 & 255);
}
static void put32(unsigned char *p, uint32_t v) {
    put16(p, v & 0xFFFF);
    put16(p + 2, v >> 16);
}

/* A RIFF WAV of frames x channels interleaved samples: 16-bit PCM (tag 1,
 * samples as whole numbers) or 32-bit float (tag 3). data_len: the size
 * the data chunk announces (0: the true one). Returns the file's size. */
static size_t wav_bytes(unsigned char *out, int tag, int channels, int rate, const double *s,
                        int frames, uint32_t data_len) {
    int bytes = tag == 1 ? 2 : 4, n = frames * channels;
    uint32_t data = (uint32_t)(n * bytes);
    memcpy(out, "RIFF", 4);
    put32(out + 4, 36 + data);
    memcpy(out + 8, "WAVEfmt ", 8);
    put32(out + 16, 16);
    put16(out + 20, (unsigned)tag);
    put16(out + 22, (unsigned)channels);
    put32(out + 24, (uint32_t)rate);
    put32(out + 28, (uint32_t)(rate * channels * bytes));
    put16(out + 32, (unsigned)(channels * bytes));
    put16(out + 34, (unsigned)(bytes * 8));
    memcpy(out + 36, "data", 4);
    put32(out + 40, data_len ? data_len : data);
    for (int i = 0; i < n; i++) {
        unsigned char *p = out + 44 + i * bytes;
        if (tag == 1) {
            put16(p, (unsigned)(uint16_t)(int16_t)s[i]);
        } else {
            float f = (float)s[i];
            uint32_t u;
            memcpy(&u, &f, 4);
            put32(p, u);
        }
    }
    return 44 + (size_t)data;
}

static const char *write_wav(const char *name, int tag, int channels, int rate, const double *s,
                             int frames) {
    static unsigned char buf[1 << 16];
    size_t n = wav_bytes(buf, tag, channels, rate, s, frames, 0);
    const char *p = io_path(name);
    CHECK(io_write(p, buf, n) == 0);
    return p;
}

static void test_wav_read(void) {
    double pcm[6] = {0, 1, -1, 32767, -32768, 12345};
#ifndef CN_HAVE_SNDFILE
    CHECK_ERROR(cn_load_wav(write_wav("a.wav", 1, 1, 8000, pcm, 6), NULL),
                "built without libsndfile");
    return;
#else
    int rate = 0;
    cn_tensor *t = cn_load_wav(write_wav("pcm16.wav", 1, 1, 8000, pcm, 6), &rate);
    CHECK(t && cn_tensor_dtype(t) == CN_F32);
    CHECK_SHAPE(t, 6);
    CHECK_EQ_INT(rate, 8000);
    const float *v = t ? cn_data(t) : NULL;
    /* 16-bit samples are k / 32768, exactly. */
    for (int i = 0; v && i < 6; i++) CHECK_CLOSE(v[i], pcm[i] / 32768.0, 0, 0);

    double fl[5] = {0.5, -0.25, 1.0 / 3, -1, 0.875};
    t = cn_load_wav(write_wav("float.wav", 3, 1, 44100, fl, 5), &rate);
    CHECK_SHAPE(t, 5);
    CHECK_EQ_INT(rate, 44100);
    v = t ? cn_data(t) : NULL;
    for (int i = 0; v && i < 5; i++) CHECK_CLOSE(v[i], (float)fl[i], 0, 0);

    /* Stereo: the mean of the two channels. */
    double st[8] = {0.5, 0.25, -1, 1, 0.125, 0.375, 0.75, -0.25};
    t = cn_load_wav(write_wav("stereo.wav", 3, 2, 22050, st, 4), &rate);
    CHECK_SHAPE(t, 4);
    CHECK_EQ_INT(rate, 22050);
    v = t ? cn_data(t) : NULL;
    for (int i = 0; v && i < 4; i++) CHECK_CLOSE(v[i], (st[2 * i] + st[2 * i + 1]) / 2, 0, 0);
    double st16[4] = {1000, 3000, -200, 100};
    t = cn_load_wav(write_wav("stereo16.wav", 1, 2, 16000, st16, 2), NULL);
    v = t ? cn_data(t) : NULL;
    CHECK(v && v[0] == (float)(2000 / 32768.0) && v[1] == (float)(-50 / 32768.0));

    /* No frames at all is a clip of length 0, not an error. */
    t = cn_load_wav(write_wav("none.wav", 1, 1, 8000, pcm, 0), NULL);
    CHECK_SHAPE(t, 0);
#endif
}

static void test_wav_bad(void) {
#ifdef CN_HAVE_SNDFILE
    double s[64];
    for (int i = 0; i < 64; i++) s[i] = i * 100;
    unsigned char buf[4096];
    size_t n = wav_bytes(buf, 1, 1, 8000, s, 64, 0);
    const char *p = io_path("cut.wav");
    /* Cut in the data: the header announces 128 bytes, 28 remain. */
    CHECK(io_write(p, buf, 44 + 28) == 0);
    CHECK_ERROR(cn_load_wav(p, NULL), "truncated: its data chunk announces 128 bytes, the file holds 28");
    /* Cut in the header. */
    CHECK(io_write(p, buf, 30) == 0);
    CHECK_ERROR(cn_load_wav(p, NULL), "cannot read");
    CHECK(io_write(p, "", 0) == 0);
    CHECK_ERROR(cn_load_wav(p, NULL), "is empty, not a WAV file");
    CHECK(io_write(p, "hello, world\n", 13) == 0);
    CHECK_ERROR(cn_load_wav(p, NULL), "as a WAV file");
    CHECK_ERROR(cn_load_wav(io_path("missing.wav"), NULL), "missing.wav");
    CHECK_ERROR(cn_load_wav(io_dir, NULL), "is a directory");
    CHECK_ERROR(cn_load_wav(NULL, NULL), "path is NULL");
    /* A streaming writer's unknown length (0xFFFFFFFF) is read to the end. */
    n = wav_bytes(buf, 1, 1, 8000, s, 64, UINT32_MAX);
    CHECK(io_write(p, buf, n) == 0);
    cn_tensor *t = cn_load_wav(p, NULL);
    CHECK_SHAPE(t, 64);
    /* The sample limit, from the environment. */
    setenv("CN_MAX_AUDIO_SAMPLES", "10", 1);
    CHECK_ERROR(cn_load_wav(p, NULL), "more than the limit of 10 samples (set CN_MAX_AUDIO_SAMPLES");
    setenv("CN_MAX_AUDIO_SAMPLES", "ten", 1);
    CHECK_ERROR(cn_load_wav(p, NULL), "CN_MAX_AUDIO_SAMPLES is 'ten'");
    unsetenv("CN_MAX_AUDIO_SAMPLES");
#endif
}

/* ---- the reference ---- */

static double ref_mel(double f) { return 2595.0 * log10(1.0 + f / 700.0); }
static double ref_hz(double m) { return 700.0 * (pow(10.0, m / 2595.0) - 1.0); }

/* Filter m at bin k, from the triangle's definition. */
static double ref_filter(const cn_mel_opts *o, int m, int k) {
    double lo = ref_mel(o->fmin), hi = ref_mel(o->fmax), step = (hi - lo) / (o->n_mels + 1);
    double a = ref_hz(lo + m * step), b = ref_hz(lo + (m + 1) * step),
           c = ref_hz(lo + (m + 2) * step);
    double f = k * (double)o->sample_rate / o->n_fft;
    if (f <= a || f >= c) return 0;
    return f <= b ? (f - a) / (b - a) : (c - f) / (c - b);
}

static void test_filterbank(void) {
    cn_mel_opts o = {.sample_rate = 16000, .n_fft = 512, .n_mels = 40, .fmin = 20, .fmax = 7600};
    cn_tensor *fb = cn_mel_filterbank(&o);
    CHECK_SHAPE(fb, 40, 257);
    const float *w = fb ? cn_data(fb) : NULL;
    for (int m = 0; w && m < 40; m++)
        for (int k = 0; k < 257; k++) CHECK_CLOSE(w[m * 257 + k], ref_filter(&o, m, k), 1e-6, 1e-7);
    /* The defaults: torchaudio's 128 mels over n_fft 400, 0 to Nyquist. */
    fb = cn_mel_filterbank(&(cn_mel_opts){.sample_rate = 8000});
    CHECK_SHAPE(fb, 128, 201);
    CHECK_ERROR(cn_mel_filterbank(NULL), "opts is NULL");
    CHECK_ERROR(cn_mel_filterbank(&(cn_mel_opts){0}), "sample_rate 0");
    CHECK_ERROR(cn_mel_filterbank(&(cn_mel_opts){.sample_rate = 8000, .fmax = 5000}),
                "fmin 0 and fmax 5000 Hz: they need 0 <= fmin < fmax <= 4000");
    CHECK_ERROR(cn_mel_filterbank(&(cn_mel_opts){.sample_rate = 8000, .n_fft = 1}), "n_fft 1");
    CHECK_ERROR(cn_mel_filterbank(&(cn_mel_opts){.sample_rate = 8000, .hop = -1}), "hop -1");
    CHECK_ERROR(cn_mel_filterbank(&(cn_mel_opts){.sample_rate = 8000, .n_mels = -2}), "n_mels -2");
    CHECK_ERROR(cn_mel_filterbank(&(cn_mel_opts){.sample_rate = 8000, .floor = -1}), "floor -1");
}

#ifdef CN_HAVE_FFTW
/* log(max(mel power, floor)) of x (len samples) by the definitions:
 * reflection padding by n_fft / 2, a periodic Hann window, a direct DFT. */
static double *ref_log_mel(const cn_mel_opts *o, const double *x, int len, int *frames) {
    int nfft = o->n_fft, pad = nfft / 2, nf = nfft / 2 + 1;
    *frames = 1 + (len + 2 * pad - nfft) / o->hop;
    double *out = malloc(sizeof *out * (size_t)(o->n_mels * *frames));
    double *pw = malloc(sizeof *pw * (size_t)nf);
    for (int t = 0; t < *frames; t++) {
        for (int k = 0; k < nf; k++) {
            double re = 0, im = 0;
            for (int n = 0; n < nfft; n++) {
                int j = t * o->hop + n - pad;
                j = j < 0 ? -j : j >= len ? 2 * (len - 1) - j : j;
                double v = x[j] * (0.5 - 0.5 * cos(2 * PI * n / nfft));
                re += v * cos(2 * PI * k * n / nfft);
                im -= v * sin(2 * PI * k * n / nfft);
            }
            pw[k] = re * re + im * im;
        }
        for (int m = 0; m < o->n_mels; m++) {
            double s = 0;
            for (int k = 0; k < nf; k++) s += ref_filter(o, m, k) * pw[k];
            double fl = o->floor ? o->floor : 1e-10;
            out[m * *frames + t] = log(s > fl ? s : fl);
        }
    }
    free(pw);
    return out;
}

static void check_log_mel(const cn_mel_opts *o, const double *x, int len) {
    int frames;
    double *ref = ref_log_mel(o, x, len, &frames);
    cn_tensor *w = cn_from_data(CN_F64, CN_SHAPE(len), x);
    cn_tensor *s = cn_log_mel_spectrogram(w, o);
    CHECK_SHAPE(s, o->n_mels, frames);
    const float *v = s ? cn_data(s) : NULL;
    /* Computed in double, rounded once to f32. */
    for (int i = 0; v && i < o->n_mels * frames; i++) CHECK_CLOSE(v[i], ref[i], 1e-6, 1e-6);
    free(ref);
}
#endif

static void test_log_mel(void) {
    enum { LEN = 1500 };
    double x[LEN];
    th_seed(7);
    for (int i = 0; i < LEN; i++)
        x[i] = 0.5 * sin(2 * PI * 440 * i / 8000.0) + 0.3 * th_uniform(-1, 1);
#ifndef CN_HAVE_FFTW
    CHECK_ERROR(cn_log_mel_spectrogram(cn_from_data(CN_F64, CN_SHAPE(LEN), x),
                                       &(cn_mel_opts){.sample_rate = 8000}),
                "built without FFTW");
    return;
#else
    check_log_mel(&(cn_mel_opts){.sample_rate = 8000, .n_fft = 256, .hop = 100, .n_mels = 20,
                                 .fmin = 50, .fmax = 3500},
                  x, LEN);
    /* An odd n_fft, a hop that does not divide. */
    check_log_mel(&(cn_mel_opts){.sample_rate = 8000, .n_fft = 255, .hop = 77, .n_mels = 16,
                                 .fmax = 4000},
                  x, LEN);
    /* The defaults are torchaudio's: n_fft 400, hop 200, 128 mels, 0 to
     * Nyquist, floor 1e-10. */
    cn_tensor *wx = cn_from_data(CN_F64, CN_SHAPE(LEN), x);
    cn_tensor *dflt = cn_log_mel_spectrogram(wx, &(cn_mel_opts){.sample_rate = 8000});
    cn_tensor *full = cn_log_mel_spectrogram(
        wx, &(cn_mel_opts){.sample_rate = 8000, .n_fft = 400, .hop = 200, .n_mels = 128,
                           .fmax = 4000, .floor = 1e-10});
    CHECK_SHAPE(dflt, 128, 1 + LEN / 200);
    CHECK(dflt && full && !memcmp(cn_data(dflt), cn_data(full), sizeof(float) * 128 * 8));
    /* Silence: every value is the floor's log. */
    double z[600] = {0};
    cn_tensor *s = cn_log_mel_spectrogram(cn_from_data(CN_F64, CN_SHAPE(600), z),
                                          &(cn_mel_opts){.sample_rate = 8000, .n_fft = 128,
                                                         .n_mels = 8, .floor = 1e-6});
    CHECK_SHAPE(s, 8, 10);
    const float *v = s ? cn_data(s) : NULL;
    for (int i = 0; v && i < 80; i++) CHECK_CLOSE(v[i], log(1e-6), 1e-6, 0);
    /* A pure tone is loudest in the filter around its frequency. */
    double tone[4000];
    for (int i = 0; i < 4000; i++) tone[i] = sin(2 * PI * 1000 * i / 16000.0);
    cn_mel_opts o = {.sample_rate = 16000, .n_fft = 512, .hop = 256, .n_mels = 40, .fmax = 8000};
    s = cn_log_mel_spectrogram(cn_from_data(CN_F64, CN_SHAPE(4000), tone), &o);
    v = s ? cn_data(s) : NULL;
    int best = 0, frames = s ? (int)cn_dim(s, 1) : 0;
    for (int m = 1; v && m < 40; m++)
        if (v[m * frames + frames / 2] > v[best * frames + frames / 2]) best = m;
    CHECK_MSG(ref_filter(&o, best, 32) > 0.5, "the loudest filter, %d, is not the one at 1000 Hz",
              best);

    cn_mel_opts d = {.sample_rate = 8000};
    CHECK_ERROR(cn_log_mel_spectrogram(cn_from_data(CN_F64, CN_SHAPE(200), x), &d),
                "the wave has 200 samples; centred frames of n_fft 400 need more than 200");
    CHECK_ERROR(cn_log_mel_spectrogram(cn_zeros(CN_F32, CN_SHAPE(2, 500)), &d),
                "a 1-D float tensor of samples, not f32 [2, 500]");
    CHECK_ERROR(cn_log_mel_spectrogram(cn_zeros(CN_I32, CN_SHAPE(500)), &d), "not i32 [500]");
    CHECK(cn_log_mel_spectrogram(NULL, &d) == NULL);
#endif
}

int main(void) {
    io_init();
    RUN(test_wav_read);
    RUN(test_wav_bad);
    RUN(test_filterbank);
    RUN(test_log_mel);
    io_cleanup();
    return th_summary();
}
