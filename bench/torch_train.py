"""PyTorch reference for `chutney train`: the benchmark workloads of
docs/benchmarks.md (mlp, cnn, lstm on Fashion-MNIST) with the same
architecture, batch, optimiser, learning rate and [0, 1] inputs, trained for
N epochs; prints the test accuracy, and with --json one line like
`chutney train --json`. Held in memory as `chutney train` holds it: the
pixels as stored (u8, only the first --limit images), scaled to f32 batch by
batch outside the timed region; the test pass in batches of the training
batch size.

    /usr/bin/python3 bench/torch_train.py --model cnn --epochs 2 [--threads T]
        [--seed S] [--data DIR] [--limit N] [--device cuda] [--compile] [--json]

With --device cuda the model and each batch go to the GPU; a step's time
then includes the batch's copy to the device and ends when the GPU has
finished the step (torch.cuda.synchronize), as `chutney train --device cuda`
counts it.

With --compile (PyTorch 2) the model is torch.compile'd (default mode);
the first step, which compiles, is reported apart as first_step_s and, as
every warm-up step, left out of samples/s.

PyTorch at its best on this CPU: OMP/BLAS thread counts are set before torch
is imported, with a passive OpenMP wait policy (see docs/benchmarks.md)."""
import argparse
import gzip
import json
import math
import os
import resource
import struct
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("--model", default="cnn", choices=["mlp", "cnn", "lstm"])
p.add_argument("--epochs", type=int, default=2)
p.add_argument("--batch", type=int, default=0)
p.add_argument("--lr", type=float, default=0)
p.add_argument("--threads", type=int, default=1)
p.add_argument("--omp", type=int, default=0, help="OpenMP threads (default: --threads)")
p.add_argument("--blas", type=int, default=0, help="BLAS threads (default: --threads)")
p.add_argument("--seed", type=int, default=1)
p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
p.add_argument("--limit", type=int, default=0,
               help="only the first N training and test images, as chutney train --limit")
p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
p.add_argument("--compile", action="store_true", help="torch.compile the model (PyTorch 2)")
p.add_argument("--precision", default="f32", choices=["f32", "bf16"],
               help="bf16: forward passes under torch.autocast (chutney train --precision bf16)")
p.add_argument("--json", action="store_true")
args = p.parse_args()

os.environ["OMP_NUM_THREADS"] = str(args.omp or args.threads)
os.environ["OPENBLAS_NUM_THREADS"] = str(args.blas or args.threads)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

torch.set_num_threads(args.omp or args.threads)
torch.manual_seed(args.seed)
device = torch.device(args.device)
on_gpu = device.type == "cuda"

DEFAULTS = {"mlp": (128, 0.05), "cnn": (64, 1e-3), "lstm": (128, 1e-3)}
batch = args.batch or DEFAULTS[args.model][0]
lr = args.lr or DEFAULTS[args.model][1]


def idx(path):
    """A u8 IDX file, read in chunks straight into the tensor's memory (one
    copy of the data at any time, as chutney's reader)."""
    opener = gzip.open if os.path.exists(path) or not os.path.exists(path[:-3]) else open
    with opener(path if opener is gzip.open else path[:-3], "rb") as f:
        head = f.read(4)
        ndim = head[3]
        dims = struct.unpack(">" + "I" * ndim, f.read(4 * ndim))
        buf = bytearray(math.prod(dims))
        view, have = memoryview(buf), 0
        while have < len(buf):
            got = f.readinto(view[have:have + (1 << 20)])
            if not got:
                sys.exit("%s is truncated" % path)
            have += got
    return torch.frombuffer(buf, dtype=torch.uint8).reshape(dims)


def load(split):
    x = idx(os.path.join(args.data, split + "-images-idx3-ubyte.gz"))
    y = idx(os.path.join(args.data, split + "-labels-idx1-ubyte.gz"))
    if args.limit > 0:
        x, y = x[:args.limit].clone(), y[:args.limit].clone()
    return x, y.long()


def pixels(x):
    return x.float().div_(255.0)


class LSTMNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(28, 128, batch_first=True)
        self.fc = nn.Linear(128, 10)

    def forward(self, x):
        out, _ = self.lstm(x.reshape(-1, 28, 28))
        return self.fc(out[:, -1])


def make_model():
    if args.model == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256),
                             nn.ReLU(), nn.Linear(256, 10))
    if args.model == "cnn":
        return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
    return LSTMNet()


xtr, ytr = load("train")
xte, yte = load("t10k")
xtr = xtr.unsqueeze(1)
xte = xte.unsqueeze(1)
model = make_model().to(device)
run_model = torch.compile(model) if args.compile else model
if args.model == "mlp":
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
else:
    opt = torch.optim.Adam(model.parameters(), lr=lr)
loss_fn = nn.CrossEntropyLoss()


def autocast():
    # the backward pass follows the forward's dtypes (bf16 products)
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16,
                          enabled=args.precision == "bf16")


t_start = time.time()
train_time = 0.0
samples = 0
warmup = 20
for epoch in range(args.epochs):
    model.train()
    perm = torch.randperm(len(xtr))
    nb = len(xtr) // batch + (1 if len(xtr) % batch else 0)
    for b in range(nb):
        sel = perm[b * batch:(b + 1) * batch]
        xb, yb = pixels(xtr[sel]), ytr[sel]
        t0 = time.perf_counter()
        xb, yb = xb.to(device), yb.to(device)
        opt.zero_grad()
        with autocast():
            loss = loss_fn(run_model(xb), yb)
        loss.backward()
        opt.step()
        if on_gpu:
            torch.cuda.synchronize(device)
        dt = time.perf_counter() - t0
        if epoch == 0 and b == 0:
            first_step = dt
        if epoch > 0 or b >= warmup:
            train_time += dt
            samples += len(sel)
    model.eval()
    with torch.no_grad(), autocast():
        correct = 0
        for b in range(0, len(xte), batch):
            out = run_model(pixels(xte[b:b + batch]).to(device)).argmax(1).cpu()
            correct += (out == yte[b:b + batch]).sum().item()
    acc = correct / len(xte)
    print("epoch %d: loss %.4f, test accuracy %.2f%%" % (epoch + 1, loss.item(), 100 * acc),
          flush=True)

sps = samples / train_time if train_time > 0 else 0
print("test accuracy: %.2f%%" % (100 * acc))
if args.json:
    print(json.dumps({"model": args.model, "epochs": args.epochs, "test_accuracy": acc,
                      "samples_per_sec": sps, "seconds": time.time() - t_start,
                      "first_step_s": first_step, "compiled": args.compile,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
                      "device": str(device), "precision": args.precision,
                      "framework": "pytorch " + torch.__version__}))
