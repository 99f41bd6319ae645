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
