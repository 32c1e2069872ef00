"""Losses ggml-opt lacks, and weighted losses: a loss graph of fit's own under ggml-opt's SUM loss.

ggml-opt knows mean, sum, cross-entropy and MSE, weighs every sample alike, and its cross-entropy
backward assumes label rows that sum to one (labels scaled by a weight would get wrong gradients). For
``sample_weight`` / ``class_weight``, and for the losses of ``OWN_LOSSES``, fit ends the training graph
itself: each sample's loss times its weight, summed by ggml-opt's SUM loss. The weights ride in the
label rows as one more column (all 1 without weights), and the host divides them by their sum over each
optimizer step's batch, so every step minimises the weighted mean loss of its batch (PyTorch's weighted
``reduction="mean"``; equal weights give the unweighted mean, and a weight of 0 removes a sample).

Each per-sample loss is the mean over the outputs of the element-wise loss (PyTorch's
``reduction="mean"`` over a batch of such rows), except cross-entropy, summed over the classes:
  - mae: |o - y|;  huber (delta 1, PyTorch's HuberLoss): d^2 / 2 for |d| < 1, else |d| - 1/2;
  - binary_cross_entropy: on logits, log(1 + exp(o)) - y o (PyTorch's BCEWithLogitsLoss), y in [0, 1].
Sequence outputs (n, T, V) with token ids (n, T) take cross-entropy per token, averaged over the tokens
of a sample (all samples have T tokens: the mean over every token, PyTorch's cross_entropy), always
through this graph: one-hot rows of every token would not fit a dataset.
"""
from __future__ import annotations

import numpy as np

from ..nn import Tensor, ops

OWN_LOSSES = ("mae", "huber", "binary_cross_entropy")
WEIGHTED_LOSSES = ("cross_entropy", "mse", *OWN_LOSSES)
HUBER_DELTA = 1.0


def per_sample_loss(outputs: Tensor, y: Tensor, loss: str) -> Tensor:
    """The loss of each sample (n, 1) of ``outputs`` (n, k) against targets ``y`` (n, k)."""
    if loss == "cross_entropy":
        return ops.neg(ops.sum_rows(ops.mul(y, ops.log_softmax(outputs))))
    if loss == "binary_cross_entropy":
        return ops.mean(ops.sub(ops.softplus(outputs), ops.mul(y, outputs)))
    diff = ops.abs(ops.sub(outputs, y))
    if loss == "mse":
        return ops.mean(ops.sqr(diff))
    if loss == "mae":
        return ops.mean(diff)
    if loss == "huber":
        # 0.5 min(|d|, delta)^2 + delta relu(|d| - delta): both pieces of the Huber loss, from ops ggml
        # can differentiate (no select)
        over = ops.relu(ops.scale(diff, 1.0, -HUBER_DELTA))
        inside = ops.sub(diff, over)
        return ops.mean(ops.add(ops.scale(ops.sqr(inside), 0.5), ops.scale(over, HUBER_DELTA)))
    raise ValueError(f"fit's own loss graph takes one of the losses {WEIGHTED_LOSSES}, got {loss!r}")


def weighted_loss(outputs: Tensor, labels: Tensor, loss: str, one_hot: Tensor | None = None) -> Tensor:
    """Per-sample weighted losses (n, 1) of ``outputs`` (n, k) against ``labels`` (n, k + 1): the
    targets, then each sample's weight (already divided by its step's sum). For sequence outputs
    (n, T, V) the labels are (n, T + 1): token ids, then the weight, and ``one_hot`` is the identity
    (V, V) that turns ids into one-hot rows (cross-entropy only)."""
    if outputs.ndim == 3:
        n, steps, vocab = outputs.shape
        ids, w = ops.to_int32(ops.columns(labels, 0, steps)), ops.columns(labels, steps, steps + 1)
        if one_hot is None or loss != "cross_entropy":
            raise ValueError(f"sequence outputs take loss='cross_entropy' (per token), got {loss!r}")
        targets = ops.reshape(ops.embedding(ids, one_hot), n * steps, vocab)
        per_token = per_sample_loss(ops.reshape(outputs, n * steps, vocab), targets, loss)
        return ops.mul(ops.mean(ops.reshape(per_token, n, steps)), w)
    n, k = outputs.shape
    y, w = ops.columns(labels, 0, k), ops.columns(labels, k, k + 1)
    return ops.mul(per_sample_loss(outputs, y, loss), w)


def host_losses(outputs: np.ndarray, targets: np.ndarray, loss: str) -> np.ndarray:
    """The same per-sample losses (n,) in float64 numpy (validation, evaluate)."""
    o, y = outputs.astype(np.float64), targets.astype(np.float64)
    if loss == "binary_cross_entropy":
        return (np.logaddexp(0.0, o) - y * o).mean(axis=1)
    d = np.abs(o - y)
    if loss == "mae":
        return d.mean(axis=1)
    if loss == "huber":
        return np.where(d < HUBER_DELTA, 0.5 * d ** 2, HUBER_DELTA * (d - 0.5 * HUBER_DELTA)).mean(axis=1)
    raise ValueError(f"no host loss for {loss!r}")


def step_weights(weights: np.ndarray, batch_size: int) -> np.ndarray:
    """An epoch's weights in batch order, each divided by their sum over its step's ``batch_size``
    samples (a step whose weights are all 0 keeps them: it changes nothing)."""
    steps = weights.reshape(-1, batch_size)
    sums = steps.sum(axis=1, keepdims=True)
    return (steps / np.where(sums > 0, sums, 1.0)).ravel()
