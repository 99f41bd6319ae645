/* The OpenCL runtime: devices found on first use, one context and one
 * in-order queue per device, programs built from generated source and
 * cached by (device, options, source), launches, byte copies and events. */
#include "ocl.h"

#include <stdio.h>
#include <stdlib.h>

/* ---- devices ---- */

static cn_ocl_dev *devs;
static int ndevs;
static pthread_once_t devs_once = PTHREAD_ONCE_INIT;

static void init_devices(void) {
    cl_uint np = 0;
    if (clGetPlatformIDs(0, NULL, &np) != CL_SUCCESS || np == 0) return;
    cl_platform_id *plats = calloc(np, sizeof *plats);
    if (!plats) return;
    if (clGetPlatformIDs(np, plats, NULL) != CL_SUCCESS) {
        free(plats);
        return;
    }
    const cl_device_type types = CL_DEVICE_TYPE_GPU | CL_DEVICE_TYPE_CPU |
                                 CL_DEVICE_TYPE_ACCELERATOR;
    int cap = 0;
    for (cl_uint p = 0; p < np; p++) {
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[p], types, 0, NULL, &nd) != CL_SUCCESS || nd == 0) continue;
        cl_device_id *ids = calloc(nd, sizeof *ids);
        if (!ids) continue;
        if (clGetDeviceIDs(plats[p], types, nd, ids, NULL) != CL_SUCCESS) {
            free(ids);
            continue;
        }
        for (cl_uint d = 0; d < nd; d++) {
            cl_int err;
            cl_context_properties props[] = {CL_CONTEXT_PLATFORM,
                                             (cl_context_properties)plats[p], 0};
            cl_context ctx = clCreateContext(props, 1, &ids[d], NULL, NULL, &err);
            if (err != CL_SUCCESS || !ctx) continue;
            cl_command_queue q = clCreateCommandQueue(ctx, ids[d], 0, &err);
            if (err != CL_SUCCESS || !q) {
                clReleaseContext(ctx);
                continue;
            }
            if (ndevs == cap) {
                int nc = cap ? 2 * cap : 4;
                cn_ocl_dev *nd2 = realloc(devs, sizeof *devs * (size_t)nc);
                if (!nd2) {
                    clReleaseCommandQueue(q);
                    clReleaseContext(ctx);
                    continue;
                }
                devs = nd2;
                cap = nc;
            }
            cn_ocl_dev *v = &devs[ndevs];
            memset(v, 0, sizeof *v);
            v->platform = plats[p];
            v->id = ids[d];
            v->ctx = ctx;
            v->queue = q;
            v->index = ndevs;
            char ext[8192] = "";
            clGetDeviceInfo(ids[d], CL_DEVICE_EXTENSIONS, sizeof ext - 1, ext, NULL);
            cl_device_fp_config dcfg = 0;
            clGetDeviceInfo(ids[d], CL_DEVICE_DOUBLE_FP_CONFIG, sizeof dcfg, &dcfg, NULL);
            v->fp64 = strstr(ext, "cl_khr_fp64") != NULL || dcfg != 0;
            cl_device_fp_config scfg = 0;
            clGetDeviceInfo(ids[d], CL_DEVICE_SINGLE_FP_CONFIG, sizeof scfg, &scfg, NULL);
            v->correct_divsqrt = (scfg & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
            clGetDeviceInfo(ids[d], CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof v->max_wg, &v->max_wg,
                            NULL);
            if (v->max_wg == 0) v->max_wg = 1;
            clGetDeviceInfo(ids[d], CL_DEVICE_MAX_COMPUTE_UNITS, sizeof v->units, &v->units, NULL);
            if (v->units == 0) v->units = 1;
            clGetDeviceInfo(ids[d], CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof v->max_alloc,
                            &v->max_alloc, NULL);
            clGetDeviceInfo(ids[d], CL_DEVICE_NAME, sizeof v->name - 1, v->name, NULL);
            pthread_mutex_init(&v->launch_lock, NULL);
            ndevs++;
        }
        free(ids);
    }
    free(plats);
}

int cn_ocl_device_count(void) {
    pthread_once(&devs_once, init_devices);
    return ndevs;
}

cn_ocl_dev *cn_ocl_dev_get(int index) {
    int n = cn_ocl_device_count();
    if (index < 0 || index >= n) {
        cn_fail("opencl: no device opencl:%d (this machine has %d OpenCL device%s)", index, n,
                n == 1 ? "" : "s");
        return NULL;
    }
    return &devs[index];
}

cn_ocl_dev *cn_ocl_dev_of(const cn_storage *s) {
    if (!s || s->device_kind != CN_DEVICE_OPENCL) {
        cn_fail("opencl: internal error: a storage not on an OpenCL device");
        return NULL;
    }
    return cn_ocl_dev_get(s->device_index);
}

static void info_str(cl_device_id id, cl_device_info what, char *buf, size_t n) {
    buf[0] = 0;
    if (clGetDeviceInfo(id, what, n - 1, buf, NULL) != CL_SUCCESS) buf[0] = 0;
    buf[n - 1] = 0;
}

int cn_ocl_device_info(int index, cn_device_info *info) {
    cn_ocl_dev *d = cn_ocl_dev_get(index);
    if (!d) return CN_EINVAL;
    memset(info, 0, sizeof *info);
    info->device = CN_DEVICE(CN_DEVICE_OPENCL, index);
    snprintf(info->name, sizeof info->name, "%s", d->name);
    info_str(d->id, CL_DEVICE_VENDOR, info->vendor, sizeof info->vendor);
    /* Platform versions run long (PoCL's names its whole build); a query
     * into a buffer too small fails outright, so ask for the size first. */
    char pv[512] = "", dv[64] = "";
    size_t need = 0;
    if (clGetPlatformInfo(d->platform, CL_PLATFORM_VERSION, 0, NULL, &need) == CL_SUCCESS &&
        need <= sizeof pv)
        clGetPlatformInfo(d->platform, CL_PLATFORM_VERSION, sizeof pv, pv, NULL);
    pv[sizeof pv - 1] = 0;
    info_str(d->id, CL_DRIVER_VERSION, dv, sizeof dv);
    snprintf(info->driver, sizeof info->driver, "%.60s, driver %s", pv, dv);
    cl_ulong mem = 0;
    clGetDeviceInfo(d->id, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, NULL);
    info->memory_bytes = mem;
    info->max_alloc_bytes = d->max_alloc;
    info->compute_units = (int)d->units;
    return CN_OK;
}

/* ---- errors ---- */

const char *cn_ocl_err_name(cl_int err) {
    switch (err) {
#define E(x) case x: return #x;
        E(CL_SUCCESS) E(CL_DEVICE_NOT_FOUND) E(CL_DEVICE_NOT_AVAILABLE)
        E(CL_COMPILER_NOT_AVAILABLE) E(CL_MEM_OBJECT_ALLOCATION_FAILURE) E(CL_OUT_OF_RESOURCES)
        E(CL_OUT_OF_HOST_MEMORY) E(CL_PROFILING_INFO_NOT_AVAILABLE) E(CL_MEM_COPY_OVERLAP)
        E(CL_IMAGE_FORMAT_MISMATCH) E(CL_IMAGE_FORMAT_NOT_SUPPORTED) E(CL_BUILD_PROGRAM_FAILURE)
        E(CL_MAP_FAILURE) E(CL_MISALIGNED_SUB_BUFFER_OFFSET)
        E(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST) E(CL_COMPILE_PROGRAM_FAILURE)
        E(CL_LINKER_NOT_AVAILABLE) E(CL_LINK_PROGRAM_FAILURE) E(CL_DEVICE_PARTITION_FAILED)
        E(CL_KERNEL_ARG_INFO_NOT_AVAILABLE) E(CL_INVALID_VALUE) E(CL_INVALID_DEVICE_TYPE)
        E(CL_INVALID_PLATFORM) E(CL_INVALID_DEVICE) E(CL_INVALID_CONTEXT)
        E(CL_INVALID_QUEUE_PROPERTIES) E(CL_INVALID_COMMAND_QUEUE) E(CL_INVALID_HOST_PTR)
        E(CL_INVALID_MEM_OBJECT) E(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR) E(CL_INVALID_IMAGE_SIZE)
        E(CL_INVALID_SAMPLER) E(CL_INVALID_BINARY) E(CL_INVALID_BUILD_OPTIONS)
        E(CL_INVALID_PROGRAM) E(CL_INVALID_PROGRAM_EXECUTABLE) E(CL_INVALID_KERNEL_NAME)
        E(CL_INVALID_KERNEL_DEFINITION) E(CL_INVALID_KERNEL) E(CL_INVALID_ARG_INDEX)
        E(CL_INVALID_ARG_VALUE) E(CL_INVALID_ARG_SIZE) E(CL_INVALID_KERNEL_ARGS)
        E(CL_INVALID_WORK_DIMENSION) E(CL_INVALID_WORK_GROUP_SIZE) E(CL_INVALID_WORK_ITEM_SIZE)
        E(CL_INVALID_GLOBAL_OFFSET) E(CL_INVALID_EVENT_WAIT_LIST) E(CL_INVALID_EVENT)
        E(CL_INVALID_OPERATION) E(CL_INVALID_GL_OBJECT) E(CL_INVALID_BUFFER_SIZE)
        E(CL_INVALID_MIP_LEVEL) E(CL_INVALID_GLOBAL_WORK_SIZE) E(CL_INVALID_PROPERTY)
        E(CL_INVALID_IMAGE_DESCRIPTOR) E(CL_INVALID_COMPILER_OPTIONS)
        E(CL_INVALID_LINKER_OPTIONS) E(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef E
    default: return "unknown OpenCL error";
    }
}

int cn_ocl_fail(const char *fn, const char *what, cl_int err) {
    int st = CN_EUNSUPPORTED;
    if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES ||
        err == CL_OUT_OF_HOST_MEMORY)
        st = CN_ENOMEM;
    else if (err == CL_INVALID_VALUE || err == CL_INVALID_BUFFER_SIZE ||
             err == CL_INVALID_ARG_SIZE || err == CL_INVALID_ARG_VALUE)
        st = CN_EINVAL;
    return cn_failc(st, "%s: %s: %s (%d)", fn, what, cn_ocl_err_name(err), (int)err);
}

int cn_ocl_check_dtype(const char *fn, const cn_ocl_dev *dev, cn_dtype dt) {
    if (dt == CN_F64 && !dev->fp64)
        return cn_failc(CN_EUNSUPPORTED,
                        "%s: f64 on opencl:%d (%s): the device has no double precision "
                        "(cl_khr_fp64); use f32",
                        fn, dev->index, dev->name);
    return CN_OK;
}

/* ---- the program cache ----
 * Keyed by (device, options, source); each entry keeps its kernels by name.
 * Lookups hash the whole source (a few kilobytes at most: cheap next to a
 * launch). */

typedef struct kern_entry {
    struct kern_entry *next;
    char *name;
    cl_kernel k;
} kern_entry;

typedef struct prog_entry {
    struct prog_entry *next;
    uint64_t hash;
    int dev;
    char *opts, *src;
    cl_program prog;
    kern_entry *kernels;
} prog_entry;

#define PROG_BUCKETS 1024
static prog_entry *prog_table[PROG_BUCKETS];
static pthread_mutex_t prog_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t fnv(uint64_t h, const char *s) {
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return (h ^ 0xff) * 0x100000001b3ull;
}

static char *dupstr(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* The first lines of a build log that fit in n bytes, errors first: the
 * log is scanned for the first line containing "error" and starts there. */
static void log_excerpt(const char *log, char *out, size_t n) {
    const char *start = log;
    const char *e = strstr(log, "error");
    if (e) {
        while (e > log && e[-1] != '\n') e--;
        start = e;
    }
    size_t k = 0;
    for (const char *p = start; *p && k + 1 < n; p++) out[k++] = *p == '\n' ? ' ' : *p;
    out[k] = 0;
}

/* Build (under prog_lock). NULL after cn_fail. */
static cl_program build(cn_ocl_dev *dev, const char *src, const char *opts) {
    cl_int err;
    const char *srcs[1] = {src};
    cl_program p = clCreateProgramWithSource(dev->ctx, 1, srcs, NULL, &err);
    if (err != CL_SUCCESS) {
        cn_ocl_fail("opencl", "clCreateProgramWithSource", err);
        return NULL;
    }
    char full[1024];
    snprintf(full, sizeof full, "%s%s %s", dev->fp64 ? "-DCN_FP64 " : "",
             dev->correct_divsqrt ? "-cl-fp32-correctly-rounded-divide-sqrt" : "",
             opts ? opts : "");
    err = clBuildProgram(p, 1, &dev->id, full, NULL, NULL);
    if (err != CL_SUCCESS) {
        size_t len = 0;
        clGetProgramBuildInfo(p, dev->id, CL_PROGRAM_BUILD_LOG, 0, NULL, &len);
        char *log = malloc(len + 1);
        char excerpt[640] = "(no log)";
        if (log) {
            log[0] = 0;
            clGetProgramBuildInfo(p, dev->id, CL_PROGRAM_BUILD_LOG, len, log, NULL);
            log[len] = 0;
            if (log[0]) log_excerpt(log, excerpt, sizeof excerpt);
            free(log);
        }
        /* The first line of the source names the kernel family (a comment). */
        char head[96];
        size_t h = 0;
        while (src[h] && src[h] != '\n' && h + 1 < sizeof head) {
            head[h] = src[h];
            h++;
        }
        head[h] = 0;
        cn_failc(CN_EUNSUPPORTED, "opencl:%d (%s): building a kernel failed (%s): %s: %s",
                 dev->index, dev->name, cn_ocl_err_name(err), head, excerpt);
        clReleaseProgram(p);
        return NULL;
    }
    return p;
}

cl_kernel cn_ocl_kernel(cn_ocl_dev *dev, const char *source, const char *opts, const char *name) {
    if (!dev || !source || !name) {
        cn_fail("opencl: internal error: cn_ocl_kernel without a device, source or name");
        return NULL;
    }
    const char *o = opts ? opts : "";
    uint64_t h = fnv(fnv(0xcbf29ce484222325ull ^ (uint64_t)dev->index, o), source);
    pthread_mutex_lock(&prog_lock);
    prog_entry *e = prog_table[h % PROG_BUCKETS];
    while (e && !(e->hash == h && e->dev == dev->index && !strcmp(e->opts, o) &&
                  !strcmp(e->src, source)))
        e = e->next;
    if (!e) {
        cl_program p = build(dev, source, o);
        if (!p) {
            pthread_mutex_unlock(&prog_lock);
            return NULL;
        }
        e = calloc(1, sizeof *e);
        char *so = dupstr(o), *ss = dupstr(source);
        if (!e || !so || !ss) {
            free(e);
            free(so);
            free(ss);
            clReleaseProgram(p);
            pthread_mutex_unlock(&prog_lock);
            cn_fail("opencl: out of memory caching a program");
            return NULL;
        }
        e->hash = h;
        e->dev = dev->index;
        e->opts = so;
        e->src = ss;
        e->prog = p;
        e->next = prog_table[h % PROG_BUCKETS];
        prog_table[h % PROG_BUCKETS] = e;
    }
    kern_entry *k = e->kernels;
    while (k && strcmp(k->name, name)) k = k->next;
    if (!k) {
        cl_int err;
        cl_kernel kk = clCreateKernel(e->prog, name, &err);
        if (err != CL_SUCCESS) {
            pthread_mutex_unlock(&prog_lock);
            cn_ocl_fail("opencl", name, err);
            return NULL;
        }
        k = calloc(1, sizeof *k);
        char *nm = dupstr(name);
        if (!k || !nm) {
            free(k);
            free(nm);
            clReleaseKernel(kk);
            pthread_mutex_unlock(&prog_lock);
            cn_fail("opencl: out of memory caching a kernel");
            return NULL;
        }
        k->name = nm;
        k->k = kk;
        k->next = e->kernels;
        e->kernels = k;
    }
    cl_kernel r = k->k;
    pthread_mutex_unlock(&prog_lock);
    return r;
}

/* ---- launches ---- */

static int set_args(const char *fn, cl_kernel k, int nargs, const cn_ocl_arg *args) {
    for (int i = 0; i < nargs; i++) {
        cl_int err = args[i].size ? clSetKernelArg(k, (cl_uint)i, args[i].size, args[i].value)
                                  : clSetKernelArg(k, (cl_uint)i, args[i].local, NULL);
        if (err != CL_SUCCESS) {
            char what[48];
            snprintf(what, sizeof what, "setting kernel argument %d", i);
            return cn_ocl_fail(fn, what, err);
        }
    }
    return CN_OK;
}

int cn_ocl_launch(const char *fn, cn_ocl_dev *dev, cl_kernel k, int nargs, const cn_ocl_arg *args,
                  cl_uint work_dim, const size_t *global, const size_t *local) {
    if (!k) return CN_EINVAL;
    pthread_mutex_lock(&dev->launch_lock);
    int r = set_args(fn, k, nargs, args);
    if (r == CN_OK) {
        cl_int err =
            clEnqueueNDRangeKernel(dev->queue, k, work_dim, NULL, global, local, 0, NULL, NULL);
        if (err != CL_SUCCESS) r = cn_ocl_fail(fn, "launching a kernel", err);
    }
    pthread_mutex_unlock(&dev->launch_lock);
    return r;
}

int cn_ocl_launch_n(const char *fn, cn_ocl_dev *dev, cl_kernel k, int nargs,
                    const cn_ocl_arg *args, int64_t n) {
    if (!k) return CN_EINVAL;
    if (n <= 0) return CN_OK;
    size_t wg = 0;
    if (clGetKernelWorkGroupInfo(k, dev->id, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL) !=
            CL_SUCCESS ||
        wg == 0)
        wg = dev->max_wg;
    size_t local = 256;
    if (local > wg) local = wg;
    if (local > dev->max_wg) local = dev->max_wg;
    if (local == 0) local = 1;
    uint64_t groups = ((uint64_t)n + local - 1) / local;
    uint64_t maxg = (uint64_t)dev->units * 64;
    if (maxg < 256) maxg = 256;
    if (groups > maxg) groups = maxg;
    size_t global = (size_t)groups * local;
    return cn_ocl_launch(fn, dev, k, nargs, args, 1, &global, &local);
}

/* ---- byte copies ---- */

static bool range_ok(const char *fn, const cn_storage *s, size_t off, size_t n) {
    if (off > s->nbytes || n > s->nbytes - off) {
        cn_failc(CN_EINVAL, "%s: bytes [%zu, %zu) are outside the %zu-byte storage on %s", fn,
                 off, off + n, s->nbytes, cn_dev_name(cn_storage_device(s)));
        return false;
    }
    return true;
}

int cn_ocl_write(cn_storage *dst, size_t dst_off, const void *src, size_t n, bool async) {
    if (n == 0) return CN_OK;
    cn_ocl_dev *d = cn_ocl_dev_of(dst);
    if (!d) return CN_EINVAL;
    if (!range_ok("opencl write", dst, dst_off, n)) return CN_EINVAL;
    cl_int err = clEnqueueWriteBuffer(d->queue, (cl_mem)dst->data, async ? CL_FALSE : CL_TRUE,
                                      dst_off, n, src, 0, NULL, NULL);
    if (err != CL_SUCCESS) return cn_ocl_fail("opencl write", "clEnqueueWriteBuffer", err);
    if (async) clFlush(d->queue);
    return CN_OK;
}

int cn_ocl_read(const cn_storage *src, size_t src_off, void *dst, size_t n) {
    if (n == 0) return CN_OK;
    cn_ocl_dev *d = cn_ocl_dev_of(src);
    if (!d) return CN_EINVAL;
    if (!range_ok("opencl read", src, src_off, n)) return CN_EINVAL;
    cl_int err = clEnqueueReadBuffer(d->queue, (cl_mem)src->data, CL_TRUE, src_off, n, dst, 0,
                                     NULL, NULL);
    if (err != CL_SUCCESS) return cn_ocl_fail("opencl read", "clEnqueueReadBuffer", err);
    return CN_OK;
}

int cn_ocl_copy_bytes(cn_storage *dst, size_t dst_off, const cn_storage *src, size_t src_off,
                      size_t n) {
    if (n == 0) return CN_OK;
    cn_ocl_dev *dd = cn_ocl_dev_of(dst), *sd = cn_ocl_dev_of(src);
    if (!dd || !sd) return CN_EINVAL;
    if (!range_ok("opencl copy", dst, dst_off, n) || !range_ok("opencl copy", src, src_off, n))
        return CN_EINVAL;
    if (dd == sd) {
        cl_int err = clEnqueueCopyBuffer(dd->queue, (cl_mem)src->data, (cl_mem)dst->data, src_off,
                                         dst_off, n, 0, NULL, NULL);
        if (err != CL_SUCCESS) return cn_ocl_fail("opencl copy", "clEnqueueCopyBuffer", err);
        return CN_OK;
    }
    /* Two devices (two contexts): through the host. */
    void *tmp = malloc(n);
    if (!tmp)
        return cn_failc(CN_ENOMEM, "opencl copy: no %zu bytes of host memory to stage a copy "
                                   "from opencl:%d to opencl:%d", n, sd->index, dd->index);
    int r = cn_ocl_read(src, src_off, tmp, n);
    if (r == CN_OK) r = cn_ocl_write(dst, dst_off, tmp, n, false);
    free(tmp);
    return r;
}

/* ---- queue and events ---- */

int cn_ocl_synchronize(int index) {
    cn_ocl_dev *d = cn_ocl_dev_get(index);
    if (!d) return CN_EINVAL;
    cl_int err = clFinish(d->queue);
    if (err != CL_SUCCESS) return cn_ocl_fail("synchronize", "clFinish", err);
    return CN_OK;
}

void *cn_ocl_event_record(int index) {
    cn_ocl_dev *d = cn_ocl_dev_get(index);
    if (!d) return NULL;
    cl_event ev = NULL;
    cl_int err = clEnqueueMarkerWithWaitList(d->queue, 0, NULL, &ev);
    if (err != CL_SUCCESS) {
        cn_ocl_fail("event_record", "clEnqueueMarkerWithWaitList", err);
        return NULL;
    }
    clFlush(d->queue);
    return ev;
}

int cn_ocl_event_synchronize(void *ev) {
    if (!ev) return CN_OK;
    cl_event e = ev;
    cl_int err = clWaitForEvents(1, &e);
    if (err != CL_SUCCESS) return cn_ocl_fail("event_synchronize", "clWaitForEvents", err);
    return CN_OK;
}

bool cn_ocl_event_query(void *ev) {
    if (!ev) return true;
    cl_int st = CL_COMPLETE;
    if (clGetEventInfo((cl_event)ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL) !=
        CL_SUCCESS)
        return true;
    return st <= CL_COMPLETE; /* CL_COMPLETE is 0; errors are negative */
}

void cn_ocl_event_free(void *ev) {
    if (ev) clReleaseEvent((cl_event)ev);
}

/* ---- layouts ---- */

/* Broadcast t to (nd, shape): full-rank strides (0 where broadcast). */
static void bcast_strides(const cn_tensor *t, int nd, const int64_t *shape, int64_t *st) {
    int lead = nd - t->ndim;
    for (int d = 0; d < nd; d++) {
        int k = d - lead;
        if (k < 0 || t->shape[k] == 1 || shape[d] == 1)
            st[d] = 0;
        else
            st[d] = t->strides[k];
    }
}

int cn_ocl_layouts(int n, const cn_tensor *const *ts, int out_ndim, const int64_t *out_shape,
                   cn_ocl_layout *ls) {
    int64_t st[16][CN_MAX_DIMS];
    int64_t sh[CN_MAX_DIMS];
    int nd = 0;
    if (n > 16) n = 16; /* callers pass at most a few */
    int64_t full[16][CN_MAX_DIMS];
    for (int j = 0; j < n; j++) bcast_strides(ts[j], out_ndim, out_shape, full[j]);
    /* Drop size-1 axes, then merge axis d into the one before it where every
     * tensor's strides allow. */
    for (int d = 0; d < out_ndim; d++) {
        if (out_shape[d] == 1) continue;
        bool merge = nd > 0;
        for (int j = 0; j < n && merge; j++)
            if (st[j][nd - 1] != full[j][d] * out_shape[d]) merge = false;
        if (merge) {
            sh[nd - 1] *= out_shape[d];
            for (int j = 0; j < n; j++) st[j][nd - 1] = full[j][d];
        } else {
            sh[nd] = out_shape[d];
            for (int j = 0; j < n; j++) st[j][nd] = full[j][d];
            nd++;
        }
    }
    for (int j = 0; j < n; j++) {
        memset(&ls[j], 0, sizeof ls[j]);
        ls[j].offset = ts[j]->offset;
        ls[j].ndim = nd;
        for (int d = 0; d < nd; d++) {
            ls[j].shape[d] = sh[d];
            ls[j].strides[d] = st[j][d];
        }
    }
    return nd;
}

void cn_ocl_layout_of(const cn_tensor *t, int out_ndim, const int64_t *out_shape,
                      cn_ocl_layout *l) {
    cn_ocl_layouts(1, &t, out_ndim, out_shape, l);
}

/* ---- types and the prelude ---- */

const char *cn_ocl_ctype(cn_dtype dt) {
    switch (dt) {
    case CN_F32: return "float";
    case CN_F64: return "double";
    case CN_F16:
    case CN_BF16: return "ushort";
    case CN_I32: return "int";
    case CN_I64: return "long";
    default: return "uchar";
    }
}

static const char prelude[] =
    "#pragma OPENCL FP_CONTRACT OFF\n"
    "#ifdef CN_FP64\n"
    "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
    "#endif\n"
    "typedef struct { long offset; long ndim; long shape[8]; long strides[8]; } cn_layout;\n"
    "inline float cn_h2f(ushort h) {\n"
    "  uint sign = (uint)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;\n"
    "  if (e == 0x1fu) return as_float(sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0u));\n"
    "  if (e == 0u) { float f = (float)m * 5.9604644775390625e-08f; return sign ? -f : f; }\n"
    "  return as_float(sign | ((e + 112u) << 23) | (m << 13));\n"
    "}\n"
    "inline ushort cn_f2h(float x) {\n"
    "  uint u = as_uint(x), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;\n"
    "  if (a >= 0x7f800000u)\n"
    "    return (ushort)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u | ((a >> 13) & 0x3ffu) : 0u));\n"
    "  if (a >= 0x477ff000u) return (ushort)(sign | 0x7c00u);\n"
    "  if (a < 0x38800000u) { float f = as_float(a) + 0.5f; return (ushort)(sign | (as_uint(f) - 0x3f000000u)); }\n"
    "  uint odd = (a >> 13) & 1u;\n"
    "  a += 0xc8000fffu + odd;\n"
    "  return (ushort)(sign | (a >> 13));\n"
    "}\n"
    "inline float cn_bf2f(ushort h) { return as_float((uint)h << 16); }\n"
    "inline ushort cn_f2bf(float x) {\n"
    "  uint u = as_uint(x);\n"
    "  if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u);\n"
    "  u += 0x7fffu + ((u >> 16) & 1u);\n"
    "  return (ushort)(u >> 16);\n"
    "}\n"
    "inline long cn_f2l(float v) {\n"
    "  if (!(v == v)) return 0;\n"
    "  if (v >= 9.2233720368547758e18f) return LONG_MAX;\n"
    "  if (v <= -9.2233720368547758e18f) return LONG_MIN;\n"
    "  return (long)v;\n"
    "}\n"
    "#ifdef CN_FP64\n"
    "inline long cn_d2l(double v) {\n"
    "  if (!(v == v)) return 0;\n"
    "  if (v >= 9.2233720368547758e18) return LONG_MAX;\n"
    "  if (v <= -9.2233720368547758e18) return LONG_MIN;\n"
    "  return (long)v;\n"
    "}\n"
    "#endif\n"
    "inline long cn_offset(const cn_layout *l, long i) {\n"
    "  long o = l->offset;\n"
    "  for (int d = (int)l->ndim - 1; d >= 0; d--) {\n"
    "    long q = i % l->shape[d];\n"
    "    i /= l->shape[d];\n"
    "    o += q * l->strides[d];\n"
    "  }\n"
    "  return o;\n"
    "}\n"
    "#define CN_OFFSET(l, i) cn_offset(&(l), (i))\n";

const char *cn_ocl_prelude(void) { return prelude; }
