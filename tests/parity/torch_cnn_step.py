"""PyTorch side of test_train_step: the benchmark CNN (docs/benchmarks.md),
seeded, one batch, two training steps with Adam (lr 1e-3) on cross-entropy;
writes the initial parameters by name, the batch, each step's loss and the
parameters after the steps to the file named on the command line."""
import sys

import torch
import torch.nn as nn

torch.set_num_threads(1)
torch.manual_seed(3)
model = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
x = torch.rand(6, 1, 28, 28)
y = torch.randint(0, 10, (6,))


def write(f, tag, name, t):
    vals = " ".join(repr(float(v)) for v in t.detach().flatten().tolist())
    f.write("%s %s f %d %s %s\n" % (tag, name, t.dim(), " ".join(str(s) for s in t.shape), vals))


out = open(sys.argv[1], "w")
for name, p in model.named_parameters():
    write(out, "init", name, p)
write(out, "x", "x", x)
write(out, "y", "y", y.float())
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(2):
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    if step == 0:
        for name, p in model.named_parameters():
            write(out, "grad", name, p.grad)
    opt.step()
    write(out, "loss", "loss", loss.reshape(1))
for name, p in model.named_parameters():
    write(out, "after", name, p)
out.write("end\n")
out.close()
