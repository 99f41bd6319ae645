/* The optimisers' per-step constants and option bits (the loops that use
 * them are each backend's optim_update; src/backend/optim_update.h has the
 * contract), and the names and initial values of their state buffers. */
#include "optim.h"

#include <math.h>

void cn_opt_state_names(cn_opt_alg alg, const cn_opt_hyper *h,
                        const char *names[CN_OPT_MAXSTATE]) {
    for (int k = 0; k < CN_OPT_MAXSTATE; k++) names[k] = NULL;
    switch (alg) {
    case CN_OPT_SGD:
        if (h->momentum != 0) names[0] = "momentum_buffer";
        break;
    case CN_OPT_ADAM:
    case CN_OPT_ADAMW:
        names[0] = "exp_avg";
        names[1] = "exp_avg_sq";
        if (h->amsgrad) names[2] = "max_exp_avg_sq";
        break;
    case CN_OPT_RMSPROP:
        names[0] = "square_avg";
        if (h->momentum > 0) names[1] = "momentum_buffer";
        if (h->centered) names[2] = "grad_avg";
        break;
    case CN_OPT_ADAGRAD:
        names[0] = "sum";
        break;
    default: break;
    }
}

double cn_opt_state_init(cn_opt_alg alg, const cn_opt_hyper *h, int slot) {
    return alg == CN_OPT_ADAGRAD && slot == 0 ? h->initial_accumulator_value : 0.0;
}

void cn_opt_prepare(cn_opt_alg alg, const cn_opt_hyper *h, cn_dtype dt, int64_t t,
                    cn_optim_update *it) {
    it->alg = alg;
    it->dtype = dt;
    double *c = it->c;
    c[0] = h->maximize ? -1.0 : 1.0;
    c[1] = h->weight_decay;
    unsigned wd = h->weight_decay != 0;
    switch (alg) {
    case CN_OPT_SGD: {
        unsigned mom = h->momentum != 0;
        unsigned f = wd | mom << 1 | (mom && t == 1) << 2 | (mom && h->nesterov) << 3;
        c[2] = h->momentum;
        c[3] = 1 - h->dampening;
        c[4] = -h->lr;
        it->bits = f;
        break;
    }
    case CN_OPT_ADAM:
    case CN_OPT_ADAMW: {
        /* torch: step is a float; beta ** step is libm's pow. */
        double bc1 = 1 - pow(h->beta1, (double)t), bc2 = 1 - pow(h->beta2, (double)t);
        bool adamw = alg == CN_OPT_ADAMW;
        c[2] = adamw ? 1 - h->lr * h->weight_decay : 1.0;
        c[3] = h->beta1;
        c[4] = 1 - h->beta1;
        c[5] = h->beta2;
        c[6] = 1 - h->beta2;
        c[7] = sqrt(bc2);
        c[8] = h->eps;
        c[9] = -(h->lr / bc1);
        it->bits = (!adamw && wd) | (unsigned)h->amsgrad << 1;
        break;
    }
    case CN_OPT_RMSPROP: {
        c[2] = h->alpha;
        c[3] = 1 - h->alpha;
        c[4] = h->eps;
        c[5] = h->momentum;
        c[6] = -h->lr;
        it->bits = wd | (unsigned)h->centered << 1 | (unsigned)(h->momentum > 0) << 2;
        break;
    }
    case CN_OPT_ADAGRAD: {
        c[2] = h->eps;
        c[3] = -(h->lr / (1 + (double)(t - 1) * h->lr_decay));
        it->bits = wd;
        break;
    }
    default: it->bits = 0; break;
    }
}
