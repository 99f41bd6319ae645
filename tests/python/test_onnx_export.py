"""chutney.onnx.export: modules traced, written as ONNX, checked by the onnx
package and run again, against PyTorch with the same weights."""

import io

import numpy as np
import pytest

import chutney
import chutney.nn as nn

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")


def copy_params(src, dst):
    with torch.no_grad():
        for (n1, p1), (n2, p2) in zip(src.state_dict().items(), dst.state_dict().items()):
            assert n1 == n2, (n1, n2)
            p2.copy_(torch.from_numpy(p1.numpy().copy()))


def make_cnn(L):
    n = L.nn
    return n.Sequential(n.Conv2d(1, 4, 3, padding=1), n.BatchNorm2d(4), n.ReLU(), n.MaxPool2d(2),
                        n.Flatten(), n.Linear(4 * 3 * 3, 10), n.Tanh(), n.Linear(10, 3),
                        n.Softmax(dim=1))


def data(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_cnn_export_is_valid_onnx_and_matches_torch(tmp_path):
    chutney.manual_seed(4)
    cm, tm = make_cnn(chutney), make_cnn(torch)
    with chutney.no_grad():  # running statistics that are not the defaults
        cm(chutney.tensor(data(8, 1, 6, 6, seed=3)))
    copy_params(cm, tm)
    tm.eval()
    path = tmp_path / "cnn.onnx"
    chutney.onnx.export(cm, chutney.tensor(data(2, 1, 6, 6)), path, input_names=["image"],
                        output_names=["probs"], dynamic_axes={"image": {0: "batch"}})
    assert cm.training  # restored after exporting in evaluation mode
    proto = onnx.load(str(path))
    onnx.checker.check_model(proto)
    assert [i.name for i in proto.graph.input] == ["image"]
    assert [o.name for o in proto.graph.output] == ["probs"]
    inits = {i.name for i in proto.graph.initializer}
    # Parameters keep their state_dict names (the batch norm's constants
    # are folded into others by the export's simplification).
    assert {"0.weight", "0.bias", "5.weight", "7.bias"} <= inits
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param
    model = chutney.onnx.load(path)
    for n in (2, 5):
        x = data(n, 1, 6, 6, seed=n)
        with torch.no_grad():
            want = tm(torch.tensor(x)).numpy()
        np.testing.assert_allclose(model(chutney.tensor(x)).numpy(), want, rtol=1e-5, atol=1e-6)


def test_function_export_with_several_inputs_and_outputs_to_a_file_object():
    w = chutney.tensor(data(4, 3, seed=1))

    def f(a, b):
        h = a @ w + b
        return h.relu(), h.sum(dim=1)

    buf = io.BytesIO()
    a, b = data(2, 4), data(2, 3, seed=2)
    chutney.onnx.export(f, (chutney.tensor(a), chutney.tensor(b)), buf)
    proto = onnx.load_from_string(buf.getvalue())
    onnx.checker.check_model(proto)
    assert [i.name for i in proto.graph.input] == ["input_0", "input_1"]
    model = chutney.onnx.load(buf.getvalue())
    r, s = model(chutney.tensor(a), chutney.tensor(b))
    h = a @ w.numpy() + b
    np.testing.assert_allclose(r.numpy(), np.maximum(h, 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(s.numpy(), h.sum(1), rtol=1e-5, atol=1e-5)


def test_export_errors_write_nothing(tmp_path):
    lin = nn.Linear(3, 2)
    x = chutney.ones(1, 3)
    with pytest.raises(ValueError, match="opset"):
        chutney.onnx.export(lin, x, tmp_path / "a.onnx", opset_version=18)
    assert not (tmp_path / "a.onnx").exists()
    with pytest.warns(UserWarning, match="writes opset 17"):
        chutney.onnx.export(lin, x, tmp_path / "b.onnx", opset_version=11)
    assert (tmp_path / "b.onnx").exists()
    with pytest.raises(ValueError, match="neither an input"):
        chutney.onnx.export(lin, x, tmp_path / "a.onnx", dynamic_axes={"nope": [0]})
    with pytest.raises(ValueError, match="computed from the inputs"):
        chutney.onnx.export(lambda t: chutney.ones(2), x, tmp_path / "a.onnx")
    with pytest.raises(ValueError, match="output names"):
        chutney.onnx.export(lin, x, tmp_path / "a.onnx", output_names=["a", "b"])
    assert not (tmp_path / "a.onnx").exists()
