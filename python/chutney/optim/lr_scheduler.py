"""torch.optim.lr_scheduler over the library's schedules (the same chainable
formulas as PyTorch 1.13): StepLR, ExponentialLR, CosineAnnealingLR,
LinearLR. Creating one applies step 0, as in PyTorch; call step() after
optimizer.step()."""

from chutney import _C


class LRScheduler:
    _kind = None

    def __init__(self, optimizer, *args):
        self.optimizer = optimizer
        optimizer._push_lr()
        self._c = [_C.LRScheduler(self._kind, c, *args) for c in optimizer._c]
        self._pull_lr()

    def _pull_lr(self):
        for g, c in zip(self.optimizer.param_groups, self.optimizer._c):
            g["lr"] = c.lr

    def step(self):
        self.optimizer._push_lr()
        for s in self._c:
            s.step()
        self._pull_lr()

    def get_last_lr(self):
        return [s.last_lr for s in self._c]

    @property
    def last_epoch(self):
        return self._c[0].last_epoch

    def state_dict(self):
        return {f"{i}.{k}": v for i, s in enumerate(self._c) for k, v in s.state()}

    def load_state_dict(self, state_dict):
        for i, s in enumerate(self._c):
            p = f"{i}."
            s.load_state([(k[len(p):], v) for k, v in state_dict.items() if k.startswith(p)])


_LRScheduler = LRScheduler


class StepLR(LRScheduler):
    _kind = "StepLR"

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1, verbose=False):
        super().__init__(optimizer, step_size, gamma)


class ExponentialLR(LRScheduler):
    _kind = "ExponentialLR"

    def __init__(self, optimizer, gamma, last_epoch=-1, verbose=False):
        super().__init__(optimizer, gamma)


class CosineAnnealingLR(LRScheduler):
    _kind = "CosineAnnealingLR"

    def __init__(self, optimizer, T_max, eta_min=0, last_epoch=-1, verbose=False):
        super().__init__(optimizer, T_max, eta_min)


class LinearLR(LRScheduler):
    _kind = "LinearLR"

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5,
                 last_epoch=-1, verbose=False):
        super().__init__(optimizer, start_factor, end_factor, total_iters)
