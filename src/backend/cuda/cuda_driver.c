/* The CUDA driver API, opened at run time (cuda_backend.h says why): each
 * function by its versioned symbol, the one cuda.h's macros would call. */
#include "cuda_backend.h"

#include <dlfcn.h>
#include <stdio.h>

static cn_cu_api api;
static const cn_cu_api *loaded;
static char why[256] = "not loaded";
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void) {
    /* CN_CUDA_DRIVER names another library (a driver in a non-standard place). */
    const char *lib = getenv("CN_CUDA_DRIVER");
    if (!lib || !*lib) lib = "libcuda.so.1";
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(why, sizeof why, "no CUDA driver (%s)", dlerror());
        return;
    }
    struct {
        void **slot;
        const char *name;
    } syms[] = {
#define S(field, sym) {(void **)&api.field, sym}
        S(Init, "cuInit"),
        S(DriverGetVersion, "cuDriverGetVersion"),
        S(DeviceGetCount, "cuDeviceGetCount"),
        S(DeviceGet, "cuDeviceGet"),
        S(DeviceGetName, "cuDeviceGetName"),
        S(DeviceGetAttribute, "cuDeviceGetAttribute"),
        S(DeviceTotalMem, "cuDeviceTotalMem_v2"),
        S(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
        S(CtxSetCurrent, "cuCtxSetCurrent"),
        S(StreamCreate, "cuStreamCreate"),
        S(StreamSynchronize, "cuStreamSynchronize"),
        S(MemAlloc, "cuMemAlloc_v2"),
        S(MemFree, "cuMemFree_v2"),
        S(MemGetInfo, "cuMemGetInfo_v2"),
        S(MemHostAlloc, "cuMemHostAlloc"),
        S(MemFreeHost, "cuMemFreeHost"),
        S(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
        S(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
        S(MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"),
        S(ModuleLoadData, "cuModuleLoadData"),
        S(ModuleGetFunction, "cuModuleGetFunction"),
        S(FuncGetAttribute, "cuFuncGetAttribute"),
        S(LaunchKernel, "cuLaunchKernel"),
        S(EventCreate, "cuEventCreate"),
        S(EventRecord, "cuEventRecord"),
        S(EventSynchronize, "cuEventSynchronize"),
        S(EventQuery, "cuEventQuery"),
        S(EventDestroy, "cuEventDestroy_v2"),
        S(GetErrorName, "cuGetErrorName"),
#undef S
    };
    for (size_t i = 0; i < sizeof syms / sizeof *syms; i++) {
        /* dlsym returns an object pointer; POSIX guarantees it converts to
         * a function pointer, which the slot's type then is. */
        void *p = dlsym(h, syms[i].name);
        if (!p) {
            snprintf(why, sizeof why, "the CUDA driver %s has no %s (too old a driver?)", lib,
                     syms[i].name);
            dlclose(h);
            return;
        }
        *syms[i].slot = p;
    }
    CUresult r = api.Init(0);
    if (r != CUDA_SUCCESS) {
        const char *name = NULL;
        if (api.GetErrorName(r, &name) != CUDA_SUCCESS || !name) name = "unknown error";
        snprintf(why, sizeof why, "the CUDA driver did not start: cuInit: %s (%d)", name, (int)r);
        return; /* the library stays open: a driver without a device is normal */
    }
    why[0] = 0;
    loaded = &api;
}

const cn_cu_api *cn_cu(void) {
    pthread_once(&once, load);
    return loaded;
}

const char *cn_cu_why(void) {
    pthread_once(&once, load);
    return why;
}

const char *cn_cu_err_name(CUresult r) {
    const char *name = NULL;
    if (!loaded || loaded->GetErrorName(r, &name) != CUDA_SUCCESS || !name)
        return "unknown CUDA error";
    return name;
}

int cn_cu_fail(const char *fn, const char *what, CUresult r) {
    int st = r == CUDA_ERROR_OUT_OF_MEMORY ? CN_ENOMEM
             : r == CUDA_ERROR_INVALID_VALUE ? CN_EINVAL
                                             : CN_EUNSUPPORTED;
    return cn_failc(st, "%s: %s: %s (%d)", fn, what, cn_cu_err_name(r), (int)r);
}
