/* Op table introspection (chutney.h): the registry's entries as public
 * structs, for `chutney ops` and docs/ops.md. */
#include "op.h"

#include <string.h>

_Static_assert(CN_MAX_OP_ATTRS <= CN_OP_INFO_MAX_ATTRS,
               "cn_op_info.attrs is too small for the op table's attributes");

static const char *kind_name(cn_attr_kind k) {
    switch (k) {
    case CN_ATTR_INT: return "int";
    case CN_ATTR_BOOL: return "bool";
    case CN_ATTR_FLOAT: return "float";
    case CN_ATTR_DTYPE: return "dtype";
    case CN_ATTR_INTS: return "ints";
    default: return "?";
    }
}

static const struct {
    uint32_t bit;
    const char *word;
} flag_words[] = {
    {CN_OPF_VIEW, "view"},       {CN_OPF_ELEMENTWISE, "elementwise"},
    {CN_OPF_FLOAT_MATH, "float_math"}, {CN_OPF_PROMOTE, "promote"},
    {CN_OPF_NONDIFF, "nondiff"}, {CN_OPF_RANDOM, "random"},
    {CN_OPF_NO_HALF, "no_half"}, {CN_OPF_FIRST_ORDER, "first_order"},
    {CN_OPF_TRANSFER, "transfer"}, {CN_OPF_COMM, "comm"},
};

static void flags_str(uint32_t flags, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = '\0';
    for (size_t k = 0; k < sizeof flag_words / sizeof flag_words[0]; k++) {
        if (!(flags & flag_words[k].bit)) continue;
        size_t w = strlen(flag_words[k].word);
        if (len + (len > 0) + w + 1 > n) break;
        if (len) buf[len++] = ' ';
        memcpy(buf + len, flag_words[k].word, w + 1);
        len += w;
    }
}

int cn_op_count(void) { return CN_OP_COUNT; }

int cn_op_get_info(int i, cn_op_info *info) {
    if (!info) return cn_failc(CN_EINVAL, "op_get_info: info is NULL");
    if (i < 0 || i >= CN_OP_COUNT)
        return cn_failc(CN_EINVAL, "op_get_info: op %d out of range [0, %d)", i, CN_OP_COUNT);
    const cn_op_def *d = cn_ops[i];
    memset(info, 0, sizeof *info);
    info->name = d->name;
    info->ninputs = d->ninputs;
    for (int k = 0; k < CN_MAX_OP_ATTRS && d->attrs[k].name; k++) {
        info->attrs[k].name = d->attrs[k].name;
        info->attrs[k].kind = kind_name(d->attrs[k].kind);
        info->attrs[k].default_value = d->attrs[k].kind == CN_ATTR_INTS ? 0 : d->attrs[k].def;
        info->nattrs = k + 1;
    }
    flags_str(d->flags, info->flags, sizeof info->flags);
    info->grad = d->flags & CN_OPF_NONDIFF       ? "none"
                 : d->flags & CN_OPF_FIRST_ORDER ? "unsupported"
                 : d->vjp && d->jvp              ? "vjp+jvp"
                 : d->vjp                        ? "vjp only"
                                                 : "missing";
    info->doc = d->doc ? d->doc : "";
    info->grad_doc = d->grad_doc ? d->grad_doc : "";
    info->onnx = d->onnx ? d->onnx : "";
    return CN_OK;
}

int cn_op_index(const char *name) {
    if (!name) return cn_failc(CN_EINVAL, "op_index: name is NULL");
    for (int i = 0; i < CN_OP_COUNT; i++)
        if (strcmp(cn_ops[i]->name, name) == 0) return i;
    return cn_failc(CN_EINVAL, "op_index: no op named '%s'", name);
}
