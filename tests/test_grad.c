/* Every differentiable op's reverse- and forward-mode rules against central
 * differences in f64, driven by the op table: an op without a case fails. */
#include "gradcheck.h"
#include "ops/op.h"

#include "grad_cases_shape.h"
/* Each op family keeps its cases in its own file. */
#if __has_include("grad_cases_unary.h")
#include "grad_cases_unary.h"
#define GC_UNARY LIST(grad_cases_unary),
#else
#define GC_UNARY
#endif
#if __has_include("grad_cases_binary.h")
#include "grad_cases_binary.h"
#define GC_BINARY LIST(grad_cases_binary),
#else
#define GC_BINARY
#endif
#if __has_include("grad_cases_reduce.h")
#include "grad_cases_reduce.h"
#define GC_REDUCE LIST(grad_cases_reduce),
#else
#define GC_REDUCE
#endif
#if __has_include("grad_cases_index.h")
#include "grad_cases_index.h"
#define GC_INDEX LIST(grad_cases_index),
#else
#define GC_INDEX
#endif
#if __has_include("grad_cases_nn.h")
#include "grad_cases_nn.h"
#define GC_NN LIST(grad_cases_nn),
#else
#define GC_NN
#endif
#if __has_include("grad_cases_rnn.h")
#include "grad_cases_rnn.h"
#define GC_RNN LIST(grad_cases_rnn),
#else
#define GC_RNN
#endif
#if __has_include("grad_cases_attention.h")
#include "grad_cases_attention.h"
#define GC_ATTENTION LIST(grad_cases_attention),
#else
#define GC_ATTENTION
#endif

typedef struct case_list {
    const grad_case *cases;
    size_t n;
} case_list;

#define LIST(arr) {arr, sizeof arr / sizeof arr[0]}
static const case_list all_cases[] = {
    LIST(grad_cases_shape),
    GC_UNARY GC_BINARY GC_REDUCE GC_INDEX GC_NN GC_RNN GC_ATTENTION
};

static void test_every_case(void) {
    for (size_t l = 0; l < sizeof all_cases / sizeof all_cases[0]; l++) {
        for (size_t k = 0; k < all_cases[l].n; k++) {
            const grad_case *c = &all_cases[l].cases[k];
            th_seed(1000 + k);
            for (int layout = 0; layout < TH_NLAYOUTS; layout++) {
                if (!gc_check_case(c, layout)) break;
            }
            gc_check_static(c);
        }
    }
}

/* The op table is the list of what must be covered. */
static void test_coverage(void) {
    for (int op = 0; op < CN_OP_COUNT; op++) {
        const cn_op_def *d = cn_ops[op];
        /* First-order ops (tests/test_rnn_op.c checks lstm_seq_backward's
         * refusal) have rules that only fail; send and recv need two ranks
         * (tests/test_dist.c checks their gradients against one process). */
        if (d->flags & (CN_OPF_NONDIFF | CN_OPF_FIRST_ORDER | CN_OPF_COMM)) continue;
        bool covered = false;
        for (size_t l = 0; l < sizeof all_cases / sizeof all_cases[0] && !covered; l++)
            for (size_t k = 0; k < all_cases[l].n && !covered; k++)
                covered = strcmp(all_cases[l].cases[k].op, d->name) == 0;
        CHECK_MSG(covered, "op %s is differentiable but has no gradient case", d->name);
        CHECK_MSG(d->vjp != NULL, "op %s has no vjp rule", d->name);
        CHECK_MSG(d->jvp != NULL, "op %s has no jvp rule", d->name);
    }
}

int main(void) {
    RUN(test_every_case);
    RUN(test_coverage);
    return th_summary();
}
