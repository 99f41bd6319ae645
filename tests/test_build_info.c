/* What a build says about itself (`chutney --version`): every optional
 * feature once, agreeing with cn_build_info's "+name" words, and the CPU
 * instruction set in use, which this CPU runs. */
#include "harness.h"

static void test_features(void) {
    int n = cn_build_feature_count();
    CHECK(n >= 11);
    for (int i = 0; i < n; i++) {
        cn_build_feature f;
        CHECK(cn_build_feature_get(i, &f) == 0);
        CHECK(f.name && *f.name && f.what && *f.what);
        for (int k = 0; k < i; k++) {
            cn_build_feature g;
            CHECK(cn_build_feature_get(k, &g) == 0 && strcmp(g.name, f.name) != 0);
        }
        /* cn_build_info lists these as "+name" when present (onnx and cblas
         * it does not name). */
        char word[40];
        snprintf(word, sizeof word, "+%s ", f.name);
        char info[512];
        snprintf(info, sizeof info, "%s ", cn_build_info());
        if (strcmp(f.name, "onnx") != 0 && strcmp(f.name, "cblas") != 0)
            CHECK_MSG((strstr(info, word) != NULL) == f.enabled, "%s: enabled %d, build info '%s'",
                      f.name, f.enabled, cn_build_info());
    }
    cn_build_feature f;
    CHECK(cn_build_feature_get(n, &f) < 0 && strstr(cn_last_error(), "out of range"));
    CHECK(cn_build_feature_get(-1, &f) < 0);
    CHECK(cn_build_feature_get(0, NULL) < 0);
    /* The ONNX entry says what the importer says. */
    for (int i = 0; i < n; i++)
        if (cn_build_feature_get(i, &f) == 0 && !strcmp(f.name, "onnx"))
            CHECK(f.enabled == (cn_onnx_op_count() > 0));
}

static void test_cpu_isa(void) {
    const char *isa = cn_cpu_isa();
    CHECK(isa && (!strcmp(isa, "default") || !strcmp(isa, "avx2") || !strcmp(isa, "avx512")));
    CHECK(cn_cpu_isa_available(isa));
    CHECK(cn_cpu_isa_available("default"));
    CHECK(!cn_cpu_isa_available("sse9"));
    CHECK(!cn_cpu_isa_available(NULL));
}

int main(void) {
    RUN(test_features);
    RUN(test_cpu_isa);
    return th_summary();
}
