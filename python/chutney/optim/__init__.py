"""torch.optim: SGD, Adam, AdamW, RMSprop and Adagrad (the C library's
optimisers), Adamax, NAdam, RAdam, Adadelta, Rprop, ASGD and LBFGS (in
Python over tensor ops, chutney.optim.extra), SparseAdam (refused: no
sparse gradients), the Optimizer base class for writing others,
lr_scheduler and swa_utils (weight averaging)."""

from chutney.optim import lr_scheduler, swa_utils  # noqa: F401
from chutney.optim.extra import (  # noqa: F401
    ASGD,
    LBFGS,
    Adadelta,
    Adamax,
    NAdam,
    RAdam,
    Rprop,
    SparseAdam,
)
from chutney.optim.optimizer import SGD, Adagrad, Adam, AdamW, Optimizer, RMSprop  # noqa: F401
