"""The losses by name: cross-entropy (classes, token ids), binary cross-entropy, mse, mae, huber,
mean and sum. Each per-sample loss is PyTorch's (see the package's docstring)."""
from __future__ import annotations

import numpy as np

from ...core import OptLoss
from .. import ops
from ..ops import Tensor
from .base import Loss, register_loss
from .numeric import class_rows, log_softmax, sigmoid

HUBER_DELTA = 1.0


class CrossEntropy(Loss):
    """Softmax cross-entropy of logits against class ids, one-hot or probability rows, or token ids.

    Token ids (n, T) equal to ``IGNORE_INDEX`` (-100, PyTorch's ``ignore_index``) are no target: they
    add no loss and no gradient (prompt tokens, padding), and each sample's loss is the mean over its
    other tokens (0 where none is left). ``sample_weight`` = each sample's count of such tokens makes
    every step's loss the mean over its batch's tokens, as Hugging Face's Trainer and MLX-LM weigh them
    (``pyggml_opt.data.finetune`` gives those counts)."""

    name = "cross_entropy"
    opt_loss = OptLoss.CROSS_ENTROPY
    classes = True
    logits = True
    sequences = True

    def targets(self, arr: np.ndarray, n: int, output_shape: tuple[int, ...], name: str) -> np.ndarray | None:
        if len(output_shape) == 1 and arr.ndim == 1:
            return class_rows(arr, n, output_shape[0], name)
        return super().targets(arr, n, output_shape, name)

    def check_rows(self, rows: np.ndarray, name: str) -> None:
        if (rows < 0).any() or not np.allclose(rows.sum(axis=1), 1.0, atol=1e-3):
            raise ValueError(f"{name}: {self.name} targets must be one-hot or probability rows (>= 0, summing to 1)")

    def per_sample(self, outputs: Tensor, y: Tensor, constants: dict[str, Tensor]) -> Tensor:
        if outputs.ndim == 3:   # token ids (n, T): the mean over a sample's tokens that are not IGNORE_INDEX
            # each token's log-sum-exp minus its target's logit, by id (one node, no one-hot labels):
            # the graph holds the logits and their gradient whatever the vocabulary
            _, steps, vocab = outputs.shape
            # ignored tokens (ids < 0) become id -1, which the op gives no loss and no gradient, and count 0
            ids = ops.to_int32(ops.clamp(y, -1.0, float(vocab - 1)))
            keep = ops.clamp(ops.scale(y, 1.0, 1.0), 0.0, 1.0)
            per_token = ops.cross_entropy_ids(outputs, ids)  # the outputs as they are: see cross_entropy_ids
            return ops.div(ops.sum_rows(per_token), ops.clamp(ops.sum_rows(keep), 1.0, float(steps)))
        return ops.neg(ops.sum_rows(ops.mul(y, ops.log_softmax(outputs))))

    def host(self, outputs: np.ndarray, targets: np.ndarray | None) -> np.ndarray:
        assert targets is not None  # has targets
        o = outputs.astype(np.float64)
        if o.ndim == 3:
            keep = targets >= 0
            ids = np.where(keep, targets, 0).astype(np.int64)[..., None]
            per_token = -np.take_along_axis(log_softmax(o), ids, axis=-1)[..., 0] * keep
            return per_token.sum(axis=1) / np.maximum(keep.sum(axis=1), 1)
        return -(targets.astype(np.float64) * log_softmax(o)).sum(axis=1)


class BinaryCrossEntropy(Loss):
    """Sigmoid cross-entropy of logits against labels in [0, 1] per output (PyTorch's BCEWithLogitsLoss)."""

    name = "binary_cross_entropy"
    binary = True
    logits = True

    def check_rows(self, rows: np.ndarray, name: str) -> None:
        if (rows < 0).any() or (rows > 1).any():
            raise ValueError(f"{name}: {self.name} targets must be in [0, 1] (labels 0 / 1 or probabilities)")

    def per_sample(self, outputs: Tensor, y: Tensor, constants: dict[str, Tensor]) -> Tensor:
        return ops.mean(ops.sub(ops.softplus(outputs), ops.mul(y, outputs)))

    def host(self, outputs: np.ndarray, targets: np.ndarray | None) -> np.ndarray:
        assert targets is not None  # has targets
        o, y = outputs.astype(np.float64), targets.astype(np.float64)
        return (np.logaddexp(0.0, o) - y * o).mean(axis=1)

    def probabilities(self, outputs: np.ndarray) -> np.ndarray:
        return sigmoid(outputs)


class _ElementWise(Loss):
    """A per-sample mean over the outputs of an element-wise error of ``d = |o - y|``."""

    def error(self, diff: Tensor) -> Tensor:
        raise NotImplementedError

    def host_error(self, d: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def per_sample(self, outputs: Tensor, y: Tensor, constants: dict[str, Tensor]) -> Tensor:
        return ops.mean(self.error(ops.abs(ops.sub(outputs, y))))

    def host(self, outputs: np.ndarray, targets: np.ndarray | None) -> np.ndarray:
        assert targets is not None  # has targets
        return self.host_error(np.abs(outputs.astype(np.float64) - targets.astype(np.float64))).mean(axis=1)


class MeanSquaredError(_ElementWise):
    name = "mse"
    opt_loss = OptLoss.MEAN_SQUARED_ERROR

    def error(self, diff: Tensor) -> Tensor:
        return ops.sqr(diff)

    def host_error(self, d: np.ndarray) -> np.ndarray:
        return d ** 2


class MeanAbsoluteError(_ElementWise):
    name = "mae"

    def error(self, diff: Tensor) -> Tensor:
        return diff

    def host_error(self, d: np.ndarray) -> np.ndarray:
        return d


class Huber(_ElementWise):
    name = "huber"

    def error(self, diff: Tensor) -> Tensor:
        # 0.5 min(|d|, delta)^2 + delta relu(|d| - delta): both pieces of the Huber loss, from ops ggml
        # can differentiate (no select)
        over = ops.relu(ops.scale(diff, 1.0, -HUBER_DELTA))
        inside = ops.sub(diff, over)
        return ops.add(ops.scale(ops.sqr(inside), 0.5), ops.scale(over, HUBER_DELTA))

    def host_error(self, d: np.ndarray) -> np.ndarray:
        return np.where(d < HUBER_DELTA, 0.5 * d ** 2, HUBER_DELTA * (d - 0.5 * HUBER_DELTA))


class Mean(Loss):
    """The model's outputs are the loss: their mean per sample (no targets)."""

    name = "mean"
    opt_loss = OptLoss.MEAN
    has_targets = False
    weighted = False

    def host(self, outputs: np.ndarray, targets: np.ndarray | None) -> np.ndarray:
        return outputs.astype(np.float64).mean(axis=1)


class Sum(Mean):
    """The model's outputs are the loss: their sum per sample and over the samples (no targets)."""

    name = "sum"
    opt_loss = OptLoss.SUM

    def host(self, outputs: np.ndarray, targets: np.ndarray | None) -> np.ndarray:
        return outputs.astype(np.float64).sum(axis=1)

    def reported(self, mean: float, unc: float, count: int) -> tuple[float, float]:
        return mean * count, unc * count


for _cls in (CrossEntropy, BinaryCrossEntropy, MeanSquaredError, MeanAbsoluteError, Huber, Mean, Sum):
    register_loss(_cls)

DEFAULT = CrossEntropy.name  # fit's and evaluate's loss unless told
