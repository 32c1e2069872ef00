"""Attention layers over sequences (T, dim)."""
from __future__ import annotations

import numpy as np

from ...checks import check_int
from .. import ops as F
from ..ops import Tensor
from ..params import uniform_init
from .base import Layer, LayerShapes


class MultiHeadAttention(Layer):
    """Self-attention over a sequence: (T, dim) -> (T, dim) with ``n_heads`` heads of dim / n_heads,
    the query, key, value and output projections ``wq``, ``wk``, ``wv``, ``wo`` (dim, dim) with biases
    ``bq`` ... ``bo`` (dim,), and with ``causal`` (default) no step attending to a later one (a
    language model's attention). ``rope``: rotate queries and keys by their position (``ops.rope``,
    rotary position embedding) instead of, or besides, learnt positions. After an
    ``Embedding(mask_zero=True)`` no step attends to padding."""

    keeps_mask = True
    uses_mask = True

    def __init__(self, dim: int, n_heads: int, causal: bool = True, rope: bool = False,
                 name: str | None = None) -> None:
        super().__init__(name)
        self.dim, self.n_heads = check_int("dim", dim), check_int("n_heads", n_heads)
        if self.dim % self.n_heads:
            raise ValueError(f"dim ({dim}) must be a multiple of n_heads ({n_heads})")
        self.causal, self.rope = bool(causal), bool(rope)
        if self.rope and (self.dim // self.n_heads) % 2:
            raise ValueError(f"rope needs an even head size, got dim / n_heads = {self.dim // self.n_heads}")

    def infer(self, input_shape: tuple[int, ...]) -> LayerShapes:
        if len(input_shape) != 2 or input_shape[1] != self.dim:
            self._fail(input_shape, f"a sequence (T, {self.dim})")
        return LayerShapes(tuple(input_shape), {f"{kind}{p}": (self.dim, self.dim) if kind == "w" else (self.dim,)
                                                for p in "qkvo" for kind in "wb"})

    def init(self, pname: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return uniform_init(rng, shape, self.dim) if pname.startswith("w") else np.zeros(shape, np.float32)

    def forward(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        n, steps, dim = x.shape
        heads, d_head = self.n_heads, dim // self.n_heads

        def split(p: str) -> Tensor:  # (n, T, dim) -> (n, heads, T, d_head)
            y = F.reshape(F.linear(x, params[f"w{p}"], params[f"b{p}"]), n, steps, heads, d_head)
            if self.rope and p in "qk":
                y = F.rope(y)
            return F.permute(y, 0, 2, 1, 3)

        mask = F.attention_mask(params["padding"]) if "padding" in params else None
        out = F.attention(split("q"), split("k"), split("v"), self.causal, mask)
        merged = F.reshape(F.permute(out, 0, 2, 1, 3), n, steps, dim)
        return F.linear(merged, params["wo"], params["bo"])

    def get_config(self) -> dict:
        return {**super().get_config(), "dim": self.dim, "n_heads": self.n_heads, "causal": self.causal, "rope": self.rope}
