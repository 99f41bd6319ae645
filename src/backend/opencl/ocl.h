/* The OpenCL backend's runtime: devices and queues, programs built by the
 * OpenCL compiler for the shared kernels (src/backend/gpu), launches,
 * buffers, byte copies and events. The kernels themselves are the shared
 * ones; this backend adds the OpenCL side of their dialect and CLBlast's
 * GEMM (ocl_blas.c). */
#ifndef CN_OCL_H
#define CN_OCL_H

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include "../gpu/gpu.h"

#include <pthread.h>

/* One device: the shared kernels' view of it first, then its context and
 * in-order queue. */
typedef struct cn_ocl_dev {
    cn_gpu_dev g;
    cl_platform_id platform;
    cl_device_id id;
    cl_context ctx;
    cl_command_queue queue;
    bool correct_divsqrt;        /* f32 / and sqrt correctly rounded (build option given) */
    pthread_mutex_t launch_lock; /* kernel arguments + enqueue */
} cn_ocl_dev;

/* Device `index` (initialising the runtime on first use); NULL after cn_fail
 * when there is no such device. */
cn_ocl_dev *cn_ocl_dev_get(int index);
/* The device a storage lives on. */
cn_ocl_dev *cn_ocl_dev_of(const cn_storage *s);
/* The same as the shared kernels see it (gpu_runtime.c's cn_gpu_dev_get). */
cn_gpu_dev *cn_ocl_gpu_dev(int index);
/* The number of OpenCL devices (0 without a platform; never fails). */
int cn_ocl_device_count(void);

/* An OpenCL error as a Chutney error: "fn: what failed: CL_OUT_OF_RESOURCES (-5)".
 * Returns a negative status (CN_ENOMEM for allocation failures, else
 * CN_EUNSUPPORTED/CN_EINVAL as fits). */
int cn_ocl_fail(const char *fn, const char *what, cl_int err);
const char *cn_ocl_err_name(cl_int err);

/* CLBlast's GEMM for cn_gpu_gemm_run (ocl_blas.c): 0 when it did the
 * product, 1 when it does not apply, < 0 on a host error. */
int cn_ocl_gemm_clblast(const char *fn, cn_gpu_dev *dev, const struct cn_gpu_gemm *g);

/* ---- the table's entries (ocl_runtime.c) ---- */
int cn_ocl_device_info(int index, cn_device_info *info);
int cn_ocl_write(cn_storage *dst, size_t dst_off, const void *src, size_t n, bool async);
int cn_ocl_read(const cn_storage *src, size_t src_off, void *dst, size_t n);
int cn_ocl_copy_bytes(cn_storage *dst, size_t dst_off, const cn_storage *src, size_t src_off,
                      size_t n);
int cn_ocl_synchronize(int index);
void *cn_ocl_event_record(int index);
int cn_ocl_event_synchronize(void *ev);
bool cn_ocl_event_query(void *ev);
void cn_ocl_event_free(void *ev);

#endif
