/* A program outside the Chutney tree: it sees only the installed header and
 * library, the way a user's program does. It checks a small product through
 * a transposed view (so BLAS, when linked, gets a strided operand) and that
 * a shape error comes back as a message, not a crash. */
#include <chutney.h>

#include <stdio.h>
#include <string.h>

int main(void) {
    int failures = 0;
    cn_scope_begin();
    /* a = [[0, 1, 2], [3, 4, 5]]; a @ a^T = [[5, 14], [14, 50]] */
    cn_tensor *a = cn_reshape(cn_arange(0, 6, 1, CN_F32), CN_SHAPE(2, 3));
    cn_tensor *g = cn_matmul(a, cn_transpose(a, 0, 1));
    const double want[2][2] = {{5, 14}, {14, 50}};
    if (!g) {
        fprintf(stderr, "matmul failed: %s\n", cn_last_error());
        failures++;
    } else {
        for (int64_t i = 0; i < 2; i++)
            for (int64_t j = 0; j < 2; j++) {
                double v = cn_get(g, (int64_t[]){i, j});
                if (v != want[i][j]) {
                    fprintf(stderr, "g[%d][%d] = %g, expected %g\n", (int)i, (int)j, v,
                            want[i][j]);
                    failures++;
                }
            }
    }
    if (cn_matmul(a, a) != NULL || strstr(cn_last_error(), "matmul") == NULL) {
        fprintf(stderr, "matmul of [2, 3] and [2, 3] did not fail cleanly: '%s'\n",
                cn_last_error());
        failures++;
    }
    cn_scope_end();
    printf("%s: %s\n", cn_build_info(), failures ? "FAILED" : "ok");
    return failures != 0;
}
