/* Models written as text, a layer per line (docs/model-format.md), read by
 * tools/model_text.c for `chutney train --model-file` and rebuilt from a
 * checkpoint's copy of the text by eval, export and predict. */
#ifndef CN_TOOLS_MODEL_TEXT_H
#define CN_TOOLS_MODEL_TEXT_H

#include "tools.h"

/* What a text describes besides its module: the sample shape of its
 * `input` line and the shape each sample leaves the last layer with. */
typedef struct cn_tool_text_shape {
    int in_ndim, out_ndim;
    int64_t in[CN_MAX_DIMS], out[CN_MAX_DIMS];
    int last_line; /* the line of the last layer (for "end with linear K") */
    int dropouts_unset; /* `dropout` lines without a p (they take --dropout's) */
} cn_tool_text_shape;

/* The module a text describes (name: the file's name, for messages), its
 * shapes checked layer by layer. dropout: p of every `dropout` line that
 * gives none. NULL after cn_tool_fail with "NAME:LINE: what is wrong". */
cn_module *cn_tool_model_text_parse(const char *text, const char *name, double dropout,
                                    cn_tool_text_shape *shape);

/* The text's samples must be the data's (ndim, in) and its output [nout]:
 * 0, or -1 after cn_tool_fail naming the line to change. */
int cn_tool_model_text_fits(const cn_tool_text_shape *s, const char *name, int ndim,
                            const int64_t *in, int64_t nout);

/* The metadata that holds a text model in a checkpoint: "model" is
 * CN_TOOL_TEXT_MODEL and "model_text" the text itself. */
#define CN_TOOL_TEXT_MODEL "file"

/* The model to rebuild for a checkpoint: a built-in one by name, the
 * checkpoint's own text (its `dropout` lines at p), or the ONNX file it
 * names ("onnx", tools/train_onnx.c), shaped for the data
 * (ndim, in, nout). NULL after cn_tool_fail. */
cn_module *cn_tool_model_for_checkpoint(const char *model, const char *ckpt, double dropout,
                                        int ndim, const int64_t *in, int64_t nout);

/* The model name a checkpoint of `chutney train` holds, into buf (a
 * built-in name, CN_TOOL_TEXT_MODEL or "onnx"); false after cn_tool_fail. */
bool cn_tool_checkpoint_model(const char *path, char *buf, size_t size);

#endif
