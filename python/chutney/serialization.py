"""save and load: dicts of tensors as safetensors files.

torch.save pickles any object; chutney.save writes what a checkpoint is
made of, a dict of name -> tensor (a state_dict, an optimiser's state), in
the safetensors format (readable by the safetensors package, and by the C
library and the `chutney` program), atomically. Nested dicts are flattened
with dotted names and come back flat.
"""

import os

from chutney import _C


def _flatten(obj, prefix, out):
    for k, v in obj.items():
        if not isinstance(k, str):
            raise TypeError(f"save: keys must be strings, not {type(k).__name__}")
        name = prefix + k
        if isinstance(v, _C.Tensor):
            out.append((name, v))
        elif isinstance(v, dict):
            _flatten(v, name + ".", out)
        else:
            raise TypeError(f"save: {name!r} is a {type(v).__name__}; only tensors (and dicts of "
                            "them) can be saved")


def save(obj, f, metadata=None):
    """Write a dict of tensors (nested dicts get dotted names) to path f.
    metadata: an optional dict of str -> str stored in the header."""
    if isinstance(obj, _C.Tensor):
        obj = {"tensor": obj}
    if not isinstance(obj, dict):
        raise TypeError("save: expected a dict of name -> tensor (e.g. model.state_dict())")
    items = []
    _flatten(obj, "", items)
    _C._save_safetensors(os.fspath(f), items, metadata)


def load(f, map_location=None, with_metadata=False):
    """Read a safetensors file into a dict of name -> tensor (on
    map_location if given). with_metadata: also return the metadata dict."""
    items, meta = _C._load_safetensors(os.fspath(f))
    out = {}
    for name, t in items:
        out[name] = t.to(map_location) if map_location is not None else t
    return (out, meta) if with_metadata else out


# ---- pickle and copy.deepcopy of tensors ----
#
# A tensor pickles as a NumPy copy of its values, its dtype's name, its
# device and requires_grad (bfloat16 through float32, which holds it
# exactly). That is what copy.deepcopy(model), multiprocessing and
# DataLoader-style code need; it keeps no autograd history, as PyTorch's
# deepcopy of a leaf.

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
