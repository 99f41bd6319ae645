/* The data sets `chutney train --data` reads besides Fashion-MNIST's IDX
 * files: image folders, CSV tables and .npy pairs (tools/dataset.c), WAV
 * folders (tools/dataset_audio.c), with what a checkpoint must record to
 * read them again the same way. */
#ifndef CN_TOOLS_DATASET_H
#define CN_TOOLS_DATASET_H

#include "tools.h"

typedef enum ds_kind { DS_IDX, DS_IMAGES, DS_CSV, DS_NPY, DS_AUDIO } ds_kind;

/* The augmentations of --augment (bits). */
enum { DS_AUG_CROP = 1, DS_AUG_FLIP = 2, DS_AUG_JITTER = 4 };

/* How clips become spectrograms: --n-fft ... --clip-seconds as given (zero:
 * the default), then resolved with the clips' rate and saved in the
 * checkpoint. */
typedef struct ds_audio {
    int rate, n_fft, hop, n_mels;
    double fmin, fmax, seconds;
} ds_audio;

/* How to read the data: the command line's options (or, for eval, the
 * checkpoint's). Zero values mean "from the data". */
typedef struct ds_spec {
    const char *data, *labels;   /* --data, --labels (npy) */
    const char *target, *features; /* csv: --target, --features a,b,c */
    int task;                    /* -1 from the data, 0 classify, 1 regress */
    int64_t height, width;       /* --image-size HxW */
    int channels;                /* --channels 1|3 */
    double val_split;            /* --val-split F; < 0: the default, 0.2 */
    bool standardize;            /* --standardize: images' mean/std per channel */
    int augment;                 /* DS_AUG_* */
    ds_audio audio;              /* WAV folders */
} ds_spec;

/* What the model and the preprocessing need, saved in checkpoints. */
#define DS_MAX_NORM 4096
typedef struct ds_info {
    ds_kind kind;
    bool regress;
    int ndim;          /* of a sample: 3 ([C, H, W]) or 1 ([F]) */
    int64_t shape[3];
    int64_t nclasses;  /* classify; 1 output when regress */
    char **classes;    /* nclasses names (NULL: the label numbers) */
    int nnorm;         /* per channel or feature; 0: none */
    double *mean, *std;
    double y_mean, y_std; /* regress: the target's, on the training split */
    bool scale255;     /* u8 pixels: divided by 255 in the loader */
    ds_audio audio;    /* WAV folders: the spectrogram's parameters */
} ds_info;

typedef struct dataset {
    cn_tensor *images, *labels; /* [N, ...] u8 or f32; [N] i64 or [N, 1] f32 */
} dataset;

/* Which kind of data path is (a directory of IDX files, of x.npy, of class
 * folders; a .csv or .npy file). */
ds_kind cn_tool_data_kind(const char *path, const char *labels);

/* Both splits and info. With stats (eval), info's normalisation and
 * classes are the checkpoint's and are kept, not recomputed. limit > 0:
 * the first limit samples of each split. 0, or -1 after cn_tool_fail. */
int cn_tool_data_load(const ds_spec *s, int64_t limit, bool stats, dataset *tr, dataset *te,
                      ds_info *info);
void cn_tool_data_info_free(ds_info *info);

/* Metadata for checkpoints: keys and values (owned by buf, freed by
 * cn_tool_data_meta_free). Returns the count. */
typedef struct ds_meta {
    const char *keys[32], *vals[32];
    char *owned[32];
    int n;
} ds_meta;
int cn_tool_data_meta(const ds_spec *s, const ds_info *info, ds_meta *m);
/* One more entry: key (not copied) and value (malloc'd, taken over; NULL
 * for an empty value when out of memory). */
void cn_tool_meta_add(ds_meta *m, const char *key, char *value);
void cn_tool_data_meta_free(ds_meta *m);

/* The spec and info a checkpoint recorded (one without data metadata is
 * Fashion-MNIST's: 1x28x28, 10 classes). 0, or -1 after cn_tool_fail. */
int cn_tool_data_from_checkpoint(const char *path, ds_spec *s, ds_info *info, char *data_buf,
                                 size_t data_size);
/* Fashion-MNIST's description (1x28x28, 10 classes), as for a checkpoint
 * without data metadata. */
void cn_tool_data_from_checkpoint_defaults(ds_info *info);

/* A file as the model's input, into out (C*H*W floats): an image decoded,
 * converted to C channels, resized to H x W (area average), scaled to
 * [0, 1] and standardised as the checkpoint says; for an audio checkpoint
 * a WAV file as training read clips. 0, or -1 after cn_tool_fail. */
int cn_tool_file_input(const char *path, const ds_info *info, float *out);

/* ---- shared by the kinds of class folders (tools/dataset.c) ---- */

/* The files of one split: paths and class labels. */
typedef struct ds_file_set {
    int n, cap;
    char **paths;
    int64_t *labels;
} ds_file_set;

/* A folder of class folders: train/ and test/ (or val/) inside (split),
 * or the folder itself, to be split by --val-split. */
typedef struct ds_files {
    int nclasses;
    char **classes; /* the sorted folder names */
    bool split;
    ds_file_set set[2];
} ds_files;

/* data's class folders and their files that want takes (what: their kind,
 * for messages). 0, or -1 after cn_tool_fail. */
int cn_tool_class_files(const char *data, bool (*want)(const char *name), const char *what,
                        ds_files *f);
void cn_tool_class_files_free(ds_files *f);
/* info's classes from f (taken over); with stats (eval) the checkpoint's
 * stand and f's must be the same. 0, or -1 after cn_tool_fail. */
int cn_tool_take_classes(const char *data, bool stats, ds_files *f, ds_info *info);
/* The mean and standard deviation of n values stride apart (a standard
 * deviation of 1 where they are constant, so that dividing keeps 0). */
void cn_tool_mean_std(const float *x, int64_t n, int64_t stride, double *mean, double *std);
/* x and y split by --val-split (sp's, or the default): a fixed shuffle. */
int cn_tool_holdout(cn_tensor *x, cn_tensor *y, const ds_spec *sp, dataset *tr, dataset *te);

/* ---- WAV folders (tools/dataset_audio.c) ---- */

/* Whether dir's class folders (or train/'s) hold WAV files. */
bool cn_tool_audio_folder(const char *dir);
/* Both splits as log-mel spectrograms [N, 1, n_mels, frames] f32, info's
 * audio parameters resolved (with stats: the checkpoint's, kept). */
int cn_tool_audio_load(const ds_spec *s, bool stats, dataset *tr, dataset *te, ds_info *info);
/* The audio parameters as checkpoint metadata, and back (0, or -1 after
 * cn_tool_fail naming path). */
void cn_tool_audio_meta(const ds_info *info, ds_meta *m);
int cn_tool_audio_from_checkpoint(const char *path, const cn_checkpoint *c, ds_info *info);
/* A WAV file as the model's input (C*H*W floats), as training read clips. */
int cn_tool_audio_input(const char *path, const ds_info *info, float *out);
/* --n-fft and the other audio options: 1 if k is one and v is good,
 * 0 if k is not one, -1 after a usage message. */
int cn_tool_audio_option(ds_audio *a, const char *cmd, const char *k, const char *v);
/* The audio options given for data of this kind: 0, or CN_TOOL_USAGE
 * after a message (audio options for other data, --fmin not below --fmax). */
int cn_tool_audio_check(const char *cmd, ds_kind kind, const ds_audio *a);

#endif
