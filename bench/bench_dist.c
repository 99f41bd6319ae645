/* Allreduce latency and bandwidth between the ranks of an MPI job:
 *   mpirun -np 2 build/bench/bench_dist [--json]
 * For each size, the median over repeats of cn_dist_allreduce (SUM, f32)
 * timed on rank 0 between barriers; "bus bandwidth" is the bytes each rank
 * sends and receives in a ring, 2 (N - 1) / N of the buffer, per second.
 * From all sizes, an alpha-beta model: t(m) = alpha + m / beta, m the
 * bytes each rank moves. Without MPI, or as one process, it says so and exits 0. */
#include "bench_util.h"

#include <chutney.h>

int main(int argc, char **argv) {
    bool json = argc > 1 && !strcmp(argv[1], "--json");
    if (cn_dist_init(&argc, &argv) < 0) {
        fprintf(stderr, "bench_dist: %s\n", cn_last_error());
        return 1;
    }
    int P = cn_dist_size(), r = cn_dist_rank();
    if (P < 2) {
        if (r == 0) printf("bench_dist: one process (run it under mpirun -np 2 or more)\n");
        cn_dist_finalize();
        return 0;
    }
    static const int64_t sizes[] = {1, 256, 4096, 65536, 262144, 1048576, 4194304, 16777216};
    /* (elements of f32: 4 B to 64 MiB) */
    const int nsizes = (int)(sizeof sizes / sizeof sizes[0]);
    double med[16];
    if (r == 0 && !json) printf("%d ranks\n%12s %12s %12s\n", P, "bytes", "median us", "bus GB/s");
    if (r == 0 && json) printf("{\"ranks\":%d,\"allreduce\":[", P);
    for (int k = 0; k < nsizes; k++) {
        int64_t n = sizes[k];
        cn_tensor *t = cn_full(CN_F32, CN_SHAPE(n), 1.0);
        int reps = n <= 4096 ? 200 : n <= 1048576 ? 40 : 10;
        double times[200];
        for (int w = 0; w < 3; w++) cn_dist_allreduce(t, CN_DIST_SUM);
        for (int i = 0; i < reps; i++) {
            cn_dist_barrier();
            double t0 = bench_now_s();
            cn_dist_allreduce(t, CN_DIST_SUM);
            times[i] = bench_now_s() - t0;
        }
        /* The slowest rank's time is the collective's. */
        cn_tensor *tt = cn_from_data(CN_F64, CN_SHAPE(reps), times);
        cn_dist_allreduce(tt, CN_DIST_MAX);
        double v[200];
        cn_copy_to_buffer(tt, CN_F64, v, sizeof(double) * (size_t)reps);
        med[k] = bench_median(v, reps);
        double bytes = 4.0 * (double)n, bus = bytes * 2.0 * (P - 1) / P / med[k] / 1e9;
        if (r == 0 && !json) printf("%12.0f %12.2f %12.3f\n", bytes, med[k] * 1e6, bus);
        if (r == 0 && json)
            printf("%s{\"bytes\":%.0f,\"median_us\":%.3f,\"bus_gbs\":%.4f}", k ? "," : "", bytes,
                   med[k] * 1e6, bus);
        cn_release(t);
        cn_release(tt);
    }
    /* alpha, beta: least squares of t = alpha + m / beta over the sizes,
     * m the bytes each rank moves, weighted by 1 / t (relative errors, so
     * the small sizes count as much as the large). */
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int k = 0; k < nsizes; k++) {
        double m = 4.0 * (double)sizes[k] * 2.0 * (P - 1) / P, w = 1.0 / (med[k] * med[k]);
        sw += w, sx += w * m, sy += w * med[k], sxx += w * m * m, sxy += w * m * med[k];
    }
    double slope = (sw * sxy - sx * sy) / (sw * sxx - sx * sx);
    double alpha = (sy - slope * sx) / sw, beta = 1.0 / slope;
    if (r == 0) {
        if (json)
            printf("],\"alpha_us\":%.3f,\"beta_gbs\":%.4f}\n", alpha * 1e6, beta / 1e9);
        else
            printf("alpha-beta: t(n) = %.2f us + n / %.3f GB/s (n: bytes each rank moves)\n",
                   alpha * 1e6, beta / 1e9);
    }
    cn_dist_finalize();
    return 0;
}
