/* The OpenCL backend's table (backend.h): its runtime (ocl_runtime.c), the
 * shared caching allocator and the shared kernels (src/backend/gpu). */
#include "ocl.h"

static cn_storage *storage_new(int index, size_t nbytes) {
    return cn_gpu_storage_new(CN_DEVICE_OPENCL, index, nbytes);
}
static int memory_stats(int index, cn_memory_stats *s) {
    return cn_gpu_memory_stats(CN_DEVICE_OPENCL, index, s);
}
static size_t empty_cache(int index) { return cn_gpu_empty_cache(CN_DEVICE_OPENCL, index); }

const cn_backend cn_backend_opencl = {
    .name = "opencl",
    .kind = CN_DEVICE_OPENCL,
    .device_count = cn_ocl_device_count,
    .device_info = cn_ocl_device_info,
    .storage_new = storage_new,
    .memory_stats = memory_stats,
    .empty_cache = empty_cache,
    .write = cn_ocl_write,
    .read = cn_ocl_read,
    .copy_bytes = cn_ocl_copy_bytes,
    .copy = cn_gpu_copy,
    .fill = cn_gpu_fill,
    .random_fill = cn_gpu_random_fill,
    .synchronize = cn_ocl_synchronize,
    .event_record = cn_ocl_event_record,
    .event_synchronize = cn_ocl_event_synchronize,
    .event_query = cn_ocl_event_query,
    .event_free = cn_ocl_event_free,
    .kernels = cn_gpu_kernels,
    .fused_run = cn_gpu_fused_run,
    .optim_update = cn_gpu_optim_update,
};
