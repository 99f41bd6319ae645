/* MPI inside the library (dist.c): collectives and point-to-point messages
 * on raw host buffers, for the data-parallel wrapper (src/nn/ddp.c) and the
 * send/recv ops' kernels. */
#ifndef CN_NN_DIST_H
#define CN_NN_DIST_H

#include "../core/core.h"

bool cn_dist_initialized(void);
/* In place over n elements of dt (f32, f64, i32, i64); scratch, if not
 * NULL, holds at least n / size + 1 elements (else one is allocated). */
int cn_dist_allreduce_raw(void *data, int64_t n, cn_dtype dt, cn_dist_op op, void *scratch);
int cn_dist_broadcast_raw(void *data, size_t nbytes, int root);
/* out: size x nbytes, rank order. */
int cn_dist_allgather_raw(const void *in, size_t nbytes, void *out);
/* An error naming the first rank whose value differs from rank 0's
 * ("fn: rank 1's WHAT differs from rank 0's"). */
int cn_dist_check_same(uint64_t value, const char *fn, const char *what);
/* One message of nbytes to / from rank peer with tag (tags below 2^20 are
 * the ops' own; the library keeps the rest). Blocking. */
int cn_dist_send_raw(const void *data, size_t nbytes, int peer, int tag);
int cn_dist_recv_raw(void *data, size_t nbytes, int peer, int tag);

/* The same collectives on CUDA tensors through NCCL (dist_nccl.c), in
 * place on the device's stream; CN_EUNSUPPORTED without NCCL in the build. */
bool cn_dist_nccl_available(void);
/* NCCL is opened at run time, once, here or on the first collective on a
 * CUDA tensor: 1 when loaded, 0 when not found (or not in the build), -1
 * when the library lacks a function dist_nccl.c calls; *why (if not
 * NULL): the library, or why not. Those collectives fail without it. */
int cn_dist_nccl_load(const char **why);
int cn_dist_nccl_allreduce(cn_tensor *t, cn_dist_op op);
int cn_dist_nccl_broadcast(cn_tensor *t, int root);
int cn_dist_nccl_allgather(const cn_tensor *t, cn_tensor *out);

#endif
