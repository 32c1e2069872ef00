"""fit's own loss graph: each sample's loss times its weight, summed by ggml-opt's SUM loss.

ggml-opt knows mean, sum, cross-entropy and MSE, weighs every sample alike, and its cross-entropy
backward assumes label rows that sum to one (labels scaled by a weight would get wrong gradients). For
``sample_weight`` / ``class_weight``, for losses ggml-opt lacks (a ``Loss`` without ``opt_loss``, a
loss function), for sequence outputs (one-hot rows of every token would not fit a dataset) and when
metrics need the outputs of the training steps, fit ends the training graph itself with the loss's
``per_sample`` graph (``nn.losses``). The weights ride in the label rows as one more column (all 1
without weights), and the host divides them by their sum over each optimizer step's batch, so every
step minimises the weighted mean loss of its batch (PyTorch's weighted ``reduction="mean"``; equal
weights give the unweighted mean, and a weight of 0 removes a sample). A loss function returning the
batch's mean cannot be weighted per sample: each physical batch's mean counts by its share of the
step's weights, all equal.
"""
from __future__ import annotations

import numpy as np

from ..nn import Tensor, ops
from ..nn.losses import Loss


def weighted_loss(outputs: Tensor, labels: Tensor, loss: Loss, constants: dict[str, Tensor]) -> Tensor:
    """Per-sample weighted losses (n, 1) of ``outputs`` against ``labels`` (n, k + 1): the targets, then
    each sample's weight (already divided by its step's sum); for a loss returning the batch's mean, that
    mean times each weight. ``constants``: the tensors of ``loss.graph_constants``."""
    width = labels.shape[1]
    y, w = ops.columns(labels, 0, width - 1), ops.columns(labels, width - 1, width)
    value = loss.per_sample(outputs, y, constants)
    # a batch's mean spread over its samples by their weights: the same sum, and ggml-opt counts the
    # batch's samples from the outputs' rows
    return ops.mul(w, value) if value.ndim == 1 else ops.mul(value, w)


def step_weights(weights: np.ndarray, batch_size: int) -> np.ndarray:
    """An epoch's weights in batch order, each divided by their sum over its step's ``batch_size``
    samples (a step whose weights are all 0 keeps them: it changes nothing)."""
    steps = weights.reshape(-1, batch_size)
    sums = steps.sum(axis=1, keepdims=True)
    return (steps / np.where(sums > 0, sums, 1.0)).ravel()
