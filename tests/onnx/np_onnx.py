"""A small ONNX evaluator in numpy, written from the operator specs (opset
17), to check what Chutney's exporter writes against an implementation that
shares no code with Chutney's importer (Debian's onnx 1.12 has no
onnx.reference). It covers the ops the exporter emits, for the cases it
emits them (no auto_pad, no storage_order, ...): anything else is refused.

    np_onnx.py MODEL.onnx INPUT.npy OUT.npy    (one input, first output)
"""
import math
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper
from numpy.lib.stride_tricks import sliding_window_view

DTYPES = {1: np.float32, 2: np.uint8, 6: np.int32, 7: np.int64, 9: np.bool_, 10: np.float16,
          11: np.float64}


def to_bf16(x):
    """x rounded to bfloat16 (to nearest, ties to even) and kept as float32:
    numpy has no bfloat16."""
    x = np.asarray(x, np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return np.where(np.isnan(x), x, u.astype(np.uint32).view(np.float32))


def cast(x, to):
    return to_bf16(x) if to == 16 else x.astype(DTYPES[to])


def same(f):
    """An op whose result has its first input's dtype."""
    return lambda x, *r, **a: np.asarray(f(x, *r, **a)).astype(x.dtype)


def in_f64(f):
    """Computed in f64, returned in the input's dtype (naive formulas stay exact enough)."""
    return lambda x, **a: np.asarray(f(x.astype(np.float64), **a)).astype(x.dtype)


# ---- convolution and pooling (2-D, NCHW, explicit pads) ----

def pool_windows(x, k, s, pads, d, fill, ceil_mode=0):
    """[N, C, OH, OW, kh, kw] windows; ceil mode pads the end with fill."""
    extra = []
    for ax in range(2):
        span = (k[ax] - 1) * d[ax] + 1
        total = x.shape[2 + ax] + pads[ax] + pads[2 + ax]
        n = (total - span + (s[ax] - 1 if ceil_mode else 0)) // s[ax] + 1
        extra.append(max(0, (n - 1) * s[ax] + span - total))
    x = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2] + extra[0]), (pads[1], pads[3] + extra[1])),
               constant_values=fill)
    w = sliding_window_view(x, ((k[0] - 1) * d[0] + 1, (k[1] - 1) * d[1] + 1), axis=(2, 3))
    return w[:, :, ::s[0], ::s[1], ::d[0], ::d[1]]


def conv(x, w, b=None, kernel_shape=None, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), group=1):
    g, ys = group, []
    cin, cout = x.shape[1] // g, w.shape[0] // g
    for i in range(g):
        win = pool_windows(x[:, i * cin:(i + 1) * cin], w.shape[2:], strides, pads, dilations, 0)
        ys.append(np.einsum("nchwij,ocij->nohw", win, w[i * cout:(i + 1) * cout], optimize=True))
    y = np.concatenate(ys, axis=1)
    return (y if b is None else y + b.reshape(1, -1, 1, 1)).astype(x.dtype)


def conv_transpose(x, w, b=None, kernel_shape=None, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1),
                   group=1, output_padding=(0, 0)):
    n, cin, h, wd = x.shape
    g, cout = group, w.shape[1]
    k, s, d = w.shape[2:], strides, dilations
    full = [(h - 1) * s[0] + (k[0] - 1) * d[0] + 1 + output_padding[0],
            (wd - 1) * s[1] + (k[1] - 1) * d[1] + 1 + output_padding[1]]
    y = np.zeros((n, cout * g, full[0], full[1]), np.float64)
    ci = cin // g
    for gi in range(g):
        xg, wg = x[:, gi * ci:(gi + 1) * ci], w[gi * ci:(gi + 1) * ci]
        for i in range(k[0]):
            for j in range(k[1]):
                y[:, gi * cout:(gi + 1) * cout, i * d[0]:i * d[0] + (h - 1) * s[0] + 1:s[0],
                  j * d[1]:j * d[1] + (wd - 1) * s[1] + 1:s[1]] += np.einsum("nchw,co->nohw", xg, wg[:, :, i, j])
    y = y[:, :, pads[0]:full[0] - pads[2], pads[1]:full[1] - pads[3]]
    return (y if b is None else y + b.reshape(1, -1, 1, 1)).astype(x.dtype)


def max_pool(x, kernel_shape, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), ceil_mode=0):
    return pool_windows(x, kernel_shape, strides, pads, dilations, -np.inf, ceil_mode).max(axis=(4, 5))


def avg_pool(x, kernel_shape, strides=(1, 1), pads=(0, 0, 0, 0), count_include_pad=0):
    total = pool_windows(x, kernel_shape, strides, pads, (1, 1), 0).sum(axis=(4, 5))
    if count_include_pad:
        return (total / (kernel_shape[0] * kernel_shape[1])).astype(x.dtype)
    ones = pool_windows(np.ones_like(x), kernel_shape, strides, pads, (1, 1), 0).sum(axis=(4, 5))
    return (total / ones).astype(x.dtype)


# ---- shapes and indexing ----

def onnx_slice(x, starts, ends, axes=None, steps=None):
    axes = range(len(starts)) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    idx = [slice(None)] * x.ndim
    for s, e, ax, st in zip(starts, ends, axes, steps):
        ax = int(ax) % x.ndim
        s, e, st, d = int(s), int(e), int(st), x.shape[ax]
        s, e = s + d if s < 0 else s, e + d if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), d), min(max(e, 0), d)
        else:
            s, e = min(max(s, 0), d - 1), min(max(e, -1), d - 1)
        idx[ax] = slice(s, None if e < 0 else e, st)
    return x[tuple(idx)]


def reshape(x, shape, allowzero=0):
    return x.reshape([x.shape[i] if v == 0 and not allowzero else int(v) for i, v in enumerate(shape)])


def pad(x, pads, value=None, mode="constant"):
    r = x.ndim
    width = [(int(pads[i]), int(pads[r + i])) for i in range(r)]
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode == "constant":
        return np.pad(x, width, constant_values=0 if value is None else value)
    return np.pad(x, width, mode={"reflect": "reflect", "edge": "edge"}[mode])


def scatter_elements(data, indices, updates, axis=0, reduction=b"none"):
    out = data.copy()
    axis %= data.ndim
    idx = list(np.indices(indices.shape, sparse=True))
    idx[axis] = np.where(indices < 0, indices + data.shape[axis], indices)
    if reduction in (b"add", "add"):
        np.add.at(out, tuple(idx), updates)
    else:
        out[tuple(idx)] = updates
    return out


def one_hot(indices, depth, values, axis=-1):
    depth = int(np.asarray(depth).reshape(-1)[0])
    i = np.where(indices < 0, indices + depth, indices)
    hot = np.moveaxis(np.arange(depth) == i[..., None], -1, axis)
    return np.where(hot, values[1], values[0])


def reduce(f):
    def run(x, axes_in=None, axes=None, keepdims=1, noop_with_empty_axes=0):
        ax = axes if axes is not None else axes_in
        ax = None if ax is None or len(ax) == 0 else tuple(int(a) for a in ax)
        return np.asarray(f(x, axis=ax, keepdims=bool(keepdims))).astype(x.dtype)
    return run


def arg(f):
    def run(x, axis=0, keepdims=1, select_last_index=0):
        assert not select_last_index
        return np.expand_dims(f(x, axis=axis), axis) if keepdims else f(x, axis=axis)
    return run


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def layer_norm(x, scale, b=None, axis=-1, epsilon=1e-5, stash_type=1):
    """Normalised over the axes from axis on, in f64; the outputs Mean and
    InvStdDev are not computed (the exporter asks only for Y)."""
    ax = tuple(range(axis % x.ndim, x.ndim))
    xd = x.astype(np.float64)
    d = xd - xd.mean(axis=ax, keepdims=True)
    y = d / np.sqrt((d * d).mean(axis=ax, keepdims=True) + epsilon) * scale
    return (y if b is None else y + b).astype(x.dtype)


def clip(x, lo=None, hi=None):
    y = x if lo is None else np.maximum(x, lo)
    return y if hi is None else np.minimum(y, hi)


def constant_of_shape(shape, value=None):
    v = np.zeros(1, np.float32) if value is None else numpy_helper.to_array(value)
    return np.full([int(s) for s in shape], v.reshape(-1)[0], dtype=v.dtype)


OPS = {
    "Add": same(np.add), "Sub": same(np.subtract), "Mul": same(np.multiply), "Div": same(np.divide),
    "Pow": same(np.power), "Max": same(np.maximum), "Min": same(np.minimum),
    "Equal": np.equal, "Less": np.less, "LessOrEqual": np.less_equal, "Greater": np.greater,
    "GreaterOrEqual": np.greater_equal, "And": np.logical_and, "Or": np.logical_or,
    "Xor": np.logical_xor, "Not": np.logical_not, "Where": np.where,
    "Neg": same(np.negative), "Abs": same(np.abs), "Sign": same(np.sign), "Exp": in_f64(np.exp),
    "Log": in_f64(np.log), "Sqrt": in_f64(np.sqrt), "Reciprocal": in_f64(lambda x: 1 / x),
    "Sin": in_f64(np.sin), "Cos": in_f64(np.cos), "Tanh": in_f64(np.tanh),
    "Sigmoid": in_f64(lambda x: 1 / (1 + np.exp(-x))), "Relu": same(lambda x: np.maximum(x, 0)),
    "LeakyRelu": in_f64(lambda x, alpha=0.01: np.where(x < 0, alpha * x, x)),
    "Elu": in_f64(lambda x, alpha=1.0: np.where(x < 0, alpha * (np.exp(x) - 1), x)),
    "Erf": in_f64(np.vectorize(math.erf)), "Softplus": in_f64(lambda x: np.log(np.exp(x) + 1)),
    "Floor": same(np.floor), "Ceil": same(np.ceil), "Round": same(np.round), "Clip": same(clip),
    "Identity": lambda x: x, "Cast": cast,
    "MatMul": same(np.matmul), "Softmax": in_f64(softmax),
    "LogSoftmax": in_f64(lambda x, axis=-1: np.log(softmax(x, axis))),
    "ReduceSum": reduce(np.sum), "ReduceMean": reduce(np.mean), "ReduceProd": reduce(np.prod),
    "ReduceMax": reduce(np.amax), "ReduceMin": reduce(np.amin),
    "ReduceL1": reduce(lambda x, axis, keepdims: np.sum(np.abs(x), axis=axis, keepdims=keepdims)),
    "ReduceL2": reduce(lambda x, axis, keepdims: np.sqrt(np.sum(np.square(x.astype(np.float64)), axis=axis,
                                                                keepdims=keepdims))),
    "ReduceLogSumExp": reduce(lambda x, axis, keepdims: np.log(np.sum(np.exp(x.astype(np.float64)), axis=axis,
                                                                      keepdims=keepdims))),
    "ArgMax": arg(np.argmax), "ArgMin": arg(np.argmin),
    "Transpose": lambda x, perm=None: np.transpose(x, perm), "Reshape": reshape, "Slice": onnx_slice,
    "Concat": lambda *xs, axis: np.concatenate(xs, axis=axis),
    "Expand": lambda x, shape: np.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(int(s) for s in shape))),
    "Shape": lambda x: np.array(x.shape, np.int64), "ConstantOfShape": constant_of_shape,
    "Gather": lambda x, i, axis=0: np.take(x, i, axis=axis),
    "GatherElements": lambda x, i, axis=0: np.take_along_axis(x, np.where(i < 0, i + x.shape[axis], i), axis),
    "ScatterElements": scatter_elements, "Pad": pad, "OneHot": one_hot,
    "CumSum": lambda x, axis: np.cumsum(x, axis=int(axis)).astype(x.dtype),
    "Trilu": lambda x, k=None, upper=1: (np.triu if upper else np.tril)(x, 0 if k is None else int(k)),
    "Conv": conv, "ConvTranspose": conv_transpose, "MaxPool": max_pool, "AveragePool": avg_pool,
    "GlobalAveragePool": lambda x: x.mean(axis=(2, 3), keepdims=True),
    "LayerNormalization": layer_norm,
}
AXES_INPUT = {"ReduceSum"}  # opset 13+: axes as an input, the others as an attribute until 18


def run(model, feeds):
    env = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    env.update(feeds)
    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx") or node.op_type not in OPS:
            raise NotImplementedError("np_onnx: %s is not implemented here" % node.op_type)
        ins = [env[n] if n else None for n in node.input]
        a = {x.name: helper.get_attribute_value(x) for x in node.attribute}
        if node.op_type in AXES_INPUT and len(ins) > 1:
            a["axes_in"] = ins.pop()
        out = OPS[node.op_type](*ins, **a)
        env[node.output[0]] = np.asarray(out)
    return [env[o.name] for o in model.graph.output]


def main():
    model = onnx.load(sys.argv[1])
    x = np.load(sys.argv[2])
    y = run(model, {model.graph.input[0].name: x})[0]
    np.save(sys.argv[3], y)


if __name__ == "__main__":
    main()
