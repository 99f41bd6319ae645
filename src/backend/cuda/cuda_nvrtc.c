/* The shared kernels compiled by NVRTC: the CUDA side of their dialect
 * (gpu.h: the kernels are written in OpenCL C's spelling, and this header
 * defines each of those names for CUDA C++), and the compiler call. NVRTC
 * needs no GPU, so the tests compile every kernel source here too.
 *
 * NVRTC is opened at run time, on the first compile (CN_NVRTC_SONAME, the
 * toolkit's, else libnvrtc.so): linked in, its compiler's thread-local
 * state is part of every thread of every program using Chutney, which
 * costs memory and breaks the leak checker's scan of thread-local storage
 * in the tests. */
#include "cuda_backend.h"
#include "cuda_nvrtc.h"

#include <dlfcn.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef CN_NVRTC_SONAME
#define CN_NVRTC_SONAME "libnvrtc.so"
#endif

static struct {
    nvrtcResult (*CreateProgram)(nvrtcProgram *, const char *, const char *, int,
                                 const char *const *, const char *const *);
    nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char *const *);
    nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetProgramLog)(nvrtcProgram, char *);
    nvrtcResult (*GetCUBINSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetCUBIN)(nvrtcProgram, char *);
    nvrtcResult (*GetPTXSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetPTX)(nvrtcProgram, char *);
    nvrtcResult (*DestroyProgram)(nvrtcProgram *);
    const char *(*GetErrorString)(nvrtcResult);
    nvrtcResult (*GetNumSupportedArchs)(int *);
    nvrtcResult (*GetSupportedArchs)(int *);
    nvrtcResult (*Version)(int *, int *);
} nv;
static bool nv_ok;
static char nv_why[256];
static pthread_once_t nv_once = PTHREAD_ONCE_INIT;

static void nv_load(void) {
    void *h = dlopen(CN_NVRTC_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libnvrtc.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(nv_why, sizeof nv_why, "no NVRTC (%s)", dlerror());
        return;
    }
    struct {
        void **slot;
        const char *name;
    } syms[] = {
#define S(f) {(void **)&nv.f, "nvrtc" #f}
        S(CreateProgram), S(CompileProgram), S(GetProgramLogSize), S(GetProgramLog),
        S(GetCUBINSize), S(GetCUBIN), S(GetPTXSize), S(GetPTX), S(DestroyProgram),
        S(GetErrorString), S(GetNumSupportedArchs), S(GetSupportedArchs), S(Version),
#undef S
    };
    for (size_t i = 0; i < sizeof syms / sizeof *syms; i++) {
        void *p = dlsym(h, syms[i].name);
        if (!p) {
            snprintf(nv_why, sizeof nv_why, "NVRTC (%s) has no %s", CN_NVRTC_SONAME,
                     syms[i].name);
            return;
        }
        *syms[i].slot = p;
    }
    nv_ok = true;
}

static int nv_ready(void) {
    pthread_once(&nv_once, nv_load);
    return nv_ok ? CN_OK : cn_failc(CN_EUNSUPPORTED, "cuda: %s", nv_why);
}

static const char dialect[] =
    "#define CN_FP64 1\n"
    "#define CN_FN __device__ inline\n"
    "#define __kernel extern \"C\" __global__\n"
    "#define __global\n"
    "#define __local __shared__\n"
    "#define __constant const\n"
    "#define restrict __restrict__\n"
    "#define CN_GROUP_SIZE(x, y) __launch_bounds__((x) * (y))\n"
    "#define CLK_LOCAL_MEM_FENCE 1\n"
    "#define CLK_GLOBAL_MEM_FENCE 2\n"
    "#define barrier(flags) __syncthreads()\n"
    "typedef unsigned char uchar;\n"
    "typedef unsigned short ushort;\n"
    "typedef unsigned int uint;\n"
    "typedef unsigned long ulong;\n"
    /* Work-item functions; dimension 0 is x. */
    "__device__ inline size_t get_local_id(int d) {\n"
    "  return d == 0 ? threadIdx.x : d == 1 ? threadIdx.y : threadIdx.z; }\n"
    "__device__ inline size_t get_local_size(int d) {\n"
    "  return d == 0 ? blockDim.x : d == 1 ? blockDim.y : blockDim.z; }\n"
    "__device__ inline size_t get_group_id(int d) {\n"
    "  return d == 0 ? blockIdx.x : d == 1 ? blockIdx.y : blockIdx.z; }\n"
    "__device__ inline size_t get_num_groups(int d) {\n"
    "  return d == 0 ? gridDim.x : d == 1 ? gridDim.y : gridDim.z; }\n"
    "__device__ inline size_t get_global_id(int d) {\n"
    "  return get_group_id(d) * get_local_size(d) + get_local_id(d); }\n"
    "__device__ inline size_t get_global_size(int d) {\n"
    "  return get_num_groups(d) * get_local_size(d); }\n"
    /* Reinterpretations and integer helpers. */
    "__device__ inline float as_float(uint x) { return __uint_as_float(x); }\n"
    "__device__ inline float as_float(int x) { return __int_as_float(x); }\n"
    "__device__ inline uint as_uint(float x) { return __float_as_uint(x); }\n"
    "__device__ inline int as_int(float x) { return __float_as_int(x); }\n"
    "__device__ inline double as_double(long x) { return __longlong_as_double(x); }\n"
    "__device__ inline double as_double(ulong x) { return __longlong_as_double((long long)x); }\n"
    "__device__ inline long as_long(double x) { return __double_as_longlong(x); }\n"
    "__device__ inline ulong as_ulong(double x) { return (ulong)__double_as_longlong(x); }\n"
    "__device__ inline uint mul_hi(uint a, uint b) { return __umulhi(a, b); }\n"
    "__device__ inline int mul_hi(int a, int b) { return __mulhi(a, b); }\n"
    "__device__ inline ulong mul_hi(ulong a, ulong b) { return __umul64hi(a, b); }\n"
    "__device__ inline long mul_hi(long a, long b) { return __mul64hi(a, b); }\n"
    "__device__ inline int atomic_min(volatile int *p, int v) { return atomicMin((int *)p, v); }\n"
    "__device__ inline int atomic_max(volatile int *p, int v) { return atomicMax((int *)p, v); }\n"
    "__device__ inline int atomic_add(volatile int *p, int v) { return atomicAdd((int *)p, v); }\n"
    "__device__ inline int atomic_cmpxchg(volatile int *p, int c, int v) {\n"
    "  return atomicCAS((int *)p, c, v); }\n"
    /* Limits and special values, as OpenCL C defines them. */
    "#define CHAR_BIT 8\n"
    "#define UCHAR_MAX 255\n"
    "#define USHRT_MAX 65535\n"
    "#define INT_MAX 2147483647\n"
    "#define INT_MIN (-2147483647 - 1)\n"
    "#define UINT_MAX 0xffffffffu\n"
    "#define LONG_MAX 9223372036854775807L\n"
    "#define LONG_MIN (-9223372036854775807L - 1L)\n"
    "#define ULONG_MAX 0xfffffffffffffffful\n"
    "#define FLT_MAX 3.402823466e+38f\n"
    "#define FLT_MIN 1.175494351e-38f\n"
    "#define FLT_EPSILON 1.1920928955078125e-07f\n"
    "#define DBL_MAX 1.7976931348623157e+308\n"
    "#define DBL_MIN 2.2250738585072014e-308\n"
    "#define DBL_EPSILON 2.220446049250313e-16\n"
    "#define INFINITY __int_as_float(0x7f800000)\n"
    "#define NAN __int_as_float(0x7fc00000)\n";

const char *cn_cuda_dialect(void) { return dialect; }

void *cn_cuda_compile(const char *src, const char *opts, const char *arch, size_t *size) {
    if (nv_ready() < 0) return NULL;
    size_t nd = strlen(dialect), ns = strlen(src);
    char *full = malloc(nd + ns + 2);
    if (!full) {
        cn_failc(CN_ENOMEM, "cuda: out of memory compiling a kernel");
        return NULL;
    }
    memcpy(full, dialect, nd);
    full[nd] = '\n';
    memcpy(full + nd + 1, src, ns + 1);
    nvrtcProgram prog;
    nvrtcResult r = nv.CreateProgram(&prog, full, "chutney.cu", 0, NULL, NULL);
    free(full);
    if (r != NVRTC_SUCCESS) {
        cn_failc(CN_EUNSUPPORTED, "cuda: nvrtcCreateProgram: %s", nv.GetErrorString(r));
        return NULL;
    }
    /* Options: the target; no contraction of a * b + c into one rounding
     * (the CPU's and OpenCL's kernels round each operation, and the tests
     * compare them); the caller's -D definitions, split on spaces. */
    char archopt[48];
    snprintf(archopt, sizeof archopt, "--gpu-architecture=%s", arch);
    const char *argv[40];
    int argc = 0;
    argv[argc++] = archopt;
    argv[argc++] = "--fmad=false";
    argv[argc++] = "--std=c++17";
    argv[argc++] = "-default-device";
    char *ocopy = NULL;
    if (opts && *opts) {
        ocopy = malloc(strlen(opts) + 1);
        if (!ocopy) {
            nv.DestroyProgram(&prog);
            cn_failc(CN_ENOMEM, "cuda: out of memory compiling a kernel");
            return NULL;
        }
        strcpy(ocopy, opts);
        for (char *tok = strtok(ocopy, " "); tok && argc < 40; tok = strtok(NULL, " "))
            argv[argc++] = tok;
    }
    r = nv.CompileProgram(prog, argc, argv);
    free(ocopy);
    if (r != NVRTC_SUCCESS) {
        size_t len = 0;
        char excerpt[640] = "(no log)";
        if (nv.GetProgramLogSize(prog, &len) == NVRTC_SUCCESS && len > 1) {
            char *log = malloc(len + 1);
            if (log && nv.GetProgramLog(prog, log) == NVRTC_SUCCESS) {
                log[len] = 0;
                cn_gpu_log_excerpt(log, excerpt, sizeof excerpt);
            }
            free(log);
        }
        char head[96];
        cn_gpu_source_head(src, head, sizeof head);
        nv.DestroyProgram(&prog);
        cn_failc(CN_EUNSUPPORTED, "cuda (%s): compiling a kernel failed (%s): %s: %s", arch,
                 nv.GetErrorString(r), head, excerpt);
        return NULL;
    }
    bool cubin = strncmp(arch, "sm_", 3) == 0;
    size_t n = 0;
    r = cubin ? nv.GetCUBINSize(prog, &n) : nv.GetPTXSize(prog, &n);
    char *img = r == NVRTC_SUCCESS ? malloc(n + 1) : NULL;
    if (img) r = cubin ? nv.GetCUBIN(prog, img) : nv.GetPTX(prog, img);
    nv.DestroyProgram(&prog);
    if (!img || r != NVRTC_SUCCESS) {
        free(img);
        cn_failc(CN_ENOMEM, "cuda: reading a compiled kernel: %s", nv.GetErrorString(r));
        return NULL;
    }
    img[n] = 0;
    *size = n;
    return img;
}

int cn_cuda_nvrtc_version(void) {
    pthread_once(&nv_once, nv_load);
    int major = 0, minor = 0;
    if (!nv_ok || nv.Version(&major, &minor) != NVRTC_SUCCESS) return 0;
    return major * 1000 + minor * 10;
}

int cn_cuda_nvrtc_newest(int *arch) {
    if (nv_ready() < 0) return CN_EUNSUPPORTED;
    int n = 0;
    if (nv.GetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0 || n > 256)
        return cn_failc(CN_EUNSUPPORTED, "cuda: NVRTC lists no architectures");
    int archs[256];
    if (nv.GetSupportedArchs(archs) != NVRTC_SUCCESS)
        return cn_failc(CN_EUNSUPPORTED, "cuda: NVRTC lists no architectures");
    int best = 0;
    for (int i = 0; i < n; i++)
        if (archs[i] > best) best = archs[i];
    *arch = best;
    return CN_OK;
}
