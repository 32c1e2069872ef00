"""The numbers of fit's logs and evaluate's result: the loss and each metric with its uncertainty,
from a ggml-opt result and the outputs of the training steps (training batches), or from outputs
computed after the epoch (validation, evaluate)."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ..core import Result
from ..nn.losses import Loss
from .metrics import Metric


class Mean:
    """The running mean of values added batch by batch, and its uncertainty: their standard deviation
    (ddof 1) over sqrt(count), which for values of 0 and 1 is ggml-opt's binomial uncertainty
    sqrt(p (1 - p) / (n - 1)). The mean is their sum over their count (exact for counts of 0 / 1),
    the squared deviations are merged batch by batch (Chan et al.'s pairwise update)."""

    def __init__(self) -> None:
        self.count, self.total, self.m2 = 0, 0.0, 0.0

    def add(self, values: np.ndarray) -> None:
        """Count the values of one batch in."""
        v = np.asarray(values, dtype=np.float64).ravel()
        if not v.size:
            return
        mean = float(v.mean())
        m2 = float(((v - mean) ** 2).sum())
        if self.count:
            delta = mean - self.total / self.count
            m2 += delta ** 2 * self.count * v.size / (self.count + v.size)
        self.count += v.size
        self.total += float(v.sum())
        self.m2 += m2

    def value(self) -> tuple[float, float]:
        """(mean, uncertainty); NaN without values, the uncertainty NaN for a single one."""
        if self.count == 0:
            return math.nan, math.nan
        unc = math.sqrt(self.m2 / (self.count - 1) / self.count) if self.count > 1 else math.nan
        return self.total / self.count, unc


def entries(name: str, value: tuple[float, float]) -> dict[str, float]:
    """A metric's two log entries: ``name`` and ``name_unc``."""
    return {name: value[0], f"{name}_unc": value[1]}


class HostMetrics:
    """The metrics of fit's training batches, from the outputs of each step, read where fit ends the
    training graph with its own loss (ggml-opt then counts no accuracy). ``batch_size``: samples per
    optimizer step (ggml-opt's SUM loss adds up one weighted mean loss per step)."""

    def __init__(self, metrics: Sequence[Metric], batch_size: int) -> None:
        self.metrics, self.batch_size = list(metrics), batch_size
        self.means = {m.name: Mean() for m in self.metrics}

    def reset(self) -> None:
        """Forget the batches counted so far (a new epoch)."""
        self.means = {m.name: Mean() for m in self.metrics}

    def add(self, outputs: np.ndarray, targets: np.ndarray) -> None:
        """Count in one step's outputs and its targets."""
        for m in self.metrics:
            self.means[m.name].add(m.values(outputs, targets))


def result_logs(result: Result, metrics: Sequence[Metric], host: HostMetrics | None) -> dict[str, float]:
    """loss, loss_unc and each metric with its uncertainty, over the training batches so far.

    Without ``host`` (ggml-opt's own loss) every metric is ggml-opt's accuracy (NaN but for its
    cross_entropy). With it, ggml-opt's SUM loss has added up the weighted mean loss of every step: it
    is divided by the number of steps here, and the metrics come from ``host``."""
    lv, lu = result.loss()
    if host is None:
        logs = entries("loss", (lv, lu))
        for m in metrics:
            logs.update(entries(m.name, result.accuracy()))
        return logs
    steps = result.ndata / host.batch_size
    loss = (lv / steps, lu / steps) if steps else (math.nan, math.nan)
    logs = entries("loss", loss)
    for name, mean in host.means.items():
        logs.update(entries(name, mean.value()))
    return logs


class WeightedMean:
    """The running weighted mean sum(w v) / sum(w) of values added batch by batch, and its uncertainty
    sqrt(sum(w^2 (v - mean)^2) n / (n - 1)) / sum(w), which for equal weights is ``Mean``'s."""

    def __init__(self) -> None:
        self.count = 0
        self.sums = np.zeros(5)  # sum w, sum w v, sum w^2, sum w^2 v, sum w^2 v^2

    def add(self, values: np.ndarray, weights: np.ndarray) -> None:
        """Count the values of one batch in, with their weights."""
        v = np.asarray(values, dtype=np.float64).ravel()
        w = np.asarray(weights, dtype=np.float64).ravel()
        w2 = w * w
        self.count += v.size
        self.sums += [w.sum(), (w * v).sum(), w2.sum(), (w2 * v).sum(), (w2 * v * v).sum()]

    def value(self) -> tuple[float, float]:
        """(mean, uncertainty); NaN where the weights sum to 0, the uncertainty NaN for a single value."""
        sw, swv, sw2, sw2v, sw2v2 = self.sums
        if sw <= 0:
            return math.nan, math.nan
        mean = swv / sw
        if self.count < 2:
            return mean, math.nan
        spread = max(sw2v2 - 2 * mean * sw2v + mean * mean * sw2, 0.0)
        return mean, math.sqrt(spread * self.count / (self.count - 1)) / sw


class EvaluationLogs:
    """loss, loss_unc and each metric with its uncertainty, for outputs computed after training
    (validation, evaluate), added batch by batch: no more than one batch of outputs is held (a
    language model's logits are tokens x vocabulary floats).

    The loss is the mean over samples (weighted by ``weighted`` samples' weights: ``add``'s
    ``weights``); metrics are unweighted. A loss returning the batch's mean (``Loss.batch_means``)
    has no uncertainty; ``Loss.reported`` gives what is reported of the mean (the "sum" loss: the sum
    over samples)."""

    def __init__(self, loss: Loss, metrics: Sequence[Metric], weighted: bool = False) -> None:
        self.loss, self.metrics = loss, list(metrics)
        self.losses: Mean | WeightedMean = WeightedMean() if weighted else Mean()
        self.values = {m.name: Mean() for m in self.metrics}
        self.has_targets = True

    def add(self, outputs: np.ndarray, targets: np.ndarray | None, losses: np.ndarray | None = None,
            weights: np.ndarray | None = None) -> None:
        """One batch: its outputs, targets, per-sample losses computed in the graph (where the loss has
        no numpy twin, ``Loss.host``; by default the loss's own, in float64 here) and weights."""
        if losses is None:
            losses = self.loss.host(outputs, targets)
            assert losses is not None  # a loss without numpy twin is evaluated in the graph
        if isinstance(self.losses, WeightedMean):
            assert weights is not None  # given with every batch when weighted
            self.losses.add(losses, weights)
        else:
            self.losses.add(losses)
        # without targets (the losses "mean" and "sum") the one metric is the default accuracy: NaN
        self.has_targets = targets is not None
        if targets is not None:
            for m in self.metrics:
                self.values[m.name].add(m.values(outputs, targets))

    def logs(self) -> dict[str, float]:
        """The entries, by name."""
        value, unc = self.losses.value()
        if self.loss.batch_means:
            unc = math.nan
        logs = entries("loss", self.loss.reported(value, unc, self.losses.count))
        for m in self.metrics:
            logs.update(entries(m.name, self.values[m.name].value() if self.has_targets else (math.nan, math.nan)))
        return logs


def validation_logs(logs: dict[str, float] | None, metrics: Sequence[Metric]) -> dict[str, float]:
    """The val_* entries of an epoch's logs (NaN without validation data)."""
    if logs is None:
        names = ["loss", *(m.name for m in metrics)]
        logs = {k: math.nan for name in names for k in (name, f"{name}_unc")}
    return {f"val_{k}": v for k, v in logs.items()}
