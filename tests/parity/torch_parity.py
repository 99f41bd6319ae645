"""PyTorch side of test_parity: evaluates each composite expression on seeded
random inputs and writes inputs, outputs and input gradients to the fixture
file named on the command line, which test_parity.c reads and recomputes in
eager and static mode. The loss differentiated is sum(out * w) with
w[k] = cos(k) over out's flat index, so no output is summed away trivially.
Run by /usr/bin/python3 (Debian's python3-torch)."""
import math
import sys

import torch
import torch.nn.functional as F

torch.set_num_threads(1)

# name -> (function, input specs). A spec is (shape, kind): kind "n" normal,
# "p" positive (0.5..2), "u" uniform(-1, 1), ("i", high) int64 indices in
# [0, high), "c" a constant float input (no gradient).
CASES = [
    ("seed_add_mul", lambda x, y, z: (x + y) * z, [((3, 4), "n")] * 3),
    ("seed_sigmoid_layer", lambda w, x: 1 / (1 + torch.exp(-(w @ x))),
     [((6,), "n"), ((6,), "n")]),
    ("seed_sum_xy_z", lambda x, y, z: torch.sum(x * y + z), [((4, 5), "n")] * 3),
    ("tanh_sigmoid", lambda x, y: torch.tanh(x) * torch.sigmoid(y), [((3, 4), "n"), ((4,), "n")]),
    ("softmax_weighted", lambda x, y: torch.softmax(x, 1) * y, [((3, 5), "n"), ((3, 5), "n")]),
    ("nll_composite", lambda x, t: -(F.log_softmax(x, 1) * F.one_hot(t, 5)).sum(1).mean(),
     [((4, 5), "n"), ((4,), ("i", 5))]),
    ("linear_relu", lambda x, w, b: torch.relu(x @ w + b),
     [((4, 3), "n"), ((3, 5), "n"), ((5,), "n")]),
    ("mlp2", lambda x, w1, b1, w2, b2: torch.tanh(torch.relu(x @ w1 + b1) @ w2 + b2),
     [((5, 4), "n"), ((4, 6), "n"), ((6,), "n"), ((6, 3), "n"), ((3,), "n")]),
    ("softplus_by_hand", lambda x: torch.log1p(torch.exp(x)), [((7,), "n")]),
    ("gelu_erf", lambda x: F.gelu(x), [((3, 3), "n")]),
    ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), [((3, 3), "n")]),
    ("silu_elu_leaky", lambda x: F.silu(x) + F.elu(x, 0.7) + F.leaky_relu(x, 0.1),
     [((2, 6), "n")]),
    ("sqrt_sq", lambda x: torch.sqrt(x * x + 1), [((5,), "n")]),
    ("pow_pos", lambda x, y: torch.pow(x, y), [((3, 4), "p"), ((4,), "u")]),
    ("div_broadcast", lambda x, y: x / (y * y + 1), [((2, 3, 4), "n"), ((3, 1), "n")]),
    ("max_min", lambda x, y, z: torch.maximum(x, y) + torch.minimum(x, z),
     [((3, 4), "n")] * 3),
    ("where_gt", lambda x, y, z: torch.where(x > 0, x * y, z), [((3, 4), "n")] * 3),
    ("mean_var", lambda x, y: x.mean(0) * y.var(1), [((4, 3), "n"), ((3, 5), "n")]),
    ("std_keepdim", lambda x: x / x.std(1, keepdim=True), [((3, 6), "n")]),
    ("logsumexp", lambda x: torch.logsumexp(x, 1), [((4, 7), "n")]),
    ("norm2", lambda x: torch.linalg.vector_norm(x) * x, [((3, 4), "n")]),
    ("prod_axis", lambda x: torch.prod(x, 1), [((3, 4), "p")]),
    ("amax_axis", lambda x: torch.amax(x, 1) + torch.amin(x, 0).sum(), [((3, 5), "n")]),
    ("cumsum", lambda x: torch.cumsum(x, 1) ** 2, [((3, 5), "n")]),
    ("concat_matmul", lambda x, y, w: torch.cat([x, y], 1) @ w,
     [((3, 2), "n"), ((3, 4), "n"), ((6, 2), "n")]),
    ("gather", lambda x, i: torch.gather(x, 1, i) * 2, [((4, 5), "n"), ((4, 3), ("i", 5))]),
    ("index_select", lambda x, i: torch.index_select(x, 0, i).sin(),
     [((5, 3), "n"), ((6,), ("i", 5))]),
    ("pad_reflect", lambda x: F.pad(x, (2, 1), mode="reflect") ** 2, [((2, 3, 5), "n")]),
    ("pad_replicate", lambda x: F.pad(x, (1, 2, 2, 0), mode="replicate") * 3,
     [((1, 2, 3, 4), "n")]),
    ("clamp_mul", lambda x, y: torch.clamp(x, -0.5, 0.5) * y, [((4, 4), "n"), ((4, 4), "n")]),
    ("abs_sin_cos", lambda x, y: torch.abs(x) + torch.sin(x) * torch.cos(y),
     [((3, 4), "n"), ((3, 4), "n")]),
    ("layer_norm_by_hand",
     lambda x, g, b: (x - x.mean(1, keepdim=True)) / torch.sqrt(x.var(1, unbiased=False, keepdim=True) + 1e-5) * g + b,
     [((4, 8), "n"), ((8,), "n"), ((8,), "n")]),
    ("triu_matmul", lambda x, y: torch.triu(x) @ y + torch.tril(x, -1).sum(),
     [((4, 4), "n"), ((4, 3), "n")]),
    ("rsqrt_recip", lambda x, y: torch.rsqrt(x) + torch.reciprocal(y), [((5,), "p"), ((5,), "p")]),
    ("erf_expm1", lambda x, y: torch.erf(x) * torch.expm1(y), [((3, 3), "n"), ((3, 3), "u")]),
    ("batched_matmul", lambda a, b: torch.matmul(a, b).exp().mean(),
     [((2, 1, 3, 4), "u"), ((5, 4, 2), "u")]),
    ("scatter_add", lambda x, i, s: torch.scatter_add(x, 1, i, s),
     [((3, 5), "n"), ((3, 4), ("i", 5)), ((3, 4), "n")]),
    ("log_exp_chain", lambda x: torch.log(torch.exp(x) + torch.exp(-x)), [((6,), "n")]),
]


def make(shape, kind, gen):
    if isinstance(kind, tuple):
        return torch.randint(0, kind[1], shape, generator=gen, dtype=torch.int64)
    if kind == "p":
        return 0.5 + 1.5 * torch.rand(shape, generator=gen)
    if kind == "u":
        return 2 * torch.rand(shape, generator=gen) - 1
    return torch.randn(shape, generator=gen)


def write_tensor(f, tag, t):
    if t.dtype == torch.int64:
        vals = " ".join(str(int(v)) for v in t.flatten().tolist())
        dt = "i"
    else:
        vals = " ".join(repr(float(v)) for v in t.detach().to(torch.float32).flatten().tolist())
        dt = "f"
    f.write("%s %s %d %s %s\n" % (tag, dt, t.dim(), " ".join(str(s) for s in t.shape), vals))


def main():
    out = open(sys.argv[1], "w")
    out.write("ncases %d\n" % len(CASES))
    for k, (name, fn, specs) in enumerate(CASES):
        gen = torch.Generator().manual_seed(1000 + k)
        xs = [make(shape, kind, gen) for shape, kind in specs]
        for x in xs:
            if x.is_floating_point():
                x.requires_grad_(True)
        y = fn(*xs)
        w = torch.cos(torch.arange(y.numel(), dtype=torch.float32)).reshape(y.shape)
        gs = torch.autograd.grad((y * w).sum(), [x for x in xs if x.requires_grad])
        out.write("case %s %d\n" % (name, len(xs)))
        for x in xs:
            write_tensor(out, "in", x)
        write_tensor(out, "out", y)
        for g in gs:
            write_tensor(out, "grad", g)
    out.close()


main()
