"""nn.SyncBatchNorm in one process: batch normalisation (F.batch_norm) of
any [N, C, ...] input; with no other processes there is nothing to
synchronise. convert_sync_batchnorm swaps it in for BatchNorm*d layers,
sharing their tensors, as PyTorch's."""

from chutney import _C
from chutney.autograd import no_grad
from chutney.nn import functional as F
from chutney.nn.modules import Module, Parameter, _BatchNorm


class SyncBatchNorm(Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_group=None, device=None, dtype=None):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.process_group = process_group
        kw = dict(device=device, dtype=dtype)
        if affine:
            self.weight = Parameter(_C.ones(num_features, **kw))
            self.bias = Parameter(_C.zeros(num_features, **kw))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", _C.zeros(num_features, **kw))
            self.register_buffer("running_var", _C.ones(num_features, **kw))
            self.register_buffer("num_batches_tracked",
                                 _C.tensor(0, dtype=_C.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self):
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1.0)
                self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            with no_grad():
                self.weight.fill_(1.0)
                self.bias.zero_()

    def forward(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")
        if input.shape[1] == 0:
            raise ValueError("SyncBatchNorm number of input channels should be non-zero")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            with no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:  # a cumulative average of the batches' statistics
                factor = 1.0 / int(self.num_batches_tracked.item())
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        track = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if track else None,
                            self.running_var if track else None, self.weight, self.bias,
                            use_batch, factor, self.eps)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """module with every BatchNorm*d (and SyncBatchNorm) below it replaced
        by a SyncBatchNorm sharing its parameters and running statistics; a
        BatchNorm*d given itself comes back as a new SyncBatchNorm."""
        out = module
        if isinstance(module, (_BatchNorm, SyncBatchNorm)):
            out = cls(module.num_features, module.eps, module.momentum, module.affine,
                      module.track_running_stats, process_group)
            if module.affine:
                out.weight, out.bias = module.weight, module.bias
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                t = getattr(module, name, None)
                if t is not None or name in out._buffers:
                    out._buffers[name] = t
            if hasattr(module, "qconfig"):
                out.qconfig = module.qconfig
            out.train(module.training)
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out
