"""nn.ChannelShuffle (F.channel_shuffle)."""

from chutney.nn import functional as F
from chutney.nn.modules import Module


class ChannelShuffle(Module):
    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"
