"""torch.optim: SGD, Adam, AdamW, RMSprop, Adagrad, and lr_scheduler."""

from chutney.optim import lr_scheduler  # noqa: F401
from chutney.optim.optimizer import SGD, Adagrad, Adam, AdamW, Optimizer, RMSprop  # noqa: F401
