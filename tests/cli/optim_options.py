"""`chutney train`'s optimiser, schedule, clipping and label-smoothing
options against torch.optim, run by Debian's PyTorch.

A one-layer model file on a small table (one batch per epoch, so an epoch
is one step) is trained for an epoch with the options and saved, then
resumed for a second epoch; PyTorch takes the first checkpoint's
parameters and optimiser state, makes the same step with the same
settings, and must land on the second checkpoint's parameters. The
schedules' lrs, from `--log`, must be torch.optim.lr_scheduler's.

    optim_options.py CHUTNEY TMPDIR      (exit 77: no torch)
"""
import json
import struct
import subprocess
import sys
import warnings

import numpy as np

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("SKIP: no torch")
    sys.exit(77)

CHUTNEY, TMP = sys.argv[1], sys.argv[2]
warnings.filterwarnings("ignore")  # SequentialLR's own deprecation notice
N, FEAT, CLASSES = 48, 6, 3
fails = 0


def fail(msg):
    global fails
    fails += 1
    print("FAIL: " + msg)


def save_npy(path, a):
    np.save(path, a)


rng = np.random.default_rng(5)
# Standardised already: chutney standardises a table's columns, here a no-op.
x = rng.standard_normal((N, FEAT))
x = ((x - x.mean(0)) / x.std(0)).astype(np.float32)
y = rng.integers(0, CLASSES, N).astype(np.int64)
for name, a in (("x", x), ("y", y), ("x_test", x[:8]), ("y_test", y[:8])):
    save_npy("%s/%s.npy" % (TMP, name), a)
with open(TMP + "/linear.txt", "w") as f:
    f.write("input %d\nlinear %d\n" % (FEAT, CLASSES))


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    meta = header.pop("__metadata__", {})
    body = raw[8 + n :]
    kinds = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "U8": np.uint8}
    out = {}
    for k, v in header.items():
        lo, hi = v["data_offsets"]
        out[k] = np.frombuffer(body[lo:hi], kinds[v["dtype"]]).reshape(v["shape"]).copy()
    return out, meta


def chutney(args):
    cmd = [CHUTNEY, "train", "--data", TMP, "--batch", str(N), "--threads", "1", "--json"] + args
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        fail("%s: exit %d: %s" % (" ".join(cmd[1:]), r.returncode, r.stderr.strip()))
    return r.returncode == 0


# (description, options, torch optimiser, clip, label smoothing, the hyper-parameters
# the checkpoint's optimiser state must hold)
CASES = [
    ("sgd --momentum --nesterov --weight-decay",
     ["--optimizer", "sgd", "--lr", "0.1", "--momentum", "0.9", "--nesterov", "--weight-decay", "0.05"],
     lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.05), 0, 0,
     {"momentum": 0.9, "nesterov": 1, "weight_decay": 0.05}),
    ("sgd --momentum --dampening",
     ["--optimizer", "sgd", "--lr", "0.1", "--momentum", "0.8", "--dampening", "0.3"],
     lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.8, dampening=0.3), 0, 0,
     {"momentum": 0.8, "dampening": 0.3}),
    ("adam --betas --eps --weight-decay --amsgrad",
     ["--optimizer", "adam", "--lr", "0.01", "--betas", "0.8,0.99", "--eps", "1e-3",
      "--weight-decay", "0.05", "--amsgrad"],
     lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.8, 0.99), eps=1e-3, weight_decay=0.05,
                                amsgrad=True), 0, 0,
     {"beta1": 0.8, "beta2": 0.99, "eps": 1e-3, "amsgrad": 1}),
    ("adamw --weight-decay",
     ["--optimizer", "adamw", "--lr", "0.01", "--weight-decay", "0.3"],
     lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.3), 0, 0, {"weight_decay": 0.3}),
    ("rmsprop --alpha --momentum --centered --eps --weight-decay",
     ["--optimizer", "rmsprop", "--lr", "0.01", "--alpha", "0.9", "--momentum", "0.5",
      "--centered", "--eps", "1e-4", "--weight-decay", "0.01"],
     lambda p: torch.optim.RMSprop(p, lr=0.01, alpha=0.9, momentum=0.5, centered=True, eps=1e-4,
                                   weight_decay=0.01), 0, 0,
     {"alpha": 0.9, "momentum": 0.5, "centered": 1}),
    ("adagrad --lr-decay --initial-accumulator --eps --weight-decay",
     ["--optimizer", "adagrad", "--lr", "0.1", "--lr-decay", "0.5", "--initial-accumulator", "0.2",
      "--eps", "1e-6", "--weight-decay", "0.01"],
     lambda p: torch.optim.Adagrad(p, lr=0.1, lr_decay=0.5, initial_accumulator_value=0.2,
                                   eps=1e-6, weight_decay=0.01), 0, 0,
     {"lr_decay": 0.5, "initial_accumulator_value": 0.2}),
    ("--clip and --label-smoothing",
     ["--optimizer", "sgd", "--lr", "0.5", "--clip", "0.05", "--label-smoothing", "0.3"],
     lambda p: torch.optim.SGD(p, lr=0.5), 0.05, 0.3, {}),
]

BUFFERS = {"momentum_buffer", "exp_avg", "exp_avg_sq", "max_exp_avg_sq", "square_avg",
           "grad_avg", "sum"}

for desc, opts, make, clip, smoothing, hyper in CASES:
    c1, c2 = TMP + "/c1.ckpt", TMP + "/c2.ckpt"
    if not (chutney(["--model-file", TMP + "/linear.txt", "--epochs", "1", "--save", c1] + opts)
            and chutney(["--resume", c1, "--epochs", "2", "--save", c2])):
        continue
    t1, meta = read_safetensors(c1)
    t2, _ = read_safetensors(c2)
    # The options reached the optimiser: its saved hyper-parameters.
    for k, v in hyper.items():
        got = float(t1["optimizer." + k])
        if abs(got - v) > 1e-12 * abs(v):
            fail("%s: the optimiser's %s is %r, not %r" % (desc, k, got, v))
    w = torch.tensor(t1["0.weight"], requires_grad=True)
    b = torch.tensor(t1["0.bias"], requires_grad=True)
    opt = make([w, b])
    step = int(t1["optimizer.step"][0])
    for i, p in enumerate((w, b)):
        st = {}
        for name in BUFFERS:
            key = "optimizer.%s.%d" % (name, i)
            if key in t1:
                st[name] = torch.tensor(t1[key])
        if not isinstance(opt, torch.optim.SGD):
            st["step"] = float(step) if isinstance(opt, torch.optim.RMSprop) else torch.tensor(float(step))
        opt.state[p] = st
    loss = F.cross_entropy(torch.tensor(x) @ w.t() + b, torch.tensor(y), label_smoothing=smoothing)
    loss.backward()
    if clip:
        torch.nn.utils.clip_grad_norm_([w, b], clip)
    opt.step()
    err = max(float(np.abs(w.detach().numpy() - t2["0.weight"]).max()),
              float(np.abs(b.detach().numpy() - t2["0.bias"]).max()))
    moved = float(np.abs(t2["0.weight"] - t1["0.weight"]).max())
    if not err <= 1e-6 or moved < 1e-4:
        fail("%s: step 2 differs from torch.optim's by %.3g (moved %.3g)" % (desc, err, moved))
    else:
        print("ok: %s: step 2 as torch.optim's (max difference %.2g, moved %.2g)" % (desc, err, moved))

# ---- schedules: the lr of each step, from --log ----
SCHEDULES = [
    ("step", ["--schedule", "step", "--step-size", "2", "--gamma", "0.5"],
     lambda o: torch.optim.lr_scheduler.StepLR(o, 2, 0.5)),
    ("exponential", ["--schedule", "exponential", "--gamma", "0.8"],
     lambda o: torch.optim.lr_scheduler.ExponentialLR(o, 0.8)),
    ("cosine", ["--schedule", "cosine", "--t-max", "4", "--eta-min", "0.01"],
     lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, 4, 0.01)),
    ("linear", ["--schedule", "linear", "--start-factor", "0.25", "--end-factor", "0.75",
                "--total-iters", "3"],
     lambda o: torch.optim.lr_scheduler.LinearLR(o, 0.25, 0.75, 3)),
    ("cosine after --warmup", ["--schedule", "cosine", "--t-max", "5", "--warmup", "2",
                               "--warmup-factor", "0.2"],
     lambda o: torch.optim.lr_scheduler.SequentialLR(
         o, [torch.optim.lr_scheduler.LinearLR(o, 0.2, 1.0, 2),
             torch.optim.lr_scheduler.CosineAnnealingLR(o, 5)], [2])),
]
STEPS = 7
for desc, opts, make in SCHEDULES:
    log = TMP + "/sched.jsonl"
    if not chutney(["--model-file", TMP + "/linear.txt", "--optimizer", "sgd", "--lr", "0.4",
                    "--epochs", str(STEPS), "--log", log] + opts):
        continue
    with open(log) as f:
        lrs = [r["lr"] for r in map(json.loads, f) if r["event"] == "step"]
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.4)
    sched = make(opt)
    want = []
    for _ in range(STEPS):
        want.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    if len(lrs) != STEPS or any(abs(a - b) > 1e-8 * abs(b) for a, b in zip(lrs, want)):
        fail("--schedule %s: lrs %s, torch's %s" % (desc, lrs, want))
    else:
        print("ok: --schedule %s: the lrs of torch.optim.lr_scheduler (%s)"
              % (desc, ", ".join("%.4g" % v for v in want)))

sys.exit(1 if fails else 0)
