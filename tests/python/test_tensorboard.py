"""chutney.utils.tensorboard.SummaryWriter: the files it writes, read back
with tests/cli/read_tfevents.py (TFRecord framing, CRC-32C computed bit by
bit) and the parsing below (histograms, images, text, hparams), checked
field by field against the formats: numpy.histogram and TensorFlow's bucket
rule for histograms, PNG decoded back to pixels for images."""

import importlib.util
import math
import os
import re
import socket
import struct
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

import chutney
from chutney.utils import tensorboard as tb
from chutney.utils.tensorboard import SummaryWriter

_spec = importlib.util.spec_from_file_location(
    "read_tfevents", Path(__file__).resolve().parents[1] / "cli" / "read_tfevents.py")
R = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(R)


# ---------------------------------------------------------------- parsing

def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def sint64(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def packed(v, fmt):
    size = struct.calcsize(fmt)
    return list(struct.unpack("<%d%s" % (len(v) // size, fmt), v))


def one_of(buf, spec):
    """Fields of `buf` by `spec` {num: (name, wire type, decode)}; an
    unknown field or wire type fails."""
    out = {}
    for num, wt, v in R.fields(buf):
        assert num in spec, "unexpected field %d" % num
        name, want_wt, dec = spec[num]
        assert wt == want_wt, "field %s: wire type %d" % (name, wt)
        val = dec(v)
        if name.endswith("[]"):
            out.setdefault(name[:-2], []).append(val)
        else:
            assert name not in out, "field %s twice" % name
            out[name] = val
    return out


def dbl(v):
    return struct.unpack("<d", v)[0]


def flt(v):
    return struct.unpack("<f", v)[0]


def utf8(v):
    return v.decode("utf-8")


def ident(v):
    return v


PLUGIN = {1: ("plugin_name", 2, utf8), 2: ("content", 2, ident)}
METADATA = {1: ("plugin_data", 2, lambda v: one_of(v, PLUGIN))}
IMAGE = {1: ("height", 0, ident), 2: ("width", 0, ident), 3: ("colorspace", 0, ident),
         4: ("png", 2, ident)}
HISTO = {1: ("min", 1, dbl), 2: ("max", 1, dbl), 3: ("num", 1, dbl), 4: ("sum", 1, dbl),
         5: ("sum_squares", 1, dbl), 6: ("bucket_limit", 2, lambda v: packed(v, "d")),
         7: ("bucket", 2, lambda v: packed(v, "d"))}
SHAPE = {2: ("dim[]", 2, lambda v: one_of(v, {1: ("size", 0, ident), 2: ("name", 2, utf8)}))}
TENSOR = {1: ("dtype", 0, ident), 2: ("tensor_shape", 2, lambda v: one_of(v, SHAPE)),
          5: ("float_val", 2, lambda v: packed(v, "f")), 6: ("double_val", 2, lambda v: packed(v, "d")),
          8: ("string_val[]", 2, ident)}
VALUE = {1: ("tag", 2, utf8), 2: ("simple_value", 5, flt), 4: ("image", 2, lambda v: one_of(v, IMAGE)),
         5: ("histo", 2, lambda v: one_of(v, HISTO)), 8: ("tensor", 2, lambda v: one_of(v, TENSOR)),
         9: ("metadata", 2, lambda v: one_of(v, METADATA))}
SUMMARY = {1: ("value[]", 2, lambda v: one_of(v, VALUE))}
EVENT = {1: ("wall_time", 1, dbl), 2: ("step", 0, sint64), 3: ("file_version", 2, utf8),
         5: ("summary", 2, lambda v: one_of(v, SUMMARY)),
         7: ("session_log", 2, lambda v: one_of(v, {1: ("status", 0, ident)}))}


def events_in(path):
    with open(path, "rb") as f:
        return [one_of(r, EVENT) for r in R.records(f.read())]


def event_files(logdir):
    return sorted(p for p in Path(logdir).iterdir() if p.name.startswith("events.out.tfevents."))


def read_run(logdir):
    files = event_files(logdir)
    assert len(files) == 1, files
    evs = events_in(files[0])
    assert evs[0]["file_version"] == "brain.Event:2"
    assert 1.5e9 < evs[0]["wall_time"] < 4e9
    return evs


def values(evs):
    """(step, wall_time, Summary.Value) of every summary value."""
    return [(e.get("step", 0), e.get("wall_time", 0.0), v)
            for e in evs if "summary" in e for v in e["summary"]["value"]]


def plugin_of(v):
    return v["metadata"]["plugin_data"]["plugin_name"]


def decode_png(data):
    """(width, height, channels, rows of pixel bytes): chunk CRCs checked,
    IDAT inflated, all five scanline filters undone."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    i, idat, ihdr, seen = 8, b"", None, []
    while i < len(data):
        (n,) = struct.unpack(">I", data[i:i + 4])
        kind, body = data[i + 4:i + 8], data[i + 8:i + 8 + n]
        (crc,) = struct.unpack(">I", data[i + 8 + n:i + 12 + n])
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF, kind
        seen.append(kind)
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        i += 12 + n
    assert seen[0] == b"IHDR" and seen[-1] == b"IEND"
    w, h, depth, ctype, comp, filt, interlace = ihdr
    assert (depth, comp, filt, interlace) == (8, 0, 0, 0)
    ch = {0: 1, 2: 3, 4: 2, 6: 4}[ctype]
    raw, stride, rows, prev = zlib.decompress(idat), w * ch, [], bytes(w * ch)
    assert len(raw) == h * (stride + 1)
    for r in range(h):
        ft, line = raw[r * (stride + 1)], bytearray(raw[r * (stride + 1) + 1:(r + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - ch] if x >= ch else 0
            b, c = prev[x], prev[x - ch] if x >= ch else 0
            if ft == 1:
                line[x] = (line[x] + a) & 255
            elif ft == 2:
                line[x] = (line[x] + b) & 255
            elif ft == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif ft == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
            else:
                assert ft == 0
        rows.append(bytes(line))
        prev = line
    return w, h, ch, rows


def png_array(data):
    w, h, ch, rows = decode_png(data)
    return np.frombuffer(b"".join(rows), np.uint8).reshape(h, w, ch)


# ---------------------------------------------------------------- framing

def test_crc32c_table_and_mask_against_bitwise():
    rng = np.random.default_rng(0)
    assert tb._crc32c(b"123456789") == 0xE3069283
    for n in (0, 1, 7, 64, 1000):
        data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        assert tb._crc32c(data) == R.crc32c(data)
        assert tb._masked_crc(data) == R.masked(R.crc32c(data))
    rec = tb._record(b"hello")
    assert list(R.records(rec)) == [b"hello"]
    assert list(R.records(rec + tb._record(b""))) == [b"hello", b""]


def test_varints_and_negative_steps(tmp_path):
    for n in (0, 1, 127, 128, 300, 2 ** 31, 2 ** 63 - 1, -1, -(2 ** 63)):
        assert sint64(R.varint(tb._varint(n), 0)[0]) == n
    with SummaryWriter(tmp_path) as w:
        for s in (0, 1, 2 ** 40, -5):
            w.add_scalar("x", 1.0, s)
    assert [s for s, _, _ in values(read_run(tmp_path))] == [0, 1, 2 ** 40, -5]


def test_file_name_version_event_and_logdir(tmp_path):
    w = SummaryWriter(tmp_path / "run", filename_suffix=".sfx")
    assert w.get_logdir() == str(tmp_path / "run")
    (path,) = event_files(tmp_path / "run")
    m = re.fullmatch(r"events\.out\.tfevents\.(\d{10})\.(.+)\.(\d+)\.(\d+)\.sfx", path.name)
    assert m and m.group(2) == socket.gethostname() and int(m.group(3)) == os.getpid()
    assert abs(int(m.group(1)) - time.time()) < 60
    # the file_version record is on disk before anything is added or closed
    (ev,) = events_in(path)
    assert ev["file_version"] == "brain.Event:2" and "step" not in ev
    w.close()


def test_default_logdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with SummaryWriter(comment="_lr0.1") as w:
        d = w.get_logdir()
    head, name = os.path.split(d)
    assert head == "runs"
    assert re.fullmatch(r"[A-Z][a-z]{2}\d{2}_\d{2}-\d{2}-\d{2}_" + re.escape(socket.gethostname()) + r"_lr0\.1",
                        name), name
    assert len(event_files(tmp_path / d)) == 1


# ---------------------------------------------------------------- scalars

def test_add_scalar_inputs_steps_walltimes(tmp_path):
    inputs = [1.5, 3, True, np.float32(0.1), np.float64(-2.25), np.array([7.5]), np.int64(9),
              chutney.tensor(0.3), chutney.tensor([4.0]), chutney.tensor([[1.25]], requires_grad=True) * 2,
              0.0, 1e40, float("nan")]
    with SummaryWriter(tmp_path) as w:
        for i, x in enumerate(inputs):
            w.add_scalar("s/x", x, global_step=i * 10, walltime=1.7e9 + i)
        w.add_scalar("s/nostep", 2.0)
    got = values(read_run(tmp_path))
    assert [s for s, _, _ in got] == [i * 10 for i in range(len(inputs))] + [0]
    assert [t for _, t, _ in got[:-1]] == [1.7e9 + i for i in range(len(inputs))]
    assert abs(got[-1][1] - time.time()) < 60
    want = [1.5, 3.0, 1.0, f32(0.1), -2.25, 7.5, 9.0, f32(0.3), 4.0, 2.5, 0.0, math.inf]
    for (_, _, v), x in zip(got, want):
        assert v["tag"] == "s/x" and v["simple_value"] == x and "metadata" not in v
    assert math.isnan(got[len(want)][2]["simple_value"])


def test_add_scalar_rejects(tmp_path):
    with SummaryWriter(tmp_path) as w:
        with pytest.raises(ValueError, match="one element"):
            w.add_scalar("x", chutney.tensor([1.0, 2.0]))
        with pytest.raises(ValueError, match="one element"):
            w.add_scalar("x", np.zeros(3))
        with pytest.raises(TypeError):
            w.add_scalar("x", "blob")


def test_add_scalar_new_style(tmp_path):
    with SummaryWriter(tmp_path) as w:
        w.add_scalar("f", 0.1, 1, new_style=True)
        w.add_scalar("d", 0.1, 2, new_style=True, double_precision=True)
    (_, _, f), (_, _, d) = values(read_run(tmp_path))
    assert plugin_of(f) == plugin_of(d) == "scalars"
    assert "simple_value" not in f and "content" not in f["metadata"]["plugin_data"]
    assert f["tensor"] == {"dtype": 1, "float_val": [f32(0.1)]}
    assert d["tensor"] == {"dtype": 2, "double_val": [0.1]}


def test_add_scalars_sub_runs(tmp_path):
    with SummaryWriter(tmp_path) as w:
        for step in range(3):
            w.add_scalars("loss/all", {"train": step * 1.0, "val": chutney.tensor(step + 0.5)}, step)
        w.add_scalars("loss/all", {"train": 9.0}, 3, walltime=1.8e9)
    assert values(read_run(tmp_path)) == []
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["loss_all_train", "loss_all_val"]
    train = values(read_run(tmp_path / "loss_all_train"))
    val = values(read_run(tmp_path / "loss_all_val"))
    assert [(s, v["tag"], v["simple_value"]) for s, _, v in train] == \
        [(0, "loss/all", 0.0), (1, "loss/all", 1.0), (2, "loss/all", 2.0), (3, "loss/all", 9.0)]
    assert [(s, v["simple_value"]) for s, _, v in val] == [(0, 0.5), (1, 1.5), (2, 2.5)]
    # one walltime per call, shared by its series
    assert [t for _, t, _ in train[:3]] == [t for _, t, _ in val] and train[3][1] == 1.8e9


# ---------------------------------------------------------------- histograms

def tensorflow_edges():
    pos = [1e-12]
    while pos[-1] * 1.1 < 1e20:
        pos.append(pos[-1] * 1.1)
    return [-v for v in pos[::-1]] + [0.0] + pos


def expected_buckets(values, bins, max_bins=None):
    counts, edges = np.histogram(np.asarray(values, np.float64), bins=bins)
    counts, edges = list(counts), list(edges)
    if max_bins is not None and len(counts) > max_bins:
        k = len(counts) // max_bins
        counts += [0] * (-len(counts) % k)
        counts = list(np.asarray(counts).reshape(-1, k).sum(1))
        edges = edges[:-1:k] + edges[-1:]
    nz = [i for i, c in enumerate(counts) if c]
    lo, hi = nz[0], nz[-1]
    # right edges only, after one empty bucket whose right edge is the
    # support's left edge
    return [float(e) for e in edges[lo:hi + 2]], [0.0] + [float(c) for c in counts[lo:hi + 1]]


def histo_of(tmp_path, data, **kw):
    d = tmp_path / ("h%d" % len(list(tmp_path.iterdir())))
    with SummaryWriter(d) as w:
        w.add_histogram("h", data, 7, **kw)
    ((step, _, v),) = values(read_run(d))
    assert step == 7 and v["tag"] == "h" and "metadata" not in v
    return v["histo"]


def check_stats(h, data):
    a = np.asarray(data, np.float64).ravel()
    h = dict({k: 0.0 for k in ("min", "max", "sum", "sum_squares")}, **h)  # proto3 leaves zeros off
    assert h["min"] == a.min() and h["max"] == a.max() and h["num"] == a.size
    assert h["sum"] == pytest.approx(a.sum(), rel=1e-12, abs=1e-9)
    assert h["sum_squares"] == pytest.approx(a.dot(a), rel=1e-12)


def test_histogram_tensorflow_buckets(tmp_path):
    assert SummaryWriter.__init__ and tb._tensorflow_bins() == tensorflow_edges()
    rng = np.random.default_rng(1)
    cases = [rng.normal(0, 3, 5000), rng.uniform(1, 2, 300), np.array([0.0, 0.0, 5.0]),
             np.array([-1e-13, 1e-13, 1e19, -7.0]), np.array([3.0])]
    for data in cases:
        h = histo_of(tmp_path, chutney.tensor(data.tolist(), dtype=chutney.float64))
        check_stats(h, data)
        limits, counts = expected_buckets(data, tensorflow_edges())
        assert h["bucket_limit"] == limits and h["bucket"] == counts
        assert sum(counts) == data.size
        # each count lies between its limit and the one before (from data)
        for i in range(1, len(limits)):
            inside = ((data >= limits[i - 1]) & (data < limits[i])).sum()
            assert counts[i] == inside or i == len(limits) - 1
    # a float32 tensor: the values as float32 holds them
    x = chutney.randn(1000)
    h = histo_of(tmp_path, x)
    assert h["bucket"] == expected_buckets(np.asarray(x.tolist()), tensorflow_edges())[1]


def test_histogram_numpy_bins_and_max_bins(tmp_path):
    rng = np.random.default_rng(2)
    data = rng.normal(size=2000)
    for kw in ({"bins": 10}, {"bins": 64}, {"bins": "auto"}, {"bins": "fd"}, {"bins": "sturges"},
               {"bins": [-3.0, -1.0, 0.0, 0.5, 2.0]}, {"bins": 100, "max_bins": 7},
               {"bins": "tensorflow", "max_bins": 50}, {"bins": 9, "max_bins": 4}, {"bins": np.int64(12)},
               {"bins": chutney.tensor([-1.0, 0.0, 1.0], dtype=chutney.float64)}):
        h = histo_of(tmp_path, data, **kw)
        check_stats(h, data)
        bins = kw["bins"]
        bins = tensorflow_edges() if isinstance(bins, str) and bins == "tensorflow" else \
            bins.tolist() if isinstance(bins, chutney.Tensor) else bins
        assert (h["bucket_limit"], h["bucket"]) == expected_buckets(data, bins, kw.get("max_bins")), kw
    with pytest.raises(ValueError):
        histo_of(tmp_path, np.zeros(0))


def test_histogram_without_numpy_matches(tmp_path, monkeypatch):
    rng = np.random.default_rng(3)
    data = np.concatenate([rng.normal(0, 10, 3000), [0.0, 2.0, 2.0]])
    kws = ({}, {"bins": 13}, {"bins": 32, "max_bins": 5}, {"bins": [-5.0, 0.0, 2.0, 30.0]})
    with_np = [histo_of(tmp_path, data, **kw) for kw in kws]
    monkeypatch.setattr(tb, "_np", None)
    for kw, ref in zip(kws, with_np):
        h = histo_of(tmp_path, chutney.tensor(data.tolist(), dtype=chutney.float64), **kw)
        assert h["bucket_limit"] == ref["bucket_limit"] and h["bucket"] == ref["bucket"], kw
        for k in ("min", "max", "num", "sum", "sum_squares"):
            assert h[k] == pytest.approx(ref[k], rel=1e-12)
    with pytest.raises(RuntimeError, match="NumPy"):
        histo_of(tmp_path, data, bins="auto")


def test_histogram_raw(tmp_path):
    with SummaryWriter(tmp_path) as w:
        w.add_histogram_raw("r", -1, 4, 6, 9.0, 30.0, [0.0, 2.0, 4.0], [0, 2, 4], global_step=3)
        with pytest.raises(ValueError):
            w.add_histogram_raw("r", 0, 1, 1, 1, 1, [1.0], [1, 2])
    ((_, _, v),) = values(read_run(tmp_path))
    assert v["histo"] == {"min": -1.0, "max": 4.0, "num": 6.0, "sum": 9.0, "sum_squares": 30.0,
                          "bucket_limit": [0.0, 2.0, 4.0], "bucket": [0.0, 2.0, 4.0]}


# ---------------------------------------------------------------- text

def test_add_text(tmp_path):
    with SummaryWriter(tmp_path) as w:
        w.add_text("notes", "héllo **world** ✓", 4)
        w.add_text("notes", "", 5)
    (s4, _, a), (s5, _, b) = values(read_run(tmp_path))
    assert (s4, s5) == (4, 5)
    assert a["tag"] == "notes/text_summary" and plugin_of(a) == "text"
    assert "content" not in a["metadata"]["plugin_data"]  # TextPluginData version 0: empty
    assert a["tensor"] == {"dtype": 7, "tensor_shape": {"dim": [{"size": 1}]},
                           "string_val": ["héllo **world** ✓".encode()]}
    assert b["tensor"]["string_val"] == [b""]


# ---------------------------------------------------------------- images

def scaled(a):
    """PyTorch's rule: uint8 kept, anything else float32 * 255, clipped,
    truncated."""
    a = np.asarray(a)
    if a.dtype == np.uint8:
        return a
    return np.clip(a.astype(np.float32) * np.float32(255), 0, 255).astype(np.uint8)


def image_of(tmp_path, fn, *args, **kw):
    d = tmp_path / ("i%d" % len(list(tmp_path.iterdir())))
    with SummaryWriter(d) as w:
        getattr(w, fn)("img", *args, global_step=2, **kw)
    ((_, _, v),) = values(read_run(d))
    im = v["image"]
    px = png_array(im["png"])
    assert (im["height"], im["width"], im["colorspace"]) == px.shape
    return px


def test_add_image_formats(tmp_path):
    rng = np.random.default_rng(4)
    chw = rng.uniform(-0.2, 1.2, (3, 5, 7)).astype(np.float32)
    chw[0, 0, :3] = [1.0, 0.5, 254.5 / 255]
    want = scaled(chw).transpose(1, 2, 0)
    assert np.array_equal(image_of(tmp_path, "add_image", chutney.tensor(chw.tolist())), want)
    assert np.array_equal(image_of(tmp_path, "add_image", chw), want)
    hwc = chw.transpose(1, 2, 0).copy()
    assert np.array_equal(image_of(tmp_path, "add_image", chutney.tensor(hwc.tolist()), dataformats="HWC"), want)
    assert np.array_equal(image_of(tmp_path, "add_image", chw.transpose(2, 1, 0).copy(), dataformats="WHC"), want)
    u8 = rng.integers(0, 256, (4, 6, 4), dtype=np.uint8)  # RGBA as is
    assert np.array_equal(image_of(tmp_path, "add_image", chutney.tensor(u8.tolist(), dtype=chutney.uint8),
                                   dataformats="HWC"), u8)
    gray = rng.uniform(0, 1, (6, 3))
    px = image_of(tmp_path, "add_image", gray, dataformats="HW")
    assert np.array_equal(px, np.repeat(scaled(gray)[:, :, None], 3, 2))
    px = image_of(tmp_path, "add_image", gray[None], dataformats="CHW")
    assert np.array_equal(px, np.repeat(scaled(gray)[:, :, None], 3, 2))
    ints = np.array([[[0, 1, 2]]])  # not uint8: scaled by 255 like floats
    assert image_of(tmp_path, "add_image", ints, dataformats="HWC").tolist() == [[[0, 255, 255]]]


def test_add_images_grid(tmp_path):
    rng = np.random.default_rng(5)
    n, c, h, w = 11, 3, 4, 5
    batch = rng.uniform(0, 1, (n, c, h, w)).astype(np.float32)
    px = image_of(tmp_path, "add_images", chutney.tensor(batch.tolist()))
    assert px.shape == (2 * h, 8 * w, 3)
    s = scaled(batch)
    for i in range(16):
        y, x = divmod(i, 8)
        tile = px[y * h:(y + 1) * h, x * w:(x + 1) * w]
        assert np.array_equal(tile, s[i].transpose(1, 2, 0) if i < n else np.zeros((h, w, 3), np.uint8))
    nhwc = batch.transpose(0, 2, 3, 1).copy()
    assert np.array_equal(image_of(tmp_path, "add_images", nhwc, dataformats="NHWC"), px)
    three = image_of(tmp_path, "add_images", batch[:3, :1])  # grey, fewer than a row
    assert three.shape == (h, 3 * w, 3) and np.array_equal(three[:, :w, 1], scaled(batch[0, 0]))


def test_image_errors(tmp_path):
    with SummaryWriter(tmp_path) as w:
        with pytest.raises(ValueError, match="dataformats"):
            w.add_image("x", np.zeros((3, 4, 4)), dataformats="CHW" + "W")
        with pytest.raises(ValueError, match="does not match"):
            w.add_image("x", np.zeros((4, 4)))
        with pytest.raises(ValueError, match="channels"):
            w.add_image("x", np.zeros((2, 4, 4)))
        with pytest.raises(ValueError, match="dataformats"):
            w.add_images("x", np.zeros((1, 3, 4, 4)), dataformats="NCHX")


class _FakeCanvas:
    """Stands in for matplotlib's Agg canvas: a w x h RGBA buffer whose
    pixel (y, x) is (x, y, 7 * id, 255)."""

    def __init__(self, fig):
        self.fig = fig

    def draw(self):
        self.fig.drawn = True

    def get_width_height(self):
        return self.fig.w, self.fig.h

    def buffer_rgba(self):
        f = self.fig
        return memoryview(bytes(v for y in range(f.h) for x in range(f.w) for v in (x, y, 7 * f.id, 255)))


class _FakeFigure:
    def __init__(self, id, w=5, h=3):
        self.id, self.w, self.h, self.drawn, self.closed = id, w, h, False, False

    def pixels(self):
        return np.array([[[x, y, 7 * self.id] for x in range(self.w)] for y in range(self.h)], np.uint8)


def test_add_figure_needs_matplotlib(tmp_path, monkeypatch):
    try:
        import matplotlib
    except ImportError:
        with SummaryWriter(tmp_path / "none") as w:
            with pytest.raises(ImportError, match="matplotlib"):
                w.add_figure("fig", object())
        # the figure path itself, through a stand-in for matplotlib's Agg canvas
        import sys
        import types
        mods = {n: types.ModuleType(n) for n in ("matplotlib", "matplotlib.backends",
                                                  "matplotlib.backends.backend_agg", "matplotlib.pyplot")}
        mods["matplotlib.backends.backend_agg"].FigureCanvasAgg = _FakeCanvas
        mods["matplotlib.pyplot"].close = lambda fig: setattr(fig, "closed", True)
        for n, m in mods.items():
            monkeypatch.setitem(sys.modules, n, m)
        one, two, three = _FakeFigure(1), _FakeFigure(2), _FakeFigure(3)
        assert np.array_equal(image_of(tmp_path, "add_figure", one), one.pixels())
        assert one.drawn and one.closed
        px = image_of(tmp_path, "add_figure", [two, three], close=False)
        assert np.array_equal(px, np.concatenate([two.pixels(), three.pixels()], 1))
        assert not two.closed
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig = plt.figure(figsize=(2, 1), dpi=20)
    px = image_of(tmp_path, "add_figure", fig)
    assert px.shape == (20, 40, 3)


# ---------------------------------------------------------------- hparams

def pb_value(v):
    return one_of(v, {2: ("number", 1, dbl), 3: ("string", 2, utf8), 4: ("bool", 0, bool)})


def hparams_content(v):
    assert plugin_of(v) == "hparams" and "tensor" not in v and "simple_value" not in v
    start = {1: ("hparams[]", 2, lambda e: one_of(e, {1: ("key", 2, utf8), 2: ("value", 2, pb_value)}))}
    info = {1: ("name", 2, utf8), 4: ("type", 0, ident),
            5: ("domain", 2, lambda l: one_of(l, {1: ("values[]", 2, pb_value)}))}
    metric = {1: ("name", 2, lambda m: one_of(m, {2: ("tag", 2, utf8)}))}
    exp = {4: ("hparam_infos[]", 2, lambda i: one_of(i, info)), 5: ("metric_infos[]", 2, lambda m: one_of(m, metric))}
    data = {1: ("version", 0, ident), 2: ("experiment", 2, lambda e: one_of(e, exp)),
            3: ("session_start_info", 2, lambda s: one_of(s, start)),
            4: ("session_end_info", 2, lambda s: one_of(s, {1: ("status", 0, ident)}))}
    return one_of(v["metadata"]["plugin_data"]["content"], data)


def test_add_hparams(tmp_path):
    with SummaryWriter(tmp_path) as w:
        w.add_hparams({"lr": 0.01, "layers": 3, "opt": "adam", "bn": True, "wd": chutney.tensor(0.5), "skip": None},
                      {"hp/acc": 0.75, "hp/loss": chutney.tensor([0.25])},
                      hparam_domain_discrete={"opt": ["adam", "sgd"], "layers": [2, 3]}, run_name="trial1")
        with pytest.raises(TypeError):
            w.add_hparams({"a": 1}, [("m", 1)])
        with pytest.raises(TypeError):
            w.add_hparams({"a": 1}, {"m": 1}, hparam_domain_discrete={"a": ["x"]})
        with pytest.raises(ValueError):
            w.add_hparams({"a": [1, 2]}, {"m": 1}, run_name="bad")
    evs = values(read_run(tmp_path / "trial1"))
    tags = [v["tag"] for _, _, v in evs]
    assert tags == ["_hparams_/experiment", "_hparams_/session_start_info", "_hparams_/session_end_info",
                    "hp/acc", "hp/loss"]
    exp = hparams_content(evs[0][2])["experiment"]
    infos = {i["name"]: i for i in exp["hparam_infos"]}
    assert {k: i["type"] for k, i in infos.items()} == {"lr": 3, "layers": 3, "opt": 1, "bn": 2, "wd": 3}
    assert infos["opt"]["domain"] == {"values": [{"string": "adam"}, {"string": "sgd"}]}
    assert infos["layers"]["domain"] == {"values": [{"number": 2.0}, {"number": 3.0}]}
    assert [m["name"]["tag"] for m in exp["metric_infos"]] == ["hp/acc", "hp/loss"]
    start = hparams_content(evs[1][2])["session_start_info"]
    assert {e["key"]: e["value"] for e in start["hparams"]} == {
        "lr": {"number": 0.01}, "layers": {"number": 3.0}, "opt": {"string": "adam"}, "bn": {"bool": True},
        "wd": {"number": 0.5}}
    assert hparams_content(evs[2][2]) == {"session_end_info": {"status": 1}}
    assert [v["simple_value"] for _, _, v in evs[3:]] == [0.75, 0.25]


# ---------------------------------------------------------------- lifetime

def test_buffering_max_queue_flush_and_close(tmp_path):
    w = SummaryWriter(tmp_path, max_queue=3, flush_secs=1000)
    (path,) = event_files(tmp_path)
    w.add_scalar("a", 1.0, 1)
    w.add_scalar("a", 2.0, 2)
    assert len(events_in(path)) == 1  # held in memory
    w.add_scalar("a", 3.0, 3)
    assert len(events_in(path)) == 4  # the third forced a write
    w.add_text("t", "x", 4)
    assert len(events_in(path)) == 4
    w.flush()
    assert len(events_in(path)) == 5
    w.add_scalar("a", 5.0, 5)
    w.close()
    assert len(events_in(path)) == 6
    w.close()  # twice is harmless
    # as PyTorch: writing after close() opens a new file in the same run
    w.add_scalar("a", 6.0, 6)
    w.flush()
    files = event_files(tmp_path)
    assert len(files) == 2 and [e.get("step") for e in events_in(files[1])] == [None, 6]
    w.close()


def test_flush_secs_timer(tmp_path):
    w = SummaryWriter(tmp_path, max_queue=1000, flush_secs=0.2)
    (path,) = event_files(tmp_path)
    w.add_scalar("a", 1.0, 1)
    deadline = time.time() + 5
    while len(events_in(path)) < 2 and time.time() < deadline:
        time.sleep(0.05)
    assert len(events_in(path)) == 2  # written by the timer, no flush() call
    w.close()


def test_context_manager_and_purge_step(tmp_path):
    with SummaryWriter(tmp_path, purge_step=100) as w:
        w.add_scalar("a", 1.0, 100)
        w.add_scalars("m", {"x": 2.0}, 100)
    for d in (tmp_path, tmp_path / "m_x"):
        evs = read_run(d)
        assert evs[1]["file_version"] == "brain.Event:2" and evs[1]["step"] == 100
        assert evs[2]["session_log"] == {"status": 1} and evs[2]["step"] == 100
        assert len(evs) == 4 and evs[3]["summary"]["value"][0]["simple_value"] in (1.0, 2.0)
    # a reopened writer does not purge again
    w.add_scalar("a", 1.0, 101)
    w.close()
    later = events_in(event_files(tmp_path)[1])
    assert [("session_log" in e, e.get("step")) for e in later] == [(False, None), (False, 101)]


def test_unsupported_methods_say_what_to_use(tmp_path):
    with SummaryWriter(tmp_path) as w:
        with pytest.raises(NotImplementedError, match="onnx"):
            w.add_graph(chutney.nn.Linear(2, 2), chutney.randn(1, 2))
        with pytest.raises(NotImplementedError, match="projector"):
            w.add_embedding(chutney.randn(5, 3))


def test_torch_spelling():
    import chutney as torch
    from chutney.utils.tensorboard import SummaryWriter as SW
    assert torch.utils.tensorboard.SummaryWriter is SW
