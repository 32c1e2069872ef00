"""Metrics: what ``fit`` reports per epoch besides the loss (``metrics=``, as Keras's) and ``evaluate``
returns. Each is the mean of one value per item (a sample, a token of a sequence, or an output for
binary labels) computed in float64 numpy from the model's outputs and the targets, with the
uncertainty ggml-opt gives its accuracy: the standard deviation of the items over sqrt(count).

By name: "accuracy" (``Accuracy``), "top_k_accuracy" (``TopKAccuracy(k=5)``), "mae"
(``MeanAbsoluteError``) and "mse" (``MeanSquaredError``). Targets are what fit's checks make of
``y``: one-hot or probability rows for cross_entropy (class ids become one-hot rows), token ids
(n, T) for sequence outputs, float rows otherwise.
"""
from __future__ import annotations

import copy
from typing import Optional, Sequence, Union

import numpy as np

from ..checks import check_int
from ..nn.losses import Loss, losses_where

# names a metric cannot take: the other entries of fit's logs, and the prefix / suffix they add
_RESERVED = ("loss", "time", "lr")


class Metric:
    """A metric of ``fit`` / ``evaluate``: the mean of ``values(outputs, targets)`` over every item.

    Subclass it for a metric of your own: set ``name`` (the History key) and ``direction`` ("max" when
    larger is better, "min" when smaller is: what ``mode="auto"`` of the callbacks that monitor it
    follows; None: by its name, "max" for names containing "acc") and implement ``values``; override
    ``bind`` to refuse losses or targets the metric does not fit."""

    name = "metric"
    direction: str | None = None

    def __init__(self, name: str | None = None) -> None:
        if name is not None:
            self.name = name
        check_metric_name(self.name)

    def bind(self, loss: Loss, output_shape: tuple[int, ...], target_shape: tuple[int, ...]) -> Metric:
        """The metric that ``fit`` / ``evaluate`` computes for ``loss`` (a ``pyggml_opt.Loss``: what its
        targets are, ``n_classes``, ``binary``, ``compares_values``), outputs of ``output_shape`` and
        targets of ``target_shape`` per sample; ValueError when it does not fit them."""
        return self

    def values(self, outputs: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """One value per item for outputs (n, *output_shape) and targets (n, *target_shape)."""
        raise NotImplementedError(f"{type(self).__name__} must implement values(outputs, targets)")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def direction_of(monitor: str, metrics: Sequence[Metric] = ()) -> str:
    """"min" or "max": which way ``monitor`` (a log entry: "loss", a metric's name, "val_" + either)
    improves: the direction of the metric of that name among ``metrics`` where it has one, else by the
    name ("max" for accuracies)."""
    name = monitor.removeprefix("val_")
    for m in metrics:
        if m.name == name and m.direction is not None:
            return m.direction
    if name in METRICS and METRICS[name].direction is not None:
        return str(METRICS[name].direction)
    return "max" if "acc" in name else "min"


def check_metric_name(name: object) -> str:
    """A metric name that leaves fit's other log entries alone."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"a metric's name must be a non-empty str, got {name!r}")
    if name in _RESERVED or name.startswith("val_") or name.endswith("_unc"):
        raise ValueError(f"a metric cannot be named {name!r}: fit's logs use {list(_RESERVED)}, the prefix 'val_' "
                         "and the suffix '_unc'")
    return name


def _classes(metric: Metric, loss: Loss, output_shape: tuple[int, ...], target_shape: tuple[int, ...]) -> int:
    """The number of classes for a metric that compares the largest outputs with the target class (the
    largest entry of a one-hot or probability row, or a token id); ValueError for losses without classes."""
    n_classes = loss.n_classes(output_shape, target_shape)
    if n_classes is None:
        raise ValueError(f"metric {metric.name!r} needs classes: loss {losses_where('classes')}, or a loss function "
                         f"with label rows of the outputs' shape {output_shape}; got loss {loss.label!r} with targets "
                         f"of shape {target_shape}")
    return n_classes


class Accuracy(Metric):
    """The fraction of correct predictions: the largest output is the target class (per sample, or per
    token of a sequence); for ``"binary_cross_entropy"`` every output on the target's side of 0 (its
    logits; targets >= 0.5 count as 1), as Keras's binary_accuracy."""

    name = "accuracy"
    direction = "max"
    _binary = False

    def bind(self, loss: Loss, output_shape: tuple[int, ...], target_shape: tuple[int, ...]) -> Metric:
        if loss.binary:
            bound = copy.copy(self)
            bound._binary = True
            return bound
        _classes(self, loss, output_shape, target_shape)
        return self

    def values(self, outputs: np.ndarray, targets: np.ndarray) -> np.ndarray:
        if self._binary:
            return ((outputs > 0) == (targets >= 0.5)).ravel()
        if outputs.ndim == 3:   # token ids (n, T) against (n, T, V), but those that are no target
            return (outputs.argmax(axis=-1) == targets)[targets >= 0]
        return outputs.argmax(axis=1) == targets.argmax(axis=1)


class TopKAccuracy(Metric):
    """The fraction of samples (tokens of a sequence) whose target class is among the ``k`` largest
    outputs, as Keras's sparse_top_k_categorical_accuracy (outputs tied with the k-th largest count as
    among them). Named "top_k_accuracy" for k = 5, else "top{k}_accuracy" (``name`` overrides)."""

    direction = "max"

    def __init__(self, k: int = 5, name: str | None = None) -> None:
        self.k = check_int("k", k)
        super().__init__(name if name is not None else "top_k_accuracy" if self.k == 5 else f"top{self.k}_accuracy")

    def bind(self, loss: Loss, output_shape: tuple[int, ...], target_shape: tuple[int, ...]) -> Metric:
        n_classes = _classes(self, loss, output_shape, target_shape)
        if self.k > n_classes:
            raise ValueError(f"metric {self.name!r}: k={self.k} exceeds the {n_classes} classes of the outputs")
        return self

    def values(self, outputs: np.ndarray, targets: np.ndarray) -> np.ndarray:
        target = targets if outputs.ndim == 3 else targets.argmax(axis=-1)
        keep = target >= 0   # token ids that are no target (IGNORE_INDEX) count for nothing
        score = np.take_along_axis(outputs, np.where(keep, target, 0).astype(np.int64)[..., None], axis=-1)
        above = (outputs > score).sum(axis=-1)   # classes strictly ahead of the target's
        return ((above < self.k) & np.isfinite(score[..., 0]))[keep]

    def __repr__(self) -> str:
        return f"TopKAccuracy(k={self.k}, name={self.name!r})"


class _Regression(Metric):
    """A per-sample mean over the outputs of an element-wise error, for outputs and targets of one shape."""

    direction = "min"

    def bind(self, loss: Loss, output_shape: tuple[int, ...], target_shape: tuple[int, ...]) -> Metric:
        if loss.compares_values(output_shape, target_shape):
            return self
        raise ValueError(f"metric {self.name!r} compares outputs with targets of their shape: it needs a loss on "
                         f"values such as 'mse' or a loss function with label rows of the outputs' shape "
                         f"{output_shape}; got loss {loss.label!r} with targets of shape {target_shape}")

    def error(self, diff: np.ndarray) -> np.ndarray:
        """The element-wise error of ``diff`` = outputs - targets."""
        raise NotImplementedError

    def values(self, outputs: np.ndarray, targets: np.ndarray) -> np.ndarray:
        diff = outputs.astype(np.float64) - targets.astype(np.float64)
        return self.error(diff).reshape(diff.shape[0], -1).mean(axis=1)


class MeanAbsoluteError(_Regression):
    """The mean absolute error |output - target|, per sample over its outputs ("mae")."""

    name = "mae"

    def error(self, diff: np.ndarray) -> np.ndarray:
        return np.abs(diff)


class MeanSquaredError(_Regression):
    """The mean squared error (output - target)^2, per sample over its outputs ("mse")."""

    name = "mse"

    def error(self, diff: np.ndarray) -> np.ndarray:
        return diff ** 2


class Unavailable(Metric):
    """The default accuracy of a loss without classes: reported as NaN."""

    name = "accuracy"
    direction = "max"

    def values(self, outputs: np.ndarray, targets: np.ndarray) -> np.ndarray:
        return np.empty(0)


METRICS: dict[str, type[Metric]] = {"accuracy": Accuracy, "top_k_accuracy": TopKAccuracy,
                                    "mae": MeanAbsoluteError, "mse": MeanSquaredError}
MetricSpec = Union[str, Metric]
Metrics = Optional[Sequence[MetricSpec]]


def get_metrics(metrics: Metrics, loss: Loss, output_shape: tuple[int, ...],
                target_shape: tuple[int, ...] | None) -> list[Metric]:
    """The metrics to compute, bound to the loss and the shapes; ``target_shape`` None: the loss takes no
    targets. None gives the default: the accuracy, NaN for losses without classes (as ggml-opt reports
    it)."""
    if metrics is None:
        if loss.classes or loss.binary:
            assert target_shape is not None  # these losses have targets
            return [Accuracy().bind(loss, output_shape, target_shape)]
        return [Unavailable()]
    if isinstance(metrics, (str, Metric)) or not isinstance(metrics, Sequence):
        raise TypeError(f"metrics must be a list of metric names or Metric objects, such as metrics=['mae'], "
                        f"got {metrics!r}")
    bound = []
    for m in metrics:
        if isinstance(m, str):
            if m not in METRICS:
                raise ValueError(f"unknown metric {m!r}; known: {sorted(METRICS)} (or a pgo.Metric object)")
            m = METRICS[m]()
        elif not isinstance(m, Metric):
            raise TypeError(f"metrics must be metric names or Metric objects, got {type(m).__name__}")
        if target_shape is None:
            raise ValueError(f"metric {m.name!r} compares outputs with targets; loss {loss.label!r} takes none")
        m = m.bind(loss, output_shape, target_shape)
        check_metric_name(m.name)   # also of a subclass that set it without Metric.__init__
        bound.append(m)
    names = [m.name for m in bound]
    if len(set(names)) < len(names):
        raise ValueError(f"metrics with the same name: {sorted(n for n in set(names) if names.count(n) > 1)}")
    return bound


def counted_by_ggml_opt(metrics: Sequence[Metric]) -> bool:
    """Whether ggml-opt's result holds every metric of ``metrics`` (its accuracy, NaN but for its own
    cross_entropy), so that fit need not read the outputs of its training steps."""
    return all(type(m) in (Accuracy, Unavailable) for m in metrics)
