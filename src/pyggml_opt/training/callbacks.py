"""Callbacks of ``fit``, as in Keras: ``Callback`` hooks, a ``CallbackList`` that calls them in
order, and one ``MonitorCallback`` base (monitor, mode, min_delta, baseline, patience) behind
``EarlyStopping``, ``ModelCheckpoint`` and ``ReduceLROnPlateau``.

While ``fit`` runs, each callback's ``trainer`` is the running fit loop (``loop.FitLoop``): its
``optimizer`` and ``optimizer_state()`` are what ModelCheckpoint and ReduceLROnPlateau use, its
``metrics`` what ``mode="auto"`` reads the direction of. What fit records and shows are callbacks too,
first in fit's list, as Keras adds them: ``RecordHistory`` (the epochs into ``model.history``) and
``progress.Progress``."""
from __future__ import annotations

import math
import os
from typing import Callable, Iterable, Protocol

from ..checks import check_choice, check_int, check_number
from ..core import OptimizerState
from ..core.tensor_data import Weight
from ..saving import save, save_checkpoint
from .history import History
from .trainable import Trainable
from .metrics import Metric, direction_of
from .optimizers import Optimizer


class Trainer(Protocol):
    """What callbacks see of the running fit (``loop.FitLoop``, which imports this module)."""

    optimizer: Optimizer
    n_batches: int             # physical batches per epoch
    epochs: int

    @property
    def metrics(self) -> list[Metric]: ...
    def optimizer_state(self, copy: bool = True) -> OptimizerState: ...


class Callback:
    """Hooks called by ``fit``. Set ``model.stop_training = True`` to stop after the current batch.

    ``needs_batch_logs``: whether ``on_batch_end`` wants the logs of every batch (fit reads them from
    ggml-opt only when some callback does)."""

    trainer: Trainer | None = None  # the running fit loop, set by CallbackList while fit runs
    needs_batch_logs = True

    def set_trainer(self, trainer: Trainer | None) -> None:
        """Called before ``on_train_begin`` with the running fit loop, and with None after ``on_train_end``."""
        self.trainer = trainer

    def on_train_begin(self, model: Trainable) -> None: ...
    def on_epoch_begin(self, model: Trainable, epoch: int) -> None: ...
    def on_batch_end(self, model: Trainable, batch: int, logs: dict) -> None: ...
    def on_epoch_end(self, model: Trainable, epoch: int, logs: dict) -> None: ...
    def on_train_end(self, model: Trainable) -> None: ...


class CallbackList:
    """Calls every callback's hook in the order given."""

    def __init__(self, callbacks: Iterable[Callback] | None, model: Trainable, trainer: Trainer | None) -> None:
        self.callbacks = list(callbacks or [])
        for cb in self.callbacks:
            if not isinstance(cb, Callback):
                raise TypeError(f"callbacks must be Callback objects, got {type(cb).__name__}")
        self.model, self.trainer = model, trainer

    @property
    def needs_batch_logs(self) -> bool:
        """Whether any callback wants the logs of every batch."""
        return any(cb.needs_batch_logs for cb in self.callbacks)

    def on_train_begin(self) -> None:
        for cb in self.callbacks:
            cb.set_trainer(self.trainer)
            cb.on_train_begin(self.model)

    def on_epoch_begin(self, epoch: int) -> None:
        for cb in self.callbacks:
            cb.on_epoch_begin(self.model, epoch)

    def on_batch_end(self, batch: int, logs: dict) -> None:
        for cb in self.callbacks:
            cb.on_batch_end(self.model, batch, logs)

    def on_epoch_end(self, epoch: int, logs: dict) -> None:
        for cb in self.callbacks:
            cb.on_epoch_end(self.model, epoch, logs)

    def on_train_end(self) -> None:
        try:
            for cb in self.callbacks:
                cb.on_train_end(self.model)
        finally:
            for cb in self.callbacks:
                cb.set_trainer(None)


class RecordHistory(Callback):
    """fit's first callback: each epoch's logs into ``history`` (before the other callbacks see them),
    which becomes ``model.history`` when training begins."""

    needs_batch_logs = False

    def __init__(self, history: History) -> None:
        self.history = history

    def on_train_begin(self, model: Trainable) -> None:
        model.history = self.history

    def on_epoch_end(self, model: Trainable, epoch: int, logs: dict) -> None:
        self.history.append(epoch, logs)


class LambdaCallback(Callback):
    """Callback from plain functions: on_batch_end(model, batch, logs), on_epoch_end(model, epoch, logs)."""

    def __init__(self, on_batch_end: Callable[[Trainable, int, dict], object] | None = None,
                 on_epoch_end: Callable[[Trainable, int, dict], object] | None = None) -> None:
        self._batch, self._epoch = on_batch_end, on_epoch_end

    def on_batch_end(self, model: Trainable, batch: int, logs: dict) -> None:
        if self._batch:
            self._batch(model, batch, logs)

    def on_epoch_end(self, model: Trainable, epoch: int, logs: dict) -> None:
        if self._epoch:
            self._epoch(model, epoch, logs)


class MonitorCallback(Callback):
    """A callback that watches one metric of the epoch logs.

    ``mode``: "min", "max" or "auto": the direction of the monitored metric (``Metric.direction``; by
    its name until a fit tells which metric it is: "max" for accuracies, else "min"). A value improves on the best
    so far when it is lower (min) / higher (max) by more than ``min_delta``. ``baseline``: the value
    to beat before anything counts as an improvement. ``wait``: epochs since the last improvement.
    """

    def __init__(self, monitor: str = "val_loss", mode: str = "auto", min_delta: float = 0.0,
                 baseline: float | None = None, patience: int = 0) -> None:
        if not isinstance(monitor, str):
            raise TypeError(f"monitor must be a metric name (str), got {type(monitor).__name__}")
        self.monitor = monitor
        mode = check_choice("mode", mode, ("auto", "min", "max"))
        self.auto = mode == "auto"
        self.mode = direction_of(monitor) if self.auto else mode
        self.min_delta = abs(check_number("min_delta", min_delta, -math.inf, math.inf))
        self.baseline = None if baseline is None else check_number("baseline", baseline, -math.inf, math.inf)
        self.patience = check_int("patience", patience, 0)
        self.reset()

    def set_trainer(self, trainer: Trainer | None) -> None:
        super().set_trainer(trainer)
        if self.auto and trainer is not None:
            self.mode = direction_of(self.monitor, trainer.metrics)

    def reset(self) -> None:
        """Forget the history of the metric (called when training begins)."""
        self.best = self.baseline
        self.best_epoch: int | None = None
        self.wait = 0

    def on_train_begin(self, model: Trainable) -> None:
        self.reset()

    def value(self, logs: dict) -> float:
        """The monitored metric; ValueError when fit does not report it."""
        value = logs.get(self.monitor, float("nan"))
        if math.isnan(value):
            raise ValueError(f"{type(self).__name__} monitors {self.monitor!r}, which fit does not report here; "
                             f"available: {sorted(k for k, v in logs.items() if not math.isnan(v))}")
        return float(value)

    def improved(self, value: float) -> bool:
        if self.best is None:
            return True
        return value < self.best - self.min_delta if self.mode == "min" else value > self.best + self.min_delta

    def update(self, epoch: int, logs: dict) -> bool:
        """Read the metric of ``epoch``: on improvement record it as the best and return True, else
        count one more epoch of waiting and return False."""
        value = self.value(logs)
        if self.improved(value):
            self.best, self.best_epoch, self.wait = value, epoch, 0
            return True
        self.wait += 1
        return False


class EarlyStopping(MonitorCallback):
    """Stop when ``monitor`` has not improved for ``patience`` epochs (as Keras: patience 0 stops at
    the first epoch without improvement); with ``restore_best_weights`` the weights of the best
    epoch are put back at the end."""

    def __init__(self, monitor: str = "val_loss", patience: int = 0, min_delta: float = 0.0,
                 restore_best_weights: bool = False, mode: str = "auto", baseline: float | None = None) -> None:
        super().__init__(monitor, mode, min_delta, baseline, patience)
        self.restore_best_weights = restore_best_weights

    def reset(self) -> None:
        super().reset()
        self.best_weights: dict[str, Weight] | None = None
        self.stopped_epoch: int | None = None

    def on_epoch_end(self, model: Trainable, epoch: int, logs: dict) -> None:
        if self.update(epoch, logs):
            if self.restore_best_weights:
                self.best_weights = model.get_weights()
        elif self.wait >= max(self.patience, 1):
            self.stopped_epoch = epoch
            model.stop_training = True

    def on_train_end(self, model: Trainable) -> None:
        if self.restore_best_weights and self.best_weights is not None:
            model.set_weights(self.best_weights)


class ModelCheckpoint(MonitorCallback):
    """Save the model as GGUF after each epoch (``path`` may contain ``{epoch}``), or only when
    ``monitor`` improved with ``save_best_only``. With ``save_optimizer`` (default) the file is a
    training checkpoint (``pyggml_opt.saving.checkpoint``): ``fit(..., resume_from=path)`` continues
    from it exactly; ``pgo.load`` reads it as a model."""

    def __init__(self, path: str | os.PathLike[str], monitor: str = "val_loss", save_best_only: bool = False,
                 mode: str = "auto", save_optimizer: bool = True, min_delta: float = 0.0,
                 baseline: float | None = None) -> None:
        super().__init__(monitor, mode, min_delta, baseline)
        self.path, self.save_best_only, self.save_optimizer = str(path), save_best_only, save_optimizer
        self.saved: list[str] = []

    def on_train_begin(self, model: Trainable) -> None:
        pass  # as Keras: the best value so far carries over to the next fit with this callback

    def on_epoch_end(self, model: Trainable, epoch: int, logs: dict) -> None:
        if self.save_best_only and not self.update(epoch, logs):
            return
        path = self.path.format(epoch=epoch + 1)
        if self.save_optimizer and self.trainer is not None:
            # the moments as views, written at once: no copy of twice the parameters on top of fit's memory
            assert model.history is not None  # set when training began (RecordHistory)
            save_checkpoint(model, path, epoch + 1, self.trainer.optimizer_state(copy=False), model.history.to_dict())
        else:
            save(model, path)
        self.saved.append(path)


class ReduceLROnPlateau(MonitorCallback):
    """Multiply the learning rate by ``factor`` when ``monitor`` has not improved for ``patience``
    epochs, then wait ``cooldown`` epochs before counting again; never below ``min_lr``. Needs a
    constant learning rate (a schedule owns the rate)."""

    def __init__(self, monitor: str = "val_loss", factor: float = 0.1, patience: int = 10, mode: str = "auto",
                 min_delta: float = 1e-4, cooldown: int = 0, min_lr: float = 0.0, verbose: int = 0) -> None:
        super().__init__(monitor, mode, min_delta, None, patience)
        self.factor = check_number("factor", factor, 0.0, 1.0, lo_open=True, hi_open=True)
        self.cooldown = check_int("cooldown", cooldown, 0)
        self.min_lr = check_number("min_lr", min_lr, 0.0, math.inf)
        self.verbose = verbose
        self.cooldown_counter = 0

    def on_train_begin(self, model: Trainable) -> None:
        super().on_train_begin(model)
        self.cooldown_counter = 0
        if self.trainer is not None and self.trainer.optimizer.schedule is not None:
            raise ValueError("ReduceLROnPlateau needs a constant learning rate; this optimizer's lr is a schedule")

    def on_epoch_end(self, model: Trainable, epoch: int, logs: dict) -> None:
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.wait = 0
        improved = self.update(epoch, logs)
        if self.cooldown_counter > 0:  # still cooling down: this epoch does not count
            self.wait = 0
        if improved or self.wait < max(self.patience, 1) or self.trainer is None:
            return
        optimizer = self.trainer.optimizer
        assert optimizer.lr is not None  # on_train_begin refused a schedule
        if optimizer.lr > self.min_lr:
            old = optimizer.lr
            new = optimizer.scale_lr(self.factor, self.min_lr)
            if self.verbose:
                print(f"epoch {epoch + 1}: ReduceLROnPlateau: learning rate {old:.4g} -> {new:.4g}")
        self.cooldown_counter, self.wait = self.cooldown, 0
