"""torch.nn.init: in place on a tensor (parameters too: nothing is recorded),
drawing from the library's generator (chutney.manual_seed)."""

from chutney import _C

calculate_gain = _C._calculate_gain
uniform_ = _C._init_uniform_
normal_ = _C._init_normal_
constant_ = _C._init_constant_
xavier_uniform_ = _C._init_xavier_uniform_
xavier_normal_ = _C._init_xavier_normal_
kaiming_uniform_ = _C._init_kaiming_uniform_
kaiming_normal_ = _C._init_kaiming_normal_


def zeros_(tensor):
    return _C._init_constant_(tensor, 0.0)


def ones_(tensor):
    return _C._init_constant_(tensor, 1.0)
