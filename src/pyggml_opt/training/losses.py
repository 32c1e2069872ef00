"""Weighted losses: ``sample_weight`` / ``class_weight`` in ``fit`` as a loss graph of fit's own.

ggml-opt's cross-entropy and MSE weigh every sample alike, and its cross-entropy backward assumes label
rows that sum to one (labels scaled by a weight would get wrong gradients). With weights, fit ends the
training graph itself: each sample's loss times its weight, under ggml-opt's SUM loss. The weights ride
in the label rows as one more column, and the host divides them by their sum over each optimizer
step's batch, so every step minimises the weighted mean loss of its batch (PyTorch's weighted
``reduction="mean"``; equal weights give the unweighted mean, and a weight of 0 removes a sample).
"""
from __future__ import annotations

import numpy as np

from ..nn import Tensor, ops

WEIGHTED_LOSSES = ("cross_entropy", "mse")


def weighted_loss(outputs: Tensor, labels: Tensor, loss: str) -> Tensor:
    """Per-sample weighted losses (n, 1) of ``outputs`` (n, k) against ``labels`` (n, k + 1): the
    targets, then each sample's weight (already divided by its step's sum)."""
    n, k = outputs.shape
    y, w = ops.columns(labels, 0, k), ops.columns(labels, k, k + 1)
    if loss == "cross_entropy":
        per = ops.neg(ops.sum_rows(ops.mul(y, ops.log_softmax(outputs))))
    elif loss == "mse":
        per = ops.mean(ops.sqr(ops.sub(outputs, y)))
    else:
        raise ValueError(f"sample weights need one of the losses {WEIGHTED_LOSSES}, got {loss!r}")
    return ops.mul(per, w)


def step_weights(weights: np.ndarray, batch_size: int) -> np.ndarray:
    """An epoch's weights in batch order, each divided by their sum over its step's ``batch_size``
    samples (a step whose weights are all 0 keeps them: it changes nothing)."""
    steps = weights.reshape(-1, batch_size)
    sums = steps.sum(axis=1, keepdims=True)
    return (steps / np.where(sums > 0, sums, 1.0)).ravel()
