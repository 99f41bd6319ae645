/* The data sets `chutney train --data` reads besides Fashion-MNIST's IDX
 * files: image folders, CSV tables and .npy pairs (tools/dataset.c), with
 * what a checkpoint must record to read them again the same way. */
#ifndef CN_TOOLS_DATASET_H
#define CN_TOOLS_DATASET_H

#include "tools.h"

typedef enum ds_kind { DS_IDX, DS_IMAGES, DS_CSV, DS_NPY } ds_kind;

/* The augmentations of --augment (bits). */
enum { DS_AUG_CROP = 1, DS_AUG_FLIP = 2, DS_AUG_JITTER = 4 };

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
    const char *keys[24], *vals[24];
    char *owned[24];
    int n;
} ds_meta;
int cn_tool_data_meta(const ds_spec *s, const ds_info *info, ds_meta *m);
void cn_tool_data_meta_free(ds_meta *m);

/* The spec and info a checkpoint recorded (one without data metadata is
 * Fashion-MNIST's: 1x28x28, 10 classes). 0, or -1 after cn_tool_fail. */
int cn_tool_data_from_checkpoint(const char *path, ds_spec *s, ds_info *info, char *data_buf,
                                 size_t data_size);
/* Fashion-MNIST's description (1x28x28, 10 classes), as for a checkpoint
 * without data metadata. */
void cn_tool_data_from_checkpoint_defaults(ds_info *info);

/* An image file as the model's input: decoded, converted to C channels,
 * resized to H x W (area average), scaled to [0, 1] and standardised as
 * the checkpoint says, into out (C*H*W floats). 0, or -1 after cn_tool_fail. */
int cn_tool_image_input(const char *path, const ds_info *info, float *out);

#endif
