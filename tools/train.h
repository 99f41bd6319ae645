/* What `chutney train` shares between its Fashion-MNIST models
 * (tools/train.c) and the GPT on a text file (tools/train_gpt.c): the
 * parsed command line and the checkpoint writer. */
#ifndef CN_TOOLS_TRAIN_H
#define CN_TOOLS_TRAIN_H

#include "tools.h"

#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"

typedef struct train_args {
    const char *model, *optimizer, *data, *save, *resume, *load;
    const char *logits; /* eval: write the test logits here (.npy) */
    const char *device_name; /* --device as given (NULL: the CPU) */
    cn_device device;        /* where the model lives and the batches go */
    bool on_device;          /* device is not the CPU: batches are copied there */
    int epochs, threads;
    int64_t batch, limit;
    double lr;
    uint64_t seed;
    bool json, quiet;
    bool static_mode; /* --mode static (the default): the step is one compiled program */
    bool distributed; /* --distributed: one rank of an MPI job (data-parallel) */
    int rank, nranks; /* 0 and 1 unless distributed */
    bool data_given;  /* --data was on the command line */
    /* --model gpt (0: its default; dropout < 0: its default) */
    int64_t vocab, context, layers, heads, embed;
    double dropout, clip;
} train_args;

/* The model state, the optimiser state under "optimizer.", and metadata:
 * format, model, optimizer, epochs_done, the RNG's state, lr, batch, seed,
 * device, then nextra more (keys[i], vals[i]), atomically (tools/train.c). */
int cn_tool_save_checkpoint(const char *path, const train_args *a, cn_module *m,
                            cn_optimizer *opt, int epochs_done, const char *const *keys,
                            const char *const *vals, int nextra);

/* `chutney train --model gpt` after the command line was checked
 * (tools/train_gpt.c). */
int cn_tool_train_gpt(train_args *a);

#endif
