"""Small ONNX models for tests/test_onnx.c, written during the test run with
Debian's python3-onnx (onnx.helper): external data (good, escaping the
directory, too short), an unsupported op and attribute, a dynamic batch with
the Shape/Gather/Concat/Reshape chain exporters emit, and a shape given as a
graph input. Usage: make_models.py OUT_DIR. Without python3-onnx it writes
OUT_DIR/SKIP and exits 0 (the C test then skips)."""
import os
import sys

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError:
    open(os.path.join(out, "SKIP"), "w").write("python3-onnx is not installed\n")
    sys.exit(0)

# A SKIP left by a run before python3-onnx was installed would skip the test
# for good in this build folder.
if os.path.exists(os.path.join(out, "SKIP")):
    os.remove(os.path.join(out, "SKIP"))

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def save(name, nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    with open(os.path.join(out, name + ".onnx"), "wb") as f:
        f.write(m.SerializeToString())


def external(name, location, length=None):
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", "8"), ("length", str(length or 24))):
        e = w.external_data.add()
        e.key, e.value = k, v
    save(name, [helper.make_node("Add", ["x", "w"], ["y"])],
         [helper.make_tensor_value_info("x", F, [2, 3])],
         [helper.make_tensor_value_info("y", F, [2, 3])], [w])


# 8 bytes of padding, then w's 24 bytes.
with open(os.path.join(out, "weights.bin"), "wb") as f:
    f.write(b"\0" * 8 + np.arange(6, dtype=np.float32).tobytes())
external("ext_ok", "weights.bin")
external("ext_escape", "../weights.bin")
external("ext_short", "weights.bin", length=48)

x23 = [helper.make_tensor_value_info("x", F, [2, 3])]
y23 = [helper.make_tensor_value_info("y", F, [2, 3])]
save("unsup_op", [helper.make_node("Det", ["x"], ["y"])], x23, y23)
save("unsup_attr", [helper.make_node("Relu", ["x"], ["y"], foo=1)], x23, y23)

# y = Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [3, 1])) * 2, with
# x [N, 3]: folds to one reshape once N is known.
two = numpy_helper.from_array(np.array(2, dtype=np.float32), "two")
tail = numpy_helper.from_array(np.array([3, 1], dtype=np.int64), "tail")
zero = numpy_helper.from_array(np.array(0, dtype=np.int64), "zero")
axes0 = numpy_helper.from_array(np.array([0], dtype=np.int64), "axes0")
save("dyn", [
    helper.make_node("Shape", ["x"], ["s"]),
    helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
    helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"]),
    helper.make_node("Concat", ["n1", "tail"], ["shp"], axis=0),
    helper.make_node("Reshape", ["x", "shp"], ["r"]),
    helper.make_node("Mul", ["r", "two"], ["y"]),
], [helper.make_tensor_value_info("x", F, ["N", 3])],
    [helper.make_tensor_value_info("y", F, ["N", 3, 1])], [two, tail, zero, axes0])

save("shape_input", [helper.make_node("Reshape", ["x", "shape"], ["y"])],
     [helper.make_tensor_value_info("x", F, [2, 3]), helper.make_tensor_value_info("shape", I64, [2])],
     [helper.make_tensor_value_info("y", F, [3, 2])])

# For tests/test_onnx_train.c, in f64 (gradients against finite
# differences): a CNN as torch exports one in training mode (Conv,
# BatchNormalization with training_mode 1 and its running-statistics
# outputs, Relu, MaxPool, Flatten, Dropout with constant ratio and
# training_mode inputs, Gemm), fc.bias read by two nodes.
D = TensorProto.DOUBLE
rng = np.random.default_rng(11)


def init(name, *shape, lo=-0.5, hi=0.5):
    return numpy_helper.from_array(rng.uniform(lo, hi, shape).astype(np.float64), name)


ratio = numpy_helper.from_array(np.array(0.5, dtype=np.float64), "ratio")
train_flag = numpy_helper.from_array(np.array(True), "train_flag")
save("train_cnn", [
    helper.make_node("Conv", ["x", "conv.weight", "conv.bias"], ["c"], kernel_shape=[3, 3],
                     pads=[1, 1, 1, 1]),
    helper.make_node("BatchNormalization", ["c", "bn.weight", "bn.bias", "bn.running_mean",
                                            "bn.running_var"], ["b", "b_mean", "b_var"],
                     epsilon=1e-5, momentum=0.9, training_mode=1),
    helper.make_node("Relu", ["b"], ["r"]),
    helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
    helper.make_node("Flatten", ["p"], ["f"], axis=1),
    helper.make_node("Dropout", ["f", "ratio", "train_flag"], ["d", "mask"]),
    helper.make_node("Gemm", ["d", "fc.weight", "fc.bias"], ["g"], transB=1),
    helper.make_node("Add", ["g", "fc.bias"], ["y"]),
], [helper.make_tensor_value_info("x", D, ["N", 2, 4, 4])],
    [helper.make_tensor_value_info("y", D, ["N", 2])],
    [init("conv.weight", 3, 2, 3, 3), init("conv.bias", 3), init("bn.weight", 3, lo=0.5, hi=1.5),
     init("bn.bias", 3), init("bn.running_mean", 3), init("bn.running_var", 3, lo=0.5, hi=2),
     init("fc.weight", 2, 12), init("fc.bias", 2), ratio, train_flag], opset=15)

# C * 0.5 computed from a weight alone: a traced program would keep it.
save("train_frozen", [helper.make_node("Gemm", ["x", "w", "bias"], ["y"], name="head", transB=1,
                                       beta=0.5)],
     [helper.make_tensor_value_info("x", F, ["N", 3])],
     [helper.make_tensor_value_info("y", F, ["N", 2])],
     [numpy_helper.from_array(np.ones((2, 3), np.float32), "w"),
      numpy_helper.from_array(np.ones(2, np.float32), "bias")])

# DynamicQuantizeLinear of all zeros: an empty range takes the scale 1/255.
save("dql", [helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "scale", "zp"])],
     [helper.make_tensor_value_info("x", F, [4])],
     [helper.make_tensor_value_info("y", TensorProto.UINT8, [4]),
      helper.make_tensor_value_info("scale", F, []),
      helper.make_tensor_value_info("zp", TensorProto.UINT8, [])], opset=11)

# Gelu (opset 20, newer than the python3-onnx that writes it: the node is
# written as any other), both forms.
save("gelu", [helper.make_node("Gelu", ["x"], ["y"]),
              helper.make_node("Gelu", ["x"], ["z"], approximate="tanh")],
     [helper.make_tensor_value_info("x", F, [6])],
     [helper.make_tensor_value_info("y", F, [6]), helper.make_tensor_value_info("z", F, [6])],
     opset=20)

# What opsets 18 to 21 changed, in one opset 21 model: ReduceMean's axes as
# an input, Split's num_outputs (uneven: 3 and 2), Pad's axes, Mish,
# Resize's axes and keep_aspect_ratio_policy, QuantizeLinear's
# output_dtype with no zero point, Pad's wrap mode (19).
i64 = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)
f32 = lambda name, v: numpy_helper.from_array(np.array(v, np.float32), name)
save("op21", [
    helper.make_node("ReduceMean", ["x", "ax1"], ["mean"], keepdims=0),
    helper.make_node("Split", ["x"], ["s0", "s1"], axis=1, num_outputs=2),
    helper.make_node("Pad", ["x", "pads", "", "ax1"], ["pad"]),
    helper.make_node("Mish", ["x"], ["mish"]),
    helper.make_node("Resize", ["x", "", "sc2"], ["up"], axes=[1]),
    helper.make_node("Reshape", ["x8", "shape4"], ["x4"]),
    helper.make_node("Resize", ["x4", "", "", "sizes"], ["fit"], axes=[2, 3],
                     keep_aspect_ratio_policy="not_larger"),
    helper.make_node("QuantizeLinear", ["x", "half"], ["q"], output_dtype=TensorProto.INT8),
    helper.make_node("Pad", ["x", "wrap_pads"], ["wrap"], mode="wrap"),
    helper.make_node("Resize", ["x4", "", "", "sizes2"], ["fit2"], axes=[2, 3],
                     keep_aspect_ratio_policy="not_smaller"),
], [helper.make_tensor_value_info("x", F, [2, 5]), helper.make_tensor_value_info("x8", F, [8])],
    [helper.make_tensor_value_info(n, F, None) for n in ("mean", "s0", "s1", "pad", "mish", "up", "fit")]
    + [helper.make_tensor_value_info("q", TensorProto.INT8, None), helper.make_tensor_value_info("wrap", F, None),
       helper.make_tensor_value_info("fit2", F, None)],
    [i64("ax1", [1]), i64("pads", [1, 2]), f32("sc2", [2.0]), i64("shape4", [1, 1, 2, 4]),
     i64("sizes", [3, 3]), f32("half", 0.5), i64("wrap_pads", [1, 2, 0, 1]), i64("sizes2", [2, 5])],
    opset=21)

# GroupNormalization: scale and bias one per group at opset 18, one per
# channel from 21 (2 groups of 2 channels, 3 positions).
for opset, k in ((18, 2), (21, 4)):
    save("group_norm%d" % opset,
         [helper.make_node("GroupNormalization", ["x", "scale", "bias"], ["y"], num_groups=2,
                           epsilon=1e-3)],
         [helper.make_tensor_value_info("x", F, [2, 4, 3])], [helper.make_tensor_value_info("y", F, None)],
         [f32("scale", [1.5, -0.5, 2.0, 0.25][:k]), f32("bias", [0.1, 0.2, -0.3, 0.4][:k])], opset=opset)

# Opset 23: Attention (4-D with grouped-query heads and an added mask; 3-D
# split into heads, causal; 4-D with a bool mask and a scale) and
# RMSNormalization, with inputs and numpy's results saved beside the model
# (att23_*.npy): independent of Chutney's kernels.
rng = np.random.default_rng(23)


def softmax_rows(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def attend(q, k, v, mask=None, causal=False, scale=None):
    sc = (q @ np.swapaxes(k, -1, -2)) * (scale if scale else q.shape[-1] ** -0.5)
    if mask is not None:
        sc = np.where(mask, sc, -np.inf) if mask.dtype == bool else sc + mask
    if causal:
        sc = np.where(np.tril(np.ones(sc.shape[-2:], bool)), sc, -np.inf)
    return softmax_rows(sc) @ v


arr = {"qa": rng.standard_normal((2, 4, 5, 8)), "ka": rng.standard_normal((2, 2, 7, 8)),
       "va": rng.standard_normal((2, 2, 7, 6)), "ma": rng.standard_normal((5, 7)),
       "qb": rng.standard_normal((2, 5, 12)), "kb": rng.standard_normal((2, 5, 12)),
       "vb": rng.standard_normal((2, 5, 9)), "qc": rng.standard_normal((1, 2, 3, 4)),
       "kc": rng.standard_normal((1, 2, 6, 4)), "vc": rng.standard_normal((1, 2, 6, 4)),
       "xr": rng.standard_normal((3, 4, 6)), "sr": rng.standard_normal(6)}
arr = {k: v.astype(np.float32) for k, v in arr.items()}
arr["mc"] = rng.random((3, 6)) < 0.7
arr["mc"][:, 0] = True  # no row masked whole
rep = lambda t: np.repeat(t, 2, axis=1)  # kv head h serves query heads 2h, 2h + 1
heads = lambda t, h: t.reshape(t.shape[0], t.shape[1], h, -1).transpose(0, 2, 1, 3)
want = {
    "ya": attend(arr["qa"], rep(arr["ka"]), rep(arr["va"]), mask=arr["ma"]),
    "yb": attend(heads(arr["qb"], 3), heads(arr["kb"], 3), heads(arr["vb"], 3), causal=True)
    .transpose(0, 2, 1, 3).reshape(2, 5, 9),
    "yc": attend(arr["qc"], arr["kc"], arr["vc"], mask=arr["mc"], scale=0.3),
    "yr": arr["xr"] / np.sqrt((arr["xr"] ** 2).mean(-1, keepdims=True) + 1e-3) * arr["sr"],
}
names = list(arr)
save("att23", [
    helper.make_node("Attention", ["qa", "ka", "va", "ma"], ["ya"]),
    helper.make_node("Attention", ["qb", "kb", "vb"], ["yb"], q_num_heads=3, kv_num_heads=3, is_causal=1),
    helper.make_node("Attention", ["qc", "kc", "vc", "mc"], ["yc"], scale=0.3),
    helper.make_node("RMSNormalization", ["xr", "sr"], ["yr"], epsilon=1e-3),
], [helper.make_tensor_value_info(n, TensorProto.BOOL if n == "mc" else F, list(arr[n].shape))
    for n in names],
    [helper.make_tensor_value_info(n, F, None) for n in want], opset=23)
for n, v in list(arr.items()) + list(want.items()):
    np.save(os.path.join(out, "att23_%s.npy" % n), v.astype(np.float32) if v.dtype != bool else v)

# Data-dependent shapes (the model runs eagerly), with inputs and numpy's
# results saved beside the model (dd_*.npy), computed by plain loops here:
# NonZero feeding GatherND, an If on a computed condition, TopK with a
# computed k (few of many: the bounded heap), and NonMaxSuppression on
# boxes of three classes shifted apart (torchvision's batched NMS), some
# flipped, some of no area, checked against the greedy loop as ONNX
# defines it.
rng = np.random.default_rng(7)


def nms_ref(boxes, scores, max_out, iou_th, score_th):
    def corners(b):
        return min(b[1], b[3]), min(b[0], b[2]), max(b[1], b[3]), max(b[0], b[2])

    def iou(a, b):
        a, b = corners(a), corners(b)
        aa = np.float32((a[2] - a[0]) * (a[3] - a[1]))
        ab = np.float32((b[2] - b[0]) * (b[3] - b[1]))
        if not (aa > 0 and ab > 0):
            return 0.0
        w, h = np.float32(min(a[2], b[2]) - max(a[0], b[0])), np.float32(min(a[3], b[3]) - max(a[1], b[1]))
        if not (w > 0 and h > 0):
            return 0.0
        inter = np.float32(w * h)
        return np.float32(inter / np.float32(aa + ab - inter))

    sel = []
    for b in range(boxes.shape[0]):
        for c in range(scores.shape[1]):
            s = scores[b, c]
            cand = [i for i in range(len(s)) if s[i] > score_th]
            cand.sort(key=lambda i: (-s[i], i))
            kept = []
            for i in cand:
                if len(kept) >= max_out:
                    break
                if all(iou(boxes[b, k], boxes[b, i]) <= iou_th for k in kept):
                    kept.append(i)
                    sel.append([b, c, i])
    return np.array(sel, dtype=np.int64).reshape(-1, 3)


nb, nx = 2, 400
cls = rng.integers(0, 3, (nb, nx))
y1 = rng.uniform(0, 90, (nb, nx)) + 100 * cls
x1 = rng.uniform(0, 90, (nb, nx)) + 100 * cls
hh, ww = rng.uniform(0, 40, (nb, nx)), rng.uniform(0, 40, (nb, nx))
ww[:, :10] = 0  # boxes of no area suppress nothing
boxes = np.stack([y1, x1, y1 + hh, x1 + ww], -1).astype(np.float32)
boxes[:, 10:30] = boxes[:, 10:30][..., [2, 3, 0, 1]]  # the other diagonal
scores = rng.random((nb, 2, nx)).astype(np.float32)
scores[:, :, 40:60] = 0.5  # ties: the lower index first
dd = {"x": rng.integers(-2, 3, (4, 5)).astype(np.float32),
      "t": np.floor(rng.uniform(0, 20, (3, 500))).astype(np.float32), "k": np.array([7], np.int64),
      "boxes": boxes, "scores": scores, "max_out": np.array([228], np.int64),
      "iou": np.array([0.3], np.float32), "sth": np.array([0.2], np.float32)}
nz = np.array(np.nonzero(dd["x"] > 0), dtype=np.int64)
order = np.argsort(-dd["t"], axis=1, kind="stable")[:, :7]
dd_want = {"nz": nz, "picked": dd["x"][tuple(nz)],
           "branch": dd["x"] * 2 if dd["x"].sum() > 0 else -dd["x"],
           "tv": np.take_along_axis(dd["t"], order, 1), "ti": order.astype(np.int64),
           "sel": nms_ref(boxes, scores, 228, np.float32(0.3), np.float32(0.2))}
zero_f = numpy_helper.from_array(np.array(0, dtype=np.float32), "zero_f")
two_f = numpy_helper.from_array(np.array(2, dtype=np.float32), "two_f")
perm = [1, 0]
save("dd", [
    helper.make_node("Greater", ["x", "zero_f"], ["pos"]),
    helper.make_node("NonZero", ["pos"], ["nz"]),
    helper.make_node("Transpose", ["nz"], ["nzt"], perm=perm),
    helper.make_node("GatherND", ["x", "nzt"], ["picked"]),
    helper.make_node("ReduceSum", ["x"], ["sum"], keepdims=0),
    helper.make_node("Greater", ["sum", "zero_f"], ["cond"]),
    helper.make_node("If", ["cond"], ["branch"],
                     then_branch=helper.make_graph([helper.make_node("Mul", ["x", "two_f"], ["dbl"])],
                                                   "then", [], [helper.make_tensor_value_info("dbl", F, None)]),
                     else_branch=helper.make_graph([helper.make_node("Neg", ["x"], ["neg"])],
                                                   "else", [], [helper.make_tensor_value_info("neg", F, None)])),
    helper.make_node("TopK", ["t", "k"], ["tv", "ti"], axis=1),
    helper.make_node("NonMaxSuppression", ["boxes", "scores", "max_out", "iou", "sth"], ["sel"]),
], [helper.make_tensor_value_info(n, I64 if v.dtype == np.int64 else F, list(v.shape)) for n, v in dd.items()],
    [helper.make_tensor_value_info(n, I64 if v.dtype == np.int64 else F, None) for n, v in dd_want.items()],
    [zero_f, two_f], opset=13)
for n, v in list(dd.items()) + list(dd_want.items()):
    np.save(os.path.join(out, "dd_%s.npy" % n), v)

# Opset 20: AffineGrid (align_corners 0 and 1, an axis of one pixel) and
# GridSample's opset-20 mode name "linear", against numpy (affine20_*.npy).


def affine_ref(theta, n, h, w, align):
    def axis(k):
        if align:
            return np.linspace(-1, 1, k) if k > 1 else np.array([-1.0])
        return (2 * np.arange(k) + 1) / k - 1
    ys, xs = np.meshgrid(axis(h), axis(w), indexing="ij")
    base = np.stack([xs, ys, np.ones_like(xs)], -1).reshape(1, h * w, 3)
    return (base @ theta.transpose(0, 2, 1)).reshape(n, h, w, 2)


def grid_sample_ref(x, g):
    """Bilinear, zeros outside, align_corners 0."""
    n, c, h, w = x.shape
    out = np.zeros((n, c) + g.shape[1:3])
    for b in range(n):
        for i in range(g.shape[1]):
            for j in range(g.shape[2]):
                px = ((g[b, i, j, 0] + 1) * w - 1) / 2
                py = ((g[b, i, j, 1] + 1) * h - 1) / 2
                x0, y0 = int(np.floor(px)), int(np.floor(py))
                for yy, wy in ((y0, 1 - (py - y0)), (y0 + 1, py - y0)):
                    for xx, wx in ((x0, 1 - (px - x0)), (x0 + 1, px - x0)):
                        if 0 <= yy < h and 0 <= xx < w:
                            out[b, :, i, j] += wx * wy * x[b, :, yy, xx]
    return out


rng = np.random.default_rng(20)
theta = (np.array([[1, 0, 0], [0, 1, 0]]) + 0.3 * rng.standard_normal((2, 2, 3))).astype(np.float32)
xg = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
aff = {"theta": theta, "xg": xg}
aff_want = {"g0": affine_ref(theta.astype(np.float64), 2, 4, 5, False),
            "g1": affine_ref(theta.astype(np.float64), 2, 1, 5, True)}
aff_want["ys"] = grid_sample_ref(xg.astype(np.float64), aff_want["g0"])
s0 = numpy_helper.from_array(np.array([2, 3, 4, 5], dtype=np.int64), "s0")
s1 = numpy_helper.from_array(np.array([2, 3, 1, 5], dtype=np.int64), "s1")
save("affine20", [
    helper.make_node("AffineGrid", ["theta", "s0"], ["g0"], align_corners=0),
    helper.make_node("AffineGrid", ["theta", "s1"], ["g1"], align_corners=1),
    helper.make_node("GridSample", ["xg", "g0"], ["ys"], mode="linear"),
], [helper.make_tensor_value_info(k, F, list(v.shape)) for k, v in aff.items()],
    [helper.make_tensor_value_info(k, F, None) for k in aff_want], [s0, s1], opset=20)
for k, v in list(aff.items()) + list(aff_want.items()):
    np.save(os.path.join(out, "affine20_%s.npy" % k), v.astype(np.float32))

# What a file may make a load or an eager run do: a Loop of 2^40
# iterations (refused after 4096 while loading) and, in a model that runs
# eagerly, a ConstantOfShape of 2^40 elements (refused by the per-node
# element budget of a run).
big = numpy_helper.from_array(np.array([1 << 20, 1 << 20], np.int64), "big")
save("eager_huge", [helper.make_node("NonZero", ["x"], ["nz"]),
                    helper.make_node("ConstantOfShape", ["big"], ["y"])],
     [helper.make_tensor_value_info("x", F, [3])],
     [helper.make_tensor_value_info("y", F, None), helper.make_tensor_value_info("nz", I64, None)], [big])
many = numpy_helper.from_array(np.array(1 << 40, np.int64), "many")
body = helper.make_graph([helper.make_node("Identity", ["c_in"], ["c_out"]),
                          helper.make_node("Add", ["v_in", "v_in"], ["v_out"])], "body",
                         [helper.make_tensor_value_info("i", I64, []),
                          helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
                          helper.make_tensor_value_info("v_in", F, None)],
                         [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
                          helper.make_tensor_value_info("v_out", F, None)])
save("loop_long", [helper.make_node("Loop", ["many", "", "x"], ["v"], body=body)],
     [helper.make_tensor_value_info("x", F, [3])], [helper.make_tensor_value_info("v", F, None)], [many])

# Scan (opset 11): running sums of x [2, 5, 3] along axis 1 read backwards,
# the sums stacked on output axis 1 in reverse, and the last state; a
# second scan input read forwards along axis 0 of y [5, 3] multiplies in.
sx = rng.standard_normal((2, 5, 3)).astype(np.float32)
sy = rng.standard_normal((5, 3)).astype(np.float32)
s0 = np.zeros((2, 3), np.float32)
state, outs = s0.astype(np.float64), []
for t in range(5):
    state = state + sx[:, 4 - t, :] * sy[t]
    outs.append(state.copy())
scan_want = {"final": state, "sums": np.stack(outs[::-1], 1)}
sbody = helper.make_graph([helper.make_node("Mul", ["x_t", "y_t"], ["p"]),
                           helper.make_node("Add", ["s_in", "p"], ["s_out"]),
                           helper.make_node("Identity", ["s_out"], ["scan_out"])], "sbody",
                          [helper.make_tensor_value_info("s_in", F, [2, 3]),
                           helper.make_tensor_value_info("x_t", F, [2, 3]),
                           helper.make_tensor_value_info("y_t", F, [3])],
                          [helper.make_tensor_value_info("s_out", F, [2, 3]),
                           helper.make_tensor_value_info("scan_out", F, [2, 3])])
save("scan11", [helper.make_node("Scan", ["s0", "sx", "sy"], ["final", "sums"], body=sbody, num_scan_inputs=2,
                                 scan_input_axes=[1, 0], scan_input_directions=[1, 0],
                                 scan_output_axes=[1], scan_output_directions=[1])],
     [helper.make_tensor_value_info("s0", F, [2, 3]), helper.make_tensor_value_info("sx", F, [2, 5, 3]),
      helper.make_tensor_value_info("sy", F, [5, 3])],
     [helper.make_tensor_value_info(k, F, None) for k in scan_want], opset=11)
for k, v in (("s0", s0), ("sx", sx), ("sy", sy)) + tuple(scan_want.items()):
    np.save(os.path.join(out, "scan11_%s.npy" % k), v.astype(np.float32))

# ScatterND with constant indices, as exporters write slice assignments:
# a run of rows replaced, a run added to (2-d indices), distinct rows out
# of order replaced and added to (one negative), a repeated row added to
# twice, and every row replaced; against numpy's loops.
sd_x = rng.standard_normal((6, 3, 2)).astype(np.float32)
sd_cases = [("none", [[1], [2], [3]]), ("add", [[[2, 0]], [[2, 1]]]), ("none", [[4], [0], [5]]),
            ("add", [[-1], [1]]), ("add", [[2], [2], [0]]), ("none", [[0], [1], [2], [3], [4], [5]])]
sd_nodes, sd_inits, sd_in, sd_want = [], [], {"sdx": sd_x}, {}
for i, (red, ix) in enumerate(sd_cases):
    ix = np.array(ix, np.int64)
    ushape = ix.shape[:-1] + sd_x.shape[ix.shape[-1]:]
    u = rng.standard_normal(ushape).astype(np.float32)
    y = sd_x.astype(np.float64).copy()
    for pos in np.ndindex(*ix.shape[:-1]):
        at = tuple(int(v) for v in ix[pos])
        y[at] = y[at] + u[pos] if red == "add" else u[pos]
    sd_inits.append(numpy_helper.from_array(ix, "sdi%d" % i))
    sd_in["sdu%d" % i] = u
    sd_want["sdy%d" % i] = y
    sd_nodes.append(helper.make_node("ScatterND", ["sdx", "sdi%d" % i, "sdu%d" % i], ["sdy%d" % i], reduction=red))
save("scatter_const", sd_nodes, [helper.make_tensor_value_info(k, F, list(v.shape)) for k, v in sd_in.items()],
     [helper.make_tensor_value_info(k, F, None) for k in sd_want], sd_inits, opset=16)
for k, v in list(sd_in.items()) + list(sd_want.items()):
    np.save(os.path.join(out, "scatter_const_%s.npy" % k), v.astype(np.float32))
# a coordinate past its axis (5 on an axis of 4) whose flat row is in range
save("scatter_bad", [helper.make_node("ScatterND", ["sbx", "sbi", "sbu"], ["sby"])],
     [helper.make_tensor_value_info("sbx", F, [3, 4]), helper.make_tensor_value_info("sbu", F, [1])],
     [helper.make_tensor_value_info("sby", F, None)],
     [numpy_helper.from_array(np.array([[0, 5]], np.int64), "sbi")], opset=16)

# ONNX Runtime's com.microsoft quantized ops (the QOperator format of its
# quantizer), against numpy's dequantize -> float op -> quantize (round
# half to even, saturate), and MaxPool on uint8.
def q8(v, scale, zp, dt):
    lo, hi = (0, 255) if dt == np.uint8 else (-128, 127)
    return np.clip(np.round(v / scale) + zp, lo, hi).astype(dt)


def dq(x, scale, zp):
    return (x.astype(np.float64) - zp) * scale


U8, I8 = TensorProto.UINT8, TensorProto.INT8
qa = rng.integers(0, 256, (2, 3, 4, 5)).astype(np.uint8)
qb = rng.integers(0, 256, (2, 3, 4, 5)).astype(np.uint8)
qc = rng.integers(-128, 128, (2, 3, 4, 5)).astype(np.int8)
sc = {"sa": 0.02, "sb": 0.03, "sy": 0.05, "sy2": 0.004, "sc": 0.01}
zp = {"za": 120, "zb": 7, "zy": 128, "zy2": 100}
ms_inits = [numpy_helper.from_array(np.array(v, np.float32), k) for k, v in sc.items()]
ms_inits += [numpy_helper.from_array(np.array(v, np.uint8), k) for k, v in zp.items()]
ms_inits += [numpy_helper.from_array(np.array(-3, np.int8), "zc"),
             numpy_helper.from_array(np.array(-10, np.int8), "zi"),
             numpy_helper.from_array(np.array(0, np.uint8), "z0")]
A, B = dq(qa, sc["sa"], zp["za"]), dq(qb, sc["sb"], zp["zb"])
C = dq(qc, sc["sc"], -3)
ms_want = {
    "add": q8(A + B, sc["sy"], zp["zy"], np.uint8),
    "mul": q8(A * B, sc["sy"], zp["zy"], np.uint8),
    "cat": q8(np.concatenate([A, B], 1), sc["sy"], zp["zy"], np.uint8),
    "gap": q8(A.mean((2, 3), keepdims=True), sc["sy2"], zp["zy2"], np.uint8),
    "gapl": q8(A.mean((1, 2), keepdims=True), sc["sy2"], zp["zy2"], np.uint8),
    "sig": q8(1 / (1 + np.exp(-C)), sc["sy2"], -10, np.int8),
    "lrelu": q8(np.where(C > 0, C, 0.1 * C), sc["sy"], -10, np.int8),
    "sig0": q8(1 / (1 + np.exp(-dq(qa, sc["sa"], 0))), sc["sy2"], 0, np.uint8),
    "msdq": A,
    "msq": q8(A, sc["sy"], zp["zy"], np.uint8),
    "mpool": np.maximum.reduce([qc[:, :, i::2, j::2][:, :, :2, :2] for i in (0, 1) for j in (0, 1)]),
}
e = np.exp(A - A.max(1, keepdims=True))  # opset 13's Softmax: axis 1 alone
ms_want["smax"] = q8(e / e.sum(1, keepdims=True), sc["sy2"], 0, np.uint8)
e = np.exp(A - A.max(3, keepdims=True))  # no axis: -1, whatever the opset
ms_want["smax11"] = q8(e / e.sum(3, keepdims=True), sc["sy2"], 0, np.uint8)
ap = np.pad(A, ((0, 0), (0, 0), (1, 1), (1, 1)))
cnt = np.pad(np.ones_like(A), ((0, 0), (0, 0), (1, 1), (1, 1)))
# QLinearAveragePool: kernel 2x2, stride 2, pads 1, padding not counted
win = lambda t: np.stack([t[:, :, i::2, j::2][:, :, :3, :3] for i in (0, 1) for j in (0, 1)]).sum(0)
ms_want["apool"] = q8(win(ap) / win(cnt), sc["sy"], zp["zy"], np.uint8)
# QGemm: per-tensor B, with y quantized; per-column B (transB), float out
ga = rng.integers(0, 256, (3, 4)).astype(np.uint8)
gb = rng.integers(-128, 128, (4, 5)).astype(np.int8)
gbt = rng.integers(-128, 128, (5, 4)).astype(np.int8)
gbias = rng.integers(-500, 500, (5,)).astype(np.int32)
gcs = (rng.random(5) * 0.01 + 0.001).astype(np.float32)
ms_inits += [numpy_helper.from_array(gb, "gb"), numpy_helper.from_array(gbt, "gbt"),
             numpy_helper.from_array(gbias, "gbias"), numpy_helper.from_array(gcs, "gcs"),
             numpy_helper.from_array(np.array(0, np.int8), "gzb"),
             numpy_helper.from_array(np.zeros(5, np.int8), "gzbt")]
GA = dq(ga, sc["sa"], zp["za"])
y1 = 0.5 * (GA @ dq(gb, sc["sb"], 0) + gbias * sc["sa"] * sc["sb"])  # alpha scales the bias too
ms_want["gemm"] = q8(y1, sc["sy"], zp["zy"], np.uint8)
ms_want["gemmf"] = GA @ (gbt.astype(np.float64) * gcs[:, None]).T + gbias * sc["sa"] * gcs.astype(np.float64)
M = "com.microsoft"
ms_nodes = [
    helper.make_node("QLinearAdd", ["qa", "sa", "za", "qb", "sb", "zb", "sy", "zy"], ["add"], domain=M),
    helper.make_node("QLinearMul", ["qa", "sa", "za", "qb", "sb", "zb", "sy", "zy"], ["mul"], domain=M),
    helper.make_node("QLinearConcat", ["sy", "zy", "qa", "sa", "za", "qb", "sb", "zb"], ["cat"], axis=1,
                     domain=M),
    helper.make_node("QLinearGlobalAveragePool", ["qa", "sa", "za", "sy2", "zy2"], ["gap"], domain=M),
    helper.make_node("QLinearGlobalAveragePool", ["qa", "sa", "za", "sy2", "zy2"], ["gapl"], channels_last=1,
                     domain=M),
    helper.make_node("QLinearSigmoid", ["qc", "sc", "zc", "sy2", "zi"], ["sig"], domain=M),
    helper.make_node("QLinearLeakyRelu", ["qc", "sc", "zc", "sy", "zi"], ["lrelu"], alpha=0.1, domain=M),
    helper.make_node("QLinearSigmoid", ["qa", "sa", "", "sy2", "z0"], ["sig0"], domain=M),
    helper.make_node("DequantizeLinear", ["qa", "sa", "za"], ["msdq"], domain=M),
    helper.make_node("QuantizeLinear", ["msdq", "sy", "zy"], ["msq"], domain=M),
    helper.make_node("QLinearSoftmax", ["qa", "sa", "za", "sy2", "z0"], ["smax11"], opset=11, domain=M),
    helper.make_node("QLinearSoftmax", ["qa", "sa", "za", "sy2", "z0"], ["smax"], axis=1, opset=13, domain=M),
    helper.make_node("QLinearAveragePool", ["qa", "sa", "za", "sy", "zy"], ["apool"], kernel_shape=[2, 2],
                     strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=0, domain=M),
    helper.make_node("QGemm", ["ga", "sa", "za", "gb", "sb", "gzb", "gbias", "sy", "zy"], ["gemm"], alpha=0.5,
                     domain=M),
    helper.make_node("QGemm", ["ga", "sa", "za", "gbt", "gcs", "gzbt", "gbias"], ["gemmf"], transB=1, domain=M),
    helper.make_node("MaxPool", ["qc"], ["mpool"], kernel_shape=[2, 2], strides=[2, 2]),
]
ms_in = {"qa": qa, "qb": qb, "qc": qc, "ga": ga}
tp = {np.uint8: U8, np.int8: I8}
g = helper.make_graph(ms_nodes, "ms_quant",
                      [helper.make_tensor_value_info(k, tp[v.dtype.type], list(v.shape)) for k, v in ms_in.items()],
                      [helper.make_tensor_value_info(k, F if v.dtype.kind == "f" else tp[v.dtype.type], None)
                       for k, v in ms_want.items()], ms_inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(M, 1)])
m.ir_version = 8
with open(os.path.join(out, "ms_quant.onnx"), "wb") as f:
    f.write(m.SerializeToString())
for k, v in list(ms_in.items()) + list(ms_want.items()):
    np.save(os.path.join(out, "ms_quant_%s.npy" % k), v.astype(np.float32) if v.dtype.kind == "f" else v)

# Control flow around values that run eagerly (numpy's results are simple
# enough to state): an If in a Loop's body (its branch's names defined
# again each iteration), an If whose branch starts with a static node and
# then needs values (the prefix program must not take the branch's
# half-made values), and a branch whose output is an outer value no later
# node reads (it must live until the If).
ctrue = numpy_helper.from_array(np.array(True), "ctrue")
three = numpy_helper.from_array(np.array(3, np.int64), "three")
vi = helper.make_tensor_value_info
ibody = helper.make_graph([
    helper.make_node("Identity", ["ctrue"], ["c_out"]),
    helper.make_node("If", ["ctrue"], ["v_out"],
                     then_branch=helper.make_graph([helper.make_node("Neg", ["v_in"], ["tb"])], "t", [],
                                                   [vi("tb", F, [2])]),
                     else_branch=helper.make_graph([helper.make_node("Abs", ["v_in"], ["eb"])], "e", [],
                                                   [vi("eb", F, [2])]))],
    "ibody", [vi("it", I64, []), vi("c_in", TensorProto.BOOL, []), vi("v_in", F, [2])],
    [vi("c_out", TensorProto.BOOL, []), vi("v_out", F, [2])])
partial = helper.make_graph([helper.make_node("Relu", ["x1"], ["t1"]), helper.make_node("NonZero", ["t1"], ["t2"])],
                            "p", [], [vi("t2", I64, None)])
partial_else = helper.make_graph([helper.make_node("NonZero", ["x1"], ["e2"])], "pe", [], [vi("e2", I64, None)])
outer = helper.make_graph([], "o", [], [vi("a", F, [3])])
save("control_eager", [
    helper.make_node("Loop", ["three", "", "v"], ["looped"], body=ibody),
    helper.make_node("Identity", ["x"], ["x1"]),
    helper.make_node("If", ["ctrue"], ["nz_pos"], then_branch=partial, else_branch=partial_else),
    helper.make_node("Relu", ["x"], ["a"]),
    helper.make_node("Neg", ["a"], ["na"]),  # a's last top-level reader, before the If returns it
    helper.make_node("If", ["ctrue"], ["a_out"], then_branch=outer, else_branch=outer),
], [vi("v", F, [2]), vi("x", F, [3])],
    [vi("looped", F, [2]), vi("nz_pos", I64, None), vi("a_out", F, [3]), vi("na", F, [3])],
    [ctrue, three], opset=13)

# GridSample on an f16 image of 300 x 300: positions past f16's exact
# integers (its flat index once went past f16's range), against numpy's
# bilinear loop in double.
img16 = rng.standard_normal((1, 1, 300, 300)).astype(np.float16)
g16 = rng.uniform(-1, 1, (1, 2, 3, 2)).astype(np.float16)
g16[0, 0, 0] = [0.995, 0.99]
# Constants, so that the load computes it eagerly, op by op in f16 (a
# program would fuse the arithmetic in f32).
save("grid16", [helper.make_node("GridSample", ["img", "g"], ["y"])], [],
     [helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)],
     [numpy_helper.from_array(img16, "img"), numpy_helper.from_array(g16, "g")], opset=16)
np.save(os.path.join(out, "grid16_y.npy"), grid_sample_ref(img16.astype(np.float64), g16.astype(np.float64)).astype(np.float32))

# Half-precision arithmetic in a static graph keeps the half dtype, as eagerly
# (the outputs' declared dtypes): y = relu(a + b) * a in f16.
save("half_ops", [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Relu", ["s"], ["r"]),
                  helper.make_node("Mul", ["r", "a"], ["y"])],
     [helper.make_tensor_value_info("a", TensorProto.FLOAT16, [5]),
      helper.make_tensor_value_info("b", TensorProto.FLOAT16, [5])],
     [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [5])])
