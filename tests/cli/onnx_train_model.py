"""The PyTorch side of tests/cli/onnx_train_cli.sh (Debian's torch 1.13).

    onnx_train_model.py export OUT.onnx X.npy EVAL.onnx
        examples/export_pytorch_cnn.py's untrained CNN (conv, BatchNorm,
        ReLU, max pool, dropout, linear), exported as docs/training.md tells
        users to, a batch of 5 random images for it, and the same model as
        PyTorch's default (evaluation-mode) export writes it: BatchNorm
        folded into the convolution, no Dropout
    onnx_train_model.py check TRAINED.onnx X.npy Y.npy
        loads TRAINED.onnx's initializers into the same torch model by name
        (strictly: every parameter and running statistic), runs it in
        evaluation mode on X and compares with Y (what `chutney run` wrote)

Exits 77 when torch or onnx is missing, so the test skips cleanly.
"""
import os
import sys

sys.dont_write_bytecode = True  # nothing written into examples/
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
try:
    import numpy as np
    import onnx
    import onnx.numpy_helper
    import torch
    from export_pytorch_cnn import Net, export
except ImportError as e:
    print("skip: %s" % e)
    sys.exit(77)


def main():
    cmd = sys.argv[1]
    if cmd == "export":
        torch.manual_seed(0)
        net = Net()
        export(net, sys.argv[2], torch.zeros(2, 3, 12, 12))
        torch.onnx.export(net.eval(), torch.zeros(2, 3, 12, 12), sys.argv[4],
                          input_names=["images"], output_names=["logits"],
                          dynamic_axes={"images": {0: "batch"}, "logits": {0: "batch"}})
        rng = np.random.default_rng(3)
        np.save(sys.argv[3], rng.random((5, 3, 12, 12), dtype=np.float32))
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
