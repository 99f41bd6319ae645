/* A five-minute tour of the C API. README.md quotes it section by section;
 * CTest runs it (example_tour) and checks that the README's quotes still
 * match it (readme_tour). */
#include <chutney.h>

#include <stdio.h>
#include <stdlib.h>

static int failures;

/* Print a result, or the error that stopped it. */
static void show(const char *what, const cn_tensor *t) {
    if (!t) {
        printf("%s: error: %s\n", what, cn_last_error());
        failures++;
        return;
    }
    char *s = cn_to_string(t);
    printf("%s = %s\n", what, s);
    free(s);
}

int main(void) {
    /* ---- tensors ---- */
    cn_scope_begin(); /* every tensor made from here on is released at cn_scope_end() */
    cn_tensor *x = cn_from_data(CN_F32, CN_SHAPE(2, 3), (float[]){1, 2, 3, 4, 5, 6});
    cn_tensor *b = cn_arange(10, 40, 10, CN_F32); /* [10, 20, 30] */
    cn_tensor *e = cn_eye(3, 3, CN_F64);
    cn_manual_seed(42); /* Philox: the same numbers for any thread count */
    cn_tensor *noise = cn_randn(CN_F32, CN_SHAPE(2, 3));
    char shape[64];
    printf("x is %s, element [1, 2] is %g\n", cn_shape_str(x, shape, sizeof shape),
           cn_get(x, (int64_t[]){1, 2}));
    show("x", x);
    show("eye(3)", e);

    /* ---- views ---- */
    cn_tensor *xt = cn_transpose(x, 0, 1);                     /* [3, 2], no copy */
    cn_tensor *last = cn_slice(x, 0, -1, CN_END, 1);           /* x[-1:] */
    cn_tensor *flip = cn_slice(x, 1, CN_END, CN_BEGIN, -1);    /* x[:, ::-1] */
    cn_tensor *wide = cn_expand(cn_reshape(b, CN_SHAPE(3, 1)), CN_SHAPE(3, 4)); /* stride 0 */
    printf("xt shares x's storage: %d, is contiguous: %d\n", cn_shares_storage(x, xt),
           cn_is_contiguous(xt));
    show("x[-1:]", last);
    show("x[:, ::-1]", flip);
    show("b as a column, expanded", wide);

    /* ---- elementwise ops, broadcasting ---- */
    cn_tensor *y = cn_relu(cn_sub_scalar(cn_add(x, b), 25)); /* [2, 3] + [3] */
    cn_tensor *mask = cn_gt(x, cn_scalar(CN_F32, 3));          /* bool */
    cn_tensor *mixed = cn_mul(cn_arange(0, 3, 1, CN_I64), x);  /* i64 * f32 -> f32 */
    show("relu(x + b - 25)", y);
    show("x > 3", mask);
    show("arange(3) * x", mixed);
    show("noise * sigmoid(x)", cn_mul(noise, cn_sigmoid(x)));

    /* ---- reductions ---- */
    show("sum(x)", cn_sum(x, NULL, 0, false));             /* every axis: rank 0 */
    show("mean over axis 0", cn_mean(x, CN_AXES(0), false)); /* [3] */
    show("max over axis 1", cn_max(x, CN_AXES(1), true));    /* keepdim: [2, 1] */
    show("argmax over axis 1", cn_argmax(x, 1, false));      /* i64 [2] */
    show("softmax over axis 1", cn_softmax(x, 1));

    /* ---- matmul ---- */
    show("x @ xt", cn_matmul(x, xt));          /* [2, 3] @ [3, 2] */
    show("x @ b", cn_matmul(x, b));            /* matrix @ vector: [2] */
    cn_tensor *batch = cn_ones(CN_F32, CN_SHAPE(2, 2, 3));
    show("batch @ xt", cn_matmul(batch, xt)); /* batch axes broadcast: [2, 2, 2] */

    /* ---- gradients ---- */
    cn_tensor *wt = cn_from_data(CN_F32, CN_SHAPE(3), (float[]){0.5f, -1, 2});
    cn_set_requires_grad(wt, true); /* a leaf: ops on it are recorded */
    cn_tensor *loss = cn_sum(cn_square(cn_matmul(x, wt)), NULL, 0, false); /* |x w|^2 */
    cn_backward(loss, NULL);                    /* d loss / d w = 2 x^T (x w) */
    show("grad of w", cn_get_grad(wt));

    /* ---- scopes ---- */
    cn_tensor *total;
    cn_scope_begin();
    cn_tensor *sq = cn_square(x);                   /* released by the inner cn_scope_end() */
    total = cn_keep(cn_sum(sq, NULL, 0, false));    /* moved to the outer scope */
    cn_scope_end();
    printf("sum of squares: %g\n", cn_item(total));

    /* ---- errors ---- */
    cn_tensor *bad = cn_matmul(x, x); /* [2, 3] @ [2, 3] */
    if (!bad) printf("expected error: %s\n", cn_last_error());
    /* NULL goes through every function, so a chain is checked once, at its end. */
    cn_tensor *chain = cn_sum(cn_relu(cn_matmul(x, x)), NULL, 0, false);
    if (!chain) printf("the chain failed: %s\n", cn_last_error());
    if (bad || chain) failures++;
    cn_scope_end();

    /* ---- ownership outside scopes ---- */
    cn_tensor *w = cn_zeros(CN_F32, CN_SHAPE(2, 2)); /* no scope open: the caller owns it */
    cn_fill_(w, 0.5);
    show("w", w);
    cn_release(w);

    return failures != 0;
}
