"""A tabular classifier (TensorDataset, random_split with a Generator, BCEWithLogits with pos_weight, ReduceLROnPlateau, early stopping with a deep-copied state_dict): written as a PyTorch script is, with
`import chutney as torch`. Run by tests/python/test_pytorch_scripts.py, which
checks the RESULT line it prints last. argv[1]: a directory for its files."""
import sys
import copy
import numpy as np
import chutney as torch
from chutney import nn
from chutney.utils.data import TensorDataset, DataLoader, random_split
rng = np.random.default_rng(0)
X = rng.standard_normal((500, 10)).astype(np.float64)
y = (X[:, 0] + X[:, 1] * 0.5 > 0.3).astype(np.float32)
ds = TensorDataset(torch.tensor(X, dtype=torch.float32), torch.tensor(y).unsqueeze(1))
train_ds, val_ds = random_split(ds, [400, 100], generator=torch.Generator().manual_seed(42))
train_dl = DataLoader(train_ds, batch_size=32, shuffle=True)
val_dl = DataLoader(val_ds, batch_size=64)
model = nn.Sequential(nn.Linear(10, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 1))
pos_weight = torch.tensor([(y == 0).sum() / (y == 1).sum()])
crit = nn.BCEWithLogitsLoss(pos_weight=pos_weight)
opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=1e-4)
sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode='min', factor=0.5, patience=2)
best_loss, best_state, bad = float('inf'), None, 0
for epoch in range(20):
    model.train()
    for xb, yb in train_dl:
        opt.zero_grad()
        loss = crit(model(xb), yb)
        loss.backward(); opt.step()
    model.eval()
    vl, correct, n = 0.0, 0, 0
    with torch.no_grad():
        for xb, yb in val_dl:
            out = model(xb)
            vl += crit(out, yb).item() * len(xb)
            preds = (torch.sigmoid(out) > 0.5).float()
            correct += (preds == yb).sum().item(); n += len(xb)
    vl /= n
    sched.step(vl)
    if vl < best_loss - 1e-4:
        best_loss, best_state, bad = vl, copy.deepcopy(model.state_dict()), 0
    else:
        bad += 1
        if bad >= 5:
            print("early stop", epoch); break
model.load_state_dict(best_state)
print("best val loss %.4f acc %.3f lr %.5f" % (best_loss, correct / n, opt.param_groups[0]['lr']))
probs = torch.sigmoid(model(torch.from_numpy(X[:5]).float())).detach().cpu().numpy().ravel()
print(np.round(probs, 3))
import json
print('RESULT', json.dumps({'acc': correct / n, 'best_loss': best_loss}))
