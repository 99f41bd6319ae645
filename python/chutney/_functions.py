"""Module-level functions with PyTorch's names, made from the Tensor methods
of the same names (chutney.exp(x) is x.exp(), chutney.sum(x, dim=1) is
x.sum(dim=1)), and a few that are not methods."""

from chutney._C import Tensor

# Functions whose first argument is the tensor the method is called on.
_METHOD_FUNCTIONS = """
abs absolute neg negative sign exp log log2 log10 log1p expm1 sqrt rsqrt square
reciprocal sin cos tan tanh sigmoid relu silu erf floor ceil round trunc
asin acos atan sinh cosh asinh acosh atanh atan2
arcsin arccos arctan arcsinh arccosh arctanh arctan2
logical_not logical_and logical_or logical_xor
add sub subtract mul multiply div divide true_divide floor_divide remainder rsub
maximum minimum eq ne lt le gt ge greater less
matmul mm bmm dot clamp clip masked_fill
sum mean prod amax amin logsumexp max min argmax argmin var std norm all any
count_nonzero cumsum softmax log_softmax
reshape flatten ravel permute transpose swapaxes t squeeze unsqueeze
broadcast_to narrow select flip tril triu chunk split unbind
gather index_select scatter_add detach clone allclose equal
""".split()

__all__ = list(_METHOD_FUNCTIONS) + ["pow"]


def _make(name):
    method = getattr(Tensor, name)

    def fn(input, *args, **kwargs):
        if not isinstance(input, Tensor):
            raise TypeError(f"chutney.{name}(): argument 'input' must be a Tensor, "
                            f"not {type(input).__name__}")
        return method(input, *args, **kwargs)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = method.__doc__
    return fn


for _name in _METHOD_FUNCTIONS:
    globals()[_name] = _make(_name)
del _name


def pow(input, exponent):  # noqa: A001 (PyTorch's name)
    """input ** exponent; one of them may be a number."""
    if not isinstance(input, Tensor) and not isinstance(exponent, Tensor):
        raise TypeError("chutney.pow(): input or exponent must be a Tensor")
    return input ** exponent
