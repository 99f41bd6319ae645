/* The collectives on CUDA tensors, through NCCL: one communicator per GPU
 * (its unique id made by rank 0 and broadcast over MPI), every call issued
 * on the device's stream, so it is ordered with the kernels around it like
 * any other work on the device (cn_device_synchronize waits for it).
 *
 * Unlike the CPU's ring (dist.c), NCCL chooses its own algorithm; for one
 * job on one set of GPUs its choice, and so its order of summation, stays
 * the same from run to run (NCCL's documented determinism for a fixed
 * configuration), but it is NCCL's order, not a fixed ring.
 *
 * NCCL is opened at run time, on the first collective on a CUDA tensor, as
 * the CUDA driver, NVRTC and cuBLAS are (cuda/cuda_backend.h): linked in,
 * it was loaded at the start of every program using Chutney, though most
 * never run a collective on a GPU. nccl.h gives the types and enums; the
 * functions come from dlsym. Without the library those collectives fail,
 * saying so; the CPU's are unaffected. */
#include "dist.h"
#include "backend.h"

#if defined(CN_HAVE_NCCL) && defined(CN_HAVE_CUDA)
#include "cuda/cuda_backend.h"

#include <dlfcn.h>
#include <nccl.h>
#include <stdio.h>

/* NCCL 2's soname, then the development link. */
static const char *const nccl_names[] = {"libnccl.so.2", "libnccl.so"};

/* The functions this file calls. */
static struct {
    const char *(*GetErrorString)(ncclResult_t r);
    ncclResult_t (*GetUniqueId)(ncclUniqueId *id);
    ncclResult_t (*CommInitRank)(ncclComm_t *c, int nranks, ncclUniqueId id, int rank);
    ncclResult_t (*AllReduce)(const void *send, void *recv, size_t n, ncclDataType_t t,
                              ncclRedOp_t op, ncclComm_t c, cudaStream_t s);
    ncclResult_t (*Broadcast)(const void *send, void *recv, size_t n, ncclDataType_t t, int root,
                              ncclComm_t c, cudaStream_t s);
    ncclResult_t (*AllGather)(const void *send, void *recv, size_t n, ncclDataType_t t,
                              ncclComm_t c, cudaStream_t s);
} nc;
static int nc_state; /* 1 loaded, 0 no library, -1 a library without one of the functions */
static char nc_why[512] = "not loaded";
static pthread_once_t nc_once = PTHREAD_ONCE_INIT;

static void nc_load(void) {
    /* Each slot's type against nccl.h's declaration: a compile-time check
     * only (sizeof does not evaluate, so nothing is linked). */
    (void)sizeof(nc.GetErrorString = ncclGetErrorString);
    (void)sizeof(nc.GetUniqueId = ncclGetUniqueId);
    (void)sizeof(nc.CommInitRank = ncclCommInitRank);
    (void)sizeof(nc.AllReduce = ncclAllReduce);
    (void)sizeof(nc.Broadcast = ncclBroadcast);
    (void)sizeof(nc.AllGather = ncclAllGather);
    void *h = NULL;
    const char *lib = NULL;
    char err[384] = "";
    for (size_t i = 0; i < sizeof nccl_names / sizeof *nccl_names && !h; i++) {
        lib = nccl_names[i];
        h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        /* The first name's error: a library that is there but does not load
         * says why there, not only "no such file". */
        if (!h && i == 0) snprintf(err, sizeof err, "%s", dlerror());
    }
    if (!h) {
        snprintf(nc_why, sizeof nc_why, "NCCL not found (libnccl.so.2, libnccl.so: %s)", err);
        return;
    }
    struct {
        void **slot;
        const char *name;
    } syms[] = {
#define S(f) {(void **)&nc.f, "nccl" #f}
        S(GetErrorString), S(GetUniqueId), S(CommInitRank),
        S(AllReduce), S(Broadcast), S(AllGather),
#undef S
    };
    for (size_t i = 0; i < sizeof syms / sizeof *syms; i++) {
        /* POSIX: dlsym's object pointer converts to the slot's function type. */
        void *p = dlsym(h, syms[i].name);
        if (!p) {
            snprintf(nc_why, sizeof nc_why, "NCCL (%s) has no %s (too old an NCCL?)", lib,
                     syms[i].name);
            nc_state = -1;
            dlclose(h);
            return;
        }
        *syms[i].slot = p;
    }
    snprintf(nc_why, sizeof nc_why, "%s", lib);
    nc_state = 1;
}

int cn_dist_nccl_load(const char **why) {
    pthread_once(&nc_once, nc_load);
    if (why) *why = nc_why;
    return nc_state;
}

#define MAX_GPUS 64
static ncclComm_t comms[MAX_GPUS];
static pthread_mutex_t comms_lock = PTHREAD_MUTEX_INITIALIZER;

static int nccl_fail(const char *fn, const char *what, ncclResult_t r) {
    return cn_failc(r == ncclSystemError ? CN_ENOMEM : CN_ESTATE, "%s: %s: NCCL: %s", fn, what,
                    nc.GetErrorString(r));
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
        if (cn_dist_rank() == 0) r = nc.GetUniqueId(&id);
        int rc = r == ncclSuccess ? cn_dist_broadcast_raw(&id, sizeof id, 0) : CN_ESTATE;
        if (r != ncclSuccess) nccl_fail(fn, "ncclGetUniqueId", r);
        if (rc == CN_OK && cn_cuda_enter(fn, d) == CN_OK) {
            r = nc.CommInitRank(&c, cn_dist_size(), id, cn_dist_rank());
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
    const char *why;
    if (cn_dist_nccl_load(&why) != 1) {
        cn_failc(CN_EUNSUPPORTED, "%s: a tensor on %s: %s; collectives on CUDA tensors need it "
                 "(or move the tensor to the CPU with cn_to)", fn,
                 cn_dev_name(cn_t_device(t)), why);
        return NULL;
    }
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
    ncclResult_t r = nc.AllReduce(dptr(t), dptr(t), (size_t)cn_numel(t), nt, rop, c,
                                  (cudaStream_t)d->stream);
    return r == ncclSuccess ? CN_OK : nccl_fail(fn, "ncclAllReduce", r);
}

int cn_dist_nccl_broadcast(cn_tensor *t, int root) {
    static const char fn[] = "dist_broadcast";
    ncclComm_t c;
    ncclDataType_t nt;
    cn_cuda_dev *d = prepare(fn, t, &c, &nt);
    if (!d) return CN_EINVAL;
    ncclResult_t r = nc.Broadcast(dptr(t), dptr(t), (size_t)cn_numel(t), nt, root, c,
                                  (cudaStream_t)d->stream);
    return r == ncclSuccess ? CN_OK : nccl_fail(fn, "ncclBroadcast", r);
}

int cn_dist_nccl_allgather(const cn_tensor *t, cn_tensor *out) {
    static const char fn[] = "dist_allgather";
    ncclComm_t c;
    ncclDataType_t nt;
    cn_cuda_dev *d = prepare(fn, t, &c, &nt);
    if (!d) return CN_EINVAL;
    ncclResult_t r = nc.AllGather(dptr(t), dptr(out), (size_t)cn_numel(t), nt, c,
                                  (cudaStream_t)d->stream);
    return r == ncclSuccess ? CN_OK : nccl_fail(fn, "ncclAllGather", r);
}

bool cn_dist_nccl_available(void) { return true; }

#else

bool cn_dist_nccl_available(void) { return false; }
int cn_dist_nccl_load(const char **why) {
    if (why) *why = "this build has no NCCL (nccl.h was not found)";
    return 0;
}
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
