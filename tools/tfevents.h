/* TensorBoard event files (tools/tfevents.c): TFRecord framing of Event
 * protos, the format tf.summary and torch.utils.tensorboard write. */
#ifndef CN_TOOLS_TFEVENTS_H
#define CN_TOOLS_TFEVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Is the writer built (protobuf-c found at build time)? */
extern const bool cn_tfevents_available;

typedef struct cn_tfevents cn_tfevents;

/* A new events.out.tfevents.<seconds>.<host>.<pid> in dir (made, with its
 * parents, if missing), starting with the file_version event. NULL with
 * errno set (ENOSYS: not built); its path goes to path (may be NULL). */
cn_tfevents *cn_tfevents_open(const char *dir, char *path, size_t path_size);
/* One event at step with a scalar summary per tag (values that are NaN
 * are left out; none left: nothing written), flushed so TensorBoard sees
 * it at once. 0, or -1 with errno. */
int cn_tfevents_scalars(cn_tfevents *w, int64_t step, const char *const *tags,
                        const double *values, int n);
/* 0, or -1 with errno when the last flush failed. */
int cn_tfevents_close(cn_tfevents *w);

#endif
