/* A cap on the elements of the tensors one thread allocates (CPU or
 * device storage), for code that computes from untrusted sizes: the ONNX
 * importer folds a file's constants under one, so that a file of a few
 * bytes cannot make it allocate gigabytes. Kept out of core.h: only the
 * allocation paths (cn_t_empty, cn_t_empty_on) and such callers need it. */
#ifndef CN_CORE_BUDGET_H
#define CN_CORE_BUDGET_H

#include <stdbool.h>
#include <stdint.h>

/* left < 0: no cap (the default). A tensor larger than what is left fails
 * to be made (cn_fail) and sets exceeded; whoever sets the struct saves
 * and restores it around its work. */
typedef struct cn_elem_budget {
    int64_t left;
    bool exceeded;
} cn_elem_budget;
extern _Thread_local cn_elem_budget cn_t_budget;

/* Takes the shape's elements from the budget, or fails naming fn and the
 * shape (the shape already passed cn_check_shape). */
bool cn_t_budget_take(const char *fn, int ndim, const int64_t *shape);

#endif
