/* Processes working as one job over MPI: rank and size, and the collectives
 * on CPU tensors (allreduce, broadcast, allgather, barrier).
 *
 * Allreduce is a ring (reduce-scatter, then allgather) over MPI's
 * point-to-point calls rather than MPI_Allreduce: each chunk is summed in
 * one fixed order of the ranks, so a rerun gives the same bits on every
 * rank (MPI's own algorithm may change with the message size and the
 * library's tuning), and the traffic per rank is 2 (N - 1) / N of the
 * buffer, the optimum.
 *
 * It sits with the backends (below the ops) because the send and recv ops
 * kernels use its point-to-point calls (cn_dist_send_raw, _recv_raw).
 *
 * Threads: every MPI call of the library goes through one lock, on a
 * communicator of its own (a duplicate of MPI_COMM_WORLD), so the
 * data-parallel wrapper's communication thread (ddp.c) and the caller's
 * thread can both use it. Without MPI in the build, or started without
 * mpirun, the job is one process: the collectives are identities. */
#include "dist.h"
#include "backend.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef CN_HAVE_MPI
#include <mpi.h>
#endif

static int rank_ = 0, size_ = 1;
static bool inited;
#ifdef CN_HAVE_MPI
static bool we_started_mpi;
static pthread_mutex_t mpi_lock = PTHREAD_MUTEX_INITIALIZER;
static MPI_Comm comm = MPI_COMM_NULL;
#endif

bool cn_dist_available(void) {
#ifdef CN_HAVE_MPI
    return true;
#else
    return false;
#endif
}

int cn_dist_rank(void) { return rank_; }
int cn_dist_size(void) { return size_; }
bool cn_dist_initialized(void) { return inited; }

int cn_dist_init(int *argc, char ***argv) {
    if (inited) return CN_OK;
#ifdef CN_HAVE_MPI
    /* CN_DIST_NO_MPI=1: one process without starting MPI (the tests' leak
     * checker then sees only Chutney's memory: MPI's libraries keep theirs
     * to the end and unload the code that allocated it). */
    const char *no = getenv("CN_DIST_NO_MPI");
    if (no && no[0] == '1') {
        inited = true;
        return CN_OK;
    }
    int already = 0;
    MPI_Initialized(&already);
    if (!already) {
        int provided = 0;
        if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
            return cn_failc(CN_ESTATE, "dist_init: MPI_Init_thread failed");
        /* Serialized is enough: every call below holds mpi_lock. */
        if (provided < MPI_THREAD_SERIALIZED) {
            MPI_Finalize();
            return cn_failc(CN_EUNSUPPORTED, "dist_init: this MPI gives thread level %d; "
                                             "Chutney needs MPI_THREAD_SERIALIZED or more",
                            provided);
        }
        we_started_mpi = true;
    }
    /* Errors come back as codes (each call names what failed) instead of
     * aborting inside MPI. */
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm, &rank_);
    MPI_Comm_size(comm, &size_);
#else
    (void)argc, (void)argv;
#endif
    inited = true;
    cn_device_set_job(rank_, size_); /* devices "rank:R/..." of this rank are local */
    return CN_OK;
}

int cn_dist_finalize(void) {
    if (!inited) return CN_OK;
#ifdef CN_HAVE_MPI
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
    if (we_started_mpi) MPI_Finalize();
    we_started_mpi = false;
#endif
    inited = false;
    rank_ = 0;
    size_ = 1;
    cn_device_set_job(0, 1);
    return CN_OK;
}

void cn_dist_abort(int code) {
#ifdef CN_HAVE_MPI
    if (inited && size_ > 1) MPI_Abort(MPI_COMM_WORLD, code);
#endif
    exit(code);
}

#ifdef CN_HAVE_MPI
static int mpi_fail(const char *fn, const char *what, int err) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(err, msg, &len);
    return cn_failc(CN_ESTATE, "%s: %s failed on rank %d of %d: %s", fn, what, rank_, size_, msg);
}
#endif

/* ---- raw buffers ---- */

#ifdef CN_HAVE_MPI /* the reductions' arithmetic, on chunks received over MPI */
static void combine(void *acc, const void *in, int64_t n, cn_dtype dt, cn_dist_op op) {
#define LOOP(T)                                                                                    \
    do {                                                                                           \
        T *a = acc;                                                                                \
        const T *b = in;                                                                           \
        if (op == CN_DIST_MAX)                                                                     \
            for (int64_t i = 0; i < n; i++) a[i] = b[i] > a[i] || b[i] != b[i] ? b[i] : a[i];      \
        else if (op == CN_DIST_MIN)                                                                \
            for (int64_t i = 0; i < n; i++) a[i] = b[i] < a[i] || b[i] != b[i] ? b[i] : a[i];      \
        else                                                                                       \
            for (int64_t i = 0; i < n; i++) a[i] += b[i];                                          \
    } while (0)
    switch (dt) {
    case CN_F32: LOOP(float); break;
    case CN_F64: LOOP(double); break;
    case CN_I32: LOOP(int32_t); break;
    default: LOOP(int64_t); break;
    }
#undef LOOP
}

static void scale(void *p, int64_t n, cn_dtype dt, int by) {
    if (dt == CN_F32) {
        float s = 1.0f / (float)by, *a = p;
        for (int64_t i = 0; i < n; i++) a[i] *= s;
    } else if (dt == CN_F64) {
        double s = 1.0 / by, *a = p;
        for (int64_t i = 0; i < n; i++) a[i] *= s;
    } else if (dt == CN_I32) {
        int32_t *a = p;
        for (int64_t i = 0; i < n; i++) a[i] /= by;
    } else {
        int64_t *a = p;
        for (int64_t i = 0; i < n; i++) a[i] /= by;
    }
}
#endif

static bool dist_dtype(cn_dtype dt) {
    return dt == CN_F32 || dt == CN_F64 || dt == CN_I32 || dt == CN_I64;
}

#ifdef CN_HAVE_MPI
/* One exchange with both neighbours, in pieces MPI's int counts allow. */
static int sendrecv(const char *fn, const char *sbuf, size_t sbytes, char *rbuf, size_t rbytes,
                    int right, int left) {
    const size_t piece = (size_t)1 << 30;
    size_t so = 0, ro = 0;
    /* At least one exchange, empty or not: the neighbours count on it. */
    for (bool first = true; first || so < sbytes || ro < rbytes; first = false) {
        int sc = (int)(sbytes - so < piece ? sbytes - so : piece);
        int rc_ = (int)(rbytes - ro < piece ? rbytes - ro : piece);
        int err = MPI_Sendrecv(sbuf + so, sc, MPI_BYTE, right, 17, rbuf + ro, rc_, MPI_BYTE, left,
                               17, comm, MPI_STATUS_IGNORE);
        if (err != MPI_SUCCESS) return mpi_fail(fn, "MPI_Sendrecv", err);
        so += (size_t)sc;
        ro += (size_t)rc_;
    }
    return CN_OK;
}
#endif

int cn_dist_allreduce_raw(void *data, int64_t n, cn_dtype dt, cn_dist_op op, void *scratch) {
    if (!dist_dtype(dt))
        return cn_failc(CN_EUNSUPPORTED, "dist_allreduce: dtype %s (f32, f64, i32, i64 only)",
                        cn_dtype_name(dt));
    if (size_ == 1 || n == 0) return CN_OK;
#ifdef CN_HAVE_MPI
    static const char fn[] = "dist_allreduce";
    int P = size_, r = rank_, right = (r + 1) % P, left = (r + P - 1) % P;
    size_t es = cn_dsize(dt);
    char *buf = data;
    /* Chunk k: elements [k n / P, (k + 1) n / P). */
#define CH_LO(k) ((int64_t)(k) * (n / P) + (int64_t)(k) * (n % P) / P)
    int64_t maxc = (n + P - 1) / P + 1;
    char *tmp = scratch ? scratch : malloc((size_t)maxc * es);
    if (!tmp) return cn_failc(CN_ENOMEM, "%s: out of memory", fn);
    int rc = CN_OK;
    pthread_mutex_lock(&mpi_lock);
    /* Reduce-scatter: at step s, send chunk (r - s) and fold the received
     * chunk (r - s - 1) into ours; chunk k is summed in the order k, k+1,
     * ..., k-1 of the ranks, the same on every run. */
    for (int s = 0; s < P - 1 && rc == CN_OK; s++) {
        int sk = ((r - s) % P + P) % P, rk = ((r - s - 1) % P + P) % P;
        int64_t slo = CH_LO(sk), shi = CH_LO(sk + 1), rlo = CH_LO(rk), rhi = CH_LO(rk + 1);
        rc = sendrecv(fn, buf + slo * (int64_t)es, (size_t)(shi - slo) * es, tmp,
                      (size_t)(rhi - rlo) * es, right, left);
        if (rc == CN_OK) combine(buf + rlo * (int64_t)es, tmp, rhi - rlo, dt, op);
    }
    /* Rank r now holds chunk r + 1 whole; the mean's division happens once,
     * there, so every rank gets the same bits. */
    if (rc == CN_OK && op == CN_DIST_MEAN) {
        int k = (r + 1) % P;
        scale(buf + CH_LO(k) * (int64_t)es, CH_LO(k + 1) - CH_LO(k), dt, P);
    }
    /* Allgather: pass the finished chunks around the ring. */
    for (int s = 0; s < P - 1 && rc == CN_OK; s++) {
        int sk = ((r + 1 - s) % P + P) % P, rk = ((r - s) % P + P) % P;
        int64_t slo = CH_LO(sk), shi = CH_LO(sk + 1), rlo = CH_LO(rk), rhi = CH_LO(rk + 1);
        rc = sendrecv(fn, buf + slo * (int64_t)es, (size_t)(shi - slo) * es,
                      buf + rlo * (int64_t)es, (size_t)(rhi - rlo) * es, right, left);
    }
#undef CH_LO
    pthread_mutex_unlock(&mpi_lock);
    if (!scratch) free(tmp);
    return rc;
#else
    (void)data, (void)op, (void)scratch;
    return CN_OK;
#endif
}

int cn_dist_broadcast_raw(void *data, size_t nbytes, int root) {
    if (root < 0 || root >= size_)
        return cn_failc(CN_EINVAL, "dist_broadcast: root %d is not a rank (the job has %d)", root,
                        size_);
    if (size_ == 1 || nbytes == 0) return CN_OK;
#ifdef CN_HAVE_MPI
    const size_t piece = (size_t)1 << 30;
    int rc = CN_OK;
    pthread_mutex_lock(&mpi_lock);
    for (size_t o = 0; o < nbytes && rc == CN_OK; o += piece) {
        int c = (int)(nbytes - o < piece ? nbytes - o : piece);
        int err = MPI_Bcast((char *)data + o, c, MPI_BYTE, root, comm);
        if (err != MPI_SUCCESS) rc = mpi_fail("dist_broadcast", "MPI_Bcast", err);
    }
    pthread_mutex_unlock(&mpi_lock);
    return rc;
#else
    (void)data;
    return CN_OK;
#endif
}

int cn_dist_allgather_raw(const void *in, size_t nbytes, void *out) {
    if (size_ == 1) {
        memcpy(out, in, nbytes);
        return CN_OK;
    }
#ifdef CN_HAVE_MPI
    if (nbytes > (size_t)1 << 30)
        return cn_failc(CN_EUNSUPPORTED, "dist_allgather: %zu bytes per rank (at most 1 GiB)",
                        nbytes);
    pthread_mutex_lock(&mpi_lock);
    int err = MPI_Allgather(in, (int)nbytes, MPI_BYTE, out, (int)nbytes, MPI_BYTE, comm);
    pthread_mutex_unlock(&mpi_lock);
    return err == MPI_SUCCESS ? CN_OK : mpi_fail("dist_allgather", "MPI_Allgather", err);
#else
    return CN_OK;
#endif
}

/* Point-to-point: the lock is not held while waiting (a recv waits for its
 * peer, which may need this process's communication thread meanwhile), so
 * these poll with MPI_Test under the lock instead of blocking in MPI. */
#ifdef CN_HAVE_MPI
static int wait_req(const char *fn, const char *what, MPI_Request *req) {
    for (;;) {
        int done = 0;
        pthread_mutex_lock(&mpi_lock);
        int err = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        pthread_mutex_unlock(&mpi_lock);
        if (err != MPI_SUCCESS) return mpi_fail(fn, what, err);
        if (done) return CN_OK;
        sched_yield();
    }
}
#endif

static int p2p_check(const char *fn, size_t nbytes, int peer, int tag) {
    if (peer < 0 || peer >= size_)
        return cn_failc(CN_EINVAL, "%s: rank %d is not in the job (ranks 0 to %d)", fn, peer,
                        size_ - 1);
    if (peer == rank_)
        return cn_failc(CN_EINVAL, "%s: rank %d to itself: send and recv go between two ranks",
                        fn, peer);
    if (tag < 0 || tag >= (1 << 21))
        return cn_failc(CN_EINVAL, "%s: tag %d (0 to 2^20 - 1)", fn, tag);
    if (nbytes > (size_t)1 << 30)
        return cn_failc(CN_EUNSUPPORTED, "%s: %zu bytes in one message (at most 1 GiB)", fn,
                        nbytes);
    return CN_OK;
}

int cn_dist_send_raw(const void *data, size_t nbytes, int peer, int tag) {
    int rc = p2p_check("send", nbytes, peer, tag);
    if (rc < 0) return rc;
#ifdef CN_HAVE_MPI
    MPI_Request req;
    pthread_mutex_lock(&mpi_lock);
    int err = MPI_Isend(data, (int)nbytes, MPI_BYTE, peer, 1000 + tag, comm, &req);
    pthread_mutex_unlock(&mpi_lock);
    if (err != MPI_SUCCESS) return mpi_fail("send", "MPI_Isend", err);
    return wait_req("send", "MPI_Isend", &req);
#else
    (void)data;
    return CN_OK;
#endif
}

int cn_dist_recv_raw(void *data, size_t nbytes, int peer, int tag) {
    int rc = p2p_check("recv", nbytes, peer, tag);
    if (rc < 0) return rc;
#ifdef CN_HAVE_MPI
    MPI_Request req;
    pthread_mutex_lock(&mpi_lock);
    int err = MPI_Irecv(data, (int)nbytes, MPI_BYTE, peer, 1000 + tag, comm, &req);
    pthread_mutex_unlock(&mpi_lock);
    if (err != MPI_SUCCESS) return mpi_fail("recv", "MPI_Irecv", err);
    return wait_req("recv", "MPI_Irecv", &req);
#else
    (void)data;
    return CN_OK;
#endif
}

int cn_dist_barrier(void) {
    if (size_ == 1) return CN_OK;
#ifdef CN_HAVE_MPI
    pthread_mutex_lock(&mpi_lock);
    int err = MPI_Barrier(comm);
    pthread_mutex_unlock(&mpi_lock);
    return err == MPI_SUCCESS ? CN_OK : mpi_fail("dist_barrier", "MPI_Barrier", err);
#else
    return CN_OK;
#endif
}

int cn_dist_check_same(uint64_t value, const char *fn, const char *what) {
    if (size_ == 1) return CN_OK;
    uint64_t *all = calloc((size_t)size_, sizeof *all); /* zeroed: GCC cannot see the gather fill it */
    if (!all) return cn_failc(CN_ENOMEM, "%s: out of memory", fn);
    int rc = cn_dist_allgather_raw(&value, sizeof value, all);
    for (int q = 1; q < size_ && rc == CN_OK; q++)
        if (all[q] != all[0])
            rc = cn_failc(CN_EINVAL, "%s: rank %d's %s differs from rank 0's (every rank must "
                                     "start from the same %s)", fn, q, what, what);
    free(all);
    return rc;
}

/* ---- tensors ---- */

/* t as the collectives need it: on the CPU, contiguous, of a dtype they
 * handle. */
/* 1: a CUDA tensor for NCCL (any rank count, one included: its path then
 * runs on a single GPU too); 0: a CPU tensor for the ring. */
static int check_tensor(const char *fn, const cn_tensor *t) {
    if (!t) return CN_EINVAL;
    if (!t->storage) return cn_failc(CN_EINVAL, "%s: a symbolic tensor (a static graph value)", fn);
    if (!cn_is_contiguous(t)) return cn_failc(CN_EINVAL, "%s: a tensor that is not contiguous", fn);
    if (t->storage->device_kind == CN_DEVICE_CUDA && cn_dist_nccl_available()) return 1;
    if (!cn_t_on_cpu(t))
        return cn_failc(CN_EUNSUPPORTED,
                        "%s: a tensor on %s: the collectives work on CPU tensors, and on CUDA "
                        "devices in builds with NCCL; move it with cn_to first",
                        fn, cn_dev_name(cn_t_device(t)));
    if (!dist_dtype((cn_dtype)t->dtype))
        return cn_failc(CN_EUNSUPPORTED, "%s: dtype %s (f32, f64, i32, i64 only)", fn,
                        cn_dtype_name((cn_dtype)t->dtype));
    if (!cn_is_contiguous(t)) return cn_failc(CN_EINVAL, "%s: a tensor that is not contiguous", fn);
    return CN_OK;
}

static void *tensor_data(const cn_tensor *t) {
    return (char *)t->storage->data + (size_t)t->offset * cn_dsize((cn_dtype)t->dtype);
}

int cn_dist_allreduce(cn_tensor *t, cn_dist_op op) {
    int rc = check_tensor("dist_allreduce", t);
    if (rc < 0) return rc;
    if ((int)op < 0 || op > CN_DIST_MIN) return cn_failc(CN_EINVAL, "dist_allreduce: bad op %d", op);
    if (rc == 1) {
        rc = cn_dist_nccl_allreduce(t, op);
        if (rc == CN_OK) cn_storage_bump(t->storage);
        return rc;
    }
    rc = cn_dist_allreduce_raw(tensor_data(t), cn_numel(t), (cn_dtype)t->dtype, op, NULL);
    if (rc == CN_OK) cn_storage_bump(t->storage);
    return rc;
}

int cn_dist_broadcast(cn_tensor *t, int root) {
    int rc = check_tensor("dist_broadcast", t);
    if (rc < 0) return rc;
    if (rc == 1) {
        if (root < 0 || root >= size_)
            return cn_failc(CN_EINVAL, "dist_broadcast: root %d is not a rank (the job has %d)",
                            root, size_);
        rc = cn_dist_nccl_broadcast(t, root);
        if (rc == CN_OK) cn_storage_bump(t->storage);
        return rc;
    }
    rc = cn_dist_broadcast_raw(tensor_data(t), (size_t)cn_numel(t) * cn_dsize((cn_dtype)t->dtype),
                               root);
    if (rc == CN_OK) cn_storage_bump(t->storage);
    return rc;
}

cn_tensor *cn_dist_allgather(cn_tensor *t) {
    int kind = check_tensor("dist_allgather", t);
    if (kind < 0) return NULL;
    int64_t shape[CN_MAX_DIMS];
    if (t->ndim + 1 > CN_MAX_DIMS) return cn_fail("dist_allgather: rank %d is too many", t->ndim);
    shape[0] = size_;
    memcpy(shape + 1, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    if (kind == 1) {
        cn_tensor *o = cn_t_empty_on(cn_t_device(t), (cn_dtype)t->dtype, t->ndim + 1, shape);
        if (o && cn_dist_nccl_allgather(t, o) < 0) {
            cn_release(o);
            o = NULL;
        }
        return o ? cn_scope_add(o) : NULL;
    }
    cn_tensor *o = cn_t_empty((cn_dtype)t->dtype, t->ndim + 1, shape);
    if (!o) return NULL;
    if (cn_dist_allgather_raw(tensor_data(t), (size_t)cn_numel(t) * cn_dsize((cn_dtype)t->dtype),
                              o->storage->data) < 0) {
        cn_release(o);
        return NULL;
    }
    return cn_scope_add(o);
}
