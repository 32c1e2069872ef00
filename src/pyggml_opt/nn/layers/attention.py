"""Attention layers over sequences (T, dim)."""
from __future__ import annotations

import math

import numpy as np

from ...checks import check_int, check_number
from .. import ops as F
from ..ops import Tensor
from ..params import uniform_init
from .base import Layer, LayerShapes


def attend(q: Tensor, k: Tensor, v: Tensor, causal: bool, params: dict[str, Tensor]) -> Tensor:
    """Attention of queries q (n, T, heads, d_head) over keys and values (n, T, kv_heads, d_head),
    heads merged: (n, T, heads * d_head). In a decoding graph (``nn/decoding.py``: ``params`` holds the
    layer's ``k_cache`` / ``v_cache``, the steps' ``positions`` and the ``kv_mask`` over the cached
    rows) the new keys and values go into the cache and the queries attend over its rows; else over
    the T steps (causal or not, a padding mask where the model has one)."""
    n, steps, heads, d_head = q.shape
    if "k_cache" in params:
        n_kv = params["kv_mask"].shape[-1]
        keys, values = (F.cache_rows(params[f"{p}_cache"], t, params["positions"], n_kv) for p, t in (("k", k), ("v", v)))
        out = F.cached_attention(q, keys, values, params["kv_mask"])
    else:
        mask = F.attention_mask(params["padding"]) if "padding" in params else None
        q, k, v = (F.permute(t, 0, 2, 1, 3) for t in (q, k, v))
        out = F.permute(F.attention(q, k, v, causal, mask), 0, 2, 1, 3)
    return F.reshape(out, n, steps, heads * d_head)


class SelfAttention(Layer):
    """What the self-attention layers share: a padding mask reaches them, and a causal one decodes with a
    key / value cache (``nn/decoding.py``) of ``kv_width`` keys and values per step."""

    keeps_mask = True
    uses_mask = True
    quantizable = frozenset({"wq", "wk", "wv", "wo"})  # the projections' matrices (biases stay float32)
    causal: bool

    @property
    def decoding(self) -> str | None:  # type: ignore[override]
        return "cache" if self.causal else None

    @property
    def kv_width(self) -> int:
        """Keys (and values) per step."""
        raise NotImplementedError


class MultiHeadAttention(SelfAttention):
    """Self-attention over a sequence: (T, dim) -> (T, dim) with ``n_heads`` heads of dim / n_heads,
    the query, key, value and output projections ``wq``, ``wk``, ``wv``, ``wo`` (dim, dim) with biases
    ``bq`` ... ``bo`` (dim,), and with ``causal`` (default) no step attending to a later one (a
    language model's attention). ``rope``: rotate queries and keys by their position (``ops.rope``,
    rotary position embedding) instead of, or besides, learnt positions. After an
    ``Embedding(mask_zero=True)`` no step attends to padding."""

    def __init__(self, dim: int, n_heads: int, causal: bool = True, rope: bool = False,
                 name: str | None = None) -> None:
        super().__init__(name)
        self.dim, self.n_heads = check_int("dim", dim), check_int("n_heads", n_heads)
        if self.dim % self.n_heads:
            raise ValueError(f"dim ({dim}) must be a multiple of n_heads ({n_heads})")
        self.causal, self.rope = bool(causal), bool(rope)
        if self.rope and (self.dim // self.n_heads) % 2:
            raise ValueError(f"rope needs an even head size, got dim / n_heads = {self.dim // self.n_heads}")

    @property
    def kv_width(self) -> int:
        """Keys (and values) per step: dim."""
        return self.dim

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

        def split(p: str) -> Tensor:  # (n, T, dim) -> (n, T, heads, d_head)
            y = F.reshape(F.linear(x, params[f"w{p}"], params[f"b{p}"]), n, steps, heads, d_head)
            return F.rope(y, positions=params.get("positions")) if self.rope and p in "qk" else y

        return F.linear(attend(split("q"), split("k"), split("v"), self.causal, params), params["wo"], params["bo"])

    def get_config(self) -> dict:
        return {**super().get_config(), "dim": self.dim, "n_heads": self.n_heads, "causal": self.causal, "rope": self.rope}


class GroupedQueryAttention(SelfAttention):
    """Llama's self-attention over a sequence: (T, dim) -> (T, dim) with ``n_heads`` query heads of
    dim / n_heads and ``n_kv_heads`` key / value heads (default n_heads; fewer: grouped-query
    attention, query head h using key / value head h // (n_heads / n_kv_heads)), projections without
    biases ``wq`` (dim, dim), ``wk`` and ``wv`` (n_kv_heads * d_head, dim), ``wo`` (dim, dim), queries
    and keys rotated by their position as llama.cpp does for its ``llama`` architecture (``ops.rope``
    mode "norm": adjacent pairs of features, frequency base ``rope_base``), causal unless ``causal``
    is False. After an ``Embedding(mask_zero=True)`` no step attends to padding."""

    def __init__(self, dim: int, n_heads: int, n_kv_heads: int | None = None, rope_base: float = 10000.0,
                 causal: bool = True, name: str | None = None) -> None:
        super().__init__(name)
        self.dim, self.n_heads = check_int("dim", dim), check_int("n_heads", n_heads)
        self.n_kv_heads = self.n_heads if n_kv_heads is None else check_int("n_kv_heads", n_kv_heads)
        if self.dim % self.n_heads or (self.dim // self.n_heads) % 2:
            raise ValueError(f"dim ({dim}) must be n_heads ({n_heads}) times an even head size (rotary positions)")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_kv_heads ({n_kv_heads}) must divide n_heads ({n_heads})")
        self.rope_base = check_number("rope_base", rope_base, 1.0, math.inf, lo_open=True)
        self.causal = bool(causal)

    @property
    def kv_dim(self) -> int:
        """Width of the key and value projections: n_kv_heads * d_head."""
        return self.n_kv_heads * (self.dim // self.n_heads)

    @property
    def kv_width(self) -> int:
        """Keys (and values) per step: kv_dim."""
        return self.kv_dim

    def infer(self, input_shape: tuple[int, ...]) -> LayerShapes:
        if len(input_shape) != 2 or input_shape[1] != self.dim:
            self._fail(input_shape, f"a sequence (T, {self.dim})")
        return LayerShapes(tuple(input_shape), {"wq": (self.dim, self.dim), "wk": (self.kv_dim, self.dim),
                                                "wv": (self.kv_dim, self.dim), "wo": (self.dim, self.dim)})

    def init(self, pname: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return uniform_init(rng, shape, shape[1])

    def forward(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        n, steps, dim = x.shape
        d_head = dim // self.n_heads

        def split(p: str, heads: int) -> Tensor:  # (n, T, dim) -> (n, T, heads, d_head)
            y = F.reshape(F.linear(x, params[f"w{p}"]), n, steps, heads, d_head)
            return F.rope(y, self.rope_base, mode="norm", positions=params.get("positions")) if p in "qk" else y

        out = attend(split("q", self.n_heads), split("k", self.n_kv_heads), split("v", self.n_kv_heads), self.causal,
                     params)
        return F.linear(out, params["wo"])

    def get_config(self) -> dict:
        return {**super().get_config(), "dim": self.dim, "n_heads": self.n_heads, "n_kv_heads": self.n_kv_heads,
                "rope_base": self.rope_base, "causal": self.causal}
