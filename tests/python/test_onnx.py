"""chutney.onnx: loading and running ONNX models from Python.

The references are independent of the library: models built with the onnx
package (onnx.helper) checked against NumPy, models exported by PyTorch
(torch.onnx.export) checked against PyTorch's own outputs, and cases of the
ONNX conformance data (Debian's libonnx-testdata) whose inputs and
expected outputs are read with onnx.numpy_helper. Skipped without the onnx
package or in a build without ONNX support."""

import glob
import os
import pathlib
import threading
import warnings

import numpy as np
import pytest

import chutney

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

pytestmark = pytest.mark.skipif(not chutney.onnx.is_available(),
                                reason="the library was built without ONNX support (protobuf-c)")

F = TensorProto.FLOAT


def vi(name, shape, elem=F):
    return helper.make_tensor_value_info(name, elem, shape)


def make(nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def mlp_model(batch="N"):
    """relu(x @ w1 + b1) @ w2 + b2 with Gemm and MatMul/Add."""
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((4, 8)).astype(np.float32)
    b1 = rng.standard_normal(8).astype(np.float32)
    w2 = rng.standard_normal((8, 3)).astype(np.float32)
    b2 = rng.standard_normal(3).astype(np.float32)
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"]),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["m"]),
             helper.make_node("Add", ["m", "b2"], ["y"])]
    model = make(nodes, [vi("x", [batch, 4])], [vi("y", [batch, 3])],
                 [init("w1", w1), init("b1", b1), init("w2", w2), init("b2", b2)])

    def ref(x):
        return np.maximum(x @ w1 + b1, 0) @ w2 + b2

    return model, ref


# ---- models built with onnx.helper, checked against NumPy ----


def test_mlp_values_and_inspection():
    model, ref = mlp_model()
    m = chutney.onnx.load(model)
    assert isinstance(m, chutney.onnx.Model)
    assert m.input_names == ["x"] and m.output_names == ["y"]
    assert m.opset == 13
    assert m.num_params == 4 * 8 + 8 + 8 * 3 + 3
    assert m.nodes == ["Gemm", "Relu", "MatMul", "Add"]
    [i] = m.get_inputs()
    [o] = m.get_outputs()
    assert (i.name, i.shape, i.type, i.dtype) == ("x", [None, 4], "tensor(float)", chutney.float32)
    assert (o.name, o.type) == ("y", "tensor(float)")
    assert "opset=13" in repr(m)

    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    y = m(x)
    assert isinstance(y, chutney.Tensor) and y.dtype == chutney.float32 and tuple(y.shape) == (5, 3)
    np.testing.assert_allclose(y.numpy(), ref(x), rtol=1e-5, atol=1e-5)
    # a Tensor, by keyword, and onnxruntime's run()
    np.testing.assert_allclose(m(x=chutney.from_numpy(x)).numpy(), ref(x), rtol=1e-5, atol=1e-5)
    [out] = m.run(None, {"x": x})
    assert isinstance(out, np.ndarray) and out.dtype == np.float32
    np.testing.assert_allclose(out, ref(x), rtol=1e-5, atol=1e-5)
    # Python data takes the input's dtype
    np.testing.assert_allclose(m(x.tolist()).numpy(), ref(x), rtol=1e-5, atol=1e-5)


def test_dynamic_batch_and_input_shapes():
    model, ref = mlp_model()
    m = chutney.onnx.load(model)
    rng = np.random.default_rng(2)
    for b in (1, 7, 2):  # planned again for each size, results stay correct
        x = rng.standard_normal((b, 4)).astype(np.float32)
        np.testing.assert_allclose(m(x).numpy(), ref(x), rtol=1e-5, atol=1e-5)

    fixed = chutney.onnx.load(model, input_shapes={"x": (3, 4)})
    assert fixed.get_inputs()[0].shape == [3, 4] and fixed.get_outputs()[0].shape == [3, 3]
    x = rng.standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_allclose(fixed(x).numpy(), ref(x), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"\[3, 4\].*\[2, 4\]"):
        fixed(np.zeros((2, 4), np.float32))
    assert chutney.onnx.load(model, input_shapes=[(6, 4)]).get_inputs()[0].shape == [6, 4]
    assert chutney.onnx.load(model, unknown_size=2).get_outputs()[0].shape == [2, 3]


def test_several_inputs_and_outputs():
    model = make([helper.make_node("Add", ["a", "b"], ["s"]),
                  helper.make_node("Mul", ["a", "b"], ["p"]),
                  helper.make_node("Greater", ["a", "b"], ["g"])],
                 [vi("a", [2, 3]), vi("b", [3])],
                 [vi("s", [2, 3]), vi("p", [2, 3]), vi("g", [2, 3], TensorProto.BOOL)])
    m = chutney.onnx.load(model)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([1.0, 4.0, -2.0], np.float32)
    s, p, g = m(a, b)
    np.testing.assert_array_equal(s.numpy(), a + b)
    np.testing.assert_array_equal(p.numpy(), a * b)
    assert g.dtype == chutney.bool
    np.testing.assert_array_equal(g.numpy(), a > b)
    s2, _, _ = m(b=b, a=a)
    np.testing.assert_array_equal(s2.numpy(), a + b)
    s3, _, _ = m(a, b=b)
    np.testing.assert_array_equal(s3.numpy(), a + b)
    outs = m.run(["g", "s"], {"a": a, "b": b})
    assert isinstance(outs, list) and len(outs) == 2
    np.testing.assert_array_equal(outs[0], a > b)
    np.testing.assert_array_equal(outs[1], a + b)
    assert [o.type for o in m.get_outputs()] == ["tensor(float)", "tensor(float)", "tensor(bool)"]


def test_integer_model():
    model = make([helper.make_node("Add", ["i", "c"], ["s"]),
                  helper.make_node("ArgMax", ["x"], ["am"], axis=1, keepdims=0)],
                 [vi("i", [3], TensorProto.INT64), vi("x", [2, 5])],
                 [vi("s", [3], TensorProto.INT64), vi("am", [2], TensorProto.INT64)],
                 [init("c", np.array([10, 20, 30], np.int64))])
    m = chutney.onnx.load(model)
    assert [a.type for a in m.get_inputs()] == ["tensor(int64)", "tensor(float)"]
    x = np.random.default_rng(3).standard_normal((2, 5)).astype(np.float32)
    s, am = m([1, 2, 3], x)  # a list becomes int64, the input's dtype
    assert s.dtype == chutney.int64 and s.tolist() == [11, 22, 33]
    np.testing.assert_array_equal(am.numpy(), x.argmax(1))


def test_input_values_bound_at_load():
    """A shape given as a graph input: bound at load time it folds, and the
    model then has one input."""
    model = make([helper.make_node("Reshape", ["x", "shape"], ["y"])],
                 [vi("x", [2, 6]), vi("shape", [3], TensorProto.INT64)], [vi("y", [3, 2, 2])])
    with pytest.raises(NotImplementedError, match="Reshape"):
        chutney.onnx.load(model)
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    for values in ({"shape": np.array([3, 2, 2], np.int64)}, [None, [3, 2, 2]],
                   {"shape": chutney.tensor([3, 2, 2])}):
        m = chutney.onnx.load(model, input_values=values)
        assert m.input_names == ["x"]
        np.testing.assert_array_equal(m(x).numpy(), x.reshape(3, 2, 2))
    with pytest.raises(ValueError, match="value given"):
        chutney.onnx.load(model, input_values={"shape": np.array([3, 2, 2], np.int32)})


def test_outputs_do_not_alias_inputs_constants_or_each_other():
    a = np.ones((2, 3), np.float32)
    m = chutney.onnx.load(make([helper.make_node("Identity", ["x"], ["y"]),
                                helper.make_node("Identity", ["x"], ["z"])],
                               [vi("x", [2, 3])], [vi("y", [2, 3]), vi("z", [2, 3])]))
    y, z = m(a)
    y.numpy()[0, 0] = 5.0
    assert a[0, 0] == 1.0 and z[0, 0].item() == 1.0
    np.testing.assert_array_equal(z.numpy(), a)

    c = np.arange(6, dtype=np.float32).reshape(2, 3)
    m = chutney.onnx.load(make([helper.make_node("Identity", ["c"], ["y"])], [], [vi("y", [2, 3])],
                               [init("c", c)]))
    assert m.input_names == []
    y = m()
    y.numpy()[:] = 100.0
    np.testing.assert_array_equal(m().numpy(), c)


def test_results_survive_later_runs():
    m = chutney.onnx.load(make([helper.make_node("Relu", ["x"], ["t"]),
                                helper.make_node("Mul", ["t", "t"], ["y"])],
                               [vi("x", ["N", 3])], [vi("y", ["N", 3])]))
    y1 = m(np.full((2, 3), 2.0, np.float32))
    y2 = m(np.full((2, 3), 3.0, np.float32))
    y3 = m(np.full((4, 3), -1.0, np.float32))
    assert y1.tolist() == [[4.0] * 3] * 2 and y2.tolist() == [[9.0] * 3] * 2
    assert y3.tolist() == [[0.0] * 3] * 4


def test_sources_path_pathlike_bytes_file(tmp_path):
    model, ref = mlp_model()
    path = tmp_path / "mlp.onnx"
    onnx.save_model(model, str(path))
    data = path.read_bytes()
    x = np.random.default_rng(4).standard_normal((2, 4)).astype(np.float32)
    with open(path, "rb") as f:
        from_file = chutney.onnx.load(f)
    for m in (chutney.onnx.load(str(path)), chutney.onnx.load(path), chutney.onnx.load(data),
              chutney.onnx.load(bytearray(data)), chutney.onnx.load(memoryview(data)), from_file):
        np.testing.assert_allclose(m(x).numpy(), ref(x), rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeError):
        chutney.onnx.load(12)


def test_external_data(tmp_path):
    rng = np.random.default_rng(5)
    w = rng.standard_normal((4, 5)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    model = make([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["y"])],
                 [vi("x", [2, 4])], [vi("y", [2, 5])], [init("w", w), init("b", b)])
    path = tmp_path / "ext.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=0)
    assert (tmp_path / "weights.bin").is_file()
    x = rng.standard_normal((2, 4)).astype(np.float32)
    m = chutney.onnx.load(path)
    assert m.num_params == 25
    np.testing.assert_allclose(m(x).numpy(), x @ w + b, rtol=1e-5, atol=1e-5)
    data = path.read_bytes()
    np.testing.assert_allclose(chutney.onnx.load(data, base_dir=tmp_path)(x).numpy(), x @ w + b,
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="external data"):
        chutney.onnx.load(data)
    (tmp_path / "weights.bin").unlink()
    with pytest.raises(FileNotFoundError, match="weights.bin"):
        chutney.onnx.load(path)


def test_threads_share_a_model():
    model, ref = mlp_model()
    m = chutney.onnx.load(model)
    xs = [np.random.default_rng(10 + i).standard_normal((3 + i, 4)).astype(np.float32) for i in range(3)]
    errors = []

    def work(x):
        try:
            for _ in range(20):
                np.testing.assert_allclose(m(x).numpy(), ref(x), rtol=1e-5, atol=1e-5)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(x,)) for x in xs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


# ---- errors ----


def test_missing_file(tmp_path):
    p = tmp_path / "nope.onnx"
    with pytest.raises(FileNotFoundError, match="nope.onnx"):
        chutney.onnx.load(p)
    with pytest.raises(FileNotFoundError):
        chutney.onnx.load_tensor(tmp_path / "nope.pb")
    with pytest.raises(IsADirectoryError):
        chutney.onnx.load(tmp_path)


def test_corrupt_and_truncated_files(tmp_path):
    model, _ = mlp_model()
    data = model.SerializeToString()
    p = tmp_path / "bad.onnx"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(RuntimeError, match="not a valid ONNX model"):
        chutney.onnx.load(p)
    p.write_bytes(b"\xff" * 64)
    with pytest.raises(RuntimeError, match="bad.onnx"):
        chutney.onnx.load(p)
    p.write_bytes(b"")
    with pytest.raises(RuntimeError):
        chutney.onnx.load(p)
    # every cut and some flipped bytes: a clean exception (or a model), never a crash
    rng = np.random.default_rng(6)
    cuts = sorted(set(rng.integers(0, len(data), 40).tolist()))
    flips = []
    for _ in range(40):
        b = bytearray(data)
        for i in rng.integers(0, len(b), 3):
            b[i] = int(rng.integers(0, 256))
        flips.append(bytes(b))
    for blob in [data[:c] for c in cuts] + flips:
        try:
            m = chutney.onnx.load(blob)
        except (RuntimeError, ValueError, TypeError, OSError) as e:
            assert str(e)
        else:
            m.get_inputs()


def test_shapes_that_depend_on_values_run_eagerly():
    """NonZero's output size is the count of nonzero elements: the model
    runs eagerly, a new size on every run; the output declared without a
    shape has none until then."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("NonZero", ["r"], ["idx"]),
             helper.make_node("Transpose", ["idx"], ["idx_t"]),
             helper.make_node("GatherND", ["x", "idx_t"], ["y"])]
    model = make(nodes, [vi("x", ["rows", 4])], [vi("idx", [2, "n"], TensorProto.INT64), vi("y", None)])
    rng = np.random.default_rng(3)
    # With the rows given at load, the Relu is a compiled program run before
    # the eager nodes; without, every node runs eagerly, any number of rows.
    for opts, rows in (({"input_shapes": {"x": [3, 4]}}, (3, 3)), ({}, (3, 5))):
        m = chutney.onnx.load(model, **opts)
        assert "NonZero (opset 13)" in m.eager_reason
        assert m.get_outputs()[0].shape == [2, None] and m.get_outputs()[1].shape is None
        for r in rows:
            x = rng.standard_normal((r, 4)).astype(np.float32)
            idx, y = m.run(None, {"x": x})
            np.testing.assert_array_equal(np.asarray(idx), np.array(np.nonzero(x > 0)))
            np.testing.assert_array_equal(np.asarray(y), x[x > 0])
    assert chutney.onnx.load(mlp_model()[0]).eager_reason is None


def test_unsupported_op_is_named():
    model = make([helper.make_node("FancyOp", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])])
    with pytest.raises(NotImplementedError, match=r"unsupported: FancyOp \(opset 13\)"):
        chutney.onnx.load(model)
    model = make([helper.make_node("Relu", ["x"], ["y"], domain="com.example")], [vi("x", [2])],
                 [vi("y", [2])])
    with pytest.raises(RuntimeError, match="com.example"):  # NotImplementedError is a RuntimeError
        chutney.onnx.load(model)


def test_bad_load_options():
    model, _ = mlp_model()
    with pytest.raises(ValueError, match="rank 2"):
        chutney.onnx.load(model, input_shapes={"x": (2, 4, 1)})
    with pytest.raises(ValueError, match="shape given"):
        chutney.onnx.load(model, input_shapes={"x": (2, 3)})
    with pytest.raises(ValueError, match="'z'.*not an input"):
        chutney.onnx.load(model, input_shapes={"z": (2, 4)})
    with pytest.raises(ValueError, match="by position"):
        chutney.onnx.load(model, input_shapes=[(2, 4), (3,)])
    with pytest.raises(TypeError, match="sequence of ints"):
        chutney.onnx.load(model, input_shapes=[2, 4])
    with pytest.raises(ValueError):
        chutney.onnx.load(model, unknown_size=-1)
    # a node's shape problem names the op
    w = init("w", np.zeros((4, 5), np.float32))
    bad = make([helper.make_node("MatMul", ["x", "w"], ["y"])], [vi("x", [2, 3])], [vi("y", [2, 5])], [w])
    with pytest.raises(ValueError, match="MatMul"):
        chutney.onnx.load(bad)


def test_wrong_inputs_at_run():
    model, _ = mlp_model()
    m = chutney.onnx.load(model)
    with pytest.raises(TypeError, match="'x' must be float32, not float64"):
        m(np.zeros((2, 4)))
    with pytest.raises(ValueError, match=r"'x' must have shape \[\?, 4\].*\[2, 5\]"):
        m(np.zeros((2, 5), np.float32))
    with pytest.raises(ValueError, match="shape"):
        m(np.zeros(4, np.float32))
    with pytest.raises(TypeError, match="1 input"):
        m(np.zeros((2, 4), np.float32), np.zeros((2, 4), np.float32))
    with pytest.raises(TypeError, match="missing input"):
        m()
    with pytest.raises(TypeError, match="'w' is not an input"):
        m(w=np.zeros((2, 4), np.float32))
    with pytest.raises(TypeError, match="twice"):
        m(np.zeros((2, 4), np.float32), x=np.zeros((2, 4), np.float32))
    with pytest.raises(ValueError, match="missing input"):
        m.run(None, {})
    with pytest.raises(ValueError, match="'q' is not an input"):
        m.run(None, {"x": np.zeros((1, 4), np.float32), "q": 1})
    with pytest.raises(ValueError, match="'nope' is not an output"):
        m.run(["nope"], {"x": np.zeros((1, 4), np.float32)})
    with pytest.raises(TypeError):
        m._model.run([1.0])
    # still usable after the errors
    assert tuple(m(np.zeros((2, 4), np.float32)).shape) == (2, 3)


# ---- PyTorch exports, checked against PyTorch ----


@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    try:
        import io

        torch.onnx.export(torch.nn.Linear(2, 2), torch.zeros(1, 2), io.BytesIO())
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"torch.onnx.export is unavailable: {type(e).__name__}: {e}")
    return torch


def export(torch, module, args, path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, str(path), **kw)
    return path


def test_torch_mlp(torch, tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16),
                              torch.nn.Tanh(), torch.nn.Linear(16, 4), torch.nn.Softmax(dim=1)).eval()
    x = torch.randn(6, 10)
    path = export(torch, net, (x,), tmp_path / "mlp.onnx", input_names=["x"], output_names=["probs"])
    m = chutney.onnx.load(path)
    assert m.input_names == ["x"] and m.output_names == ["probs"]
    assert m.num_params == sum(p.numel() for p in net.parameters())
    with torch.no_grad():
        want = net(x).numpy()
    np.testing.assert_allclose(m(x.numpy()).numpy(), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m.run(None, {"x": x.numpy()})[0], want, rtol=1e-5, atol=1e-6)


def _cnn(torch):
    class CNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(8)
            self.conv2 = torch.nn.Conv2d(8, 6, 3, stride=2, groups=2)
            self.fc = torch.nn.Linear(6 * 2 * 2, 5)

        def forward(self, x):
            x = torch.nn.functional.max_pool2d(torch.relu(self.bn(self.conv1(x))), 2)
            x = torch.nn.functional.avg_pool2d(torch.relu(self.conv2(x)), 2, stride=1, padding=1)
            x = torch.nn.functional.adaptive_avg_pool2d(x, 2)
            return self.fc(torch.flatten(x, 1))

    torch.manual_seed(1)
    net = CNN()
    with torch.no_grad():  # BatchNorm statistics that are not the identity
        net.bn.running_mean.uniform_(-1, 1)
        net.bn.running_var.uniform_(0.5, 2.0)
        net.bn.weight.uniform_(0.5, 1.5)
        net.bn.bias.uniform_(-1, 1)
    return net.eval()


def test_torch_cnn_conv_pool_batchnorm(torch, tmp_path):
    net = _cnn(torch)
    x = torch.randn(2, 3, 16, 16)
    path = export(torch, net, (x,), tmp_path / "cnn.onnx", input_names=["image"], output_names=["logits"],
                  training=torch.onnx.TrainingMode.PRESERVE, opset_version=13)
    m = chutney.onnx.load(path)
    assert {"Conv", "BatchNormalization", "MaxPool", "AveragePool", "Gemm"} <= set(m.nodes)
    with torch.no_grad():
        want = net(x).numpy()
    got = m(chutney.from_numpy(x.numpy()))
    assert tuple(got.shape) == (2, 5)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5)


def test_torch_dynamic_batch(torch, tmp_path):
    net = _cnn(torch)
    x = torch.randn(2, 3, 16, 16)
    path = export(torch, net, (x,), tmp_path / "dyn.onnx", input_names=["x"], output_names=["y"],
                  dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, opset_version=13)
    m = chutney.onnx.load(path)
    assert m.get_inputs()[0].shape == [None, 3, 16, 16]
    for b in (2, 5):
        x = torch.randn(b, 3, 16, 16)
        with torch.no_grad():
            want = net(x).numpy()
        [got] = m.run(["y"], {"x": x.numpy()})
        assert got.shape == (b, 5)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_torch_shape_computations_and_two_outputs(torch, tmp_path):
    """x.view(x.size(0), -1) exports a Shape/Gather/Concat/Reshape chain: with
    a symbolic batch the importer needs concrete shapes (input_shapes), and
    then folds it."""

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(2, 3, 3)
            self.fc = torch.nn.Linear(3 * 4 * 4, 4)

        def forward(self, x):
            h = torch.relu(self.conv(x))
            return self.fc(h.view(h.size(0), -1)), h.mean(dim=(2, 3))

    torch.manual_seed(2)
    net = Net().eval()
    x = torch.randn(3, 2, 6, 6)
    path = export(torch, net, (x,), tmp_path / "shape.onnx", input_names=["x"], output_names=["y", "pooled"],
                  dynamic_axes={"x": {0: "n"}}, opset_version=13)
    with pytest.raises(NotImplementedError, match="concrete input shapes"):
        chutney.onnx.load(path)
    m = chutney.onnx.load(path, input_shapes={"x": (3, 2, 6, 6)})
    assert "Shape" in m.nodes and "Reshape" in m.nodes
    with torch.no_grad():
        want_y, want_p = net(x)
    y, pooled = m(x.numpy())
    np.testing.assert_allclose(y.numpy(), want_y.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(pooled.numpy(), want_p.numpy(), rtol=1e-4, atol=1e-5)


# ---- the ONNX conformance data (libonnx-testdata) ----

TESTDATA = "/usr/share/libonnx-testdata/data"
CASES = [
    "node/test_relu", "node/test_add_bcast", "node/test_matmul_2d", "node/test_gemm_all_attributes",
    "node/test_conv_with_strides_padding", "node/test_maxpool_2d_pads", "node/test_averagepool_2d_pads",
    "node/test_batchnorm_epsilon", "node/test_softmax_axis_1", "node/test_transpose_all_permutations_0",
    "node/test_concat_2d_axis_negative_1", "node/test_argmax_keepdims_example", "node/test_greater",
    "node/test_where_example", "node/test_reshape_reordered_all_dims",
    "pytorch-converted/test_Conv2d", "pytorch-operator/test_operator_maxpool",
    "simple/test_single_relu_model",
]


def _pb(path):
    return numpy_helper.to_array(onnx.load_tensor(path))


@pytest.mark.parametrize("case", CASES)
def test_conformance_case(case):
    d = os.path.join(TESTDATA, case)
    if not os.path.isfile(os.path.join(d, "model.onnx")):
        pytest.skip(f"no ONNX conformance data at {d} (Debian: apt-get install libonnx-testdata)")
    data_dir = os.path.join(d, "test_data_set_0")
    in_files = sorted(glob.glob(os.path.join(data_dir, "input_*.pb")), key=lambda p: int(p[-4]))
    out_files = sorted(glob.glob(os.path.join(data_dir, "output_*.pb")), key=lambda p: int(p[-4]))
    inputs = [chutney.onnx.load_tensor(p) for p in in_files]
    # load_tensor against onnx's own reader
    for t, p in zip(inputs, in_files):
        ref = _pb(p)
        assert tuple(t.shape) == ref.shape and t.numpy().dtype == ref.dtype
        np.testing.assert_array_equal(t.numpy(), ref)
    shapes = [tuple(t.shape) for t in inputs]
    try:
        m = chutney.onnx.load(pathlib.Path(d) / "model.onnx", input_shapes=shapes)
        feeds = inputs
    except NotImplementedError:
        # an input the importer needs at load time (Reshape's shape): bound
        values = [None] + inputs[1:]
        m = chutney.onnx.load(os.path.join(d, "model.onnx"), input_shapes=shapes[:1], input_values=values)
        feeds = inputs[:1]
    outs = m(*feeds)
    if not isinstance(outs, tuple):
        outs = (outs,)
    assert len(outs) == len(out_files)
    for got, p in zip(outs, out_files):
        want = _pb(p)
        got = got.numpy()
        assert got.dtype == want.dtype and got.shape == want.shape
        if np.issubdtype(want.dtype, np.floating):
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-7)
        else:
            np.testing.assert_array_equal(got, want)
    # the same through onnxruntime's API
    feed = {n: t.numpy() for n, t in zip(m.input_names, feeds)}
    for got, p in zip(m.run(None, feed), out_files):
        np.testing.assert_allclose(got, _pb(p), rtol=1e-3, atol=1e-7)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_recurrent_sequence_lens_like_torch_packed(kind, direction):
    """ONNX's sequence_lens (known at load time): Y zero past each
    sequence's end, Y_h (and Y_c) its state at its last step, the reverse
    direction starting there; against PyTorch's packed sequences with the
    same weights."""
    torch = pytest.importorskip("torch")
    T, N, I, H = 6, 4, 3, 5
    lens = np.array([6, 2, 4, 1], np.int32)
    torch.manual_seed(0)
    bidir = direction == "bidirectional"
    tm = getattr(torch.nn, kind)(I, H, bidirectional=bidir)
    G = 4 if kind == "LSTM" else 3
    # torch's gate blocks (LSTM i f g o, GRU r z n) in ONNX's (i o f c, z r h)
    order = [0, 3, 1, 2] if kind == "LSTM" else [1, 0, 2]

    def onnx_gates(w):
        w = w.detach().numpy()
        return np.concatenate([w[k * H:(k + 1) * H] for k in order], 0)

    sfx = ["", "_reverse"] if bidir else [""]
    W = np.stack([onnx_gates(getattr(tm, f"weight_ih_l0{s}")) for s in sfx])
    R = np.stack([onnx_gates(getattr(tm, f"weight_hh_l0{s}")) for s in sfx])
    B = np.stack([np.concatenate([onnx_gates(getattr(tm, f"bias_ih_l0{s}")),
                                  onnx_gates(getattr(tm, f"bias_hh_l0{s}"))]) for s in sfx])
    D = len(sfx)
    attrs = {"hidden_size": H, "direction": direction}
    if kind == "GRU":
        attrs["linear_before_reset"] = 1
    outs = ["Y", "Y_h"] + (["Y_c"] if kind == "LSTM" else [])
    node = helper.make_node(kind, ["X", "W", "R", "B", "lens"], outs, **attrs)
    out_vis = [vi("Y", [T, D, N, H]), vi("Y_h", [D, N, H])] + \
        ([vi("Y_c", [D, N, H])] if kind == "LSTM" else [])
    m = make([node], [vi("X", [T, N, I])], out_vis,
             [init("W", W.astype(np.float32)), init("R", R.astype(np.float32)),
              init("B", B.astype(np.float32)), init("lens", lens)], opset=14)
    x = np.random.default_rng(2).standard_normal((T, N, I)).astype(np.float32)
    xin = x.copy()
    for b, n in enumerate(lens):
        xin[n:, b] = np.nan  # padding: never read
    got = chutney.onnx.load(m.SerializeToString())(chutney.tensor(xin))
    got = [g.numpy() for g in (got if isinstance(got, (list, tuple)) else [got])]
    packed = torch.nn.utils.rnn.pack_padded_sequence(torch.tensor(x), torch.tensor(lens),
                                                     enforce_sorted=False)
    with torch.no_grad():
        out, hn = tm(packed)
    y, _ = torch.nn.utils.rnn.pad_packed_sequence(out, total_length=T)  # [T, N, D*H]
    want_y = y.numpy().reshape(T, N, D, H).transpose(0, 2, 1, 3)
    want = [want_y] + ([hn[0].numpy(), hn[1].numpy()] if kind == "LSTM" else [hn.numpy()])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_recurrent_layout_1_with_initial_states_like_torch():
    """layout = 1: X [N, T, in], initial_h/initial_c and Y_h/Y_c [N, D, H],
    Y [N, T, D, H]; against PyTorch's batch_first LSTM with the same
    weights and initial states."""
    torch = pytest.importorskip("torch")
    T, N, I, H = 4, 3, 2, 5
    torch.manual_seed(1)
    tm = torch.nn.LSTM(I, H, bidirectional=True, batch_first=True)
    order = [0, 3, 1, 2]

    def onnx_gates(w):
        w = w.detach().numpy()
        return np.concatenate([w[k * H:(k + 1) * H] for k in order], 0)

    sfx = ["", "_reverse"]
    W = np.stack([onnx_gates(getattr(tm, f"weight_ih_l0{s}")) for s in sfx])
    R = np.stack([onnx_gates(getattr(tm, f"weight_hh_l0{s}")) for s in sfx])
    B = np.stack([np.concatenate([onnx_gates(getattr(tm, f"bias_ih_l0{s}")),
                                  onnx_gates(getattr(tm, f"bias_hh_l0{s}"))]) for s in sfx])
    rng = np.random.default_rng(4)
    x = rng.standard_normal((N, T, I)).astype(np.float32)
    h0 = rng.standard_normal((2, N, H)).astype(np.float32)
    c0 = rng.standard_normal((2, N, H)).astype(np.float32)
    node = helper.make_node("LSTM", ["X", "W", "R", "B", "", "h0", "c0"], ["Y", "Y_h", "Y_c"],
                            hidden_size=H, direction="bidirectional", layout=1)
    m = make([node], [vi("X", [N, T, I])],
             [vi("Y", [N, T, 2, H]), vi("Y_h", [N, 2, H]), vi("Y_c", [N, 2, H])],
             [init("W", W.astype(np.float32)), init("R", R.astype(np.float32)),
              init("B", B.astype(np.float32)), init("h0", h0.transpose(1, 0, 2).copy()),
              init("c0", c0.transpose(1, 0, 2).copy())], opset=14)
    y, yh, yc = [g.numpy() for g in chutney.onnx.load(m.SerializeToString())(chutney.tensor(x))]
    with torch.no_grad():
        out, (h, c) = tm(torch.tensor(x), (torch.tensor(h0), torch.tensor(c0)))
    np.testing.assert_allclose(y, out.numpy().reshape(N, T, 2, H), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(yh, h.numpy().transpose(1, 0, 2), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(yc, c.numpy().transpose(1, 0, 2), rtol=1e-5, atol=1e-6)
