"""Tensors: creation, dtypes, devices, shapes, printing, conversions."""

import math
import pickle

import pytest

import chutney
from conftest import close


def test_tensor_from_nested_lists_infers_dtype():
    assert chutney.tensor([[1, 2], [3, 4]]).dtype == chutney.int64
    assert chutney.tensor([1.0, 2]).dtype == chutney.float32
    assert chutney.tensor([True, False]).dtype == chutney.bool
    assert chutney.tensor([True, 2]).dtype == chutney.int64
    assert chutney.tensor(3.5).shape == ()
    assert chutney.tensor([]).shape == (0,)
    assert chutney.tensor([]).dtype == chutney.float32
    assert chutney.tensor([[], []]).shape == (2, 0)
    t = chutney.tensor([[1, 2, 3], [4, 5, 6]], dtype=chutney.float64)
    assert t.dtype == chutney.float64 and t.shape == (2, 3)
    assert t.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]


def test_tensor_exact_int64():
    big = 2**62 + 1
    t = chutney.tensor([big, -big])
    assert t.tolist() == [big, -big]
    assert chutney.full((2,), big).tolist() == [big, big]


def test_tensor_of_tensors_and_ragged():
    a = chutney.tensor([chutney.tensor(1.0), chutney.tensor(2.0)])
    assert a.tolist() == [1.0, 2.0]
    b = chutney.tensor([chutney.tensor([1, 2]), chutney.tensor([3, 4])])
    assert b.tolist() == [[1, 2], [3, 4]]
    with pytest.raises(ValueError):
        chutney.tensor([[1, 2], [3]])
    with pytest.raises(ValueError):
        chutney.tensor([1, [2]])
    with pytest.raises(TypeError):
        chutney.tensor("abc")
    with pytest.raises(TypeError):
        chutney.tensor([1, None])
    with pytest.raises(TypeError):
        chutney.tensor({1: 2})


def test_creation_functions():
    assert chutney.zeros(2, 3).tolist() == [[0.0] * 3] * 2
    assert chutney.zeros((2, 3)).shape == (2, 3)
    assert chutney.zeros([2, 3]).shape == (2, 3)
    assert chutney.zeros(size=(2, 3)).shape == (2, 3)
    assert chutney.ones(3, dtype=chutney.int32).tolist() == [1, 1, 1]
    assert chutney.ones(()).shape == ()
    assert chutney.empty(4).shape == (4,)
    assert chutney.full((2, 2), 7).dtype == chutney.int64
    assert chutney.full((2, 2), 7.5).tolist() == [[7.5, 7.5], [7.5, 7.5]]
    assert chutney.full((1,), True).dtype == chutney.bool
    assert chutney.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert chutney.arange(5).dtype == chutney.int64
    assert chutney.arange(1, 2, 0.25).tolist() == [1.0, 1.25, 1.5, 1.75]
    assert chutney.arange(1.0, 4).dtype == chutney.float32
    assert chutney.arange(10, 0, -3).tolist() == [10, 7, 4, 1]
    assert close(chutney.linspace(0, 1, 5), [0, 0.25, 0.5, 0.75, 1])
    assert chutney.eye(2).tolist() == [[1, 0], [0, 1]]
    assert chutney.eye(2, 3).shape == (2, 3)
    x = chutney.ones(2, 3, dtype=chutney.float64)
    assert chutney.zeros_like(x).dtype == chutney.float64
    assert chutney.ones_like(x, dtype=chutney.int32).dtype == chutney.int32
    assert chutney.full_like(x, 2.5).tolist() == [[2.5] * 3] * 2
    assert chutney.rand_like(x).shape == (2, 3)
    with pytest.raises(ValueError):
        chutney.arange(0, 1, 0)
    with pytest.raises(TypeError):
        chutney.zeros(2, foo=1)


def test_random_is_seeded():
    chutney.manual_seed(7)
    a = chutney.randn(5).tolist()
    state = chutney.get_rng_state()
    b = chutney.rand(3).tolist()
    chutney.manual_seed(7)
    assert chutney.randn(5).tolist() == a
    chutney.set_rng_state(state)
    assert chutney.rand(3).tolist() == b
    r = chutney.randint(0, 10, (1000,))
    assert r.dtype == chutney.int64 and 0 <= r.min().item() and r.max().item() < 10
    assert chutney.randint(5, (3,)).shape == (3,)
    assert sorted(chutney.randperm(6).tolist()) == list(range(6))
    n = chutney.normal(2.0, 0.5, (10000,))
    assert abs(n.mean().item() - 2.0) < 0.05 and abs(n.std().item() - 0.5) < 0.05
    u = chutney.rand(10000)
    assert 0 <= u.min().item() and u.max().item() < 1


def test_dtypes_have_torch_names():
    assert repr(chutney.float32) == "chutney.float32"
    assert chutney.float is chutney.float32
    assert chutney.double is chutney.float64
    assert chutney.long is chutney.int64
    assert chutney.int is chutney.int32
    assert chutney.half is chutney.float16
    assert chutney.float32.is_floating_point and not chutney.int64.is_floating_point
    assert chutney.float64.itemsize == 8
    for name in ("float64", "f64", "double", "torch.float64"):
        assert chutney.zeros(1, dtype=name).dtype == chutney.float64
    assert chutney.zeros(1, dtype=float).dtype == chutney.float64
    assert chutney.zeros(1, dtype=int).dtype == chutney.int64
    with pytest.raises(TypeError):
        chutney.zeros(1, dtype="complex64")
    with pytest.raises(TypeError):
        chutney.zeros(1, dtype=3)
    assert pickle.loads(pickle.dumps(chutney.int64)) is chutney.int64


def test_conversions_between_dtypes():
    x = chutney.tensor([1.7, -2.2, 0.0])
    assert x.long().tolist() == [1, -2, 0]
    assert x.bool().tolist() == [True, True, False]
    assert x.double().dtype == chutney.float64
    assert close(x.half().float(), [1.7, -2.2, 0.0], rtol=1e-3)
    assert close(x.bfloat16().float(), [1.7, -2.2, 0.0], rtol=1e-2)
    assert x.to(chutney.int32).dtype == chutney.int32
    assert x.to("float64").dtype == chutney.float64
    assert x.to(dtype=chutney.float32) is x
    assert x.type_as(chutney.zeros(1, dtype=chutney.int64)).dtype == chutney.int64


def test_shape_and_inspection():
    x = chutney.zeros(2, 3, 4)
    assert x.shape == (2, 3, 4) and isinstance(x.shape, tuple)
    assert repr(x.shape) == "chutney.Size([2, 3, 4])"
    assert x.shape.numel() == 24
    assert x.size() == (2, 3, 4) and x.size(1) == 3 and x.size(-1) == 4
    assert x.dim() == 3 and x.ndim == 3 and x.numel() == 24 and len(x) == 2
    assert x.stride() == (12, 4, 1) and x.stride(0) == 12
    assert x.is_contiguous() and not x.transpose(0, 2).is_contiguous()
    assert x.element_size() == 4 and x.nbytes == 96
    assert x[1].storage_offset() == 12
    with pytest.raises(IndexError):
        x.size(3)
    with pytest.raises(TypeError):
        len(chutney.tensor(1.0))


def test_device():
    x = chutney.ones(2)
    assert x.device == "cpu"
    assert str(x.device) == "cpu" and x.device.type == "cpu" and x.device.index is None
    assert x.is_cpu
    assert chutney.device("cpu") == chutney.device("cpu:0")
    d = chutney.device("opencl", 1)
    assert str(d) == "opencl:1" and d.type == "opencl" and d.index == 1
    assert {chutney.device("cpu"), chutney.device("cpu")} == {chutney.device("cpu")}
    assert x.to("cpu") is x and x.cpu() is x
    with pytest.raises(ValueError):
        chutney.device("tpu:0")
    assert chutney.device_count("cpu") == 1
    r = chutney.device("rank:1/cpu:0")  # a device of another process of an MPI job
    assert r.type == "cpu" and str(r) == "rank:1/cpu:0" and repr(r) == "device('rank:1/cpu:0')"
    assert r != chutney.device("cpu")


@pytest.mark.skipif(chutney.device_count("opencl") == 0, reason="no OpenCL device")
def test_opencl_round_trip():
    x = chutney.arange(6, dtype=chutney.float32).reshape(2, 3)
    y = x.to("opencl")
    assert y.device == "opencl:0"
    z = (y * 2 + 1).sum(dim=1)
    assert z.device == "opencl:0"
    assert z.cpu().tolist() == [9.0, 27.0]
    assert "device='opencl:0'" in repr(z)
    with pytest.raises(TypeError):
        y.numpy()
    assert y.tolist() == x.tolist()


def test_repr_like_torch():
    assert repr(chutney.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    assert repr(chutney.tensor([1, 2])) == "tensor([1, 2])"
    assert repr(chutney.tensor([1.0], dtype=chutney.float64)) == "tensor([1.], dtype=chutney.float64)"
    assert repr(chutney.tensor([True])) == "tensor([True])"
    torch = pytest.importorskip("torch")
    assert repr(chutney.tensor([True, False, True])) == repr(torch.tensor([True, False, True]))
    assert repr(chutney.tensor(False)) == repr(torch.tensor(False))
    assert repr(chutney.ones(2, requires_grad=True)) == "tensor([1., 1.], requires_grad=True)"
    assert "grad_fn" in repr(chutney.ones(2, requires_grad=True) * 2)
    assert str(chutney.tensor(3.0)) == "tensor(3.)"
    assert f"{chutney.tensor(3.14159):.2f}" == "3.14"
    with pytest.raises(TypeError):
        f"{chutney.ones(2):.2f}"
    assert f"{chutney.ones(2)}" == str(chutney.ones(2))


def test_python_numbers():
    assert chutney.tensor(2.5).item() == 2.5
    assert chutney.tensor([[7]]).item() == 7
    assert chutney.tensor(True).item() is True
    assert float(chutney.tensor([1.5])) == 1.5
    assert int(chutney.tensor(3.9)) == 3
    assert [10, 20, 30][chutney.tensor(1)] == 20
    assert bool(chutney.tensor([1.0])) and not bool(chutney.tensor(0))
    with pytest.raises(RuntimeError):
        bool(chutney.ones(2))
    with pytest.raises(ValueError):
        chutney.ones(2).item()
    with pytest.raises(TypeError):
        [1, 2][chutney.tensor(1.0)]
    nan = chutney.tensor(float("nan")).item()
    assert math.isnan(nan)


def test_iteration_and_contains():
    x = chutney.tensor([[1, 2], [3, 4]])
    rows = list(x)
    assert [r.tolist() for r in rows] == [[1, 2], [3, 4]]
    assert 3 in x and 5 not in x
    with pytest.raises(TypeError):
        iter(chutney.tensor(1.0))


def test_tensor_constructor_and_hash():
    assert chutney.Tensor(2, 3).shape == (2, 3)
    assert chutney.Tensor([1, 2]).dtype == chutney.float32
    assert chutney.Tensor().shape == (0,)
    x = chutney.ones(2)
    assert len({x, x}) == 1
    assert isinstance(x, chutney.Tensor) and chutney.is_tensor(x)


def test_clone_contiguous_detach_share():
    x = chutney.arange(6.0).reshape(2, 3)
    c = x.clone()
    c[0, 0] = 100
    assert x[0, 0].item() == 0
    t = x.t()
    assert t.shares_storage(x)
    assert not t.contiguous().shares_storage(x)
    assert x.contiguous() is x
    d = x.detach()
    assert d.shares_storage(x)


def test_save_and_load(tmp_path):
    sd = {"a": chutney.arange(6.0).reshape(2, 3), "b": chutney.tensor([1, 2, 3]),
          "nested": {"c": chutney.ones(2, dtype=chutney.float64)}}
    p = tmp_path / "x.safetensors"
    chutney.save(sd, p, metadata={"epoch": "3"})
    back, meta = chutney.load(p, with_metadata=True)
    assert meta == {"epoch": "3"}
    assert sorted(back) == ["a", "b", "nested"] and sorted(back["nested"]) == ["c"]
    assert back["a"].tolist() == sd["a"].tolist() and back["b"].dtype == chutney.int64
    assert back["nested"]["c"].dtype == chutney.float64
    # the file itself holds the tensors under their dotted paths
    from chutney import _C
    assert sorted(n for n, _ in _C._load_safetensors(str(p))[0]) == ["a", "b", "nested.c"]
    # a flat state_dict is stored as just that, and comes back as it went
    chutney.save({"w.x": sd["a"]}, p)
    back, meta = chutney.load(p, with_metadata=True)
    assert list(back) == ["w.x"] and meta == {}
    # what training checkpoints hold, the same object back
    ck = {"epoch": 7, "best": 0.91, "name": "run", "done": False, "none": None,
          "inf": float("inf"), "model": {"fc.weight": sd["a"]}, "history": [1.5, sd["b"]],
          "pair": (sd["b"], 2), 3: "int key"}
    chutney.save(ck, p)
    got = chutney.load(p)
    assert list(got) == list(ck)
    assert {k: got[k] for k in ("epoch", "best", "name", "done", "none", "inf", 3)} == \
        {k: ck[k] for k in ("epoch", "best", "name", "done", "none", "inf", 3)}
    assert got["model"]["fc.weight"].tolist() == sd["a"].tolist()
    assert got["history"][0] == 1.5 and got["history"][1].tolist() == [1, 2, 3]
    assert isinstance(got["pair"], tuple) and got["pair"][1] == 2
    chutney.save(sd["a"], p)
    assert chutney.load(p).tolist() == sd["a"].tolist()
    with pytest.raises(TypeError):
        chutney.save({"a": object()}, p)
    with pytest.raises(ValueError):
        chutney.save({"a.b": sd["a"], "a": {"b": sd["a"]}}, p)
    with pytest.raises(FileNotFoundError):
        chutney.load(tmp_path / "missing.safetensors")
    (tmp_path / "bad").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    with pytest.raises(Exception) as e:
        chutney.load(tmp_path / "bad")
    assert not isinstance(e.value, SystemError)
