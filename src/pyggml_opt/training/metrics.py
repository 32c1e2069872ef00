"""Loss and accuracy, with their uncertainties, as ggml-opt defines them: from a ggml-opt result
(training batches) or from outputs computed here (validation, evaluate)."""
from __future__ import annotations

import math

import numpy as np

from ..core import Result
from .losses import OWN_LOSSES, host_losses


def result_logs(result: Result, weighted: "HostAccuracy | None" = None) -> dict:
    """loss, loss_unc, accuracy, accuracy_unc accumulated in ``result``.

    For fit's weighted losses (``weighted``: the accuracy counted on the host) ggml-opt's SUM loss adds
    up the weighted mean loss of every step: it is divided by the number of steps here, and the
    accuracy, which ggml-opt counts only for its own cross-entropy, comes from ``weighted``."""
    lv, lu = result.loss()
    if weighted is None:
        av, au = result.accuracy()
    else:
        steps = result.ndata / weighted.batch_size
        lv, lu = (lv / steps, lu / steps) if steps else (float("nan"), float("nan"))
        av, au = weighted.value()
    return {"loss": lv, "loss_unc": lu, "accuracy": av, "accuracy_unc": au}


def accuracy_of(correct: int, n: int) -> tuple[float, float]:
    """The fraction correct and its binomial uncertainty, as ggml-opt computes them."""
    if n == 0:
        return float("nan"), float("nan")
    acc = correct / n
    return acc, math.sqrt(acc * (1 - acc) / (n - 1)) if n > 1 else float("nan")


def binary_correct(outputs: np.ndarray, targets: np.ndarray) -> int:
    """Outputs (logits) on the same side of 0 as their targets of 0 / 1 are on 1/2 (Keras's
    binary_accuracy), counted over every output."""
    return int(((outputs > 0) == (targets >= 0.5)).sum())


def binary_accuracy(outputs: np.ndarray, targets: np.ndarray) -> tuple[float, float]:
    return accuracy_of(binary_correct(outputs, targets), outputs.size)


class HostAccuracy:
    """Correct predictions of training batches counted here, where ggml-opt counts none (fit's own loss
    graph): the class of the largest output for cross_entropy, the side of 0 of every output for
    binary_cross_entropy; no accuracy for the other losses."""

    def __init__(self, batch_size: int, loss: str) -> None:
        self.batch_size, self.loss = batch_size, loss
        self.correct = self.seen = 0

    def reset(self) -> None:
        self.correct = self.seen = 0

    def add(self, outputs: np.ndarray, targets: np.ndarray) -> None:
        if self.loss == "cross_entropy" and outputs.ndim == 3:   # token ids (n, T) against (n, T, V)
            self.correct += int((outputs.argmax(axis=-1) == targets).sum())
            self.seen += targets.size
        elif self.loss == "cross_entropy":
            self.correct += int((outputs.argmax(axis=1) == targets.argmax(axis=1)).sum())
            self.seen += outputs.shape[0]
        elif self.loss == "binary_cross_entropy":
            self.correct += binary_correct(outputs, targets)
            self.seen += outputs.size

    def value(self) -> tuple[float, float]:
        return accuracy_of(self.correct, self.seen)


def log_softmax(z: np.ndarray) -> np.ndarray:
    """log softmax over the last axis, stable for any magnitude."""
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def sigmoid(z: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-z)), the probabilities of binary logits, without overflow."""
    return np.exp(-np.logaddexp(0.0, -z)).astype(z.dtype, copy=False)


def softmax(z: np.ndarray) -> np.ndarray:
    """softmax over the last axis (the probabilities of logits)."""
    return np.exp(log_softmax(z))


def loss_and_accuracy(outputs: np.ndarray, targets: np.ndarray | None, loss: str) -> tuple[float, float, float, float]:
    """(loss, loss_unc, accuracy, accuracy_unc) over samples, as ggml-opt defines them."""
    n = outputs.shape[0]
    if loss == "cross_entropy" and outputs.ndim == 3:
        assert targets is not None  # token ids (n, T)
        ids = targets.astype(np.int64)
        token = -np.take_along_axis(log_softmax(outputs.astype(np.float64)), ids[..., None], axis=-1)[..., 0]
        per = token.mean(axis=1)   # every sample has T tokens: the mean of these is the mean per token
        acc, acc_unc = accuracy_of(int((outputs.argmax(axis=-1) == ids).sum()), ids.size)
    elif loss == "cross_entropy":
        assert targets is not None  # None only for the losses without labels
        per = -(targets * log_softmax(outputs)).sum(axis=1)
        acc, acc_unc = accuracy_of(int((outputs.argmax(axis=1) == targets.argmax(axis=1)).sum()), n)
    elif loss == "mse":
        per = ((outputs - targets) ** 2).mean(axis=1)
        acc = acc_unc = float("nan")
    elif loss in OWN_LOSSES:
        assert targets is not None  # these losses have labels
        per = host_losses(outputs, targets, loss)
        acc, acc_unc = binary_accuracy(outputs, targets) if loss == "binary_cross_entropy" else (math.nan, math.nan)
    else:
        per = outputs.mean(axis=1) if loss == "mean" else outputs.sum(axis=1)
        acc = acc_unc = float("nan")
    value = per.mean() if loss != "sum" else per.sum()
    unc = per.std(ddof=1) / math.sqrt(n) if n > 1 else float("nan")
    if loss == "sum":
        unc *= n
    return float(value), float(unc), float(acc), float(acc_unc)


def validation_logs(values: tuple[float, float, float, float] | None) -> dict:
    """The val_* entries of an epoch's logs (NaN without validation data)."""
    v = values if values is not None else (float("nan"),) * 4
    return dict(zip(("val_loss", "val_loss_unc", "val_accuracy", "val_accuracy_unc"), v))
