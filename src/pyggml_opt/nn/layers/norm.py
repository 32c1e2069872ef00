"""Normalisation layers: over the last axis (LayerNorm, RMSNorm), and per channel over the batch
(BatchNorm1d, BatchNorm2d)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...checks import check_int, check_number
from .. import ops as F
from ..ops import Tensor
from ..ops.norm import batch_norm_train
from .base import Layer, LayerShapes


class _LastAxisNorm(Layer):
    """What the normalisations over the last axis share: its size, ``eps``, and an optional learnt
    affine part (``weight`` starting at ones, ``bias`` at zeros)."""

    keeps_mask = True
    decoding = "steps"

    def __init__(self, normalized_shape: int, eps: float, elementwise_affine: bool, name: str | None,
                 affine_params: tuple[str, ...]) -> None:
        super().__init__(name)
        self.normalized_shape = check_int("normalized_shape", normalized_shape)
        self.eps = check_number("eps", eps, 0.0, math.inf, lo_open=True)
        self.elementwise_affine = bool(elementwise_affine)
        self._affine_params = affine_params if self.elementwise_affine else ()

    def infer(self, input_shape: tuple[int, ...]) -> LayerShapes:
        if not input_shape or input_shape[-1] != self.normalized_shape:
            self._fail(input_shape, f"last axis of size {self.normalized_shape}")
        return LayerShapes(tuple(input_shape), {p: (self.normalized_shape,) for p in self._affine_params})

    def init(self, pname: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return np.ones(shape, np.float32) if pname == "weight" else np.zeros(shape, np.float32)

    def get_config(self) -> dict:
        return {**super().get_config(), "normalized_shape": self.normalized_shape, "eps": self.eps,
                "elementwise_affine": self.elementwise_affine}


class LayerNorm(_LastAxisNorm):
    """Layer normalisation over the last axis with learnt ``weight`` (ones) and ``bias`` (zeros)."""

    def __init__(self, normalized_shape: int, eps: float = 1e-5, elementwise_affine: bool = True,
                 name: str | None = None) -> None:
        super().__init__(normalized_shape, eps, elementwise_affine, name, ("weight", "bias"))

    def forward(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        y = F.layer_norm(x, self.eps)
        if self.elementwise_affine:
            y = F.add(F.mul(y, params["weight"]), params["bias"])
        return y


class RMSNorm(_LastAxisNorm):
    """Root-mean-square normalisation over the last axis, x / sqrt(mean(x^2) + eps), times a learnt
    ``weight`` (ones) (PyTorch's RMSNorm, LLaMA's norm)."""

    def __init__(self, normalized_shape: int, eps: float = 1e-6, elementwise_affine: bool = True,
                 name: str | None = None) -> None:
        super().__init__(normalized_shape, eps, elementwise_affine, name, ("weight",))

    def forward(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        y = F.rms_norm(x, self.eps)
        return F.mul(y, params["weight"]) if self.elementwise_affine else y


class _BatchNorm(Layer):
    """What BatchNorm1d and BatchNorm2d share: PyTorch's batch normalisation of the channels (the first
    axis of a sample), with a learnt affine part (``weight`` ones, ``bias`` zeros; ``affine=False``
    leaves it out) and the buffers ``running_mean`` (zeros) and ``running_var`` (ones).

    In training (fit's training graph) each channel is normalised by the mean and biased variance of
    the batch over every other axis, and each graph evaluation (each physical batch, so with gradient
    accumulation several per optimizer step, as PyTorch updates them per forward pass) updates
    running = (1 - momentum) * running + momentum * batch statistic, with the variance unbiased. In
    predict, evaluate and fit's validation the running statistics normalise. The buffers are saved,
    loaded, pickled and copied with the weights; the optimizer does not train them."""

    _sample_ranks: tuple[int, ...]
    _expected: str

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1, affine: bool = True,
                 name: str | None = None) -> None:
        super().__init__(name)
        self.num_features = check_int("num_features", num_features)
        self.eps = check_number("eps", eps, 0.0, math.inf, lo_open=True)
        self.momentum = check_number("momentum", momentum, 0.0, 1.0)
        self.affine = bool(affine)

    def infer(self, input_shape: tuple[int, ...]) -> LayerShapes:
        if len(input_shape) not in self._sample_ranks or input_shape[0] != self.num_features:
            self._fail(input_shape, self._expected.format(c=self.num_features))
        channels = (self.num_features,)
        return LayerShapes(tuple(input_shape), {"weight": channels, "bias": channels} if self.affine else {},
                           {"running_mean": channels, "running_var": channels})

    def init(self, pname: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return np.ones(shape, np.float32) if pname in ("weight", "running_var") else np.zeros(shape, np.float32)

    def forward(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        return F.batch_norm(x, params["running_mean"], params["running_var"], params.get("weight"),
                            params.get("bias"), self.eps)

    def forward_train(self, x: Tensor, params: dict[str, Tensor], updates: list[Tensor], **state: Any) -> Tensor:
        y, writes = batch_norm_train(x, params["running_mean"], params["running_var"], params.get("weight"),
                                     params.get("bias"), self.momentum, self.eps)
        updates.extend(writes)
        return y

    def get_config(self) -> dict:
        return {**super().get_config(), "num_features": self.num_features, "eps": self.eps,
                "momentum": self.momentum, "affine": self.affine}


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of feature vectors (num_features,) or of sequences (num_features, length),
    per feature (PyTorch's BatchNorm1d; see ``_BatchNorm`` for training and inference). Training needs
    more than one value per feature in a physical batch."""

    _sample_ranks = (1, 2)
    _expected = "({c},) or (channels={c}, length)"


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of images (num_features, h, w), per channel (PyTorch's BatchNorm2d; see
    ``_BatchNorm`` for training and inference)."""

    _sample_ranks = (3,)
    _expected = "(channels={c}, height, width)"
