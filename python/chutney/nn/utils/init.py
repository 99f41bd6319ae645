"""torch.nn.utils.skip_init."""

import inspect


def skip_init(module_cls, *args, **kwargs):
    """module_cls(*args, **kwargs), as PyTorch's skip_init. PyTorch builds
    the module on the meta device and then allocates it uninitialised;
    Chutney has no meta device, so the module is built (and initialised) as
    usual: its values are valid but, as with PyTorch, not to be relied on."""
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    return module_cls(*args, **kwargs)
