"""Normalisation layers over the last axis."""
from __future__ import annotations

import math

import numpy as np

from ...checks import check_int, check_number
from .. import ops as F
from ..ops import Tensor
from .base import Layer


class _LastAxisNorm(Layer):
    """What the normalisations over the last axis share: its size, ``eps``, and an optional learnt
    affine part (``weight`` starting at ones, ``bias`` at zeros)."""

    def __init__(self, normalized_shape: int, eps: float, elementwise_affine: bool, name: str | None,
                 affine_params: tuple[str, ...]) -> None:
        super().__init__(name)
        self.normalized_shape = check_int("normalized_shape", normalized_shape)
        self.eps = check_number("eps", eps, 0.0, math.inf, lo_open=True)
        self.elementwise_affine = bool(elementwise_affine)
        self.param_shapes = {p: (self.normalized_shape,) for p in affine_params} if self.elementwise_affine else {}

    def output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        if not input_shape or input_shape[-1] != self.normalized_shape:
            self._fail(input_shape, f"last axis of size {self.normalized_shape}")
        return input_shape

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
