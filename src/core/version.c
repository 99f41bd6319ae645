/* Version and build description. */
#include "core.h"

const char *cn_version(void) { return CN_VERSION_STRING; }

const char *cn_build_info(void) {
    return "chutney " CN_VERSION_STRING
#ifdef CN_HAVE_OPENBLAS
           " +openblas"
#elif defined(CN_HAVE_CBLAS)
           " +cblas"
#else
           " (no BLAS: built-in GEMM)"
#endif
#ifdef CN_HAVE_DNNL
           " +onednn"
#endif
#ifdef CN_HAVE_ZLIB
           " +zlib"
#endif
#ifdef CN_HAVE_STB
           " +stb"
#endif
#ifdef CN_HAVE_SNDFILE
           " +sndfile"
#endif
#ifdef CN_HAVE_FFTW
           " +fftw"
#endif
#ifdef CN_HAVE_OPENCL
           " +opencl"
#endif
#ifdef CN_HAVE_CLBLAST
           " +clblast"
#endif
#ifdef CN_HAVE_CUDA
           " +cuda"
#endif
#ifdef CN_HAVE_MPI
           " +mpi"
#endif
#ifdef CN_HAVE_NCCL
           " +nccl"
#endif
#ifdef __AVX2__
           " avx2"
#endif
#ifdef __AVX512F__
           " avx512"
#endif
        ;
}

/* The optional parts of a build (CMakeLists.txt's CHUTNEY_WITH_* options
 * and what CMake found), present or not, so a person can see at once why
 * a feature is missing. */
#ifdef CN_HAVE_ONNX
#define HAS_ONNX true
#else
#define HAS_ONNX false
#endif
#ifdef CN_HAVE_OPENBLAS
#define HAS_OPENBLAS true
#else
#define HAS_OPENBLAS false
#endif
#ifdef CN_HAVE_CBLAS
#define HAS_CBLAS true
#else
#define HAS_CBLAS false
#endif
#ifdef CN_HAVE_DNNL
#define HAS_DNNL true
#else
#define HAS_DNNL false
#endif
#ifdef CN_HAVE_OPENCL
#define HAS_OPENCL true
#else
#define HAS_OPENCL false
#endif
#ifdef CN_HAVE_CLBLAST
#define HAS_CLBLAST true
#else
#define HAS_CLBLAST false
#endif
#ifdef CN_HAVE_CUDA
#define HAS_CUDA true
#else
#define HAS_CUDA false
#endif
#ifdef CN_HAVE_NCCL
#define HAS_NCCL true
#else
#define HAS_NCCL false
#endif
#ifdef CN_HAVE_MPI
#define HAS_MPI true
#else
#define HAS_MPI false
#endif
#ifdef CN_HAVE_ZLIB
#define HAS_ZLIB true
#else
#define HAS_ZLIB false
#endif
#ifdef CN_HAVE_STB
#define HAS_STB true
#else
#define HAS_STB false
#endif
#ifdef CN_HAVE_SNDFILE
#define HAS_SNDFILE true
#else
#define HAS_SNDFILE false
#endif
#ifdef CN_HAVE_FFTW
#define HAS_FFTW true
#else
#define HAS_FFTW false
#endif

static const cn_build_feature features[] = {
    {"onnx", "ONNX import and export (protobuf-c)", HAS_ONNX},
    {"openblas", "OpenBLAS for matrix products", HAS_OPENBLAS},
    {"cblas", "a CBLAS for matrix products (else the built-in GEMM)", HAS_CBLAS},
    {"onednn", "oneDNN for the convolutions it runs faster", HAS_DNNL},
    {"opencl", "the OpenCL backend (devices opencl:N)", HAS_OPENCL},
    {"clblast", "CLBlast for matrix products on OpenCL devices", HAS_CLBLAST},
    {"cuda", "the CUDA backend (devices cuda:N; cuBLAS, NVRTC)", HAS_CUDA},
    {"nccl", "NCCL for distributed training on CUDA devices", HAS_NCCL},
    {"mpi", "distributed training over MPI", HAS_MPI},
    {"zlib", "gzip-compressed data files (.gz)", HAS_ZLIB},
    {"stb", "image files: PNG, JPEG, BMP, ... (stb_image)", HAS_STB},
    {"sndfile", "WAV audio files (libsndfile)", HAS_SNDFILE},
    {"fftw", "log-mel spectrograms (FFTW's real FFT)", HAS_FFTW},
};

int cn_build_feature_count(void) { return (int)(sizeof features / sizeof features[0]); }

int cn_build_feature_get(int i, cn_build_feature *out) {
    if (!out || i < 0 || i >= cn_build_feature_count())
        return cn_failc(CN_EINVAL, "build_feature: index %d is out of range (0..%d)", i,
                        cn_build_feature_count() - 1);
    *out = features[i];
    return CN_OK;
}

const char *cn_cpu_isa(void) { return cn_isa_name(cn_isa()); }

bool cn_cpu_isa_available(const char *name) {
    for (int l = 0; name && l < CN_ISA_LEVELS; l++)
        if (strcmp(name, cn_isa_name(l)) == 0) return cn_isa_available(l);
    return false;
}
