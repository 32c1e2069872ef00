"""Attention layers over sequences (T, dim)."""
from __future__ import annotations

import math

import numpy as np

from ...checks import check_bool, check_choice, check_int, check_number
from .. import ops as F
from ..ops import Tensor
from ..ops.attention import ROPE_MODES
from .base import LayerShapes, SequenceState
from .block import Block
from .dense import Linear
from .norm import RMSNorm


def attend(q: Tensor, k: Tensor, v: Tensor, causal: bool, state: SequenceState, window: int | None = None,
           scale_by: float | None = None) -> Tensor:
    """Attention of queries q (n, T, heads, d_head) over keys and values (n, T, kv_heads, d_head),
    heads merged: (n, T, heads * d_head), scores scaled by ``scale_by`` (default 1 / sqrt(d_head)),
    within a sliding ``window`` of steps where given. In a decoding graph (``state`` holds the layer's
    ``k_cache`` / ``v_cache``, the steps' ``positions`` and the ``kv_mask`` over the cached rows, or the
    window's) the new keys and values go into the cache and the queries attend over its rows; else over
    the T steps (causal or not, the padding mask where the model has one, the documents' mask in packed
    windows)."""
    n, steps, heads, d_head = q.shape
    if "k_cache" in state.caches:
        assert state.kv_mask is not None and state.positions is not None  # a decoding graph gives all three
        n_kv = state.kv_mask.shape[-1]
        keys = F.cache_rows(state.caches["k_cache"], k, state.positions, n_kv)
        values = F.cache_columns(state.caches["v_cache"], v, state.positions, n_kv)
        rows = state.kv_mask if window is None else state.window_masks[window]
        out = F.cached_attention(q, keys, values, rows, scale_by)
    else:
        mask = F.attention_mask(state.padding) if state.padding is not None else None
        if state.documents is not None:
            mask = state.documents if mask is None else F.add(state.documents, mask)
        q, k, v = (F.permute(t, 0, 2, 1, 3) for t in (q, k, v))
        out = F.permute(F.attention(q, k, v, causal, mask, window, scale_by), 0, 2, 1, 3)
    return F.reshape(out, n, steps, heads * d_head)


class SelfAttention(Block):
    """What the self-attention layers share: their query, key, value and output projections are
    ``Linear`` children ``wq``, ``wk``, ``wv``, ``wo`` (parameters ``wq.weight`` ...; a LoRA wraps one of
    them), a padding mask reaches them, and a causal one decodes with a key / value cache
    (``nn/decoding.py``) of ``kv_width`` keys and values per step."""

    keeps_mask = True
    causal: bool
    dim: int

    @property
    def decoding(self) -> str | None:  # type: ignore[override]
        return "cache" if self.causal else None

    @property
    def kv_width(self) -> int:
        """Keys (and values) per step."""
        raise NotImplementedError

    def legacy_names(self) -> dict[str, str]:
        # the projections were raw parameters ``wq`` ... (biases ``bq`` ...) before they were Linear
        # children: the files, checkpoints and pickles of those versions name them so
        names = {f"w{p}.weight": f"w{p}" for p in "qkvo"}
        names.update({f"w{p}.bias": f"b{p}" for p in "qkvo"})
        return names

    def infer(self, input_shape: tuple[int, ...]) -> LayerShapes:
        if len(input_shape) != 2 or input_shape[1] != self.dim:
            self._fail(input_shape, f"a sequence (T, {self.dim})")
        steps = input_shape[0]
        inputs: dict[str, tuple[int, ...]] = {"wq": input_shape, "wk": input_shape, "wv": input_shape,
                  "wo": (steps, self.children["wo"].in_features)}  # type: ignore[attr-defined]
        inputs.update({c: (1, self.children[c].normalized_shape) for c in ("q_norm", "k_norm")  # type: ignore[attr-defined]
                       if c in self.children})
        return self.infer_children(inputs, tuple(input_shape))

    def heads(self, x: Tensor, params: dict[str, Tensor], p: str, n_heads: int) -> Tensor:
        """Projection ``w<p>`` of x (n, T, dim) split into heads: (n, T, n_heads, head size)."""
        n, steps, _ = x.shape
        y = self.call(f"w{p}", x, params)
        return F.reshape(y, n, steps, n_heads, y.shape[-1] // n_heads)


class MultiHeadAttention(SelfAttention):
    """Self-attention over a sequence: (T, dim) -> (T, dim) with ``n_heads`` heads of dim / n_heads,
    the query, key, value and output projections ``wq``, ``wk``, ``wv``, ``wo`` (Linear (dim, dim) with
    biases, which start at zero), and with ``causal`` (default) no step attending to a later one (a
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
        self.children = {f"w{p}": Linear(self.dim, self.dim) for p in "qkvo"}

    @property
    def kv_width(self) -> int:
        """Keys (and values) per step: dim."""
        return self.dim

    def init(self, pname: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        # GPT-2's biases start at zero (a Linear's own start uniform, as PyTorch's)
        return np.zeros(shape, np.float32) if pname.endswith(".bias") else super().init(pname, shape, rng)

    def forward(self, x: Tensor, params: dict[str, Tensor], state: SequenceState | None = None) -> Tensor:
        state = state or SequenceState()

        def split(p: str) -> Tensor:  # (n, T, dim) -> (n, T, heads, d_head)
            y = self.heads(x, params, p, self.n_heads)
            return F.rope(y, positions=state.positions) if self.rope and p in "qk" else y

        return self.call("wo", attend(split("q"), split("k"), split("v"), self.causal, state), params)

    def get_config(self) -> dict:
        return {**super().get_config(), "dim": self.dim, "n_heads": self.n_heads, "causal": self.causal,
                "rope": self.rope}


class GroupedQueryAttention(SelfAttention):
    """Llama's self-attention over a sequence: (T, dim) -> (T, dim) with ``n_heads`` query heads and
    ``n_kv_heads`` key / value heads (default n_heads; fewer: grouped-query attention, query head h
    using key / value head h // (n_heads / n_kv_heads)) of ``head_dim`` features each (default
    dim / n_heads); projections ``wq`` (n_heads * head_dim, dim), ``wk`` and ``wv``
    (n_kv_heads * head_dim, dim), ``wo`` (dim, n_heads * head_dim), with biases on wq / wk / wv only if
    ``qkv_bias`` (Qwen2's), none on wo; queries and keys RMS-normalised per head with learnt weights
    ``q_norm`` / ``k_norm`` if ``qk_norm`` (Qwen3's, eps ``norm_eps``), then rotated by their position
    (``ops.rope`` of ``rope_mode``: "norm", adjacent pairs, as llama.cpp's ``llama``; "neox", halves, as
    Qwen's; frequency base ``rope_base``); causal unless ``causal`` is False; scores scaled by ``scale``
    (default 1 / sqrt(head_dim)); with ``window`` (sliding-window attention, Gemma's local layers) each
    query attends to the keys of fewer than ``window`` steps before it only. After an
    ``Embedding(mask_zero=True)`` no step attends to padding."""

    def __init__(self, dim: int, n_heads: int, n_kv_heads: int | None = None, rope_base: float = 10000.0,
                 causal: bool = True, head_dim: int | None = None, rope_mode: str = "norm", qkv_bias: bool = False,
                 qk_norm: bool = False, norm_eps: float = 1e-6, window: int | None = None, scale: float | None = None,
                 name: str | None = None) -> None:
        super().__init__(name)
        self.dim, self.n_heads = check_int("dim", dim), check_int("n_heads", n_heads)
        self.n_kv_heads = self.n_heads if n_kv_heads is None else check_int("n_kv_heads", n_kv_heads)
        if head_dim is None and self.dim % self.n_heads:
            raise ValueError(f"dim ({dim}) must be n_heads ({n_heads}) times an even head size (rotary positions), "
                             "or head_dim given")
        self.head_dim = self.dim // self.n_heads if head_dim is None else check_int("head_dim", head_dim)
        if self.head_dim % 2:
            raise ValueError(f"rotary positions need an even head size, got {self.head_dim}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_kv_heads ({n_kv_heads}) must divide n_heads ({n_heads})")
        self.rope_base = check_number("rope_base", rope_base, 1.0, math.inf, lo_open=True)
        self.rope_mode = check_choice("rope_mode", rope_mode, tuple(ROPE_MODES))
        self.causal, self.qkv_bias = bool(causal), check_bool("qkv_bias", qkv_bias)
        self.qk_norm = check_bool("qk_norm", qk_norm)
        self.norm_eps = check_number("norm_eps", norm_eps, 0.0, 1.0, lo_open=True)
        self.window = None if window is None else check_int("window", window)
        self.scale = None if scale is None else check_number("scale", scale, 0.0, math.inf, lo_open=True)
        q_width = self.n_heads * self.head_dim
        self.children = {"wq": Linear(self.dim, q_width, self.qkv_bias),
                         "wk": Linear(self.dim, self.kv_dim, self.qkv_bias),
                         "wv": Linear(self.dim, self.kv_dim, self.qkv_bias), "wo": Linear(q_width, self.dim, False)}
        if self.qk_norm:
            self.children.update(q_norm=RMSNorm(self.head_dim, self.norm_eps), k_norm=RMSNorm(self.head_dim, self.norm_eps))

    @property
    def kv_dim(self) -> int:
        """Width of the key and value projections: n_kv_heads * head_dim."""
        return self.n_kv_heads * self.head_dim

    @property
    def kv_width(self) -> int:
        """Keys (and values) per step: kv_dim."""
        return self.kv_dim

    def forward(self, x: Tensor, params: dict[str, Tensor], state: SequenceState | None = None) -> Tensor:
        state = state or SequenceState()

        def split(p: str, heads: int) -> Tensor:  # (n, T, dim) -> (n, T, heads, head_dim)
            y = self.heads(x, params, p, heads)
            if p not in "qk":
                return y
            if self.qk_norm:
                y = self.call(f"{p}_norm", y, params)
            return F.rope(y, self.rope_base, mode=self.rope_mode, positions=state.positions)

        out = attend(split("q", self.n_heads), split("k", self.n_kv_heads), split("v", self.n_kv_heads), self.causal,
                     state, self.window, self.scale)
        return self.call("wo", out, params)

    def get_config(self) -> dict:
        config = {**super().get_config(), "dim": self.dim, "n_heads": self.n_heads, "n_kv_heads": self.n_kv_heads,
                  "rope_base": self.rope_base, "causal": self.causal}
        # absent at their defaults: the configurations (and files) of earlier versions
        optional = {"head_dim": (self.head_dim, self.dim / self.n_heads), "rope_mode": (self.rope_mode, "norm"),
                    "qkv_bias": (self.qkv_bias, False), "qk_norm": (self.qk_norm, False),
                    "window": (self.window, None), "scale": (self.scale, None)}
        config.update({k: v for k, (v, default) in optional.items() if v != default})
        if self.qk_norm:
            config["norm_eps"] = self.norm_eps
        return config
