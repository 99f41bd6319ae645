"""save and load: checkpoints as safetensors files.

torch.save pickles any object; chutney.save writes a checkpoint in the
safetensors format (readable by the safetensors package, and by the C
library and the `chutney` program), atomically. Every tensor is stored
under its dotted path in the object ("model.fc.weight", "history.0"). A
flat dict of tensors (a state_dict) is stored as just that; anything else
that checkpoints hold (nested dicts, lists and tuples, ints, floats,
strings, bools, None: `{"epoch": 3, "model": sd, "optimizer": osd}`) also
records its structure as JSON in the header, so load gives the same
object back.
"""

import json
import math
import os

from chutney import _C

_TREE = "__chutney_structure__"
_VALUES = (int, float, str, bool, type(None))


def _walk(obj, path, items, seen):
    """obj as a JSON-able structure whose tensors are replaced by their
    names; the tensors appended to items."""
    if isinstance(obj, _C.Tensor):
        name = path or "tensor"
        if name in seen:
            raise ValueError(f"save: two tensors would be stored as {name!r} (a dotted key and "
                             "a nested one name the same path)")
        seen.add(name)
        items.append((name, obj))
        return {"tensor": name}
    if isinstance(obj, dict):
        out = []
        for k, v in obj.items():
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise TypeError(f"save: keys must be strings or ints, not {type(k).__name__}")
            out.append([k, _walk(v, f"{path}.{k}" if path else str(k), items, seen)])
        return {"dict": out}
    if isinstance(obj, (list, tuple)):
        kind = "list" if isinstance(obj, list) else "tuple"
        return {kind: [_walk(v, f"{path}.{i}" if path else str(i), items, seen)
                       for i, v in enumerate(obj)]}
    if isinstance(obj, _VALUES):
        if isinstance(obj, float) and not math.isfinite(obj):
            return {"float": repr(obj)}
        return {"value": obj}
    raise TypeError(f"save: {path or 'the object'!r} is a {type(obj).__name__}; a checkpoint "
                    "holds tensors, dicts, lists, tuples, numbers, strings, bools and None")


def _rebuild(node, tensors):
    if "tensor" in node:
        return tensors[node["tensor"]]
    if "dict" in node:
        return {k: _rebuild(v, tensors) for k, v in node["dict"]}
    if "list" in node:
        return [_rebuild(v, tensors) for v in node["list"]]
    if "tuple" in node:
        return tuple(_rebuild(v, tensors) for v in node["tuple"])
    if "float" in node:
        return float(node["float"])
    return node["value"]


def save(obj, f, metadata=None, **_torch_kwargs):
    """Write obj to path f: a tensor, or a (nested) dict / list / tuple of
    tensors and plain values. metadata: an optional dict of str -> str
    stored in the header."""
    items = []
    tree = _walk(obj, "", items, set())
    flat = "dict" in tree and all("tensor" in v and isinstance(k, str) for k, v in tree["dict"])
    meta = dict(metadata or {})
    if _TREE in meta:
        raise ValueError(f"save: the metadata key {_TREE!r} is the checkpoint's own")
    if not flat:
        meta[_TREE] = json.dumps(tree)
    _C._save_safetensors(os.fspath(f), items, meta or None)


def load(f, map_location=None, with_metadata=False, weights_only=None, **_torch_kwargs):
    """Read a file written by save (the same structure back) or any
    safetensors file (a dict of name -> tensor), on map_location if given
    (a device or its name). with_metadata: also return the metadata dict."""
    items, meta = _C._load_safetensors(os.fspath(f))
    if map_location is not None and not isinstance(map_location, (str, _C.device)):
        raise TypeError("load: map_location is a device or its name (functions and dicts are "
                        "not supported)")
    tensors = {}
    for name, t in items:
        tensors[name] = t.to(map_location) if map_location is not None else t
    tree = meta.pop(_TREE, None)
    if tree is None:
        out = tensors
    else:
        try:
            out = _rebuild(json.loads(tree), tensors)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"load: {os.fspath(f)}: the checkpoint's structure is corrupt "
                             f"({e})") from None
    return (out, meta) if with_metadata else out


# ---- pickle and copy.deepcopy of tensors ----
#
# A tensor pickles as a NumPy copy of its values, its dtype's name, its
# device and requires_grad (bfloat16 through float32, which holds it
# exactly). That is what copy.deepcopy(model), multiprocessing and
# DataLoader-style code need; like PyTorch's pickles it keeps no .grad and
# no autograd history, and views of one storage come back as separate
# tensors.

import copyreg as _copyreg


def _rebuild_tensor(values, dtype_name, device, requires_grad):
    t = _C.from_numpy(values).to(getattr(_C, dtype_name))
    if device != "cpu":
        t = t.to(device)
    return t.requires_grad_(True) if requires_grad else t


def _reduce_tensor(t):
    d = t.detach().cpu()
    name = str(t.dtype).split(".")[-1]
    values = (d.float() if t.dtype == _C.bfloat16 else d).contiguous().numpy().copy()
    return (_rebuild_tensor, (values, name, str(t.device), t.requires_grad))


_copyreg.pickle(_C.Tensor, _reduce_tensor)


def _deepcopy_tensor(t, memo):
    """copy.deepcopy of a tensor (not a Parameter, which has its own): a
    detached copy with requires_grad and .grad, as PyTorch's (pickles
    carry no .grad)."""
    if id(t) in memo:
        return memo[id(t)]
    new = t.detach().clone()
    if t.requires_grad:
        new.requires_grad_(True)
    if t.requires_grad and t.grad is not None:
        new.grad = t.grad.detach().clone()
    memo[id(t)] = new
    return new


import copy as _copy  # noqa: E402

_copy._deepcopy_dispatch[_C.Tensor] = _deepcopy_tensor
