/* The register machine of the fused elementwise kernel (src/graph/fused.c).
 *
 * A fused expression is turned into straight-line code for an accumulator
 * machine. The accumulator holds one group of the output (CN_FR_GROUP_BYTES:
 * 128 f32 or 64 f64 elements) in vector registers: eight 512-bit registers
 * with AVX-512; with AVX2 eight 256-bit ones hold half a group, otherwise
 * eight 128-bit ones a quarter, and the code runs once per part. Each instruction combines the accumulator with operands read
 * from memory: an input's group (straight from the tensor, or from a block
 * it was gathered into), a scalar's filled group, or a value the code
 * stored earlier because it is read more than once (a tree, or a
 * subexpression shared by two ops). A chain of ops thus never leaves the
 * registers between its ops, which is what makes a fused chain of cheap
 * ops several times faster than one loop per op (bench_fused).
 *
 * The cheap ops (arithmetic, comparisons, logic, where, relu, clamp, ...)
 * run in the registers. The others (exp, tanh, pow, ...) are CALLs: the
 * accumulator is stored, the op's loop from fused_kernels.c runs over the
 * group, and the result is loaded back. Both give the unfused kernels' bits:
 * the register forms are the same IEEE operations and bitwise selects as
 * the kernels' formulas, and the CALLs are those formulas. */
#ifndef CN_CPU_FUSED_REGS_H
#define CN_CPU_FUSED_REGS_H

#include "fused_kernels.h"

#define CN_FR_GROUP_BYTES 512

enum {
    CN_FR_LOAD,  /* acc = arg[0] */
    CN_FR_STORE, /* arg[0] = acc (acc kept) */
    CN_FR_CALL,  /* acc = fn(operands), acc being operand accpos */
    /* unary, on acc */
    CN_FR_COPY,
    CN_FR_NEG,
    CN_FR_ABS,
    CN_FR_SIGN,
    CN_FR_SQUARE,
    CN_FR_RECIPROCAL,
    CN_FR_RELU,
    CN_FR_LEAKY_RELU, /* slope p.f0 / p.d0 */
    CN_FR_CLAMP,      /* bounds p.f0, p.f1 / p.d0, p.d1 */
    /* maximum and minimum with a scalar operand c (p.f0 / p.d0) that is not
     * NaN, acc being x (0) or y (1): max(acc, c), max(c, acc), ... Half the
     * work of CN_FR_MAX/MIN, which must test the operand for NaN. */
    CN_FR_MAX_C0,
    CN_FR_MAX_C1,
    CN_FR_MIN_C0,
    CN_FR_MIN_C1,
    CN_FR_NOT,        /* mask of acc == 0 */
    CN_FR_TRUTH,      /* mask of acc != 0 */
    /* binary: x op y, acc being x (accpos 0) or y (accpos 1) */
    CN_FR_ADD,
    CN_FR_SUB,
    CN_FR_MUL,
    CN_FR_DIV,
    CN_FR_MAX,
    CN_FR_MIN,
    CN_FR_EQ,
    CN_FR_NE,
    CN_FR_LT,
    CN_FR_LE,
    CN_FR_GT,
    CN_FR_GE,
    CN_FR_AND,
    CN_FR_OR,
    CN_FR_XOR,
    /* cond ? x : y, acc being operand accpos (0 cond, 1 x, 2 y) */
    CN_FR_WHERE,
    CN_FR_NOPS
};

typedef struct cn_fr_code {
    uint8_t op;      /* CN_FR_* */
    uint8_t accpos;  /* which operand the accumulator is */
    int16_t arg[3];  /* the other operands: indexes into the pointer table, -1 none */
    cn_fk_fn fn;     /* CALL: the op's loop (takes operands in order a, b, c) */
    cn_fk_params p;
} cn_fr_code;

/* Run code over ngroups consecutive groups. ptr[r] points at register r's
 * current group; after each group, the registers listed in adv (nadv of
 * them) move on by one group, the others (scalars, stored values) stay.
 * The accumulator is written to out, group after group (out may be an
 * input's group, read before it is written). Of the last group only the
 * first last_n elements (1..a group) matter: the rest of what is written
 * there is garbage. dt: f32 or f64. */
void cn_fr_run(cn_dtype dt, const cn_fr_code *code, int ncode, char **ptr, const int16_t *adv,
               int nadv, int64_t ngroups, int64_t last_n, char *out);

#endif
