"""torch.jit's names that model code uses, over eager execution.

TorchScript does not exist here: `script` and `trace` give back what they
are given (a function, or a module whose forward then runs as written),
so code decorated for TorchScript runs, and `is_scripting()` is False.
What needs TorchScript itself (saving or loading a TorchScript file,
freezing) raises and says what to use instead: chutney.save of a
state_dict, chutney.onnx.export, or chutney.compile for speed."""

import warnings

__all__ = ["script", "trace", "trace_module", "ignore", "unused", "export", "is_scripting",
           "is_tracing", "annotate", "Final", "save", "load", "freeze", "optimize_for_inference",
           "ScriptModule", "ScriptFunction", "fork", "wait", "interface"]

_NO_FILES = ("TorchScript files are not supported: save the weights with "
             "chutney.save(model.state_dict(), path), or export the model with "
             "chutney.onnx.export(model, example_inputs, path)")


class ScriptModule:
    """The type scripted modules would have; nothing here is one."""


class ScriptFunction:
    """The type scripted functions would have; nothing here is one."""


def script(obj=None, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """Returns obj itself: it runs eagerly, as written."""
    if optimize is not None:
        warnings.warn("`optimize` is deprecated and has no effect.", stacklevel=2)
    return obj


def trace(func, example_inputs=None, optimize=None, check_trace=True, check_inputs=None,
          check_tolerance=1e-5, strict=True, _force_outplace=False, _module_class=None,
          _compilation_unit=None, example_kwarg_inputs=None, _store_inputs=True):
    """Returns func itself (it runs eagerly); example_inputs are not run."""
    return func


def trace_module(mod, inputs, *args, **kwargs):
    return mod


def ignore(drop=False, **kwargs):
    if callable(drop):
        return drop
    return lambda fn: fn


def unused(fn):
    return fn


def export(fn):
    return fn


def interface(obj):
    return obj


def is_scripting():
    return False


def is_tracing():
    return False


def annotate(the_type, the_value):
    return the_value


class _FinalMeta(type):
    def __getitem__(cls, item):
        return item


class Final(metaclass=_FinalMeta):
    """torch.jit.Final[int]: the annotated type itself."""


def fork(func, *args, **kwargs):
    """Runs func now; wait() gives its result."""
    return _Done(func(*args, **kwargs))


class _Done:
    def __init__(self, value):
        self.value = value

    def wait(self):
        return self.value


def wait(future):
    return future.wait()


def save(m, f, _extra_files=None):
    raise NotImplementedError(f"chutney.jit.save: {_NO_FILES}")


def load(f, map_location=None, _extra_files=None):
    raise NotImplementedError(f"chutney.jit.load: {_NO_FILES}")


def freeze(mod, preserved_attrs=None, optimize_numerics=True):
    raise NotImplementedError("chutney.jit.freeze: there is no TorchScript module to freeze; "
                              "chutney.compile(model) folds and packs constants for inference")


def optimize_for_inference(mod, other_methods=None):
    raise NotImplementedError("chutney.jit.optimize_for_inference: use chutney.compile(model)")
