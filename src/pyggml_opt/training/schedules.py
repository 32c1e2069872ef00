"""Learning-rate schedules: callables step -> learning rate, for an optimizer's ``lr``.

``pgo.AdamW(lr=WarmupCosine(1e-3, total_steps=5000, warmup_steps=200))``: the optimizer asks for the
rate of every optimizer step (0, 1, 2, ...: ggml-opt's iteration - 1, which starts at 0 in every fit
and carries over with ``optimizer_state`` and checkpoints). They are classes rather than closures so that they print and pickle. A decay never goes
below ``MIN_RATE``.
"""
from __future__ import annotations

import math

from ..checks import check_int, check_number
from .optimizers import check_lr

# The smallest rate a schedule returns: ggml-opt takes rates > 0 only (as float32), so a decay ends here
# instead of at 0.
MIN_RATE = 1e-12


class WarmupCosine:
    """Linear warm-up from ``lr / warmup_steps`` to ``lr`` over ``warmup_steps`` steps, then a cosine
    decay to ``min_lr`` at ``total_steps`` (and ``min_lr`` after): the schedule GPT-style models train
    with (PyTorch: LinearLR then CosineAnnealingLR)."""

    def __init__(self, lr: float, total_steps: int, warmup_steps: int = 0, min_lr: float = 0.0) -> None:
        self.lr = check_lr("lr", lr)
        self.total_steps = check_int("total_steps", total_steps)
        self.warmup_steps = check_int("warmup_steps", warmup_steps, 0)
        if self.warmup_steps >= self.total_steps:
            raise ValueError(f"warmup_steps ({warmup_steps}) must be below total_steps ({total_steps})")
        self.min_lr = check_number("min_lr", min_lr, 0.0, self.lr)

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return self.lr * (step + 1) / self.warmup_steps
        progress = min(1.0, (step - self.warmup_steps) / (self.total_steps - self.warmup_steps))
        return max(self.min_lr + 0.5 * (self.lr - self.min_lr) * (1.0 + math.cos(math.pi * progress)), MIN_RATE)

    def __repr__(self) -> str:
        return (f"WarmupCosine(lr={self.lr}, total_steps={self.total_steps}, warmup_steps={self.warmup_steps}, "
                f"min_lr={self.min_lr})")


class StepDecay:
    """``lr * gamma ** (step // step_size)`` (PyTorch's StepLR, counted in optimizer steps)."""

    def __init__(self, lr: float, step_size: int, gamma: float = 0.1) -> None:
        self.lr = check_lr("lr", lr)
        self.step_size = check_int("step_size", step_size)
        self.gamma = check_number("gamma", gamma, 0.0, 1.0, lo_open=True)

    def __call__(self, step: int) -> float:
        return max(self.lr * self.gamma ** (step // self.step_size), MIN_RATE)

    def __repr__(self) -> str:
        return f"StepDecay(lr={self.lr}, step_size={self.step_size}, gamma={self.gamma})"


class ExponentialDecay:
    """``lr * gamma ** step`` (PyTorch's ExponentialLR, counted in optimizer steps)."""

    def __init__(self, lr: float, gamma: float) -> None:
        self.lr = check_lr("lr", lr)
        self.gamma = check_number("gamma", gamma, 0.0, 1.0, lo_open=True)

    def __call__(self, step: int) -> float:
        return max(self.lr * self.gamma ** step, MIN_RATE)

    def __repr__(self) -> str:
        return f"ExponentialDecay(lr={self.lr}, gamma={self.gamma})"
