"""Dynamic int8 quantisation (torch.ao.quantization.quantize_dynamic) over
the library's cn_module_quantize_int8.

A quantised Linear or Conv2d (one group) keeps symmetric int8 weights with
one float32 scale per output channel (buffers "weight" int8 and
"weight_scale"; the bias becomes a float32 buffer; grouped and dilated
convolutions stay float), quantises its input at
run time (one scale per row of the product), multiplies with int32 sums and
returns float32. CPU only; the layers have no parameters and no gradient.
"""

from chutney import _C
from chutney.nn.modules import Conv2d, Linear

__all__ = ["quantize_dynamic", "qint8"]


class _QuantDtype:
    """torch.qint8: names the quantised type; no tensor has it (the weights
    are int8 tensors with a scale beside them)."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"chutney.{self.name}"

    def __reduce__(self):
        return self.name


qint8 = _QuantDtype("qint8")

_QUANTISABLE = (Linear, Conv2d)


def quantize_dynamic(model, qconfig_spec=None, dtype=qint8, mapping=None, inplace=False):
    """Quantise the Linear layers (and the Conv2d ones, if qconfig_spec names
    Conv2d) of model to int8 weights with dynamic int8 activations.
    qconfig_spec: a set of module classes (Linear, Conv2d); None means
    {Linear}, the part of PyTorch's default the library quantises. Only
    inplace=True: modules cannot be copied (tensors cannot be pickled)."""
    if dtype is not qint8:
        raise NotImplementedError(
            f"quantize_dynamic: dtype {dtype!r}: the library quantises to int8 only "
            "(dtype=chutney.qint8)")
    if mapping is not None:
        raise NotImplementedError("quantize_dynamic: mapping (the library's layers quantise themselves)")
    if qconfig_spec is None:
        qconfig_spec = {Linear}
    if isinstance(qconfig_spec, dict):
        raise NotImplementedError("quantize_dynamic: a dict of qconfigs (give a set of module "
                                  "classes: {chutney.nn.Linear, chutney.nn.Conv2d})")
    kinds = set(qconfig_spec)
    for k in kinds:
        if not (isinstance(k, type) and issubclass(k, _QUANTISABLE)):
            raise NotImplementedError(
                f"quantize_dynamic: {getattr(k, '__name__', repr(k))}: the library quantises "
                "Linear and Conv2d only")
    if not inplace:
        raise NotImplementedError(
            "quantize_dynamic(inplace=False): modules cannot be copied (tensors cannot be "
            "pickled); pass inplace=True to quantise the model itself")
    layers = [m for m in model.modules() if isinstance(m, tuple(kinds))]
    for m in layers:
        if m.weight.device.type != "cpu":
            raise RuntimeError(f"quantize_dynamic: a {type(m).__name__} on {m.weight.device}: "
                               "int8 layers run on the CPU only")
    for m in layers:
        if m._c.quantize_int8() > 0:  # 0: a grouped or dilated convolution, left float
            m._register_c_state()
    return model
