"""PyTorch side of test_optim and test_sched: parameter trajectories of
torch.optim's optimisers and learning-rate sequences of
torch.optim.lr_scheduler, written to the fixture file named on the command
line. Run by /usr/bin/python3 (Debian's python3-torch 1.13).

Optimisers minimise loss = sum((A p - b)^2) + sum(q^3) / 3 over p [4] and
q [2, 3], from starting values given by closed formulas (the C test uses the
same ones), for 10 steps; after each step the script writes p and q. A config
may drop q's gradient (grad = None) on some steps, so q is skipped there.
test_optim.c holds the same list of configs, by name, with Chutney's
options."""
import math
import sys
import warnings

import torch

torch.set_num_threads(1)
warnings.simplefilter("ignore")  # torch's "step(epoch) is deprecated" notes

STEPS = 10

# name, optimiser, keyword arguments, dtype of p, dtype of q, steps (1-based)
# at which q has no gradient.
F32, F64 = torch.float32, torch.float64
OPTIM = [
    ("sgd", torch.optim.SGD, dict(lr=0.05), F32, F32, ()),
    ("sgd_momentum", torch.optim.SGD, dict(lr=0.05, momentum=0.9), F32, F32, ()),
    ("sgd_dampening_wd", torch.optim.SGD,
     dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.1), F32, F32, ()),
    ("sgd_nesterov_wd", torch.optim.SGD,
     dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.05), F32, F32, ()),
    ("sgd_maximize", torch.optim.SGD, dict(lr=0.01, momentum=0.5, maximize=True), F32, F32, ()),
    ("sgd_momentum_skip", torch.optim.SGD, dict(lr=0.05, momentum=0.9), F32, F32, (1, 4, 5)),
    ("adam", torch.optim.Adam, dict(lr=0.05), F32, F32, ()),
    ("adam_wd_amsgrad", torch.optim.Adam, dict(lr=0.05, weight_decay=0.1, amsgrad=True),
     F32, F32, ()),
    ("adam_betas_eps_maximize", torch.optim.Adam,
     dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, maximize=True), F32, F32, ()),
    ("adam_skip", torch.optim.Adam, dict(lr=0.05), F32, F32, (3, 4)),
    ("adam_f64", torch.optim.Adam, dict(lr=0.05, amsgrad=True), F64, F64, ()),
    ("adam_mixed", torch.optim.Adam, dict(lr=0.05, weight_decay=0.05), F32, F64, (2,)),
    ("adamw", torch.optim.AdamW, dict(lr=0.05), F32, F32, ()),
    ("adamw_wd_amsgrad", torch.optim.AdamW, dict(lr=0.05, weight_decay=0.2, amsgrad=True),
     F32, F32, ()),
    ("rmsprop", torch.optim.RMSprop, dict(lr=0.01), F32, F32, ()),
    ("rmsprop_momentum", torch.optim.RMSprop, dict(lr=0.01, momentum=0.5), F32, F32, ()),
    ("rmsprop_centered", torch.optim.RMSprop, dict(lr=0.01, alpha=0.9, centered=True),
     F32, F32, ()),
    ("rmsprop_all", torch.optim.RMSprop,
     dict(lr=0.01, momentum=0.9, centered=True, weight_decay=0.1, maximize=True), F32, F32, ()),
    ("rmsprop_mixed", torch.optim.RMSprop, dict(lr=0.01, centered=True, momentum=0.3),
     F64, F32, ()),
    ("adagrad", torch.optim.Adagrad, dict(lr=0.1), F32, F32, ()),
    ("adagrad_all", torch.optim.Adagrad,
     dict(lr=0.1, lr_decay=0.05, weight_decay=0.1, initial_accumulator_value=0.2), F32, F32, ()),
    ("adagrad_eps_maximize_skip", torch.optim.Adagrad, dict(lr=0.1, eps=1e-3, maximize=True),
     F32, F32, (2, 7)),
]


def start_values():
    a = [[0.5 * math.sin(1.0 + 4 * i + j) for j in range(4)] for i in range(5)]
    b = [0.3 * math.cos(2.0 + i) for i in range(5)]
    p = [0.4 * math.sin(0.5 + 1.3 * j) for j in range(4)]
    q = [0.8 * math.cos(0.7 + 0.9 * k) for k in range(6)]
    return a, b, p, q


def fmt(dt, values):
    return " ".join(("%.9g" if dt == F32 else "%.17g") % v for v in values)


def run_optim(out, name, cls, kwargs, dp, dq, skip):
    a0, b0, p0, q0 = start_values()
    a = torch.tensor(a0, dtype=dp)
    b = torch.tensor(b0, dtype=dp)
    p = torch.tensor(p0, dtype=dp, requires_grad=True)
    q = torch.tensor(q0, dtype=dq).reshape(2, 3).requires_grad_()
    opt = cls([p, q], **kwargs)
    out.write("optim %s %d\n" % (name, STEPS))
    for step in range(1, STEPS + 1):
        opt.zero_grad()
        loss = ((a @ p - b) ** 2).sum() + (q ** 3).sum() / 3
        loss.backward()
        if step in skip:
            q.grad = None
        opt.step()
        out.write("%s %s\n" % (fmt(dp, p.detach().flatten().tolist()),
                               fmt(dq, q.detach().flatten().tolist())))


# Schedules: name, a function building the scheduler, steps.
def sched_step(o):
    return torch.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5)


def sched_exp(o):
    return torch.optim.lr_scheduler.ExponentialLR(o, gamma=0.9)


def sched_cosine(o):
    return torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=7, eta_min=0.01)


def sched_linear(o):
    return torch.optim.lr_scheduler.LinearLR(o, start_factor=0.25, end_factor=1.0,
                                             total_iters=4)


def sched_linear_down(o):
    return torch.optim.lr_scheduler.LinearLR(o, start_factor=1.0, end_factor=0.1,
                                             total_iters=6)


def sched_warmup_cosine(o):
    w = torch.optim.lr_scheduler.LinearLR(o, start_factor=0.1, end_factor=1.0, total_iters=5)
    c = torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=12, eta_min=0.001)
    return torch.optim.lr_scheduler.SequentialLR(o, [w, c], milestones=[5])


def sched_three(o):
    w = torch.optim.lr_scheduler.LinearLR(o, start_factor=0.5, end_factor=1.0, total_iters=3)
    s = torch.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.7)
    e = torch.optim.lr_scheduler.ExponentialLR(o, gamma=0.95)
    return torch.optim.lr_scheduler.SequentialLR(o, [w, s, e], milestones=[3, 8])


SCHED = [
    ("step", sched_step, 12),
    ("exponential", sched_exp, 12),
    ("cosine", sched_cosine, 30),
    ("linear", sched_linear, 8),
    ("linear_down", sched_linear_down, 9),
    ("warmup_cosine", sched_warmup_cosine, 40),
    ("three", sched_three, 14),
]


def run_sched(out, name, make, steps):
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=0.1)
    s = make(opt)
    lrs = [opt.param_groups[0]["lr"]]
    for _ in range(steps):
        opt.step()
        s.step()
        lrs.append(opt.param_groups[0]["lr"])
    out.write("sched %s %d %s\n" % (name, len(lrs), " ".join("%.17g" % v for v in lrs)))


def main():
    out = open(sys.argv[1], "w")
    for cfg in OPTIM:
        run_optim(out, *cfg)
    for cfg in SCHED:
        run_sched(out, *cfg)
    out.close()


main()
