/* --precision: mixed precision for train and the inference commands
 * (tools/tools.h; docs/training.md, "Mixed precision"). */
#include "tools.h"

#include <stdio.h>
#include <string.h>

bool cn_tool_precision(const char *cmd, const char *s, int *out) {
    static const char *const names[] = {"f32", "bf16", "f16"};
    static const cn_dtype dts[] = {CN_F32, CN_BF16, CN_F16};
    int i = cn_tool_choice(cmd, "--precision", "precision", s, names, 3);
    if (i >= 0) *out = dts[i];
    return i >= 0;
}

int cn_tool_autocast_begin(int precision) {
    if (precision < 0 || precision == CN_F32) return 0;
    if (cn_autocast_begin((cn_dtype)precision) < 0) {
        fprintf(stderr, "chutney: %s\n", cn_last_error());
        return CN_TOOL_FAILED;
    }
    return 0;
}

void cn_tool_autocast_end(int precision) {
    if (precision >= 0 && precision != CN_F32) cn_autocast_end();
}

int cn_tool_run_with_precision(int (*run)(int argc, char **argv), int argc, char **argv) {
    int precision = -1, n = 0;
    for (int i = 0; i < argc; i++) {
        if (i > 0 && !strcmp(argv[i], "--precision")) {
            if (i + 1 >= argc || !strncmp(argv[i + 1], "--", 2))
                return cn_tool_missing_value(argv[0], "--precision", "f32, bf16 or f16");
            if (!cn_tool_precision(argv[0], argv[++i], &precision)) return CN_TOOL_USAGE;
            continue;
        }
        argv[n++] = argv[i]; /* argv[argc] stays NULL past the kept ones */
    }
    if (n < argc) argv[n] = NULL;
    int rc = cn_tool_autocast_begin(precision);
    if (!rc) {
        rc = run(n, argv);
        cn_tool_autocast_end(precision);
    }
    return rc;
}

int cn_tool_scale_outputs(cn_grad_scaler *s, cn_tensor **outs, int n) {
    if (!s) return n;
    outs[n] = outs[0];
    outs[0] = cn_grad_scaler_scale(s, outs[0]);
    return n + 1;
}

void cn_tool_scaler_report(const cn_grad_scaler *s, int64_t steps, int64_t skipped_before) {
    if (s)
        printf("f16 loss scaling: %lld of %lld steps skipped (an inf or NaN gradient), scale now "
               "%g\n", (long long)(cn_grad_scaler_skipped(s) - skipped_before), (long long)steps,
               cn_grad_scaler_get_scale(s));
}
