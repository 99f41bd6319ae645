"""torch.optim.lr_scheduler (PyTorch 1.13's formulas, its chainable forms
where it has them, so the lrs are the same doubles).

StepLR, ExponentialLR, CosineAnnealingLR and LinearLR are the library's
schedules. MultiStepLR, ConstantLR, LambdaLR, MultiplicativeLR,
PolynomialLR, OneCycleLR, CyclicLR, CosineAnnealingWarmRestarts, SequentialLR,
ChainedScheduler and ReduceLROnPlateau are computed here and write
group["lr"]; both kinds combine in SequentialLR and ChainedScheduler.
Creating one applies step 0, as in PyTorch; call step() after
optimizer.step()."""

import math
import types
import warnings
from bisect import bisect_right
from collections import Counter

from chutney import _C
from chutney.optim.optimizer import Optimizer

EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being "
    "deprecated where possible. Please use `scheduler.step()` to step the "
    "scheduler. During the deprecation, if epoch is different from None, the "
    "closed form is used instead of the new chainable form, where available."
)


class LRScheduler:
    """torch's base class: step() moves last_epoch on and sets each group's
    lr to get_lr()'s value (the closed form, where a subclass has one, for
    the deprecated step(epoch))."""

    def __init__(self, optimizer, last_epoch=-1, verbose=False):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for g in optimizer.param_groups:
                g.setdefault("initial_lr", g["lr"])
        else:
            for i, g in enumerate(optimizer.param_groups):
                if "initial_lr" not in g:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] "
                                   "when resuming an optimizer")
        self.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self.verbose = verbose
        self._initial_step()

    def _initial_step(self):
        self._step_count = 0
        self.step()

    def get_lr(self):
        raise NotImplementedError

    def get_last_lr(self):
        return self._last_lr

    def print_lr(self, is_verbose, group, lr, epoch=None):
        if is_verbose:
            if epoch is None:
                print(f"Adjusting learning rate of group {group} to {lr:.4e}.")
            else:
                e = ("%.2f" if isinstance(epoch, float) else "%.5d") % epoch
                print(f"Epoch {e}: adjusting learning rate of group {group} to {lr:.4e}.")

    def step(self, epoch=None):
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning)
        self._step_to(epoch)

    def _step_to(self, epoch=None):
        """step(epoch) without the deprecation warning: SequentialLR restarts
        its schedules with step(0), as torch does, and the user did not ask
        for a deprecated call."""
        self._step_count += 1
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            closed = getattr(self, "_get_closed_form_lr", None)
            values = closed() if closed is not None else self.get_lr()
        self._set_lrs(values, epoch)

    def _set_lrs(self, values, epoch=None):
        for i, (g, lr) in enumerate(zip(self.optimizer.param_groups, values)):
            g["lr"] = lr
            self.print_lr(self.verbose, i, lr, epoch)
        self.optimizer._push_lr()
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)


_LRScheduler = LRScheduler


def _edit_state(c, **values):
    """Rewrites some scalar entries of a library object's state: the binding
    sets them only through a whole state."""
    items = [(k, _C.tensor(values[k], dtype=t.dtype) if k in values else t) for k, t in c.state()]
    c.load_state(items)


# torch's _get_closed_form_lr of the library's schedules, by their state's
# "kind": the binding steps them only by one epoch at a time.
_CLOSED_FORMS = {
    "step": lambda s, e: s["base_lr"] * s["gamma"] ** (e // s["step_size"]),
    "exponential": lambda s, e: s["base_lr"] * s["gamma"] ** e,
    "cosine_annealing": lambda s, e: (s["eta_min"] + (s["base_lr"] - s["eta_min"]) *
                                      (1 + math.cos(math.pi * e / s["t_max"])) / 2),
    "linear": lambda s, e: s["base_lr"] * (
        s["start_factor"] +
        (s["end_factor"] - s["start_factor"]) * min(s["total_iters"], e) / s["total_iters"]),
}


class _LibrarySchedule(LRScheduler):
    """One library schedule per param group (the library's optimisers are
    one per group; a Python optimiser lends one that only holds each
    group's lr); the library computes the lr."""

    _kind = None

    def __init__(self, optimizer, *args):
        self.optimizer = optimizer
        optimizer._push_lr()
        for g, c in zip(optimizer.param_groups, optimizer._lr_holders()):
            init = g.setdefault("initial_lr", g["lr"])
            if init != c.lr:
                # The library takes the lr at its first schedule as the
                # initial lr; a schedule of this module may have moved the
                # lr since it set initial_lr. A schedule that leaves the lr
                # as it is sets the library's (if none did yet).
                lr = c.lr
                c.lr = init
                _C.LRScheduler("ExponentialLR", c, 1.0)
                c.lr = lr
        self._c = [_C.LRScheduler(self._kind, c, *args) for c in optimizer._lr_holders()]
        self._pull_lr()

    def _pull_lr(self):
        for g, c in zip(self.optimizer.param_groups, self.optimizer._lr_holders()):
            g["lr"] = c.lr

    def _initial_step(self):
        for s in self._c:
            _edit_state(s, step_count=0)
        self.step()

    def step(self, epoch=None):
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning)
            self._step_to(epoch)
            return
        self.optimizer._push_lr()
        for s in self._c:
            s.step()
        self._pull_lr()

    def _step_to(self, epoch=None):
        if epoch is None:
            self.step()
            return
        for g, c, s in zip(self.optimizer.param_groups, self.optimizer._lr_holders(), self._c):
            st = {k: bytes(v.tolist()).decode() if k == "kind" else v.item()
                  for k, v in s.state()}
            lr = _CLOSED_FORMS[st["kind"]](st, epoch)
            _edit_state(s, last_epoch=epoch, step_count=st["step_count"] + 1, last_lr=lr)
            g["lr"] = lr
            c.lr = lr

    def get_last_lr(self):
        return [s.last_lr for s in self._c]

    @property
    def base_lrs(self):
        return [dict(s.state())["base_lr"].item() for s in self._c]

    @property
    def last_epoch(self):
        return self._c[0].last_epoch

    @last_epoch.setter
    def last_epoch(self, value):
        for s in self._c:
            _edit_state(s, last_epoch=value)

    def state_dict(self):
        return {f"{i}.{k}": v for i, s in enumerate(self._c) for k, v in s.state()}

    def load_state_dict(self, state_dict):
        for i, s in enumerate(self._c):
            p = f"{i}."
            s.load_state([(k[len(p):], v) for k, v in state_dict.items() if k.startswith(p)])


class StepLR(_LibrarySchedule):
    _kind = "StepLR"

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1, verbose=False):
        super().__init__(optimizer, step_size, gamma)


class ExponentialLR(_LibrarySchedule):
    _kind = "ExponentialLR"

    def __init__(self, optimizer, gamma, last_epoch=-1, verbose=False):
        super().__init__(optimizer, gamma)


class CosineAnnealingLR(_LibrarySchedule):
    _kind = "CosineAnnealingLR"

    def __init__(self, optimizer, T_max, eta_min=0, last_epoch=-1, verbose=False):
        super().__init__(optimizer, T_max, eta_min)


class LinearLR(_LibrarySchedule):
    _kind = "LinearLR"

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5,
                 last_epoch=-1, verbose=False):
        super().__init__(optimizer, start_factor, end_factor, total_iters)


def _per_group(name, optimizer, value):
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(f"expected {len(optimizer.param_groups)} values for {name}, "
                             f"got {len(value)}")
        return list(value)
    return [value] * len(optimizer.param_groups)


class _LambdaSchedule(LRScheduler):
    def __init__(self, optimizer, lr_lambda, last_epoch=-1, verbose=False):
        self.optimizer = optimizer
        if not isinstance(lr_lambda, (list, tuple)):
            self.lr_lambdas = [lr_lambda] * len(optimizer.param_groups)
        else:
            if len(lr_lambda) != len(optimizer.param_groups):
                raise ValueError(f"Expected {len(optimizer.param_groups)} lr_lambdas, but got "
                                 f"{len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        super().__init__(optimizer, last_epoch, verbose)

    def state_dict(self):
        """As torch: a callable object's attributes are saved, a function
        or lambda is not."""
        sd = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        sd["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else fn.__dict__.copy()
                            for fn in self.lr_lambdas]
        return sd

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        lr_lambdas = state_dict.pop("lr_lambdas")
        self.__dict__.update(state_dict)
        for fn, saved in zip(self.lr_lambdas, lr_lambdas):
            if saved is not None:
                fn.__dict__.update(saved)


class LambdaLR(_LambdaSchedule):
    """lr = initial_lr * lr_lambda(epoch), one function or one per group."""

    def get_lr(self):
        return [base * f(self.last_epoch) for f, base in zip(self.lr_lambdas, self.base_lrs)]


class MultiplicativeLR(_LambdaSchedule):
    """lr *= lr_lambda(epoch) at each step after the first."""

    def get_lr(self):
        groups = self.optimizer.param_groups
        if self.last_epoch > 0:
            return [g["lr"] * f(self.last_epoch) for f, g in zip(self.lr_lambdas, groups)]
        return [g["lr"] for g in groups]


class MultiStepLR(LRScheduler):
    """lr *= gamma at each milestone (twice at a milestone given twice)."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1, verbose=False):
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self):
        groups = self.optimizer.param_groups
        if self.last_epoch not in self.milestones:
            return [g["lr"] for g in groups]
        return [g["lr"] * self.gamma ** self.milestones[self.last_epoch] for g in groups]

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        # a checkpoint gives the milestones back as a plain dict (int keys)
        self.milestones = Counter({int(k): v for k, v in dict(self.milestones).items()})

    def _get_closed_form_lr(self):
        milestones = sorted(self.milestones.elements())
        return [base * self.gamma ** bisect_right(milestones, self.last_epoch)
                for base in self.base_lrs]


class ConstantLR(LRScheduler):
    """lr * factor until total_iters steps, then lr."""

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1, verbose=False):
        if factor > 1.0 or factor < 0:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self):
        groups = self.optimizer.param_groups
        if self.last_epoch == 0:
            return [g["lr"] * self.factor for g in groups]
        if self.last_epoch != self.total_iters:
            return [g["lr"] for g in groups]
        return [g["lr"] * (1.0 / self.factor) for g in groups]

    def _get_closed_form_lr(self):
        return [base * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor))
                for base in self.base_lrs]


class PolynomialLR(LRScheduler):
    """lr = initial_lr * (1 - epoch / total_iters) ** power, then 0."""

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1, verbose=False):
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self):
        groups = self.optimizer.param_groups
        if self.last_epoch == 0 or self.last_epoch > self.total_iters:
            return [g["lr"] for g in groups]
        decay = ((1.0 - self.last_epoch / self.total_iters) /
                 (1.0 - (self.last_epoch - 1) / self.total_iters)) ** self.power
        return [g["lr"] * decay for g in groups]

    def _get_closed_form_lr(self):
        return [base * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters)
                ** self.power for base in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine from initial_lr to eta_min over T_i steps, then again from
    initial_lr with T_i *= T_mult. step(epoch) takes fractional epochs."""

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0, last_epoch=-1, verbose=False):
        if T_0 <= 0 or not isinstance(T_0, int):
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self):
        return [self.eta_min + (base - self.eta_min) *
                (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2 for base in self.base_lrs]

    def step(self, epoch=None):
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur - self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            if epoch < 0:
                raise ValueError(f"Expected non-negative epoch, but got {epoch}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    n = int(math.log((epoch / self.T_0 * (self.T_mult - 1) + 1), self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult ** n
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        self._set_lrs(self.get_lr(), epoch)

    def _step_to(self, epoch=None):
        self.step(epoch)  # torch does not deprecate this one's step(epoch)


class OneCycleLR(LRScheduler):
    """The 1cycle policy: from max_lr / div_factor up to max_lr over
    pct_start of total_steps, then down to initial_lr / final_div_factor
    (three_phase: down to initial_lr, then to that minimum).

    cycle_momentum (the default) moves the momentum (SGD, RMSprop) or beta1
    (Adam, AdamW) inversely, between max_momentum and base_momentum, as
    torch does; the library's optimisers take a new momentum only with their
    whole state, so each step copies the optimiser's buffers once more
    (cycle_momentum=False avoids that). An SGD or RMSprop created with
    momentum=0 has no momentum buffer to cycle: its momentum stays 0 (torch
    would cycle it from 0.95), with a warning."""

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None,
                 pct_start=0.3, anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85,
                 max_momentum=0.95, div_factor=25., final_div_factor=1e4, three_phase=False,
                 last_epoch=-1, verbose=False):
        self.optimizer = optimizer
        if total_steps is None and epochs is None and steps_per_epoch is None:
            raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
        if total_steps is not None:
            if total_steps <= 0 or not isinstance(total_steps, int):
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        else:
            if epochs is None or epochs <= 0 or not isinstance(epochs, int):
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if (steps_per_epoch is None or steps_per_epoch <= 0 or
                    not isinstance(steps_per_epoch, int)):
                raise ValueError("Expected positive integer steps_per_epoch, but got "
                                 f"{steps_per_epoch}")
            self.total_steps = epochs * steps_per_epoch
        if three_phase:
            self._schedule_phases = [
                {"end_step": float(pct_start * self.total_steps) - 1, "start_lr": "initial_lr",
                 "end_lr": "max_lr", "start_momentum": "max_momentum",
                 "end_momentum": "base_momentum"},
                {"end_step": float(2 * pct_start * self.total_steps) - 2, "start_lr": "max_lr",
                 "end_lr": "initial_lr", "start_momentum": "base_momentum",
                 "end_momentum": "max_momentum"},
                {"end_step": self.total_steps - 1, "start_lr": "initial_lr", "end_lr": "min_lr",
                 "start_momentum": "max_momentum", "end_momentum": "max_momentum"},
            ]
        else:
            self._schedule_phases = [
                {"end_step": float(pct_start * self.total_steps) - 1, "start_lr": "initial_lr",
                 "end_lr": "max_lr", "start_momentum": "max_momentum",
                 "end_momentum": "base_momentum"},
                {"end_step": self.total_steps - 1, "start_lr": "max_lr", "end_lr": "min_lr",
                 "start_momentum": "base_momentum", "end_momentum": "max_momentum"},
            ]
        if pct_start < 0 or pct_start > 1 or not isinstance(pct_start, float):
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError("anneal_strategy must by one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self._anneal_func_type = anneal_strategy

        max_lrs = _per_group("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for m, g in zip(max_lrs, optimizer.param_groups):
                g["initial_lr"] = m / div_factor
                g["max_lr"] = m
                g["min_lr"] = g["initial_lr"] / final_div_factor

        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("optimizer must support momentum with `cycle_momentum` option "
                                 "enabled")
            self.use_beta1 = "betas" in optimizer.defaults
            if not self.use_beta1 and any(g["momentum"] <= 0 for g in optimizer.param_groups):
                warnings.warn(
                    f"OneCycleLR: momentum is not cycled: {type(optimizer).__name__} was created "
                    "with momentum=0, and the library's optimiser cannot take a momentum buffer "
                    "later (torch would cycle it between max_momentum and base_momentum); create "
                    "it with momentum > 0, or pass cycle_momentum=False", UserWarning)
                self.cycle_momentum = False
        if self.cycle_momentum:
            self._pushed_momentum = [None] * len(optimizer.param_groups)
            maxs = _per_group("max_momentum", optimizer, max_momentum)
            bases = _per_group("base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for m, b, g in zip(maxs, bases, optimizer.param_groups):
                    if self.use_beta1:
                        g["betas"] = (m, *g["betas"][1:])
                    else:
                        g["momentum"] = m
                    g["max_momentum"] = m
                    g["base_momentum"] = b
        super().__init__(optimizer, last_epoch, verbose)

    def _anneal(self, start, end, pct):
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        lrs = []
        step_num = self.last_epoch
        if step_num > self.total_steps:
            raise ValueError(f"Tried to step {step_num + 1} times. The specified number of total "
                             f"steps is {self.total_steps}")
        for g in self.optimizer.param_groups:
            start_step = 0
            for i, phase in enumerate(self._schedule_phases):
                end_step = phase["end_step"]
                if step_num <= end_step or i == len(self._schedule_phases) - 1:
                    pct = (step_num - start_step) / (end_step - start_step)
                    lr = self._anneal(g[phase["start_lr"]], g[phase["end_lr"]], pct)
                    if self.cycle_momentum:
                        mom = self._anneal(g[phase["start_momentum"]], g[phase["end_momentum"]],
                                           pct)
                    break
                start_step = phase["end_step"]
            lrs.append(lr)
            if self.cycle_momentum:
                if self.use_beta1:
                    g["betas"] = (mom, *g["betas"][1:])
                else:
                    g["momentum"] = mom
        return lrs

    def _set_lrs(self, values, epoch=None):
        super()._set_lrs(values, epoch)
        if self.cycle_momentum:
            self._push_momentum()

    def _push_momentum(self):
        # A Python optimiser reads group["betas"] / ["momentum"] at each
        # step; a library one has them in its state.
        cs = getattr(self.optimizer, "_c", None)
        if not cs:
            return
        name = "beta1" if self.use_beta1 else "momentum"
        for i, (g, c) in enumerate(zip(self.optimizer.param_groups, cs)):
            m = g["betas"][0] if self.use_beta1 else g["momentum"]
            if m != self._pushed_momentum[i]:
                _edit_state(c, **{name: m})
                self._pushed_momentum[i] = m

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items()
                if k not in ("optimizer", "_pushed_momentum")}

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        if self.cycle_momentum:
            # The optimiser's momentum is whatever its own state says now.
            self._pushed_momentum = [None] * len(self.optimizer.param_groups)


class CyclicLR(LRScheduler):
    """Cyclical learning rates (PyTorch 1.13's CyclicLR): each cycle goes
    from base_lr up to max_lr in step_size_up steps and back down in
    step_size_down, the amplitude scaled by mode ('triangular': 1,
    'triangular2': halved each cycle, 'exp_range': gamma**iteration) or by
    scale_fn. cycle_momentum moves the optimiser's momentum inversely,
    between max_momentum and base_momentum (an optimiser without
    'momentum', such as Adam, is refused as in PyTorch 1.13); an SGD or
    RMSprop of the library created with momentum=0 has no buffer to cycle,
    so its momentum stays 0, with a warning (see OneCycleLR)."""

    def __init__(self, optimizer, base_lr, max_lr, step_size_up=2000, step_size_down=None,
                 mode="triangular", gamma=1.0, scale_fn=None, scale_mode="cycle",
                 cycle_momentum=True, base_momentum=0.8, max_momentum=0.9, last_epoch=-1,
                 verbose=False):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        base_lrs = _per_group("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, g in zip(base_lrs, optimizer.param_groups):
                g["lr"] = lr
        self.max_lrs = _per_group("max_lr", optimizer, max_lr)
        step_size_up = float(step_size_up)
        step_size_down = float(step_size_down) if step_size_down is not None else step_size_up
        self.total_size = step_size_up + step_size_down
        self.step_ratio = step_size_up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode, self.gamma = mode, gamma
        # a user's scale_fn is not saved by state_dict (it may be a lambda)
        self._scale_fn_custom = scale_fn
        if scale_fn is None:
            self.scale_mode = "iterations" if mode == "exp_range" else "cycle"
        else:
            self.scale_mode = scale_mode
        self.cycle_momentum = cycle_momentum
        self.use_beta1 = False
        if cycle_momentum:
            if "momentum" not in optimizer.defaults:
                raise ValueError("optimizer must support momentum with `cycle_momentum` option "
                                 "enabled")
            if getattr(optimizer, "_c", None) and any(g["momentum"] <= 0
                                                      for g in optimizer.param_groups):
                warnings.warn(
                    f"CyclicLR: momentum is not cycled: {type(optimizer).__name__} was created "
                    "with momentum=0, and the library's optimiser cannot take a momentum buffer "
                    "later (torch would cycle it between max_momentum and base_momentum); create "
                    "it with momentum > 0, or pass cycle_momentum=False", UserWarning)
                self.cycle_momentum = False
        if self.cycle_momentum:
            self._pushed_momentum = [None] * len(optimizer.param_groups)
            base_momentums = _per_group("base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for m, g in zip(base_momentums, optimizer.param_groups):
                    g["momentum"] = m
            self.base_momentums = [g["momentum"] for g in optimizer.param_groups]
            self.max_momentums = _per_group("max_momentum", optimizer, max_momentum)
        super().__init__(optimizer, last_epoch, verbose)
        self.base_lrs = base_lrs

    def scale_fn(self, x):
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2. ** (x - 1))
        return self.gamma ** x

    def get_lr(self):
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1. + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            scale_factor = x / self.step_ratio
        else:
            scale_factor = (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lrs = [base + (top - base) * scale_factor * scale
               for base, top in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for g, low, top in zip(self.optimizer.param_groups, self.base_momentums,
                                   self.max_momentums):
                g["momentum"] = top - (top - low) * scale_factor * scale
        return lrs

    def _set_lrs(self, values, epoch=None):
        super()._set_lrs(values, epoch)
        if self.cycle_momentum:
            self._push_momentum()

    _push_momentum = OneCycleLR._push_momentum

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items()
                if k not in ("optimizer", "_pushed_momentum", "_scale_fn_custom")}

    def load_state_dict(self, state_dict):
        custom = self._scale_fn_custom
        super().load_state_dict(state_dict)
        self._scale_fn_custom = custom
        if self.cycle_momentum:
            self._pushed_momentum = [None] * len(self.optimizer.param_groups)


class SequentialLR(LRScheduler):
    """schedulers[0] until milestones[0], then schedulers[1] restarted at its
    epoch 0 (its closed form), and so on."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1, verbose=False):
        for i, s in enumerate(schedulers):
            if s.optimizer is not optimizer:
                raise ValueError("Sequential Schedulers expects all schedulers to belong to the "
                                 f"same optimizer, but got schedulers at index {i} to be "
                                 "different than the optimizer passed in.")
        if len(milestones) != len(schedulers) - 1:
            raise ValueError("Sequential Schedulers expects number of schedulers provided to be "
                             "one more than the number of milestone points, but got number of "
                             f"schedulers {len(schedulers)} and the number of milestones to be "
                             f"equal to {len(milestones)}")
        self._schedulers = list(schedulers)
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for g in optimizer.param_groups:
            g["lr"] = g["initial_lr"]
        optimizer._push_lr()
        # Each schedule stepped once when it was made: undo, then redo the
        # first one's.
        for s in self._schedulers:
            s.last_epoch -= 1
        self._schedulers[0]._initial_step()
        self._last_lr = self._schedulers[0].get_last_lr()

    def step(self):
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        s = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            s._step_to(0)
        else:
            s.step()
        self._last_lr = s.get_last_lr()

    def state_dict(self):
        sd = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        sd["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return sd

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        children = state_dict.pop("_schedulers")
        self.__dict__.update(state_dict)
        for s, sd in zip(self._schedulers, children):
            s.load_state_dict(sd)


class ChainedScheduler(LRScheduler):
    """Steps every schedule at each step(), so their factors multiply."""

    def __init__(self, schedulers, optimizer=None):
        if optimizer is None:
            optimizer = schedulers[0].optimizer
        for i, s in enumerate(schedulers):
            if s.optimizer is not optimizer:
                raise ValueError("ChainedScheduler expects all schedulers to belong to the same "
                                 f"optimizer, but got schedulers at index 0 and {i} to be "
                                 "different")
        self._schedulers = list(schedulers)
        self.optimizer = optimizer
        self._last_lr = [g["lr"] for g in optimizer.param_groups]

    def step(self):
        for s in self._schedulers:
            s.step()
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    state_dict = SequentialLR.state_dict
    load_state_dict = SequentialLR.load_state_dict


class ReduceLROnPlateau(LRScheduler):
    """lr = max(lr * factor, min_lr) after more than patience steps without
    the metric improving by threshold, then cooldown steps of rest."""

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4,
                 threshold_mode="rel", cooldown=0, min_lr=0, eps=1e-8, verbose=False):
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        self.factor = factor
        self.optimizer = optimizer
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != len(optimizer.param_groups):
                raise ValueError(f"expected {len(optimizer.param_groups)} min_lrs, got "
                                 f"{len(min_lr)}")
            self.min_lrs = list(min_lr)
        else:
            self.min_lrs = [min_lr] * len(optimizer.param_groups)
        self.patience = patience
        self.verbose = verbose
        self.cooldown = cooldown
        self.cooldown_counter = 0
        self.eps = eps
        self.last_epoch = 0
        self._init_is_better(mode, threshold, threshold_mode)
        self._reset()
        self._last_lr = [g["lr"] for g in optimizer.param_groups]

    def _reset(self):
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def step(self, metrics, epoch=None):
        current = float(metrics)  # a 0-d tensor too
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning)
        self.last_epoch = epoch
        if self.is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs in cooldown do not count
        if self.num_bad_epochs > self.patience:
            self._reduce_lr(epoch)
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def _reduce_lr(self, epoch):
        for i, g in enumerate(self.optimizer.param_groups):
            old = float(g["lr"])
            new = max(old * self.factor, self.min_lrs[i])
            if old - new > self.eps:
                g["lr"] = new
                if self.verbose:
                    e = ("%.2f" if isinstance(epoch, float) else "%.5d") % epoch
                    print(f"Epoch {e}: reducing learning rate of group {i} to {new:.4e}.")
        self.optimizer._push_lr()

    @property
    def in_cooldown(self):
        return self.cooldown_counter > 0

    def is_better(self, a, best):
        if self.mode == "min" and self.threshold_mode == "rel":
            return a < best * (1. - self.threshold)
        if self.mode == "min" and self.threshold_mode == "abs":
            return a < best - self.threshold
        if self.mode == "max" and self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.)
        return a > best + self.threshold

    def _init_is_better(self, mode, threshold, threshold_mode):
        if mode not in ("min", "max"):
            raise ValueError("mode " + mode + " is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError("threshold mode " + threshold_mode + " is unknown!")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        self._init_is_better(self.mode, self.threshold, self.threshold_mode)
