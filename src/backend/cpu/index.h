/* CPU kernels of the joining, indexing and padding ops (src/ops/index.c).
 * Every kernel writes a contiguous `out` already shaped by the op's infer;
 * inputs may have any strides. Errors only the data can show (an index out
 * of range) come back as a negative status after cn_failc, naming `op`. */
#ifndef CN_CPU_INDEX_H
#define CN_CPU_INDEX_H

#include "../../core/core.h"

/* Inputs already share out's dtype; out's size on axis is the sum of theirs. */
int cn_cpu_concat(cn_tensor *const *in, int nin, int axis, cn_tensor *out);

/* out[p] = x[p with p[axis] replaced by index[p]]. With `select`, index is
 * 1-D (or rank 0) and indexes the axis only (index_select); otherwise it has
 * out's shape (gather). */
int cn_cpu_gather(const char *op, const cn_tensor *x, const cn_tensor *index, int axis,
                  bool select, cn_tensor *out);

/* out = x, then out[p with p[axis] = index[p]] += src[p] for p in index's shape. */
int cn_cpu_scatter_add(const cn_tensor *x, const cn_tensor *index, const cn_tensor *src, int axis,
                       cn_tensor *out);

/* pads: (before, after) pairs from the last axis, npads entries; mode a
 * cn_pad_mode. The pads were checked against x's shape by infer. */
int cn_cpu_pad(const cn_tensor *x, const int64_t *pads, int npads, int mode, double value,
               cn_tensor *out);

/* out (i64, index's shape + [C]) gets 1 at each index value, 0 elsewhere. */
int cn_cpu_one_hot(const cn_tensor *index, cn_tensor *out);

/* Keep the elements on and below (upper = false) or on and above (upper =
 * true) diagonal k of the last two axes, zero the rest. */
int cn_cpu_tri(const cn_tensor *x, int64_t k, bool upper, cn_tensor *out);

/* The largest value of an integer tensor (INT64_MIN when it is empty). */
int cn_cpu_int_max(const cn_tensor *t, int64_t *max);

#endif
