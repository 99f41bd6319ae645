"""chutney.onnx: ONNX models run by the C library's importer.

    import chutney, numpy as np
    model = chutney.onnx.load("resnet18.onnx", input_shapes={"input": (1, 3, 224, 224)})
    logits = model(chutney.randn(1, 3, 224, 224))              # a Tensor (a tuple if several)
    [out] = model.run(None, {"input": np.zeros((1, 3, 224, 224), np.float32)})  # onnxruntime's way

load() imports the file once into a static graph (initializers become
constants, shape computations over known sizes fold); each call runs the
compiled program (compiled on the first run, planned again when the input
sizes change) with the GIL released. What the importer supports (opsets 6
to 17 of the default domain) is in docs/onnx.md and supported_ops(); an
unsupported op fails the load with NotImplementedError("unsupported: OP
(opset N): reason").

Errors: a missing file is FileNotFoundError (other open failures OSError),
a corrupt or invalid file RuntimeError, an unsupported op or feature
NotImplementedError, a bad input_shapes/input_values entry ValueError; at
run time a fed input of the wrong dtype TypeError, of the wrong shape
ValueError, a missing or unknown input TypeError when calling the model and
ValueError in run() (as onnxruntime's invalid-argument error).
"""

import os

from chutney import _C

__all__ = ["load", "load_tensor", "supported_ops", "is_available", "Model", "NodeArg", "export"]

# The ONNX type strings onnxruntime's NodeArg.type gives.
_ONNX_TYPE = {
    _C.float32: "tensor(float)",
    _C.float64: "tensor(double)",
    _C.float16: "tensor(float16)",
    _C.bfloat16: "tensor(bfloat16)",
    _C.int32: "tensor(int32)",
    _C.int64: "tensor(int64)",
    _C.uint8: "tensor(uint8)",
    _C.int8: "tensor(int8)",
    _C.bool: "tensor(bool)",
}


class NodeArg:
    """An input or output of a model, as onnxruntime's NodeArg: .name, .shape
    (a list of ints, None where the size is unknown until run), .type (e.g.
    "tensor(float)"), and .dtype (the chutney dtype)."""

    __slots__ = ("name", "shape", "type", "dtype")

    def __init__(self, name, shape, dtype):
        self.name = name
        # shape None: an output declared without a shape, of a model that
        # runs eagerly (known once it runs).
        self.shape = None if shape is None else [None if s < 0 else s for s in shape]
        self.dtype = dtype
        self.type = _ONNX_TYPE.get(dtype, str(dtype)) if dtype is not None else "unknown"

    def __repr__(self):
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"


_MISSING = object()


def _is_array_like(x):
    """NumPy arrays and scalars, and other objects that convert to one (a
    torch tensor, anything with __array__): these keep their own dtype."""
    t = type(x)
    return t.__module__ == "numpy" or hasattr(x, "__array_interface__") or hasattr(x, "__array__")


class Model:
    """An ONNX model loaded by load().

    Called with tensors, model(x) or model(x, mask) in the model's input
    order or model(input_ids=x) by input name, it returns the output Tensor,
    or a tuple of Tensors when the model has several outputs. run() is
    onnxruntime's InferenceSession.run: a dict of NumPy arrays in, a list of
    NumPy arrays out.

    Inputs are not converted between dtypes: a Tensor or NumPy array must
    have the input's declared dtype (TypeError otherwise) and its known
    sizes (ValueError otherwise). Python numbers and lists are made into
    tensors of the input's dtype."""

    def __init__(self, c_model):
        if not isinstance(c_model, _C.OnnxModel):
            raise TypeError("Model wraps a chutney._C.OnnxModel; use chutney.onnx.load(path)")
        self._model = c_model
        self._input_names = list(c_model.input_names)
        self._output_names = list(c_model.output_names)
        self._input_dtypes = list(c_model.input_dtypes)
        self._index = {n: i for i, n in enumerate(self._input_names)}

    # ---- inspection ----

    @property
    def input_names(self):
        """The graph inputs, in order (initializers and input_values excluded)."""
        return list(self._input_names)

    @property
    def output_names(self):
        return list(self._output_names)

    @property
    def opset(self):
        """The opset of the default domain."""
        return self._model.opset

    @property
    def eager_reason(self):
        """None when the model loaded as a static graph; otherwise why it
        runs eagerly, node by node, on every run: a node whose outputs'
        shapes depend on values computed at run time (NonZero,
        NonMaxSuppression, ...: object detectors)."""
        return self._model.eager_reason

    @property
    def num_params(self):
        """Elements of all initializers."""
        return self._model.num_params

    @property
    def nodes(self):
        """The op type of each node of the file, in order."""
        return self._model.nodes

    def get_inputs(self):
        """[NodeArg] of the inputs (onnxruntime's get_inputs)."""
        m = self._model
        return [NodeArg(n, s, d) for n, s, d in zip(m.input_names, m.input_shapes, m.input_dtypes)]

    def get_outputs(self):
        """[NodeArg] of the outputs (shapes as far as known before running)."""
        m = self._model
        return [NodeArg(n, s, d) for n, s, d in zip(m.output_names, m.output_shapes, m.output_dtypes)]

    def __repr__(self):
        ins = ", ".join(f"{a.name}: {a.type}{a.shape}" for a in self.get_inputs())
        outs = ", ".join(self._output_names)
        return (f"chutney.onnx.Model(opset={self.opset}, inputs=[{ins}], outputs=[{outs}], "
                f"nodes={len(self.nodes)}, params={self.num_params})")

    # ---- running ----

    def _as_input(self, i, x):
        if isinstance(x, _C.Tensor):
            return x
        if _is_array_like(x):
            if not (hasattr(x, "__array_interface__") or type(x).__module__ == "numpy"):
                import numpy as np

                x = np.asarray(x)
            return _C.as_tensor(x)
        try:
            return _C.tensor(x, dtype=self._input_dtypes[i])
        except TypeError as e:
            raise TypeError(f"input {self._input_names[i]!r}: {e}") from None

    def _run(self, feeds):
        return self._model.run(feeds)

    def __call__(self, *args, **kwargs):
        n = len(self._input_names)
        if len(args) > n:
            raise TypeError(f"the model takes {n} input{'s' if n != 1 else ''} "
                            f"({', '.join(self._input_names)}), {len(args)} given")
        vals = list(args) + [_MISSING] * (n - len(args))
        for k, v in kwargs.items():
            i = self._index.get(k)
            if i is None:
                raise TypeError(f"{k!r} is not an input of the model (inputs: "
                                f"{', '.join(self._input_names) or 'none'})")
            if vals[i] is not _MISSING:
                raise TypeError(f"input {k!r} given twice (by position and by name)")
            vals[i] = v
        missing = [self._input_names[i] for i, v in enumerate(vals) if v is _MISSING]
        if missing:
            raise TypeError(f"missing input{'s' if len(missing) > 1 else ''}: {', '.join(missing)}")
        outs = self._run([self._as_input(i, v) for i, v in enumerate(vals)])
        return outs[0] if len(outs) == 1 else outs

    def run(self, output_names, input_feed, run_options=None):
        """onnxruntime's InferenceSession.run: input_feed a dict of input name ->
        NumPy array (or Tensor); returns a list of NumPy arrays, the outputs
        named in output_names (None or []: all, in the model's order)."""
        if not isinstance(input_feed, dict):
            raise TypeError(f"run: input_feed must be a dict of input name -> array, not "
                            f"{type(input_feed).__name__}")
        for k in input_feed:
            if k not in self._index:
                raise ValueError(f"run: {k!r} is not an input of the model (inputs: "
                                 f"{', '.join(self._input_names) or 'none'})")
        missing = [n for n in self._input_names if n not in input_feed]
        if missing:
            raise ValueError(f"run: missing input{'s' if len(missing) > 1 else ''}: {', '.join(missing)}")
        if output_names:
            if isinstance(output_names, str):
                raise TypeError("run: output_names is a list of names (or None for all)")
            where = {n: i for i, n in enumerate(self._output_names)}
            for n in output_names:
                if n not in where:
                    raise ValueError(f"run: {n!r} is not an output of the model (outputs: "
                                     f"{', '.join(self._output_names)})")
            pick = [where[n] for n in output_names]
        else:
            pick = range(len(self._output_names))
        outs = self._run([self._as_input(i, input_feed[n]) for i, n in enumerate(self._input_names)])
        return [outs[i].numpy(force=True) for i in pick]


def load(f, input_shapes=None, input_values=None, unknown_size=None, base_dir=None):
    """Load an ONNX model: f a path (str or os.PathLike), the serialized
    model (bytes, bytearray, memoryview), an onnx.ModelProto, or a binary
    file object.

    input_shapes: concrete shapes for inputs whose declared sizes are
    unknown (a symbolic batch), {name: shape} or [shape, ...] in input
    order; with every size known, the model's shape computations fold.
    input_values: {name: value} or [value or None, ...]: inputs known at
    load time (e.g. an integer shape argument); they become constants and
    are no longer inputs of the model.
    unknown_size: the size of every input size still unknown (e.g. 1);
    None keeps them unknown (they are then given by each run).
    base_dir: where the external data of a model given as bytes lives (a
    path's and a file object's own directory otherwise).
    """
    if isinstance(f, (bytes, bytearray, memoryview)):
        source = f
    elif hasattr(f, "SerializeToString"):  # onnx.ModelProto
        source = f.SerializeToString()
    elif hasattr(f, "read"):
        source = f.read()
        if not isinstance(source, (bytes, bytearray)):
            raise TypeError("load: the file object must be opened in binary mode ('rb')")
        name = getattr(f, "name", None)
        if base_dir is None and isinstance(name, (str, os.PathLike)):
            base_dir = os.path.dirname(os.path.abspath(name))
    elif isinstance(f, (str, os.PathLike)):
        source = os.fspath(f)
        if base_dir is not None:
            raise TypeError("load: base_dir is for a model given as bytes (a file's external data is "
                            "looked up next to it)")
    else:
        raise TypeError(f"load: expected a path, bytes or a file object, not {type(f).__name__}")
    try:
        model = _C.OnnxModel(source, input_shapes, input_values, unknown_size or 0,
                             None if base_dir is None else os.fspath(base_dir))
    except OSError as e:
        if type(e) is OSError and isinstance(source, str) and os.path.isdir(source):
            raise IsADirectoryError(str(e)) from None
        raise
    return Model(model)


def load_tensor(f):
    """A serialized ONNX TensorProto file (the ONNX test data's input_0.pb)
    as a Tensor."""
    return _C.onnx_load_tensor(os.fspath(f))


def supported_ops():
    """The ONNX op types the importer reads, sorted (docs/onnx.md says with
    which attributes and limits). Empty in a build without ONNX support."""
    return _C.onnx_supported_ops()


def is_available():
    """Was the library built with ONNX support (protobuf-c)?"""
    return bool(_C.onnx_supported_ops())


def _dims(spec, name):
    if isinstance(spec, dict):
        return sorted(int(d) for d in spec)
    try:
        return sorted(int(d) for d in spec)
    except TypeError:
        raise TypeError(f"export: dynamic_axes[{name!r}] should be a dict or list of dims") from None


def export(model, args, f, export_params=True, verbose=False, training=None, input_names=None,
           output_names=None, operator_export_type=None, opset_version=None,
           do_constant_folding=True, dynamic_axes=None, keep_initializers_as_inputs=None,
           custom_opsets=None, export_modules_as_functions=False):
    """Write a module or function as an ONNX model (torch.onnx.export).

    model is traced on args (a Tensor, or a tuple of them whose last item
    may be a dict of keyword arguments) into a static graph, which the
    library writes as opset 17 (IR version 8; an older opset_version
    asked for warns and gets 17, a newer one raises): the module's parameters and
    buffers become initializers under their state_dict names, each
    input's sizes are args' except the axes dynamic_axes names ({"input":
    {0: "batch"}} or {"input": [0]}), which become symbolic (named
    "<input>_dim<k>"; the names given are not kept). Modules are exported
    in evaluation mode unless training is True (or TrainingMode.TRAINING),
    as PyTorch does. f is a path (written atomically) or a binary file
    object. An op with no ONNX form raises NotImplementedError naming it;
    nothing is written then.
    """
    from chutney import _compile
    from chutney.autograd import no_grad
    from chutney.nn.modules import Module

    if opset_version is not None and opset_version > 17:
        raise ValueError(f"export: opset_version {opset_version}: chutney writes opset 17")
    if opset_version is not None and opset_version < 17:
        # Scripts pass the opset of their tutorial more often than one their
        # runtime needs: write 17, and say so.
        import warnings
        warnings.warn(f"export: opset_version {opset_version} asked for; chutney writes opset 17 "
                      f"(ONNX Runtime reads it from 1.11)", stacklevel=2)
    if not export_params:
        raise NotImplementedError("export: export_params=False (parameters as graph inputs) is "
                                  "not supported")
    if keep_initializers_as_inputs:
        raise NotImplementedError("export: keep_initializers_as_inputs is not supported")
    if isinstance(args, _C.Tensor):
        args = (args,)
    args = tuple(args)
    kwargs = {}
    if args and isinstance(args[-1], dict):
        args, kwargs = args[:-1], dict(args[-1])
    leaves = []
    try:
        spec = _compile._flatten((args, kwargs), leaves)
    except _compile._Unsupported as exc:
        raise TypeError(f"export: cannot trace {exc}") from None
    names = list(input_names or [])
    if len(names) > len(leaves):
        raise ValueError(f"export: {len(names)} input names for {len(leaves)} tensor inputs")
    names += ["input" if len(leaves) == 1 else f"input_{i}" for i in range(len(names), len(leaves))]
    dyn = {}
    for name, axes in (dynamic_axes or {}).items():
        if name in names:
            dims = _dims(axes, name)
            ndim = leaves[names.index(name)].dim()
            if any(d < 0 or d >= ndim for d in dims):
                raise ValueError(f"export: dynamic_axes[{name!r}] = {dims} for a {ndim}-d input")
            dyn[name] = dims
        elif not (output_names and name in output_names):
            raise ValueError(f"export: dynamic_axes names {name!r}, which is neither an input "
                             "nor an output name")
    is_module = isinstance(model, Module)
    train = training is True or getattr(training, "name", None) == "TRAINING"
    was_training = model.training if is_module else None
    if is_module:
        model.train(train)
    try:
        with no_grad():
            graph, _, tr, out = _compile._trace(model, args, kwargs, leaves, spec, names, dyn)
    except _compile._Unsupported as exc:
        raise RuntimeError(f"export: cannot trace {exc}") from None
    finally:
        if is_module:
            model.train(was_training)
    _, symbolic, out_map = _compile._split_outputs(out)
    if not symbolic or any(not isinstance(m, int) for m in out_map):
        raise ValueError("export: every output must be a tensor computed from the inputs")
    if output_names is not None and len(output_names) != len(symbolic):
        raise ValueError(f"export: {len(output_names)} output names for {len(symbolic)} outputs")
    params = pnames = None
    if is_module:
        state = model.state_dict()
        pnames, params = list(state.keys()), list(state.values())
    gname = type(model).__name__ if is_module else getattr(model, "__name__", "chutney")
    kw = dict(output_names=output_names, params=params, param_names=pnames, graph_name=gname)
    if isinstance(f, (str, os.PathLike)):
        _C.onnx_export(graph, symbolic, os.fspath(f), **kw)
    else:
        f.write(_C.onnx_export(graph, symbolic, None, **kw))
    if verbose:
        print(f"chutney.onnx.export: {len(symbolic)} outputs, {len(leaves)} inputs")
