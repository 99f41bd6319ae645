"""torch.optim.swa_utils: AveragedModel (stochastic weight averaging, or
an exponential moving average of the weights), SWALR, update_bn."""

import copy
import itertools
import math

from chutney import _C
from chutney.autograd import no_grad
from chutney.nn.modules import Module
from chutney.optim.lr_scheduler import LRScheduler

__all__ = ["AveragedModel", "SWALR", "update_bn", "get_ema_avg_fn", "get_swa_avg_fn",
           "get_ema_multi_avg_fn", "get_swa_multi_avg_fn"]


def get_ema_avg_fn(decay=0.999):
    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param
    return ema_update


def get_swa_avg_fn():
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)
    return swa_update


def get_ema_multi_avg_fn(decay=0.999):
    def ema_update(ema_params, current_params, num_averaged):
        for p_ema, p in zip(ema_params, current_params):
            p_ema.mul_(decay).add_(p, alpha=1 - decay)
    return ema_update


def get_swa_multi_avg_fn():
    def swa_update(averaged_params, current_params, num_averaged):
        n = float(num_averaged.item() if isinstance(num_averaged, _C.Tensor) else num_averaged)
        for p_avg, p in zip(averaged_params, current_params):
            p_avg.add_((p - p_avg) / (n + 1))
    return swa_update


class AveragedModel(Module):
    """A deep copy of model whose parameters (and buffers, with
    use_buffers) are the running average of model's, updated by
    update_parameters(model): equal weights by default (SWA), or avg_fn /
    multi_avg_fn (get_ema_multi_avg_fn(decay) for an EMA). The first update
    copies the values."""

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", _C.tensor(0, dtype=_C.int64, device=device))
        self.avg_fn, self.multi_avg_fn, self.use_buffers = avg_fn, multi_avg_fn, use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def update_parameters(self, model):
        mine = (itertools.chain(self.module.parameters(), self.module.buffers())
                if self.use_buffers else self.parameters())
        theirs = (itertools.chain(model.parameters(), model.buffers())
                  if self.use_buffers else model.parameters())
        pairs = [(a, b) for a, b in zip(mine, theirs) if a is not self.n_averaged]
        n = int(self.n_averaged.item())
        with no_grad():
            if n == 0:
                for a, b in pairs:
                    a.copy_(b.detach().to(a.device))
            elif self.multi_avg_fn is not None:
                floats = [(a, b.detach().to(a.device)) for a, b in pairs if a.is_floating_point()]
                self.multi_avg_fn([a for a, _ in floats], [b for _, b in floats],
                                  self.n_averaged.to(floats[0][0].device) if floats else n)
            else:
                fn = self.avg_fn or get_swa_avg_fn()
                for a, b in pairs:
                    if a.is_floating_point():
                        a.copy_(fn(a.detach(), b.detach().to(a.device), self.n_averaged))
                    else:
                        a.copy_(b.detach().to(a.device))
            if not self.use_buffers:
                # The buffers follow the model's (BatchNorm statistics are
                # recomputed for the average with update_bn).
                for a, b in zip(self.module.buffers(), model.buffers()):
                    a.copy_(b.detach().to(a.device))
            self.n_averaged.add_(1)

    def parameters(self, recurse=True):
        return self.module.parameters(recurse)


def update_bn(loader, model, device=None):
    """One pass over loader in training mode with every BatchNorm's running
    statistics reset and averaged over the batches with equal weights (as
    PyTorch's momentum=None), to give an averaged model statistics of its
    own."""
    from chutney.nn.modules import _BatchNorm
    from chutney.nn.utils import _layers
    bns = [m for m in model.modules() if isinstance(m, _BatchNorm) and m.track_running_stats]
    if not bns:
        return
    saved = {}
    for m in bns:
        m.running_mean.zero_()
        m.running_var.fill_(1)
        if getattr(m, "num_batches_tracked", None) is not None:
            m.num_batches_tracked.zero_()
        saved[m] = (m.momentum, m.__dict__.get(_layers._MARK, False))
        # The library's BatchNorm keeps the momentum it was made with: its
        # functional form reads m.momentum, changed below batch by batch.
        _layers.enter(m)
    was_training = model.training
    model.train()
    with no_grad():
        for k, batch in enumerate(loader):
            x = batch[0] if isinstance(batch, (list, tuple)) else batch
            if device is not None:
                x = x.to(device)
            for m in bns:
                m.momentum = 1.0 / (k + 1)
            model(x)
    for m, (momentum, was_functional) in saved.items():
        m.momentum = momentum
        if not was_functional:
            _layers.leave(m, force=True)
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's lr to swa_lr over anneal_epochs ('cos' or
    'linear'), then holds it."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos",
                 last_epoch=-1):
        lrs = swa_lr if isinstance(swa_lr, (list, tuple)) else [swa_lr] * len(
            optimizer.param_groups)
        if len(lrs) != len(optimizer.param_groups):
            raise ValueError(f"swa_lr must have the same length as optimizer.param_groups: "
                             f"swa_lr has {len(lrs)}, optimizer.param_groups has "
                             f"{len(optimizer.param_groups)}")
        for group, lr in zip(optimizer.param_groups, lrs):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must by one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_func = self._cos if anneal_strategy == "cos" else self._linear
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear(t):
        return t

    @staticmethod
    def _cos(t):
        return (1 - math.cos(math.pi * t)) / 2

    def get_lr(self):
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_t = max(0, min(1, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self.anneal_func(prev_t)
        prev_lrs = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha)
                    for g in self.optimizer.param_groups]
        t = max(0, min(1, step / max(1, self.anneal_epochs)))
        alpha = self.anneal_func(t)
        return [g["swa_lr"] * alpha + lr * (1 - alpha)
                for g, lr in zip(self.optimizer.param_groups, prev_lrs)]

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)
