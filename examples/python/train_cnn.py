"""Train the CNN benchmark model on Fashion-MNIST from Python, written as
PyTorch code with `import chutney as torch` in spirit: the same model as
`chutney train --model cnn` (docs/benchmarks.md: two 3x3 convolutions with
max pooling, two linear layers, Adam lr 1e-3, batch 64).

    pip install ./python            # once (docs/python.md)
    python3 examples/python/train_cnn.py --epochs 1 [--limit 6000] [--eager] [--save cnn.safetensors]

The data is Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist),
or --data DIR with the four idx files (gzipped or not).
"""

import argparse
import time

import chutney
import chutney.nn as nn
import chutney.nn.functional as F
from chutney.utils.data import DataLoader, TensorDataset, load_fashion_mnist


def make_cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def evaluate(model, loader):
    model.eval()
    correct = total = 0
    with chutney.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
            total += y.shape[0]
    model.train()
    return correct / total


def main():
    ap = argparse.ArgumentParser(description="Train the CNN on Fashion-MNIST with chutney")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--limit", type=int, default=0, help="use only the first N training images")
    ap.add_argument("--data", default=None, help="directory of the idx files")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--save", default=None, help="write the trained state_dict (safetensors)")
    ap.add_argument("--eager", action="store_true",
                    help="run the training step eagerly instead of compiling it (chutney.compile)")
    args = ap.parse_args()

    chutney.manual_seed(args.seed)
    x_train, y_train = load_fashion_mnist(args.data, train=True)
    x_test, y_test = load_fashion_mnist(args.data, train=False)
    if args.limit:
        x_train, y_train = x_train[:args.limit], y_train[:args.limit]
    train = DataLoader(TensorDataset(x_train, y_train), batch_size=args.batch, shuffle=True)
    test = DataLoader(TensorDataset(x_test, y_test), batch_size=256)

    model = make_cnn()
    print(model)
    print(f"{sum(p.numel() for p in model.parameters())} parameters; "
          f"{len(train)} batches of {args.batch} per epoch")
    opt = chutney.optim.Adam(model.parameters(), lr=args.lr)

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    # The whole step (forward, backward, update) as one static program, as
    # `chutney train` runs it by default; --eager runs the Python each time.
    step = train_step if args.eager else chutney.compile(train_step)

    for epoch in range(1, args.epochs + 1):
        t0, total, seen = time.time(), 0.0, 0
        for i, (x, y) in enumerate(train, 1):
            loss = step(x, y)
            total += loss.item() * y.shape[0]
            seen += y.shape[0]
            if i % 100 == 0:
                print(f"  epoch {epoch} batch {i}/{len(train)} loss {total / seen:.4f}", flush=True)
        dt = time.time() - t0
        acc = evaluate(model, test)
        print(f"epoch {epoch}: loss {total / seen:.4f}, {seen / dt:.0f} images/s, "
              f"test accuracy {acc:.4f}", flush=True)

    if args.save:
        chutney.save(model.state_dict(), args.save, metadata={"model": "cnn"})
        print(f"saved {args.save}")


if __name__ == "__main__":
    main()
