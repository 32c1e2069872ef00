"""Optimizers: AdamW and SGD with ggml-opt's parameters, an optional learning-rate schedule and
optional gradient clipping by the global norm.

ggml-opt asks for the optimizer parameters once per optimizer step (through a C callback that returns
``struct ggml_opt_optimizer_params`` by value); ``c_params`` answers it. The learning rate may be a
number or a callable ``lr(step) -> float`` where ``step`` counts optimizer steps from 0. The step is
ggml-opt's (``core.OptContext``: its iteration - 1), never the optimizer object's: each fit starts at
step 0 with fresh moments, and a fit continuing an optimizer state (``optimizer_state=``,
``resume_from=``) continues both, so schedule and moments always agree. The optimizer object holds
hyperparameters only, and may serve several fits.
``global_clipnorm`` is fixed when ggml-opt builds the training graph (``ggml_opt_params.grad_clip_norm``,
vendor patch 0012): the graph computes the global L2 norm of the accumulated gradients and scales them
before each step.
"""
from __future__ import annotations

import math
from typing import Callable, Union

import numpy as np

from ..checks import check_number
from ..core import CData, OptOptimizer, adamw_params, sgd_params

LearningRate = Union[float, Callable[[int], float]]


def check_lr(name: str, value: object) -> float:
    """A learning rate (or ``global_clipnorm``): > 0 and still > 0 and finite as the float32 ggml-opt
    receives (a smaller value becomes 0.0 there, and ggml-opt aborts on alpha <= 0)."""
    v = check_number(name, value, 0.0, math.inf, lo_open=True)
    with np.errstate(over="ignore"):  # beyond float32's range: inf, refused below
        as_f32 = float(np.float32(v))
    if not (0.0 < as_f32 < math.inf):
        raise ValueError(f"{name} must be in (0.0, inf] and representable as a float32 (about 1.4e-45 to "
                         f"3.4e38, ggml-opt's type), got {value!r}")
    return v


class Optimizer:
    """Base class: holds the learning rate (or schedule), weight decay and the gradient-clipping threshold.

    ``global_clipnorm``: None (default) or a threshold > 0: before every optimizer step the gradients
    of all parameters are scaled together by min(1, global_clipnorm / (norm + 1e-6)), norm being
    their global L2 norm (as ``torch.nn.utils.clip_grad_norm_`` before ``optimizer.step()``, and
    Keras's ``global_clipnorm``). With gradient accumulation (``physical_batch_size`` < ``batch_size``)
    the norm is that of the accumulated gradient the step uses. The step then proceeds as usual on the
    clipped gradients (AdamW's moments see them too)."""

    type: OptOptimizer
    name: str
    schedule: Callable[[int], float] | None
    lr: float | None  # None with a schedule

    def __init__(self, lr: LearningRate, weight_decay: float, global_clipnorm: float | None = None) -> None:
        if callable(lr):
            self.schedule, self.lr = lr, None
        else:
            self.schedule, self.lr = None, check_lr("lr", lr)
        self.weight_decay = check_number("weight_decay", weight_decay, 0.0, 1.0)
        self.global_clipnorm = None if global_clipnorm is None else check_lr("global_clipnorm", global_clipnorm)
        self._pending: BaseException | None = None
        self._last_lr: float | None = self.lr if self.lr is not None else None

    def current_lr(self, step: int) -> float:
        """The learning rate of optimizer step ``step`` (counted from 0; evaluates the schedule)."""
        if self.schedule is None:
            assert self.lr is not None  # set whenever there is no schedule
            return self.lr
        try:
            value = self.schedule(step)
        except Exception as exc:  # noqa: BLE001 - reported after the C call returns
            raise ValueError(f"learning-rate schedule failed at step {step}: {exc!r}") from exc
        return check_lr(f"learning rate from the schedule at step {step}", value)

    def c_params(self, step: int) -> CData:
        """``struct ggml_opt_optimizer_params`` for optimizer step ``step``; never raises (called from C)."""
        try:
            lr = self.current_lr(step)
            self._last_lr = lr
        except BaseException as exc:  # noqa: BLE001
            self.record_error(exc)
            lr = self._last_lr if self._last_lr else 1e-30  # a valid value: ggml-opt asserts lr > 0
        return self._params(lr)

    def fallback_params(self) -> CData:
        """The struct of ``c_params`` with the last valid learning rate, evaluating nothing."""
        return self._params(self._last_lr if self._last_lr else 1e-30)

    @property
    def last_lr(self) -> float:
        """The learning rate of the last optimizer step (before any: the constant lr, or NaN)."""
        return self._last_lr if self._last_lr is not None else float("nan")

    def record_error(self, exc: BaseException) -> None:
        """Keep ``exc`` (the first one) to raise once the C call that could not take it returns."""
        if self._pending is None:
            self._pending = exc

    def raise_pending(self) -> None:
        """Re-raise an error the schedule raised inside the C callback."""
        if self._pending is not None:
            exc, self._pending = self._pending, None
            raise exc

    def _params(self, lr: float) -> CData:
        raise NotImplementedError

    def get_config(self) -> dict:
        """The constructor arguments (``lr`` is the schedule itself when there is one)."""
        return {"lr": self.schedule or self.lr, "weight_decay": self.weight_decay,
                "global_clipnorm": self.global_clipnorm}

    @classmethod
    def from_config(cls, config: dict) -> "Optimizer":
        """An optimizer with the same hyperparameters from ``get_config()``'s dict."""
        return cls(**config)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(" + ", ".join(f"{k}={v!r}" for k, v in self.get_config().items()) + ")"

    def scale_lr(self, factor: float, min_lr: float = 0.0) -> float:
        """Multiply the (constant) learning rate by ``factor``, not below ``min_lr``; returns the new
        value. A schedule cannot be scaled: it owns the learning rate."""
        if self.schedule is not None:
            raise ValueError("this optimizer's learning rate is a schedule (a callable), which cannot be "
                             "scaled; use a constant lr with ReduceLROnPlateau")
        assert self.lr is not None  # set whenever there is no schedule
        self.lr = check_lr("lr", max(self.lr * factor, min_lr))
        return self.lr


class AdamW(Optimizer):
    """AdamW as ggml-opt implements it: lr > 0, betas in [0, 1), eps >= 0, weight decay in [0, 1];
    ``global_clipnorm`` (None or > 0) clips the gradients by their global L2 norm before each step
    (see ``Optimizer``).

    ggml-opt accepts betas of 1, but its bias correction then divides by 1 - beta**t = 0 and the
    weights become NaN at the first step, so 1 is refused here (as PyTorch does)."""

    type = OptOptimizer.ADAMW
    name = "adamw"

    def __init__(self, lr: LearningRate = 1e-3, beta1: float = 0.9, beta2: float = 0.999,
                 eps: float = 1e-8, weight_decay: float = 0.0, global_clipnorm: float | None = None) -> None:
        super().__init__(lr, weight_decay, global_clipnorm)
        why = " (with 1, AdamW's bias correction divides by zero)"
        self.beta1 = check_number("beta1", beta1, 0.0, 1.0, hi_open=True, why=why)
        self.beta2 = check_number("beta2", beta2, 0.0, 1.0, hi_open=True, why=why)
        self.eps = check_number("eps", eps, 0.0, math.inf)

    def _params(self, lr: float) -> CData:
        return adamw_params(lr, self.beta1, self.beta2, self.eps, self.weight_decay)

    def get_config(self) -> dict:
        config = super().get_config()
        return {"lr": config.pop("lr"), "beta1": self.beta1, "beta2": self.beta2, "eps": self.eps, **config}


class SGD(Optimizer):
    """Plain SGD with decoupled weight decay, as ggml-opt implements it; ``global_clipnorm`` (None or
    > 0) clips the gradients by their global L2 norm before each step (see ``Optimizer``)."""

    type = OptOptimizer.SGD
    name = "sgd"

    def __init__(self, lr: LearningRate = 1e-3, weight_decay: float = 0.0,
                 global_clipnorm: float | None = None) -> None:
        super().__init__(lr, weight_decay, global_clipnorm)

    def _params(self, lr: float) -> CData:
        return sgd_params(lr, self.weight_decay)


def get(optimizer: Optimizer | str) -> Optimizer:
    """An Optimizer from an instance or a name ("adamw", "sgd")."""
    if isinstance(optimizer, Optimizer):
        return optimizer
    if isinstance(optimizer, str):
        table = {"adamw": AdamW, "adam": AdamW, "sgd": SGD}
        if optimizer.lower() in table:
            return table[optimizer.lower()]()
        raise ValueError(f"unknown optimizer {optimizer!r}; expected 'adamw', 'sgd' or an Optimizer")
    raise TypeError(f"optimizer must be an Optimizer or a name, got {type(optimizer).__name__}")
