"""onnx.checker and a spec-based evaluator over the models
tests/test_onnx_export.c exported.

    check_export.py DIR

Every DIR/*.onnx must pass onnx.checker.check_model with full_check (which
also runs ONNX's shape inference in strict mode against the shapes the
exporter declared for each value) and declare IR version 8 and opset 17;
the models the test writes must all be there. Each model then runs in
np_onnx.py (numpy, written from the ONNX operator specs, sharing nothing
with Chutney) on the inputs the test saved (NAME.in.INPUT.npy), and every
output must match what the library computed (NAME.out.K.npy): integers and
bools exactly, floats within 1e-4. Exits 77 (skipped) without python3-onnx.
"""
import glob
import os
import sys

import numpy as np

try:
    import onnx
    import onnx.checker
except ImportError:
    print("SKIP: python3-onnx is not installed")
    sys.exit(77)

EXPECTED = {"mlp", "cnn", "lstm", "gru", "norms", "attention", "elementwise",
            "shapes_reductions", "conv_pool", "autocast_bf16"}


def evaluate(d, base, model):
    """The first difference between np_onnx's outputs and the library's, or None."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import np_onnx
    feeds = {}
    for i in model.graph.input:
        path = os.path.join(d, "%s.in.%s.npy" % (base, i.name))
        if not os.path.exists(path):
            return "no saved input %s" % path
        feeds[i.name] = np.load(path)
    try:
        outs = np_onnx.run(model, feeds)
    except Exception as e:  # a model the evaluator cannot run is a failure, not a crash
        return "%s: %s" % (type(e).__name__, e)
    for k, (o, y) in enumerate(zip(model.graph.output, outs)):
        ref = np.load(os.path.join(d, "%s.out.%d.npy" % (base, k)))
        if y.shape != ref.shape or y.dtype != ref.dtype:
            return "output %d (%s): %s %s, the library gives %s %s" % (k, o.name, y.dtype, y.shape,
                                                                       ref.dtype, ref.shape)
        if ref.dtype.kind in "biu":
            bad = y != ref
        else:
            a, b = y.astype(np.float64), ref.astype(np.float64)
            bad = ~((np.abs(a - b) <= 1e-4 + 1e-4 * np.abs(b)) | (np.isnan(a) & np.isnan(b)))
        if bad.any():
            i = tuple(np.argwhere(bad)[0])
            return "output %d (%s): %d of %d elements differ, first %s: %r vs %r" % (
                k, o.name, int(bad.sum()), bad.size, i, y[i], ref[i])
    return None


def main():
    d = sys.argv[1]
    if not os.path.isdir(d):  # test_onnx_export skipped: a build without ONNX
        print("SKIP: %s does not exist (nothing was exported)" % d)
        return 77
    paths = sorted(glob.glob(os.path.join(d, "*.onnx")))
    names = {os.path.basename(p)[:-5] for p in paths}
    fails = 0
    missing = EXPECTED - names
    if missing:
        print("FAIL: models not exported: %s" % ", ".join(sorted(missing)))
        fails += 1
    for p in paths:
        name = os.path.basename(p)
        m = onnx.load(p)
        try:
            onnx.checker.check_model(m, full_check=True)
        except Exception as e:  # the checker's own exception types vary by version
            print("FAIL: %s: %s" % (name, e))
            fails += 1
            continue
        opsets = {o.domain: o.version for o in m.opset_import}
        if m.ir_version != 8 or opsets.get("", None) != 17:
            print("FAIL: %s: IR version %d, opsets %s" % (name, m.ir_version, opsets))
            fails += 1
            continue
        # Unknown batch sizes are declared symbolic, not fixed.
        dims = [d for i in m.graph.input for d in i.type.tensor_type.shape.dim]
        if name[:-5] in EXPECTED and not any(d.dim_param for d in dims):
            print("FAIL: %s: no symbolic input size" % name)
            fails += 1
            continue
        err = evaluate(d, name[:-5], m)
        if err:
            print("FAIL: %s in numpy: %s" % (name, err))
            fails += 1
            continue
        print("ok: %s: %d nodes, %d initializers; numpy gives the library's outputs"
              % (name, len(m.graph.node), len(m.graph.initializer)))
    # Parameters keep the module's names and layout (W, not W^T).
    if "mlp" in names:
        m = onnx.load(os.path.join(d, "mlp.onnx"))
        inits = {t.name: list(t.dims) for t in m.graph.initializer}
        if inits.get("1.weight") != [32, 64] or inits.get("3.bias") != [10]:
            print("FAIL: mlp.onnx initializers: %s" % sorted(inits))
            fails += 1
    print("%d models, %d failures" % (len(paths), fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
