/* The CUDA runtime: devices found on first use (each with its primary
 * context and one stream), the shared kernels' programs compiled by NVRTC
 * for the device's architecture and loaded as modules, launches, buffers,
 * byte copies and events. */
#include "cuda_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- devices ---- */

static cn_cuda_dev *devs;
static int ndevs;
static pthread_once_t devs_once = PTHREAD_ONCE_INIT;
static const cn_gpu_runtime cuda_runtime_def;

static void init_devices(void) {
    const cn_cu_api *cu = cn_cu();
    if (!cu) return;
    int n = 0;
    if (cu->DeviceGetCount(&n) != CUDA_SUCCESS || n <= 0) return;
    devs = calloc((size_t)n, sizeof *devs);
    if (!devs) return;
    for (int i = 0; i < n; i++) {
        cn_cuda_dev *v = &devs[ndevs];
        if (cu->DeviceGet(&v->dev, i) != CUDA_SUCCESS) continue;
        if (cu->DevicePrimaryCtxRetain(&v->ctx, v->dev) != CUDA_SUCCESS) continue;
        if (cu->CtxSetCurrent(v->ctx) != CUDA_SUCCESS) continue;
        /* A blocking stream: it also orders against the legacy default
         * stream, which libraries called without a stream use. */
        if (cu->StreamCreate(&v->stream, CU_STREAM_DEFAULT) != CUDA_SUCCESS) continue;
        int sms = 0, maxt = 0;
        cu->DeviceGetAttribute(&v->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, v->dev);
        cu->DeviceGetAttribute(&v->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, v->dev);
        cu->DeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, v->dev);
        cu->DeviceGetAttribute(&maxt, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, v->dev);
        cu->DeviceTotalMem(&v->total_mem, v->dev);
        v->g.rt = &cuda_runtime_def;
        v->g.kind = CN_DEVICE_CUDA;
        v->g.index = ndevs;
        snprintf(v->g.label, sizeof v->g.label, "cuda:%d", ndevs);
        if (cu->DeviceGetName(v->g.name, (int)sizeof v->g.name - 1, v->dev) != CUDA_SUCCESS)
            snprintf(v->g.name, sizeof v->g.name, "CUDA device %d", i);
        v->g.fp64 = true;
        v->g.max_wg = maxt > 0 ? (size_t)maxt : 1024;
        v->g.units = sms > 0 ? (unsigned)sms : 1;
        v->g.max_alloc = v->total_mem;
        pthread_mutex_init(&v->blas_lock, NULL);
        ndevs++;
    }
}

int cn_cuda_device_count(void) {
    pthread_once(&devs_once, init_devices);
    return ndevs;
}

cn_cuda_dev *cn_cuda_dev_get(int index) {
    int n = cn_cuda_device_count();
    if (index < 0 || index >= n) {
        if (n == 0)
            cn_fail("cuda: no device cuda:%d (%s)", index,
                    cn_cu_why()[0] ? cn_cu_why() : "the driver reports no GPU");
        else
            cn_fail("cuda: no device cuda:%d (this machine has %d CUDA device%s)", index, n,
                    n == 1 ? "" : "s");
        return NULL;
    }
    return &devs[index];
}

cn_cuda_dev *cn_cuda_dev_of(const cn_storage *s) {
    if (!s || s->device_kind != CN_DEVICE_CUDA) {
        cn_fail("cuda: internal error: a storage not on a CUDA device");
        return NULL;
    }
    return cn_cuda_dev_get(s->device_index);
}

cn_gpu_dev *cn_cuda_gpu_dev(int index) {
    cn_cuda_dev *d = cn_cuda_dev_get(index);
    return d ? &d->g : NULL;
}

int cn_cuda_enter(const char *fn, cn_cuda_dev *d) {
    CUresult r = cn_cu()->CtxSetCurrent(d->ctx);
    return r == CUDA_SUCCESS ? CN_OK : cn_cu_fail(fn, "cuCtxSetCurrent", r);
}

int cn_cuda_device_info(int index, cn_device_info *info) {
    cn_cuda_dev *d = cn_cuda_dev_get(index);
    if (!d) return CN_EINVAL;
    memset(info, 0, sizeof *info);
    info->device = CN_DEVICE(CN_DEVICE_CUDA, index);
    snprintf(info->name, sizeof info->name, "%s", d->g.name);
    snprintf(info->vendor, sizeof info->vendor, "NVIDIA");
    int v = 0;
    cn_cu()->DriverGetVersion(&v);
    snprintf(info->driver, sizeof info->driver, "CUDA driver %d.%d", v / 1000, v % 1000 / 10);
    snprintf(info->capability, sizeof info->capability, "%d.%d", d->cc_major, d->cc_minor);
    info->memory_bytes = d->total_mem;
    info->max_alloc_bytes = d->g.max_alloc;
    info->compute_units = (int)d->g.units;
    return CN_OK;
}

/* ---- programs ---- */

static void *build(cn_gpu_dev *g, const char *src, const char *opts) {
    cn_cuda_dev *d = (cn_cuda_dev *)g;
    if (cn_cuda_enter("cuda", d) < 0) return NULL;
    /* The device's own code (CUBIN) when this NVRTC knows its architecture;
     * else PTX for the newest architecture it does know, which the driver
     * compiles for the device when loading. */
    char arch[24];
    snprintf(arch, sizeof arch, "sm_%d%d", d->cc_major, d->cc_minor);
    size_t n = 0;
    void *img = cn_cuda_compile_cached(src, opts, arch, &n);
    if (!img) {
        int nums = 0;
        if (cn_cuda_nvrtc_newest(&nums) == CN_OK && nums < d->cc_major * 10 + d->cc_minor) {
            snprintf(arch, sizeof arch, "compute_%d", nums);
            cn_clear_error();
            img = cn_cuda_compile_cached(src, opts, arch, &n);
        }
        if (!img) return NULL;
    }
    CUmodule m = NULL;
    CUresult r = cn_cu()->ModuleLoadData(&m, img);
    free(img);
    if (r != CUDA_SUCCESS) {
        cn_cu_fail(g->label, "loading a compiled kernel (cuModuleLoadData)", r);
        return NULL;
    }
    return m;
}

static cn_gpu_kernel kernel(cn_gpu_dev *g, void *prog, const char *name) {
    CUfunction f = NULL;
    CUresult r = cn_cu()->ModuleGetFunction(&f, (CUmodule)prog, name);
    if (r != CUDA_SUCCESS) {
        cn_cu_fail(g->label, name, r);
        return NULL;
    }
    return f;
}

static size_t kernel_max_group(cn_gpu_dev *g, cn_gpu_kernel k) {
    int v = 0;
    if (cn_cu()->FuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, (CUfunction)k) !=
            CUDA_SUCCESS ||
        v <= 0)
        return g->max_wg;
    return (size_t)v;
}

/* The largest divisor of n that is at most cap (n >= 1). */
static size_t divisor_at_most(size_t n, size_t cap) {
    for (size_t b = cap < n ? cap : n; b > 1; b--)
        if (n % b == 0) return b;
    return 1;
}

static int launch(const char *fn, cn_gpu_dev *g, cn_gpu_kernel k, int nargs,
                  const cn_gpu_arg *args, unsigned dims, const size_t *global,
                  const size_t *local) {
    cn_cuda_dev *d = (cn_cuda_dev *)g;
    if (dims < 1 || dims > 3 || nargs > 64)
        return cn_failc(CN_EINVAL, "%s: internal error: a launch of %u dimensions, %d arguments",
                        fn, dims, nargs);
    size_t grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
    size_t room = kernel_max_group(g, k);
    for (unsigned i = 0; i < dims; i++) {
        if (global[i] == 0) return CN_OK;
        /* Without a group size the kernels rely on exactly `global` work
         * items: a block that divides it. */
        size_t b = local ? local[i] : divisor_at_most(global[i], i == 0 ? 256 : 1);
        if (b == 0 || global[i] % b) return cn_failc(CN_EINVAL, "%s: internal error: a group "
                                                     "size that does not divide the grid", fn);
        block[i] = b;
        grid[i] = global[i] / b;
    }
    size_t maxgrid[3] = {2147483647u, 65535u, 65535u};
    for (int i = 0; i < 3; i++)
        if (grid[i] > maxgrid[i])
            return cn_failc(CN_EUNSUPPORTED,
                            "%s: %zu thread blocks along axis %d of a launch on %s (CUDA allows "
                            "%zu)", fn, grid[i], i, g->label, maxgrid[i]);
    if (block[0] * block[1] * block[2] > room)
        return cn_failc(CN_EINVAL, "%s: internal error: a block of %zu threads (the kernel "
                        "allows %zu)", fn, block[0] * block[1] * block[2], room);
    void *params[64];
    for (int i = 0; i < nargs; i++) params[i] = (void *)args[i].value;
    int rc = cn_cuda_enter(fn, d);
    if (rc < 0) return rc;
    CUresult r = cn_cu()->LaunchKernel((CUfunction)k, (unsigned)grid[0], (unsigned)grid[1],
                                       (unsigned)grid[2], (unsigned)block[0], (unsigned)block[1],
                                       (unsigned)block[2], 0, d->stream, params, NULL);
    return r == CUDA_SUCCESS ? CN_OK : cn_cu_fail(fn, "launching a kernel", r);
}

/* ---- buffers ---- */

static cn_gpu_buf mem_alloc(cn_gpu_dev *g, size_t nbytes, char *why, size_t nwhy) {
    cn_cuda_dev *d = (cn_cuda_dev *)g;
    if (cn_cu()->CtxSetCurrent(d->ctx) != CUDA_SUCCESS) {
        snprintf(why, nwhy, "cannot make the device's context current");
        return NULL;
    }
    CUdeviceptr p = 0;
    CUresult r = cn_cu()->MemAlloc(&p, nbytes);
    if (r != CUDA_SUCCESS || !p) {
        snprintf(why, nwhy, "%s (%d)", cn_cu_err_name(r), (int)r);
        return NULL;
    }
    return (cn_gpu_buf)(uintptr_t)p;
}

static void mem_free(cn_gpu_dev *g, cn_gpu_buf m) {
    cn_cuda_dev *d = (cn_cuda_dev *)g;
    if (cn_cu()->CtxSetCurrent(d->ctx) == CUDA_SUCCESS) cn_cu()->MemFree((CUdeviceptr)(uintptr_t)m);
}

static CUdeviceptr dptr(const cn_storage *s, size_t off) {
    return (CUdeviceptr)(uintptr_t)s->data + off;
}

/* From pageable host memory the driver stages the bytes before returning,
 * so the caller may reuse src at once even when the copy is asynchronous. */
int cn_cuda_write(cn_storage *dst, size_t dst_off, const void *src, size_t n, bool async) {
    if (n == 0) return CN_OK;
    cn_cuda_dev *d = cn_cuda_dev_of(dst);
    if (!d) return CN_EINVAL;
    if (!cn_gpu_range_ok("cuda write", dst, dst_off, n)) return CN_EINVAL;
    int rc = cn_cuda_enter("cuda write", d);
    if (rc < 0) return rc;
    CUresult r = cn_cu()->MemcpyHtoDAsync(dptr(dst, dst_off), src, n, d->stream);
    if (r == CUDA_SUCCESS && !async) r = cn_cu()->StreamSynchronize(d->stream);
    return r == CUDA_SUCCESS ? CN_OK : cn_cu_fail("cuda write", "cuMemcpyHtoDAsync", r);
}

int cn_cuda_read(const cn_storage *src, size_t src_off, void *dst, size_t n) {
    if (n == 0) return CN_OK;
    cn_cuda_dev *d = cn_cuda_dev_of(src);
    if (!d) return CN_EINVAL;
    if (!cn_gpu_range_ok("cuda read", src, src_off, n)) return CN_EINVAL;
    int rc = cn_cuda_enter("cuda read", d);
    if (rc < 0) return rc;
    CUresult r = cn_cu()->MemcpyDtoHAsync(dst, dptr(src, src_off), n, d->stream);
    if (r == CUDA_SUCCESS) r = cn_cu()->StreamSynchronize(d->stream);
    return r == CUDA_SUCCESS ? CN_OK : cn_cu_fail("cuda read", "cuMemcpyDtoHAsync", r);
}

int cn_cuda_copy_bytes(cn_storage *dst, size_t dst_off, const cn_storage *src, size_t src_off,
                       size_t n) {
    if (n == 0) return CN_OK;
    cn_cuda_dev *dd = cn_cuda_dev_of(dst), *sd = cn_cuda_dev_of(src);
    if (!dd || !sd) return CN_EINVAL;
    if (!cn_gpu_range_ok("cuda copy", dst, dst_off, n) ||
        !cn_gpu_range_ok("cuda copy", src, src_off, n))
        return CN_EINVAL;
    if (dd == sd) {
        int rc = cn_cuda_enter("cuda copy", dd);
        if (rc < 0) return rc;
        CUresult r = cn_cu()->MemcpyDtoDAsync(dptr(dst, dst_off), dptr(src, src_off), n,
                                              dd->stream);
        return r == CUDA_SUCCESS ? CN_OK : cn_cu_fail("cuda copy", "cuMemcpyDtoDAsync", r);
    }
    /* Two GPUs: through the host (each device's stream keeps its order). */
    void *tmp = malloc(n);
    if (!tmp)
        return cn_failc(CN_ENOMEM, "cuda copy: no %zu bytes of host memory to stage a copy from "
                                   "%s to %s", n, sd->g.label, dd->g.label);
    int r = cn_cuda_read(src, src_off, tmp, n);
    if (r == CN_OK) r = cn_cuda_write(dst, dst_off, tmp, n, false);
    free(tmp);
    return r;
}

/* ---- stream and events ---- */

int cn_cuda_synchronize(int index) {
    cn_cuda_dev *d = cn_cuda_dev_get(index);
    if (!d) return CN_EINVAL;
    int rc = cn_cuda_enter("synchronize", d);
    if (rc < 0) return rc;
    CUresult r = cn_cu()->StreamSynchronize(d->stream);
    return r == CUDA_SUCCESS ? CN_OK : cn_cu_fail("synchronize", "cuStreamSynchronize", r);
}

void *cn_cuda_event_record(int index) {
    cn_cuda_dev *d = cn_cuda_dev_get(index);
    if (!d || cn_cuda_enter("event_record", d) < 0) return NULL;
    CUevent ev = NULL;
    CUresult r = cn_cu()->EventCreate(&ev, CU_EVENT_DISABLE_TIMING);
    if (r == CUDA_SUCCESS) r = cn_cu()->EventRecord(ev, d->stream);
    if (r != CUDA_SUCCESS) {
        if (ev) cn_cu()->EventDestroy(ev);
        cn_cu_fail("event_record", "cuEventRecord", r);
        return NULL;
    }
    return ev;
}

int cn_cuda_event_synchronize(void *ev) {
    if (!ev) return CN_OK;
    CUresult r = cn_cu()->EventSynchronize((CUevent)ev);
    return r == CUDA_SUCCESS ? CN_OK : cn_cu_fail("event_synchronize", "cuEventSynchronize", r);
}

bool cn_cuda_event_query(void *ev) {
    if (!ev) return true;
    return cn_cu()->EventQuery((CUevent)ev) != CUDA_ERROR_NOT_READY;
}

void cn_cuda_event_free(void *ev) {
    if (ev) cn_cu()->EventDestroy((CUevent)ev);
}

/* ---- the runtime the shared kernels use ---- */

static const cn_gpu_runtime cuda_runtime_def = {
    .build = build,
    .kernel = kernel,
    .kernel_max_group = kernel_max_group,
    .launch = launch,
    .mem_alloc = mem_alloc,
    .mem_free = mem_free,
    .gemm = cn_cuda_gemm_cublas,
};
