"""The PyTorch side of tests/cli/onnx_train_cli.sh (Debian's torch 1.13).

    onnx_train_model.py export OUT.onnx
        an untrained small CNN for 12x12 RGB images and 3 classes (conv,
        BatchNorm, ReLU, max pool, dropout, linear), exported in training
        mode with a symbolic batch size, as docs/training.md tells users to
    onnx_train_model.py input X.npy
        a batch of 5 random images
    onnx_train_model.py check TRAINED.onnx X.npy Y.npy
        loads TRAINED.onnx's initializers into the same torch model by name
        (strictly: every parameter and running statistic), runs it in
        evaluation mode on X and compares with Y (what `chutney run` wrote)

Exits 77 when torch or onnx is missing, so the test skips cleanly.
"""
import sys

try:
    import numpy as np
    import onnx
    import onnx.numpy_helper
    import torch
    import torch.nn as nn
except ImportError as e:
    print("skip: %s" % e)
    sys.exit(77)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.drop = nn.Dropout(0.25)
        self.fc = nn.Linear(8 * 6 * 6, 3)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn(self.conv(x))))
        return self.fc(self.drop(torch.flatten(x, 1)))


def main():
    cmd = sys.argv[1]
    if cmd == "export":
        torch.manual_seed(0)
        model = Net().train()
        torch.onnx.export(model, torch.zeros(2, 3, 12, 12), sys.argv[2],
                          input_names=["images"], output_names=["logits"],
                          dynamic_axes={"images": {0: "batch"}, "logits": {0: "batch"}},
                          training=torch.onnx.TrainingMode.TRAINING)
    elif cmd == "input":
        rng = np.random.default_rng(3)
        np.save(sys.argv[2], rng.random((5, 3, 12, 12), dtype=np.float32))
    else:
        trained = onnx.load(sys.argv[2])
        onnx.checker.check_model(trained)
        inits = {t.name: torch.from_numpy(onnx.numpy_helper.to_array(t).copy())
                 for t in trained.graph.initializer}
        model = Net()
        state = model.state_dict()
        for k in state:
            if k.endswith("num_batches_tracked"):
                continue
            state[k] = inits[k]
        model.load_state_dict(state)
        model.eval()
        with torch.no_grad():
            want = model(torch.from_numpy(np.load(sys.argv[3]))).numpy()
        got = np.load(sys.argv[4])
        err = float(np.abs(want - got).max())
        moved = float((inits["bn.running_var"] - 1).abs().max())
        print("max |torch - chutney| = %.3g; running_var moved by %.3g" % (err, moved))
        if err > 1e-4 or moved < 1e-3:
            sys.exit(1)


main()
