"""torch.nn: Module, layers, containers and losses (chutney.nn.modules,
normalization, transformer, and the smaller files named for what they hold),
functional and init."""

from chutney.nn import functional, init, utils  # noqa: F401
from chutney.nn.modules import (  # noqa: F401
    CELU, ELU, GELU, GLU, GRU, LSTM, RNN, SELU, AdaptiveAvgPool1d, AdaptiveAvgPool2d,
    AdaptiveMaxPool1d, AdaptiveMaxPool2d, AvgPool1d, AvgPool2d, BatchNorm1d, BatchNorm2d, BCELoss,
    BCEWithLogitsLoss, ConstantPad1d, ConstantPad2d, ConstantPad3d, Conv1d, Conv2d,
    ConvTranspose2d, CosineEmbeddingLoss, CosineSimilarity, CrossEntropyLoss, Dropout, Dropout1d,
    Dropout2d, Dropout3d, Embedding, Flatten, GaussianNLLLoss, Hardsigmoid, Hardswish, Hardtanh,
    HuberLoss, Identity, KLDivLoss, L1Loss, LayerNorm, LeakyReLU, Linear, LocalResponseNorm,
    LogSigmoid, LogSoftmax, MarginRankingLoss, MaxPool1d, MaxPool2d, Mish, Module, ModuleDict,
    ModuleList, MSELoss, NLLLoss, PairwiseDistance, Parameter, PixelShuffle, PixelUnshuffle,
    PoissonNLLLoss, PReLU, ReflectionPad1d, ReflectionPad2d, ReLU, ReLU6, ReplicationPad1d,
    ReplicationPad2d, ReplicationPad3d, Sequential, Sigmoid, SiLU, SmoothL1Loss, Softmax, Softmin,
    Softplus, SoftMarginLoss, Softsign, Tanh, Tanhshrink, TripletMarginLoss, Unflatten, Upsample,
    UpsamplingBilinear2d, UpsamplingNearest2d, ZeroPad1d, ZeroPad2d, Threshold, Hardshrink,
    Softshrink, Softmax2d, Bilinear, LSTMCell, GRUCell, RNNCell, ParameterList, ParameterDict,
    Conv3d, BatchNorm3d, MaxPool3d, AvgPool3d, AdaptiveAvgPool3d, ConvTranspose1d, EmbeddingBag)
from chutney.nn.modules import _CellBase as RNNCellBase, _RNNBase as RNNBase  # noqa: F401
from chutney.nn.adaptive_softmax import AdaptiveLogSoftmaxWithLoss  # noqa: F401
from chutney.nn.channel_shuffle import ChannelShuffle  # noqa: F401
from chutney.nn.conv_transpose3d import ConvTranspose3d  # noqa: F401
from chutney.nn.fold import Fold, Unfold  # noqa: F401
from chutney.nn.lazy import LazyConv1d, LazyConv2d, LazyLinear  # noqa: F401
from chutney.nn.lazy_more import (  # noqa: F401
    LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d, LazyConv3d, LazyConvTranspose1d,
    LazyConvTranspose2d, LazyConvTranspose3d, LazyInstanceNorm1d, LazyInstanceNorm2d,
    LazyInstanceNorm3d)
from chutney.nn.layers_3d import AdaptiveMaxPool3d, MaxUnpool3d, ReflectionPad3d  # noqa: F401
from chutney.nn.losses_more import (  # noqa: F401
    CTCLoss, HingeEmbeddingLoss, MultiLabelMarginLoss, MultiLabelSoftMarginLoss, MultiMarginLoss,
    TripletMarginWithDistanceLoss)
from chutney.nn.pooling_more import LPPool1d, LPPool2d, MaxUnpool1d, MaxUnpool2d  # noqa: F401
from chutney.nn.stochastic import AlphaDropout, FeatureAlphaDropout, RReLU  # noqa: F401
from chutney.nn.sync_batchnorm import SyncBatchNorm  # noqa: F401
from chutney.nn import parallel  # noqa: F401,E402
from chutney.nn.parallel import DataParallel  # noqa: F401
from chutney.nn.normalization import (  # noqa: F401
    GroupNorm, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, RMSNorm)
from chutney.nn.transformer import (  # noqa: F401
    MultiheadAttention, Transformer, TransformerDecoder, TransformerDecoderLayer,
    TransformerEncoder, TransformerEncoderLayer)
