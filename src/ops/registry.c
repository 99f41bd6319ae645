/* The registry: the table of every op, built from op_list.h. */
#include "op.h"

#define CN_OP(name) extern const cn_op_def cn_opdef_##name;
#include "../core/op_list.h"
#undef CN_OP

const cn_op_def *cn_ops[CN_OP_TABLE_SIZE] = {
#define CN_OP(name) [CN_OP_##name] = &cn_opdef_##name,
#include "../core/op_list.h"
#undef CN_OP
};

const cn_op_def *cn_op_find(const char *name) {
    if (!name) return NULL;
    for (int i = 0; i < CN_OP_COUNT; i++)
        if (strcmp(cn_ops[i]->name, name) == 0) return cn_ops[i];
    return NULL;
}
