/* The collectives on CUDA tensors, through NCCL: one communicator per GPU
 * (its unique id made by rank 0 and broadcast over MPI), every call issued
 * on the device's stream, so it is ordered with the kernels around it like
 * any other work on the device (cn_device_synchronize waits for it).
 *
 * Unlike the CPU's ring (dist.c), NCCL chooses its own algorithm; for one
 * job on one set of GPUs its choice, and so its order of summation, stays
 * the same from run to run (NCCL's documented determinism for a fixed
 * configuration), but it is NCCL's order, not a fixed ring. */
#include "dist.h"
#include "backend.h"

#if defined(CN_HAVE_NCCL) && defined(CN_HAVE_CUDA)
#include "cuda/cuda_backend.h"

#include <nccl.h>
#include <stdio.h>

#define MAX_GPUS 64
static ncclComm_t comms[MAX_GPUS];
static pthread_mutex_t comms_lock = PTHREAD_MUTEX_INITIALIZER;

static int nccl_fail(const char *fn, const char *what, ncclResult_t r) {
    return cn_failc(r == ncclSystemError ? CN_ENOMEM : CN_ESTATE, "%s: %s: NCCL: %s", fn, what,
                    ncclGetErrorString(r));
}

/* The communicator of GPU index (made on first use: every rank must reach
 * this for the same GPU index in the same order, as with any collective). */
static ncclComm_t comm_of(const char *fn, cn_cuda_dev *d) {
    int i = d->g.index;
    if (i >= MAX_GPUS) {
        cn_failc(CN_EUNSUPPORTED, "%s: cuda:%d (NCCL communicators for the first %d GPUs)", fn,
                 i, MAX_GPUS);
        return NULL;
    }
    pthread_mutex_lock(&comms_lock);
    ncclComm_t c = comms[i];
    if (!c) {
        ncclUniqueId id;
        ncclResult_t r = ncclSuccess;
        if (cn_dist_rank() == 0) r = ncclGetUniqueId(&id);
        int rc = r == ncclSuccess ? cn_dist_broadcast_raw(&id, sizeof id, 0) : CN_ESTATE;
        if (r != ncclSuccess) nccl_fail(fn, "ncclGetUniqueId", r);
        if (rc == CN_OK && cn_cuda_enter(fn, d) == CN_OK) {
            r = ncclCommInitRank(&c, cn_dist_size(), id, cn_dist_rank());
            if (r != ncclSuccess) {
                nccl_fail(fn, "ncclCommInitRank", r);
                c = NULL;
            }
        }
        comms[i] = c;
    }
    pthread_mutex_unlock(&comms_lock);
    return c;
}

static bool nccl_type(cn_dtype dt, ncclDataType_t *t) {
    switch (dt) {
    case CN_F32: *t = ncclFloat32; return true;
    case CN_F64: *t = ncclFloat64; return true;
    case CN_I32: *t = ncclInt32; return true;
    case CN_I64: *t = ncclInt64; return true;
    case CN_F16: *t = ncclFloat16; return true;
    case CN_BF16: *t = ncclBfloat16; return true;
    default: return false;
    }
}

static void *dptr(const cn_tensor *t) {
    return (char *)t->storage->data + (size_t)t->offset * cn_dsize((cn_dtype)t->dtype);
}

/* The device, its communicator and the NCCL type for t; NULL after cn_fail. */
static cn_cuda_dev *prepare(const char *fn, const cn_tensor *t, ncclComm_t *c, ncclDataType_t *nt) {
    if (!nccl_type((cn_dtype)t->dtype, nt)) {
        cn_failc(CN_EUNSUPPORTED, "%s: dtype %s on a GPU (f32, f64, f16, bf16, i32, i64)", fn,
                 cn_dtype_name((cn_dtype)t->dtype));
        return NULL;
    }
    cn_cuda_dev *d = cn_cuda_dev_of(t->storage);
    if (!d || cn_cuda_enter(fn, d) < 0 || !(*c = comm_of(fn, d))) return NULL;
    return d;
}

int cn_dist_nccl_allreduce(cn_tensor *t, cn_dist_op op) {
    static const char fn[] = "dist_allreduce";
    ncclComm_t c;
    ncclDataType_t nt;
    cn_cuda_dev *d = prepare(fn, t, &c, &nt);
    if (!d) return CN_EINVAL;
    ncclRedOp_t rop = op == CN_DIST_MAX ? ncclMax : op == CN_DIST_MIN ? ncclMin
                      : op == CN_DIST_MEAN ? ncclAvg : ncclSum;
    ncclResult_t r = ncclAllReduce(dptr(t), dptr(t), (size_t)cn_numel(t), nt, rop, c,
                                   (cudaStream_t)d->stream);
    return r == ncclSuccess ? CN_OK : nccl_fail(fn, "ncclAllReduce", r);
}

int cn_dist_nccl_broadcast(cn_tensor *t, int root) {
    static const char fn[] = "dist_broadcast";
    ncclComm_t c;
    ncclDataType_t nt;
    cn_cuda_dev *d = prepare(fn, t, &c, &nt);
    if (!d) return CN_EINVAL;
    ncclResult_t r = ncclBroadcast(dptr(t), dptr(t), (size_t)cn_numel(t), nt, root, c,
                                   (cudaStream_t)d->stream);
    return r == ncclSuccess ? CN_OK : nccl_fail(fn, "ncclBroadcast", r);
}

int cn_dist_nccl_allgather(const cn_tensor *t, cn_tensor *out) {
    static const char fn[] = "dist_allgather";
    ncclComm_t c;
    ncclDataType_t nt;
    cn_cuda_dev *d = prepare(fn, t, &c, &nt);
    if (!d) return CN_EINVAL;
    ncclResult_t r = ncclAllGather(dptr(t), dptr(out), (size_t)cn_numel(t), nt, c,
                                   (cudaStream_t)d->stream);
    return r == ncclSuccess ? CN_OK : nccl_fail(fn, "ncclAllGather", r);
}

bool cn_dist_nccl_available(void) { return true; }

#else

bool cn_dist_nccl_available(void) { return false; }
int cn_dist_nccl_allreduce(cn_tensor *t, cn_dist_op op) {
    (void)t, (void)op;
    return CN_EUNSUPPORTED;
}
int cn_dist_nccl_broadcast(cn_tensor *t, int root) {
    (void)t, (void)root;
    return CN_EUNSUPPORTED;
}
int cn_dist_nccl_allgather(const cn_tensor *t, cn_tensor *out) {
    (void)t, (void)out;
    return CN_EUNSUPPORTED;
}

#endif
