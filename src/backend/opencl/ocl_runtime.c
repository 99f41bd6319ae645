/* The OpenCL runtime: devices found on first use, one context and one
 * in-order queue per device, the shared kernels' programs built by the
 * OpenCL compiler, launches, buffers, byte copies and events. */
#include "ocl.h"

#include <stdio.h>
#include <stdlib.h>

/* ---- devices ---- */

static const cn_gpu_runtime ocl_runtime_def;


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
            v->g.rt = &ocl_runtime_def;
            v->g.kind = CN_DEVICE_OPENCL;
            v->g.index = ndevs;
            snprintf(v->g.label, sizeof v->g.label, "opencl:%d", ndevs);
            char ext[8192] = "";
            clGetDeviceInfo(ids[d], CL_DEVICE_EXTENSIONS, sizeof ext - 1, ext, NULL);
            cl_device_fp_config dcfg = 0;
            clGetDeviceInfo(ids[d], CL_DEVICE_DOUBLE_FP_CONFIG, sizeof dcfg, &dcfg, NULL);
            v->g.fp64 = strstr(ext, "cl_khr_fp64") != NULL || dcfg != 0;
            cl_device_fp_config scfg = 0;
            clGetDeviceInfo(ids[d], CL_DEVICE_SINGLE_FP_CONFIG, sizeof scfg, &scfg, NULL);
            v->correct_divsqrt = (scfg & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
            size_t wg = 0;
            clGetDeviceInfo(ids[d], CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
            v->g.max_wg = wg ? wg : 1;
            cl_uint units = 0;
            clGetDeviceInfo(ids[d], CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, NULL);
            v->g.units = units ? units : 1;
            cl_ulong max_alloc = 0;
            clGetDeviceInfo(ids[d], CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc, &max_alloc,
                            NULL);
            v->g.max_alloc = max_alloc;
            clGetDeviceInfo(ids[d], CL_DEVICE_NAME, sizeof v->g.name - 1, v->g.name, NULL);
            v->g.impl = NULL;
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

cn_gpu_dev *cn_ocl_gpu_dev(int index) {
    cn_ocl_dev *d = cn_ocl_dev_get(index);
    return d ? &d->g : NULL;
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
    snprintf(info->name, sizeof info->name, "%s", d->g.name);
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
    snprintf(info->driver, sizeof info->driver, "%.60s, driver %.50s", pv, dv);
    cl_ulong mem = 0;
    clGetDeviceInfo(d->id, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, NULL);
    info->memory_bytes = mem;
    info->max_alloc_bytes = d->g.max_alloc;
    info->compute_units = (int)d->g.units;
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

/* ---- programs (the cache of compiled sources is gpu_runtime.c's) ---- */

/* In front of every program: the OpenCL side of the shared kernels'
 * dialect (gpu.h). */
static const char dialect[] =
    "#pragma OPENCL FP_CONTRACT OFF\n"
    "#ifdef CN_FP64\n"
    "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
    "#endif\n"
    "#define CN_FN inline\n"
    "#define CN_GROUP_SIZE(x, y) __attribute__((reqd_work_group_size(x, y, 1)))\n";

/* NULL after cn_fail. */
static void *build(cn_gpu_dev *g, const char *src, const char *opts) {
    cn_ocl_dev *dev = (cn_ocl_dev *)g;
    cl_int err;
    const char *srcs[2] = {dialect, src};
    cl_program p = clCreateProgramWithSource(dev->ctx, 2, srcs, NULL, &err);
    if (err != CL_SUCCESS) {
        cn_ocl_fail("opencl", "clCreateProgramWithSource", err);
        return NULL;
    }
    char full[1024];
    snprintf(full, sizeof full, "%s%s %s", g->fp64 ? "-DCN_FP64 " : "",
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
            if (log[0]) cn_gpu_log_excerpt(log, excerpt, sizeof excerpt);
            free(log);
        }
        char head[96];
        cn_gpu_source_head(src, head, sizeof head);
        cn_failc(CN_EUNSUPPORTED, "%s (%s): building a kernel failed (%s): %s: %s", g->label,
                 g->name, cn_ocl_err_name(err), head, excerpt);
        clReleaseProgram(p);
        return NULL;
    }
    return p;
}

static cn_gpu_kernel kernel(cn_gpu_dev *g, void *prog, const char *name) {
    (void)g;
    cl_int err;
    cl_kernel k = clCreateKernel((cl_program)prog, name, &err);
    if (err != CL_SUCCESS) {
        cn_ocl_fail("opencl", name, err);
        return NULL;
    }
    return k;
}

static size_t kernel_max_group(cn_gpu_dev *g, cn_gpu_kernel k) {
    cn_ocl_dev *dev = (cn_ocl_dev *)g;
    size_t wg = 0;
    if (clGetKernelWorkGroupInfo((cl_kernel)k, dev->id, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg,
                                 &wg, NULL) != CL_SUCCESS)
        wg = 0;
    return wg;
}

/* ---- launches ---- */

static int set_args(const char *fn, cl_kernel k, int nargs, const cn_gpu_arg *args) {
    for (int i = 0; i < nargs; i++) {
        cl_int err = clSetKernelArg(k, (cl_uint)i, args[i].size, args[i].value);
        if (err != CL_SUCCESS) {
            char what[48];
            snprintf(what, sizeof what, "setting kernel argument %d", i);
            return cn_ocl_fail(fn, what, err);
        }
    }
    return CN_OK;
}

/* The shared kernel objects hold their arguments: setting them and
 * enqueueing is one step under the device's lock. */
static int launch(const char *fn, cn_gpu_dev *g, cn_gpu_kernel kk, int nargs,
                  const cn_gpu_arg *args, unsigned dims, const size_t *global,
                  const size_t *local) {
    cn_ocl_dev *dev = (cn_ocl_dev *)g;
    cl_kernel k = kk;
    pthread_mutex_lock(&dev->launch_lock);
    int r = set_args(fn, k, nargs, args);
    if (r == CN_OK) {
        cl_int err = clEnqueueNDRangeKernel(dev->queue, k, (cl_uint)dims, NULL, global, local, 0,
                                            NULL, NULL);
        if (err != CL_SUCCESS) r = cn_ocl_fail(fn, "launching a kernel", err);
    }
    pthread_mutex_unlock(&dev->launch_lock);
    return r;
}

/* ---- buffers ---- */

static cn_gpu_buf mem_alloc(cn_gpu_dev *g, size_t nbytes, char *why, size_t nwhy) {
    cn_ocl_dev *dev = (cn_ocl_dev *)g;
    cl_int err;
    cl_mem m = clCreateBuffer(dev->ctx, CL_MEM_READ_WRITE, nbytes, NULL, &err);
    if (err != CL_SUCCESS || !m) {
        snprintf(why, nwhy, "%s (%d)", cn_ocl_err_name(err), (int)err);
        return NULL;
    }
    return m;
}

static void mem_free(cn_gpu_dev *g, cn_gpu_buf m) {
    (void)g;
    clReleaseMemObject((cl_mem)m);
}

int cn_ocl_write(cn_storage *dst, size_t dst_off, const void *src, size_t n, bool async) {
    if (n == 0) return CN_OK;
    cn_ocl_dev *d = cn_ocl_dev_of(dst);
    if (!d) return CN_EINVAL;
    if (!cn_gpu_range_ok("opencl write", dst, dst_off, n)) return CN_EINVAL;
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
    if (!cn_gpu_range_ok("opencl read", src, src_off, n)) return CN_EINVAL;
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
    if (!cn_gpu_range_ok("opencl copy", dst, dst_off, n) ||
        !cn_gpu_range_ok("opencl copy", src, src_off, n))
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
                                   "from opencl:%d to opencl:%d", n, sd->g.index, dd->g.index);
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

/* ---- the runtime the shared kernels use ---- */

static const cn_gpu_runtime ocl_runtime_def = {
    .build = build,
    .kernel = kernel,
    .kernel_max_group = kernel_max_group,
    .launch = launch,
    .mem_alloc = mem_alloc,
    .mem_free = mem_free,
#ifdef CN_HAVE_CLBLAST
    .gemm = cn_ocl_gemm_clblast,
#endif
};
