/* The ONNX importer's op table as public structs (chutney.h, "Op table
 * introspection"), for `chutney info --supported-ops` and docs/onnx.md. */
#include "onnx_internal.h"

#include <string.h>

#ifdef CN_HAVE_ONNX

/* Entry i of the importer's families in order; NULL and *n = how many
 * there are when i is out of range. */
static const onnx_op_entry *entry(int i, int *n) {
    int k = 0;
    for (const onnx_op_entry *const *f = cn_onnx_families(); *f; f++)
        for (const onnx_op_entry *e = *f; e->name; e++, k++)
            if (k == i) return e;
    /* then com.microsoft's, named with their domain */
    for (const onnx_op_entry *e = cn_onnx_ops_ms; e->name; e++, k++)
        if (k == i) return e;
    *n = k;
    return NULL;
}

int cn_onnx_op_count(void) {
    int n;
    entry(-1, &n);
    return n;
}

int cn_onnx_get_op_info(int i, cn_onnx_op_info *info) {
    if (!info) return cn_failc(CN_EINVAL, "onnx_get_op_info: info is NULL");
    int n;
    const onnx_op_entry *e = entry(i, &n);
    if (!e) return cn_failc(CN_EINVAL, "onnx_get_op_info: op %d out of range [0, %d)", i, n);
    info->name = e->name;
    info->attrs = e->attrs ? e->attrs : "";
    info->min_inputs = e->min_in;
    info->max_inputs = e->max_in;
    info->max_outputs = e->max_out;
    info->limits = e->limits ? e->limits : "";
    return CN_OK;
}

#else /* !CN_HAVE_ONNX */

int cn_onnx_op_count(void) { return 0; }

int cn_onnx_get_op_info(int i, cn_onnx_op_info *info) {
    (void)info;
    return cn_failc(CN_EINVAL, "onnx_get_op_info: op %d out of range: built without ONNX support", i);
}

#endif
