"""torch.nn: Module, layers, containers and losses (chutney.nn.modules),
functional and init."""

from chutney.nn import functional, init, utils  # noqa: F401
from chutney.nn.modules import (  # noqa: F401
    ELU, GELU, GRU, LSTM, RNN, AdaptiveAvgPool2d, AvgPool2d, BatchNorm1d, BatchNorm2d, BCELoss,
    BCEWithLogitsLoss, Conv1d, Conv2d, ConvTranspose2d, CrossEntropyLoss, Dropout, Embedding,
    Flatten, Hardtanh, Identity, L1Loss, LayerNorm, LeakyReLU, Linear, LogSoftmax, MaxPool2d,
    Module, ModuleDict, ModuleList, MSELoss, NLLLoss, Parameter, ReLU, Sequential, Sigmoid, SiLU,
    Softmax, Softplus, Tanh, Unflatten)
