"""Embeddings: token ids to vectors, and learnt positions added to a sequence."""
from __future__ import annotations

import math

import numpy as np

from ...checks import check_int, check_number
from .. import ops as F
from ..ops import Tensor
from .base import Layer, LayerShapes, SequenceState


class Embedding(Layer):
    """Token ids (T,) -> their vectors (T, embedding_dim): row ``id`` of ``weight`` (num_embeddings,
    embedding_dim), initialised N(0, init_std^2) (PyTorch's N(0, 1) by default; a table that is also an
    output layer's weight wants about 1 / sqrt(embedding_dim), so that logits start near 1 in size).
    ``scale`` multiplies the rows it gives (Gemma's sqrt(embedding_dim)), not the table (which an
    output layer tied to it uses as it is). Takes int arrays of ids in [0, num_embeddings);
    it must be a model's first layer. ``mask_zero`` (Keras's): id 0 is padding; the layers after it
    that keep the steps axis pass the padding mask on, and ``MultiHeadAttention`` (no step attends to
    padding), ``TransformerBlock`` and ``GlobalAveragePooling1D`` (the mean over the tokens only) use it."""

    input_dtype = "int32"
    keeps_mask = True
    quantizable = frozenset({"weight"})

    def __init__(self, num_embeddings: int, embedding_dim: int, mask_zero: bool = False, name: str | None = None,
                 init_std: float = 1.0, scale: float = 1.0) -> None:
        super().__init__(name)
        # ids are int32 (the input's dtype, GET_ROWS's): a larger table has rows no id reaches
        self.num_embeddings = check_int("num_embeddings", num_embeddings, 1, np.iinfo(np.int32).max)
        self.embedding_dim = check_int("embedding_dim", embedding_dim)
        self.mask_zero = bool(mask_zero)
        self.init_std = check_number("init_std", init_std, 0.0, math.inf, lo_open=True, hi_open=True)
        self.scale = check_number("scale", scale, 0.0, math.inf, lo_open=True, hi_open=True)

    def infer(self, input_shape: tuple[int, ...]) -> LayerShapes:
        if len(input_shape) != 1:
            self._fail(input_shape, "a sequence of ids (T,)")
        return LayerShapes((input_shape[0], self.embedding_dim), {"weight": (self.num_embeddings, self.embedding_dim)})

    def init(self, pname: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return (self.init_std * rng.standard_normal(shape)).astype(np.float32)

    def check_input(self, x: np.ndarray) -> None:
        lo, hi = int(x.min()), int(x.max())
        if lo < 0 or hi >= self.num_embeddings:
            raise ValueError(f"token ids must be in [0, {self.num_embeddings}) for {self!r}, got range [{lo}, {hi}]")

    @property
    def decoding(self) -> str | None:  # type: ignore[override]
        # a padding mask would hide cached steps whose id is 0
        return None if self.mask_zero else "steps"

    def input_mask(self, x: Tensor) -> Tensor | None:
        return F.token_mask(x) if self.mask_zero else None

    def forward(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        rows = F.embedding(x, params["weight"])
        return rows if self.scale == 1.0 else F.scale(rows, self.scale)

    def get_config(self) -> dict:
        config = {**super().get_config(), "num_embeddings": self.num_embeddings, "embedding_dim": self.embedding_dim,
                  "mask_zero": self.mask_zero}
        # absent at their defaults: the configurations (and files) of earlier versions
        config.update({k: v for k, v in (("init_std", self.init_std), ("scale", self.scale)) if v != 1.0})
        return config


class PositionalEmbedding(Layer):
    """Learnt absolute positions (GPT-2's): adds row t of ``weight`` (max_length, dim) to step t of a
    sequence (T, dim), T <= max_length; initialised N(0, 0.02^2) as GPT-2 does."""

    keeps_mask = True
    decoding = "positions"

    def __init__(self, max_length: int, dim: int, name: str | None = None) -> None:
        super().__init__(name)
        self.max_length = check_int("max_length", max_length)
        self.dim = check_int("dim", dim)

    def infer(self, input_shape: tuple[int, ...]) -> LayerShapes:
        if len(input_shape) != 2 or input_shape[1] != self.dim or input_shape[0] > self.max_length:
            self._fail(input_shape, f"a sequence (T, {self.dim}) of at most max_length={self.max_length} steps")
        return LayerShapes(tuple(input_shape), {"weight": (self.max_length, self.dim)})

    def init(self, pname: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return (0.02 * rng.standard_normal(shape)).astype(np.float32)

    def forward(self, x: Tensor, params: dict[str, Tensor], state: SequenceState | None = None) -> Tensor:
        positions = state.positions if state is not None else None
        if positions is not None:  # a decoding graph's steps (nn/decoding.py), packed windows' documents
            ids = positions if positions.ndim == 2 else F.reshape(positions, 1, positions.shape[0])
            return F.add(x, F.embedding(ids, params["weight"]))
        return F.add(x, F.rows(params["weight"], 0, x.shape[1], graph=x))

    def get_config(self) -> dict:
        return {**super().get_config(), "max_length": self.max_length, "dim": self.dim}
