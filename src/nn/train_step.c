/* A whole training step as one program: forward, the gradients of the
 * loss with respect to the optimiser's parameters bound to its flat
 * gradient buffer, and its update after the steps. */
#include "optim.h"
#include "../graph/program.h"

#include <stdio.h>
#include <stdlib.h>

static int optimizer_step(void *opt) { return cn_optimizer_step(opt); }

cn_program *cn_compile_train_step(cn_graph *g, cn_tensor *const *outputs, int noutputs,
                                  cn_optimizer *opt, const cn_compile_opts *opts) {
    if (!opt) return cn_fail("compile_train_step: optimizer is NULL");
    if (!outputs || noutputs < 1 || !outputs[0])
        return cn_fail("compile_train_step: no loss given");
    int np = cn_optimizer_num_params(opt);
    cn_tensor **params = malloc(sizeof *params * (size_t)(np ? np : 1));
    cn_tensor **outs = malloc(sizeof *outs * (size_t)(noutputs + np));
    cn_program *p = NULL;
    if (!params || !outs) {
        cn_fail("compile_train_step: out of memory");
        goto out;
    }
    /* .grad of every parameter set up (flat views); then overwritten by
     * each run. */
    if (cn_optimizer_zero_grad(opt) < 0) goto out;
    int nreq = 0;
    for (int i = 0; i < np; i++) {
        cn_tensor *q = cn_opt_param(opt, i);
        if (q->requires_grad) params[nreq++] = q;
    }
    cn_scope_begin();
    memcpy(outs, outputs, sizeof *outs * (size_t)noutputs);
    int rc = cn_grad(outputs, NULL, 1, params, nreq, outs + noutputs, CN_GRAD_ALLOW_UNUSED);
    int nout = noutputs;
    for (int i = 0; rc == 0 && i < nreq; i++) {
        if (!outs[noutputs + i]) { /* unused: no gradient, the optimiser skips it */
            rc = cn_set_grad(params[i], NULL);
            continue;
        }
        if (!cn_get_grad(params[i])) {
            cn_tensor *z = cn_zeros_like(params[i]);
            rc = z ? cn_set_grad(params[i], z) : CN_ENOMEM;
        }
        params[nout - noutputs] = params[i];
        outs[nout++] = outs[noutputs + i];
    }
    /* Which parameter each gradient output belongs to: split over ranks,
     * it goes to every rank reading the parameter. */
    cn_tensor **outp = rc == 0 ? calloc((size_t)nout, sizeof *outp) : NULL;
    if (rc == 0 && !outp) rc = cn_failc(CN_ENOMEM, "compile_train_step: out of memory");
    for (int i = noutputs; rc == 0 && i < nout; i++) outp[i] = params[i - noutputs];
    if (rc == 0) p = cn_compile_params(g, outs, nout, outp, opts);
    free(outp);
    cn_scope_end();
    if (!p) goto out;
    for (int i = noutputs; i < nout; i++) {
        cn_tensor *q = params[i - noutputs];
        /* Another rank's parameter: no gradient here, so the optimiser
         * leaves this copy as it is. */
        if (!cn_program_output_here(p, i)) cn_set_grad(q, NULL);
        cn_tensor *g = params[i - noutputs] = cn_get_grad(q);
        /* Named after its parameter, for dumps and pictures of the
         * program (a name too long for the label is left out). */
        char label[160];
        if (g && *cn_get_name(q) &&
            snprintf(label, sizeof label, "grad %s", cn_get_name(q)) < (int)sizeof label)
            (void)cn_set_name(g, label);
    }
    cn_program_attach_step(p, noutputs, params, nout - noutputs, optimizer_step, opt);
out:
    free(params);
    free(outs);
    return p;
}

