"""torch.optim's Adamax, NAdam, RAdam, Adadelta, Rprop, ASGD and LBFGS in
Python over chutney tensor ops, and SparseAdam's refusal.

Each follows PyTorch 1.13's default (single-tensor) step op by op, so
float32 results round as PyTorch's do, with its state entries and their
types: "step" a float32 0-d tensor (an int for Adadelta and Rprop),
NAdam's mu_product and ASGD's eta and mu float32 0-d tensors (which
load_state_dict gives the parameter's dtype, as PyTorch's does). The
hyper-parameters are read from the groups at every step, so schedulers
and edits of param_groups take effect at the next step.

Options PyTorch 2 added are taken too: NAdam's and RAdam's maximize and
decoupled_weight_decay (PyTorch 2's algorithm: the parameter is scaled by
1 - lr * weight_decay before the update) and LBFGS's lr check;
capturable is accepted and has no effect (no CUDA graphs here);
differentiable=True is refused. foreach is accepted and only changes
NAdam, where PyTorch 1.13's foreach step differs from its default one
(see NAdam).
"""

import math

from chutney import _C
from chutney.autograd import enable_grad, no_grad
from chutney.optim.optimizer import Optimizer

__all__ = ["Adamax", "NAdam", "RAdam", "Adadelta", "Rprop", "ASGD", "LBFGS", "SparseAdam"]


def _check_lr(lr):
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")


def _check_adam_like(lr, betas, eps, weight_decay):
    _check_lr(lr)
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


def _check_not_differentiable(name, differentiable):
    if differentiable:
        raise NotImplementedError(f"{name}(differentiable=True): a step recorded by autograd is "
                                  "not supported (the update is made under no_grad)")


def _grad(p, maximize):
    return -p.grad if maximize else p.grad


def _count_step(state):
    # The float32 count PyTorch keeps (exact for any realistic step number).
    step_t = state["step"]
    step_t.add_(1)
    return step_t.item()


class Adamax(Optimizer):
    """Adam over the infinity norm: exp_inf = max(beta2 * exp_inf, |g| + eps)."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        _check_adam_like(lr, betas, eps, weight_decay)
        _check_not_differentiable("Adamax", differentiable)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize))

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                beta1, beta2 = group["betas"]
                lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = _grad(p, group["maximize"])
                    state = self.state[p]
                    if not state:
                        state["step"] = _C.tensor(0.0)
                        state["exp_avg"] = _C.zeros_like(p)
                        state["exp_inf"] = _C.zeros_like(p)
                    step = _count_step(state)
                    if wd != 0:
                        grad = grad.add(p, alpha=wd)
                    exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
                    exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                    exp_inf.copy_(exp_inf.mul_(beta2).maximum(grad.abs().add_(eps)))
                    p.addcdiv_(exp_avg, exp_inf, value=-(lr / (1 - beta1 ** step)))
        return loss


class NAdam(Optimizer):
    """Adam with Nesterov momentum and the momentum schedule
    mu_t = beta1 * (1 - 0.5 * 0.96 ** (t * momentum_decay)).

    PyTorch 1.13's default step takes the product of the mu's up to t + 1
    as mu_product * mu_t * mu_{t+1} (mu_t counted twice); its foreach=True
    step, and PyTorch 2, take mu_product * mu_{t+1}. Both are reproduced:
    foreach=True selects the latter (with 1.13's foreach arithmetic)."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, foreach=None, *, maximize=False,
                 decoupled_weight_decay=False, capturable=False, differentiable=False):
        _check_adam_like(lr, betas, eps, weight_decay)
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        _check_not_differentiable("NAdam", differentiable)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay, foreach=foreach,
                                      maximize=maximize,
                                      decoupled_weight_decay=decoupled_weight_decay))

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                beta1, beta2 = group["betas"]
                lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
                psi = group["momentum_decay"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = _grad(p, group.get("maximize", False))
                    state = self.state[p]
                    if not state:
                        state["step"] = _C.tensor(0.0)
                        state["mu_product"] = _C.tensor(1.0)
                        state["exp_avg"] = _C.zeros_like(p)
                        state["exp_avg_sq"] = _C.zeros_like(p)
                    step = _count_step(state)
                    bias_correction2 = 1 - beta2 ** step
                    if wd != 0:
                        if group.get("decoupled_weight_decay", False):
                            p.mul_(1 - lr * wd)
                        else:
                            grad = grad.add(p, alpha=wd)
                    mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * psi))
                    mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * psi))
                    mu_product = state["mu_product"]
                    mu_product.mul_(mu)
                    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                    exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                    prod = mu_product.item()
                    if group["foreach"]:
                        denom = exp_avg_sq.sqrt().div_(math.sqrt(bias_correction2)).add_(eps)
                        next_prod = prod * mu_next
                    else:
                        denom = exp_avg_sq.div(bias_correction2).sqrt().add_(eps)
                        next_prod = (mu_product * mu * mu_next).item()
                    p.addcdiv_(grad, denom, value=-lr * (1.0 - mu) / (1.0 - prod))
                    p.addcdiv_(exp_avg, denom, value=-lr * mu_next / (1.0 - next_prod))
        return loss


class RAdam(Optimizer):
    """Adam whose adaptive step is rectified by the variance of its
    estimate; plain bias-corrected momentum while rho_t <= 5."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, decoupled_weight_decay=False, capturable=False,
                 differentiable=False):
        _check_adam_like(lr, betas, eps, weight_decay)
        _check_not_differentiable("RAdam", differentiable)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize,
                                      decoupled_weight_decay=decoupled_weight_decay))

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                beta1, beta2 = group["betas"]
                lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
                rho_inf = 2 / (1 - beta2) - 1
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = _grad(p, group.get("maximize", False))
                    state = self.state[p]
                    if not state:
                        state["step"] = _C.tensor(0.0)
                        state["exp_avg"] = _C.zeros_like(p)
                        state["exp_avg_sq"] = _C.zeros_like(p)
                    step = _count_step(state)
                    bias_correction1 = 1 - beta1 ** step
                    bias_correction2 = 1 - beta2 ** step
                    if wd != 0:
                        if group.get("decoupled_weight_decay", False):
                            p.mul_(1 - lr * wd)
                        else:
                            grad = grad.add(p, alpha=wd)
                    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                    exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                    corrected = exp_avg / bias_correction1
                    rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
                    if rho_t > 5.0:
                        rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf /
                                         ((rho_inf - 4) * (rho_inf - 2) * rho_t))
                        adaptive = math.sqrt(bias_correction2) / exp_avg_sq.sqrt().add_(eps)
                        p.add_(corrected * lr * adaptive * rect, alpha=-1.0)
                    else:
                        p.add_(corrected * lr, alpha=-1.0)
        return loss


class Adadelta(Optimizer):
    """Steps scaled by the ratio of running RMS of updates to running RMS of
    gradients, times lr."""

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 maximize=False, capturable=False, differentiable=False):
        _check_lr(lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        _check_not_differentiable("Adadelta", differentiable)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize, foreach=foreach))

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                lr, rho, eps, wd = group["lr"], group["rho"], group["eps"], group["weight_decay"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = _grad(p, group["maximize"])
                    state = self.state[p]
                    if not state:
                        state["step"] = 0
                        state["square_avg"] = _C.zeros_like(p)
                        state["acc_delta"] = _C.zeros_like(p)
                    state["step"] += 1
                    if wd != 0:
                        grad = grad.add(p, alpha=wd)
                    square_avg, acc_delta = state["square_avg"], state["acc_delta"]
                    square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
                    std = square_avg.add(eps).sqrt_()
                    delta = acc_delta.add(eps).sqrt_().div_(std).mul_(grad)
                    acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
                    p.add_(delta, alpha=-lr)
        return loss


class Rprop(Optimizer):
    """Resilient backpropagation: per-element step sizes grown by etaplus
    while the gradient keeps its sign, shrunk by etaminus (and that step
    skipped) when it flips; only the gradient's sign moves the parameter.
    The step sizes start at the group's lr when a parameter is first
    stepped (a later lr change does not reach them, as in PyTorch)."""

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), foreach=None,
                 maximize=False, *, capturable=False, differentiable=False):
        _check_lr(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        _check_not_differentiable("Rprop", differentiable)
        super().__init__(params, dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach,
                                      maximize=maximize))

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                etaminus, etaplus = group["etas"]
                size_min, size_max = group["step_sizes"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = _grad(p, group["maximize"])
                    state = self.state[p]
                    if not state:
                        state["step"] = 0
                        state["prev"] = _C.zeros_like(p)
                        state["step_size"] = _C.zeros_like(grad).fill_(group["lr"])
                    state["step"] += 1
                    prev, step_size = state["prev"], state["step_size"]
                    factor = grad.mul(prev).sign()
                    flipped = factor.lt(0)
                    # sign() leaves NaN where the product is NaN, and so does PyTorch's factor
                    factor.masked_fill_(factor.gt(0), etaplus)
                    factor.masked_fill_(flipped, etaminus)
                    factor.masked_fill_(factor.eq(0), 1)
                    step_size.mul_(factor).clamp_(size_min, size_max)
                    grad = grad.masked_fill(flipped, 0)
                    p.addcmul_(grad.sign(), step_size, value=-1)
                    prev.copy_(grad)
        return loss


class ASGD(Optimizer):
    """Averaged SGD: an SGD step with decaying eta and weight decay lambd,
    and in state["ax"] the running average of the iterates from step t0 on."""

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False, differentiable=False, capturable=False):
        _check_lr(lr)
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        _check_not_differentiable("ASGD", differentiable)
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize))

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                lr, lambd, alpha, t0 = group["lr"], group["lambd"], group["alpha"], group["t0"]
                wd = group["weight_decay"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = _grad(p, group["maximize"])
                    state = self.state[p]
                    if not state:
                        state["step"] = _C.tensor(0.0)
                        state["eta"] = _C.tensor(float(lr))
                        state["mu"] = _C.tensor(1.0)
                        state["ax"] = _C.zeros_like(p)
                    step = _count_step(state)
                    if wd != 0:
                        grad = grad.add(p, alpha=wd)
                    eta, mu, ax = state["eta"], state["mu"], state["ax"]
                    p.mul_(1 - lambd * eta.item())
                    p.add_(grad, alpha=-eta.item())
                    if mu.item() != 1:
                        ax.add_(p.sub(ax).mul(mu.item()))
                    else:
                        ax.copy_(p)
                    # PyTorch makes the new values float32 tensors before
                    # copying them in, so they are float32-rounded even in a
                    # float64 state.
                    eta.copy_(_C.tensor(lr / math.pow(1 + lambd * lr * step, alpha)))
                    mu.copy_(_C.tensor(1 / max(1, step - t0)))
        return loss


def _cubic_min(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimiser of the cubic through (x1, f1, g1) and (x2, f2, g2),
    clamped to bounds (default: between x1 and x2); the middle of the
    bounds when the cubic has no minimum."""
    lo, hi = bounds if bounds is not None else ((x1, x2) if x1 <= x2 else (x2, x1))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if d2_square >= 0:
        d2 = d2_square.sqrt()
        if x1 <= x2:
            x = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            x = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(x, lo), hi)
    return (lo + hi) / 2.0


def _strong_wolfe(evaluate, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_ls=25):
    """A step t along d meeting the strong Wolfe conditions (sufficient
    decrease c1, curvature c2): a bracketing phase growing t by cubic
    extrapolation, then zooming into the bracket by cubic interpolation.
    Returns (loss, flat gradient, t, evaluations)."""
    d_norm = d.abs().max()
    g = g.clone()
    f_new, g_new = evaluate(x, t, d)
    evals = 1
    gtd_new = g_new.dot(d)

    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    ls_iter = 0
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.clone()], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.clone()], [gtd_prev, gtd_new]
            break
        # still descending: extrapolate, at least 1% further, at most 10x
        lo, hi = t + 0.01 * (t - t_prev), t * 10
        t_prev, t = t, _cubic_min(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(lo, hi))
        f_prev, g_prev, gtd_prev = f_new, g_new.clone(), gtd_new
        f_new, g_new = evaluate(x, t, d)
        evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1

    if ls_iter == max_ls:
        bracket, bracket_f, bracket_g = [0, t], [f, f_new], [g, g_new]

    # zoom: bracket[low] is the best point so far
    insufficient = False
    low, high = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_min(bracket[0], bracket_f[0], bracket_gtd[0],
                       bracket[1], bracket_f[1], bracket_gtd[1])
        # keep t at least 10% of the bracket away from its ends, unless the
        # last step already made progress from the inside
        margin = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < margin:
            if insufficient or t >= max(bracket) or t <= min(bracket):
                if abs(t - max(bracket)) < abs(t - min(bracket)):
                    t = max(bracket) - margin
                else:
                    t = min(bracket) + margin
                insufficient = False
            else:
                insufficient = True
        else:
            insufficient = False

        f_new, g_new = evaluate(x, t, d)
        evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1

        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low]:
            bracket[high], bracket_f[high] = t, f_new
            bracket_g[high], bracket_gtd[high] = g_new.clone(), gtd_new
            low, high = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                # the minimum lies between low and t: the old low becomes high
                bracket[high], bracket_f[high] = bracket[low], bracket_f[low]
                bracket_g[high], bracket_gtd[high] = bracket_g[low], bracket_gtd[low]
            bracket[low], bracket_f[low] = t, f_new
            bracket_g[low], bracket_gtd[low] = g_new.clone(), gtd_new

    return bracket_f[low], bracket_g[low], bracket[low], evals


class LBFGS(Optimizer):
    """L-BFGS over all the parameters as one flat vector (one parameter
    group). step(closure) runs up to max_iter iterations, calling closure
    (which zeroes the gradients, computes the loss, calls backward and
    returns the loss) as often as it needs, at most about max_eval times;
    it returns the loss of the first call. line_search_fn: None (fixed
    steps of lr) or "strong_wolfe". Its state lives under the first
    parameter."""

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None):
        _check_lr(lr)
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                                      tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change,
                                      history_size=history_size, line_search_fn=line_search_fn))
        self._params = self.param_groups[0]["params"]
        self._numel_cache = None

    def _new_group(self, group):
        if self.param_groups:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")

    def _numel(self):
        if self._numel_cache is None:
            self._numel_cache = sum(p.numel() for p in self._params)
        return self._numel_cache

    def _flat_grad(self):
        return _C.cat([p.grad.reshape(-1) if p.grad is not None
                       else _C.zeros(p.numel(), dtype=p.dtype, device=p.device)
                       for p in self._params], 0)

    def _add_step(self, t, d):
        offset = 0
        for p in self._params:
            n = p.numel()
            p.add_(d[offset:offset + n].view_as(p), alpha=float(t))
            offset += n

    def _evaluate_at(self, closure, x, t, d):
        """Loss and flat gradient at x + t * d; the parameters go back to x."""
        self._add_step(t, d)
        with enable_grad():
            loss = float(closure())
        g = self._flat_grad()
        for p, v in zip(self._params, x):
            p.copy_(v)
        return loss, g

    def step(self, closure=None):
        if closure is None:
            raise TypeError("LBFGS.step() needs a closure that reevaluates the model (zero_grad, "
                            "loss, backward) and returns the loss")
        orig_loss = self._closure_loss(closure)
        with no_grad():
            return self._iterate(closure, orig_loss)

    def _iterate(self, closure, orig_loss):
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]

        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if flat_grad.abs().max() <= tolerance_grad:
            return orig_loss

        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        H_diag = state.get("H_diag")
        prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1

            if state["n_iter"] == 1:
                d = flat_grad.neg()
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1
            else:
                y = flat_grad.sub(prev_flat_grad)
                s = d.mul(t)
                ys = y.dot(s)
                # a pair is kept only when it has positive curvature, so
                # that the implied inverse Hessian stays positive definite
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / y.dot(y)

                # two-loop recursion: d = -H g
                num_old = len(old_dirs)
                if "al" not in state:
                    state["al"] = [None] * history_size
                al = state["al"]
                q = flat_grad.neg()
                for i in range(num_old - 1, -1, -1):
                    al[i] = old_stps[i].dot(q) * ro[i]
                    q.add_(old_dirs[i], alpha=float(-al[i]))
                d = r = q * H_diag
                for i in range(num_old):
                    be_i = old_dirs[i].dot(r) * ro[i]
                    r.add_(old_stps[i], alpha=float(al[i] - be_i))

            if prev_flat_grad is None:
                prev_flat_grad = flat_grad.clone()
            else:
                prev_flat_grad.copy_(flat_grad)
            prev_loss = loss

            # the first step is scaled down to at most lr / |g|_1
            t = min(1.0, 1.0 / flat_grad.abs().sum()) * lr if state["n_iter"] == 1 else lr

            gtd = flat_grad.dot(d)
            if gtd > -tolerance_change:  # not a descent direction
                break

            ls_evals = 0
            if line_search_fn is not None:
                if line_search_fn != "strong_wolfe":
                    raise RuntimeError("only 'strong_wolfe' is supported")
                x_init = [p.clone() for p in self._params]
                loss, flat_grad, t, ls_evals = _strong_wolfe(
                    lambda x, t_, d_: self._evaluate_at(closure, x, t_, d_),
                    x_init, t, d, loss, flat_grad, gtd)
                self._add_step(t, d)
                opt_cond = flat_grad.abs().max() <= tolerance_grad
            else:
                self._add_step(t, d)
                opt_cond = False
                # the last iteration's loss is not needed (the closure's
                # first call at the next step computes it)
                if n_iter != max_iter:
                    with enable_grad():
                        loss = float(closure())
                    flat_grad = self._flat_grad()
                    opt_cond = flat_grad.abs().max() <= tolerance_grad
                    ls_evals = 1
            current_evals += ls_evals
            state["func_evals"] += ls_evals

            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if d.mul(t).abs().max() <= tolerance_change:
                break
            if abs(loss - prev_loss) < tolerance_change:
                break

        state["d"], state["t"] = d, t
        state["old_dirs"], state["old_stps"], state["ro"] = old_dirs, old_stps, ro
        state["H_diag"] = H_diag
        state["prev_flat_grad"], state["prev_loss"] = prev_flat_grad, prev_loss
        return orig_loss


class SparseAdam(Optimizer):
    """torch.optim.SparseAdam needs sparse gradients (nn.Embedding(...,
    sparse=True)), which chutney does not have: the arguments are checked
    as PyTorch checks them, then NotImplementedError."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        if not 0.0 < lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        raise NotImplementedError(
            "SparseAdam: chutney has no sparse gradients (nn.Embedding's sparse=True is not "
            "supported); use Adam or AdamW on the dense gradient (unlike SparseAdam, they also "
            "move rows whose gradient is zero, by their momentum)")
