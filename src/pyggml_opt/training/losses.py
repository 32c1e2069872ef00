"""Losses ggml-opt lacks, weighted losses and loss functions of the user's: a loss graph of fit's own
under ggml-opt's SUM loss; and every loss's float64 numpy twin, for validation and evaluate.

ggml-opt knows mean, sum, cross-entropy and MSE, weighs every sample alike, and its cross-entropy
backward assumes label rows that sum to one (labels scaled by a weight would get wrong gradients). For
``sample_weight`` / ``class_weight``, for the losses of ``OWN_LOSSES``, for a loss function
(``fit(loss=fn)``) and when metrics need the outputs of the training steps, fit ends the training
graph itself: each sample's loss times its weight, summed by ggml-opt's SUM loss. The weights ride in
the label rows as one more column (all 1 without weights), and the host divides them by their sum over
each optimizer step's batch, so every step minimises the weighted mean loss of its batch (PyTorch's
weighted ``reduction="mean"``; equal weights give the unweighted mean, and a weight of 0 removes a
sample).

Each per-sample loss is the mean over the outputs of the element-wise loss (PyTorch's
``reduction="mean"`` over a batch of such rows), except cross-entropy, summed over the classes:
  - mae: |o - y|;  huber (delta 1, PyTorch's HuberLoss): d^2 / 2 for |d| < 1, else |d| - 1/2;
  - binary_cross_entropy: on logits, log(1 + exp(o)) - y o (PyTorch's BCEWithLogitsLoss), y in [0, 1].
Sequence outputs (n, T, V) with token ids (n, T) take cross-entropy per token, averaged over the tokens
of a sample (all samples have T tokens: the mean over every token, PyTorch's cross_entropy), always
through this graph: one-hot rows of every token would not fit a dataset.

A loss function ``fn(outputs, labels) -> Tensor`` is built from ``pyggml_opt.ops`` on the outputs and
the float label rows (n, k) of ``y``, and returns per-sample losses (n,) or (n, 1), weighted as above,
or a scalar: the mean over the batch, which cannot be weighted per sample (each physical batch's mean
counts by its share of the step's weights, all equal).
"""
from __future__ import annotations

from typing import Callable, Union

import numpy as np

from .._lib import lib
from ..core import GRAPH_SIZE, Context
from ..nn import Tensor, ops
from ..saving.model_file import CUSTOM_LOSS, loss_entry

OWN_LOSSES = ("mae", "huber", "binary_cross_entropy")
WEIGHTED_LOSSES = ("cross_entropy", "mse", *OWN_LOSSES)
HUBER_DELTA = 1.0

LossFn = Callable[[Tensor, Tensor], Tensor]
Loss = Union[str, LossFn]  # a loss name or a loss function (fit's ``loss``)


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


def function_name(fn: object) -> str:
    """How messages name a loss function (as model files do)."""
    return loss_entry(fn).removeprefix(CUSTOM_LOSS)


def custom_loss(fn: LossFn, outputs: Tensor, labels: Tensor) -> tuple[Tensor, bool]:
    """``fn(outputs, labels)`` checked, as (per-sample losses (n, 1), False) or (the batch's loss, a
    scalar, True). ValueError / TypeError naming the function when it raises or returns anything else
    (a batch of one sample counts as per-sample: its mean is its loss)."""
    n = outputs.shape[0]
    what = f"the loss function {function_name(fn)}(outputs {outputs.shape}, labels {labels.shape})"
    try:
        value = fn(outputs, labels)
    except Exception as e:  # noqa: BLE001 - whatever the user's function raises, reported as its failure
        raise ValueError(f"{what} raised {type(e).__name__}: {e}") from e
    if not isinstance(value, Tensor):
        raise TypeError(f"{what} must return a Tensor built with pyggml_opt.ops, got {type(value).__name__}")
    shape = value.shape
    if value.ptr.type != lib.GGML_TYPE_F32:
        raise ValueError(f"{what} must return float32 losses")
    if shape in ((n,), (n, 1)):
        return ops.reshape(value, n, 1), False
    if int(np.prod(shape)) == 1:
        return ops.reshape(value, 1), True
    raise ValueError(f"{what} must return per-sample losses of shape ({n},) or ({n}, 1), or a scalar (the "
                     f"batch's mean), got shape {shape}")


def check_custom_loss(loss: Loss, output_shape: tuple[int, ...], labels: np.ndarray | None) -> bool:
    """For a loss function: try it on a graph of two samples (no data) before anything is trained, with
    label rows as wide as ``labels``; True when it returns a scalar (the batch's mean) rather than
    per-sample losses. False for a loss name."""
    if not callable(loss):
        return False
    assert labels is not None  # a loss function takes label rows (checks.targets)
    ctx = Context(GRAPH_SIZE)
    try:
        outputs = ops.new_input(ctx, (2, *output_shape), "outputs")
        return custom_loss(loss, outputs, ops.new_input(ctx, (2, labels.shape[1]), "labels"))[1]
    finally:
        ctx.close()


def weighted_loss(outputs: Tensor, labels: Tensor, loss: Loss, one_hot: Tensor | None = None) -> Tensor:
    """Per-sample weighted losses (n, 1) of ``outputs`` (n, k) against ``labels`` (n, k + 1): the
    targets, then each sample's weight (already divided by its step's sum); for a loss function
    returning the batch's mean, that mean times each weight. For sequence outputs
    (n, T, V) and cross_entropy the labels are (n, T + 1): token ids, then the weight, and ``one_hot``
    is the identity (V, V) that turns ids into one-hot rows."""
    n, width = labels.shape
    y, w = ops.columns(labels, 0, width - 1), ops.columns(labels, width - 1, width)
    if callable(loss):
        value, scalar = custom_loss(loss, outputs, y)
        # a batch's mean spread over its samples by their weights: the same sum, and ggml-opt counts the
        # batch's samples from the outputs' rows
        return ops.mul(w, value) if scalar else ops.mul(value, w)
    if outputs.ndim == 3:
        _, steps, vocab = outputs.shape
        if one_hot is None or loss != "cross_entropy":
            raise ValueError(f"sequence outputs take loss='cross_entropy' (per token), got {loss!r}")
        targets = ops.reshape(ops.embedding(ops.to_int32(y), one_hot), n * steps, vocab)
        per_token = per_sample_loss(ops.reshape(outputs, n * steps, vocab), targets, loss)
        return ops.mul(ops.mean(ops.reshape(per_token, n, steps)), w)
    return ops.mul(per_sample_loss(outputs, y, loss), w)


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


def host_losses(outputs: np.ndarray, targets: np.ndarray | None, loss: str) -> np.ndarray:
    """The per-sample losses (n,) of a named loss in float64 numpy (validation, evaluate): the model's
    outputs themselves for "mean" and "sum" (their mean / sum over a sample), which take no targets."""
    o = outputs.astype(np.float64)
    if loss in ("mean", "sum"):
        return o.mean(axis=1) if loss == "mean" else o.sum(axis=1)
    assert targets is not None  # every other loss has targets
    if loss == "cross_entropy" and o.ndim == 3:   # token ids (n, T): the mean over a sample's tokens
        ids = targets.astype(np.int64)[..., None]
        return -np.take_along_axis(log_softmax(o), ids, axis=-1)[..., 0].mean(axis=1)
    y = targets.astype(np.float64)
    if loss == "cross_entropy":
        return -(y * log_softmax(o)).sum(axis=1)
    if loss == "binary_cross_entropy":
        return (np.logaddexp(0.0, o) - y * o).mean(axis=1)
    d = np.abs(o - y)
    if loss == "mse":
        return (d ** 2).mean(axis=1)
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
