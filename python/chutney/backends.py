"""torch.backends' switches that training scripts set (cudnn.benchmark,
cudnn.deterministic, ...). They are accepted and remembered, and change
nothing: the library picks its own convolution algorithms (and its
results do not depend on these switches)."""


class _Switches:
    def __init__(self, **defaults):
        self.__dict__.update(defaults)


cudnn = _Switches(enabled=True, benchmark=False, deterministic=False, allow_tf32=True)
mkldnn = _Switches(enabled=True)
cuda = _Switches(matmul=_Switches(allow_tf32=False, allow_bf16_reduced_precision_reduction=True,
                                  allow_fp16_reduced_precision_reduction=True))


def _false():
    return False


# Apple's GPUs: scripts ask `torch.backends.mps.is_available()` when they
# pick a device; the library has no Metal backend.
mps = _Switches(is_available=_false, is_built=_false)
cudnn.is_available = lambda: __import__("chutney").cuda.is_available()
cudnn.version = lambda: None
