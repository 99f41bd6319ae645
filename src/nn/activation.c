/* Stateless modules: activations, Flatten, Identity. */
#include "nn.h"

typedef enum { A_RELU, A_TANH, A_SIGMOID, A_GELU, A_SILU, A_LEAKY, A_ELU, A_SOFTPLUS, A_SOFTMAX,
               A_LOG_SOFTMAX, A_FLATTEN, A_IDENTITY } act_kind;

typedef struct act_mod {
    cn_module base;
    act_kind kind;
    double a, b; /* slope, alpha, beta and threshold, approximate */
    int i, j;    /* axes */
} act_mod;

static cn_tensor *act_forward(cn_module *m, cn_tensor *x) {
    act_mod *s = (act_mod *)m;
    switch (s->kind) {
    case A_RELU: return cn_relu(x);
    case A_TANH: return cn_tanh(x);
    case A_SIGMOID: return cn_sigmoid(x);
    case A_GELU: return cn_gelu(x, s->a != 0);
    case A_SILU: return cn_silu(x);
    case A_LEAKY: return cn_leaky_relu(x, s->a);
    case A_ELU: return cn_elu(x, s->a);
    case A_SOFTPLUS: return cn_softplus(x, s->a, s->b);
    case A_SOFTMAX: return cn_softmax(x, s->i);
    case A_LOG_SOFTMAX: return cn_log_softmax(x, s->i);
    case A_FLATTEN: return cn_flatten(x, s->i, s->j);
    case A_IDENTITY: return cn_scope_add(cn_retain(x));
    }
    return cn_fail("module_forward: corrupt activation module");
}

#define VT(name, type) static const cn_module_vtable name = {type, act_forward, NULL};
VT(relu_vt, "ReLU")
VT(tanh_vt, "Tanh")
VT(sigmoid_vt, "Sigmoid")
VT(gelu_vt, "GELU")
VT(silu_vt, "SiLU")
VT(leaky_vt, "LeakyReLU")
VT(elu_vt, "ELU")
VT(softplus_vt, "Softplus")
VT(softmax_vt, "Softmax")
VT(log_softmax_vt, "LogSoftmax")
VT(flatten_vt, "Flatten")
VT(identity_vt, "Identity")
#undef VT

static cn_module *make(const cn_module_vtable *vt, act_kind k, double a, double b, int i, int j) {
    act_mod *s = (act_mod *)cn_module_new(vt, sizeof(act_mod));
    if (!s) return NULL;
    s->kind = k;
    s->a = a;
    s->b = b;
    s->i = i;
    s->j = j;
    return &s->base;
}

cn_module *cn_nn_relu(void) { return make(&relu_vt, A_RELU, 0, 0, 0, 0); }
cn_module *cn_nn_tanh(void) { return make(&tanh_vt, A_TANH, 0, 0, 0, 0); }
cn_module *cn_nn_sigmoid(void) { return make(&sigmoid_vt, A_SIGMOID, 0, 0, 0, 0); }
cn_module *cn_nn_gelu(bool approximate) { return make(&gelu_vt, A_GELU, approximate, 0, 0, 0); }
cn_module *cn_nn_silu(void) { return make(&silu_vt, A_SILU, 0, 0, 0, 0); }
cn_module *cn_nn_leaky_relu(double slope) { return make(&leaky_vt, A_LEAKY, slope, 0, 0, 0); }
cn_module *cn_nn_elu(double alpha) { return make(&elu_vt, A_ELU, alpha, 0, 0, 0); }
cn_module *cn_nn_softplus(double beta, double threshold) {
    return make(&softplus_vt, A_SOFTPLUS, beta, threshold, 0, 0);
}
cn_module *cn_nn_softmax(int axis) { return make(&softmax_vt, A_SOFTMAX, 0, 0, axis, 0); }
cn_module *cn_nn_log_softmax(int axis) {
    return make(&log_softmax_vt, A_LOG_SOFTMAX, 0, 0, axis, 0);
}
cn_module *cn_nn_flatten(int start_axis, int end_axis) {
    return make(&flatten_vt, A_FLATTEN, 0, 0, start_axis, end_axis);
}
cn_module *cn_nn_identity(void) { return make(&identity_vt, A_IDENTITY, 0, 0, 0, 0); }
