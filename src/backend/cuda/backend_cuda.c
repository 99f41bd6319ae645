/* The CUDA backend's table (backend.h): its runtime (cuda_runtime.c), the
 * shared caching allocator and the shared kernels (src/backend/gpu), with
 * cuBLAS under the matrix products (cuda_blas.c). */
#include "cuda_backend.h"

static cn_storage *storage_new(int index, size_t nbytes) {
    return cn_gpu_storage_new(CN_DEVICE_CUDA, index, nbytes);
}
static int memory_stats(int index, cn_memory_stats *s) {
    return cn_gpu_memory_stats(CN_DEVICE_CUDA, index, s);
}
static size_t empty_cache(int index) { return cn_gpu_empty_cache(CN_DEVICE_CUDA, index); }
static const char *why_none(void) {
    const char *w = cn_cu_why();
    return w[0] ? w : "the driver reports no GPU";
}

const cn_backend cn_backend_cuda = {
    .name = "cuda",
    .kind = CN_DEVICE_CUDA,
    .device_count = cn_cuda_device_count,
    .why_none = why_none,
    .device_info = cn_cuda_device_info,
    .storage_new = storage_new,
    .memory_stats = memory_stats,
    .empty_cache = empty_cache,
    .write = cn_cuda_write,
    .read = cn_cuda_read,
    .copy_bytes = cn_cuda_copy_bytes,
    .copy = cn_gpu_copy,
    .fill = cn_gpu_fill,
    .random_fill = cn_gpu_random_fill,
    .synchronize = cn_cuda_synchronize,
    .event_record = cn_cuda_event_record,
    .event_synchronize = cn_cuda_event_synchronize,
    .event_query = cn_cuda_event_query,
    .event_free = cn_cuda_event_free,
    .kernels = cn_gpu_kernels,
    .fused_run = cn_gpu_fused_run,
    .optim_update = cn_gpu_optim_update,
};
