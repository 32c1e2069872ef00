"""The Llama architecture: ``LlamaArgs``, ``LlamaBlock``, the ``llama`` builder and llama.cpp's "llama"
GGUF entry, with the keys and tensor names its variants (``qwen2.py``, ``qwen3.py``: the same block with
attention options) share.

What llama.cpp's loader (src/models/llama.cpp, llama-model.cpp in llama-cpp-python 0.3.36) expects:
keys ``llama.context_length``, ``.embedding_length``, ``.feed_forward_length``, ``.block_count``,
``.attention.head_count``, ``.attention.head_count_kv``, ``.rope.dimension_count`` (the head size) as
uint32, ``.attention.layer_norm_rms_epsilon``, ``.rope.freq_base`` as float32 (it refuses keys of
another type); tensors ``token_embd``, ``output_norm``, ``output`` (absent when the output layer uses
the token embedding) and per block ``blk.<i>.attn_norm``, ``attn_q``, ``attn_k``, ``attn_v``,
``attn_output``, ``ffn_norm``, ``ffn_gate``, ``ffn_up``, ``ffn_down``, numpy shapes (out, in) as
pyggml_opt's Linear weights. llama.cpp's ``llama`` rotates adjacent feature pairs (rope type NORM), as
``GroupedQueryAttention`` does, so no weight is permuted.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...checks import check_bool, check_choice, check_int, check_number
from ...nn import Tensor, register
from ...nn import ops as F
from ...nn.layers import Block, GatedMLP, GroupedQueryAttention, Layer, LayerShapes, Linear, RMSNorm
from ...nn.layers.base import SequenceState
from .args import ModelArgs
from .model import LanguageModel, token_embedding
from .table import Architecture, Key, TensorMap

FFN_MULTIPLE = 32  # the default ffn_dim is rounded up to a multiple of this (Llama rounds to 256)


def default_ffn_dim(dim: int) -> int:
    """Llama's feed-forward width for ``dim``: 2/3 of 4 * dim (SwiGLU's three matrices then cost what a
    4 * dim GELU MLP's two do), rounded up to a multiple of 32."""
    return FFN_MULTIPLE * math.ceil(8 * dim / 3 / FFN_MULTIPLE)


@register
class LlamaBlock(Block):
    """Llama's transformer block on a sequence (T, dim): x + attn(RMSNorm(x)), then
    x + ffn(RMSNorm(x)), with ``attn`` a ``GroupedQueryAttention`` (``n_heads``, ``n_kv_heads``, heads
    of ``head_dim``, rotary positions of base ``rope_theta`` and ``rope_mode``, ``qkv_bias``,
    ``qk_norm``, causal) and ``ffn`` a SiLU ``GatedMLP`` (SwiGLU) of ``ffn_dim`` hidden units; the norms
    (``attn_norm``, ``ffn_norm``, and the attention's per-head ones) use ``eps``."""

    keeps_mask = True

    def __init__(self, dim: int, n_heads: int, n_kv_heads: int | None = None, ffn_dim: int | None = None,
                 rope_theta: float = 10000.0, eps: float = 1e-5, head_dim: int | None = None, rope_mode: str = "norm",
                 qkv_bias: bool = False, qk_norm: bool = False, name: str | None = None) -> None:
        super().__init__(name)
        self.dim = check_int("dim", dim)
        attn = GroupedQueryAttention(dim, n_heads, n_kv_heads, rope_theta, head_dim=head_dim, rope_mode=rope_mode,
                                     qkv_bias=qkv_bias, qk_norm=qk_norm,
                                     norm_eps=check_number("eps", eps, 0.0, 1.0, lo_open=True))
        self.n_heads, self.n_kv_heads, self.rope_theta = attn.n_heads, attn.n_kv_heads, attn.rope_base
        self.ffn_dim = check_int("ffn_dim", ffn_dim) if ffn_dim is not None else 4 * self.dim
        self.eps = check_number("eps", eps, 0.0, 1.0, lo_open=True)
        self.children = {"attn_norm": RMSNorm(dim, self.eps), "attn": attn, "ffn_norm": RMSNorm(dim, self.eps),
                         "ffn": GatedMLP(dim, self.ffn_dim, "silu")}

    def infer(self, input_shape: tuple[int, ...]) -> LayerShapes:
        if len(input_shape) != 2 or input_shape[1] != self.dim:
            self._fail(input_shape, f"a sequence (T, {self.dim})")
        return self.infer_children({child: input_shape for child in self.children}, tuple(input_shape))

    def forward(self, x: Tensor, params: dict[str, Tensor], state: SequenceState | None = None) -> Tensor:
        x = F.add(x, self.call("attn", self.call("attn_norm", x, params), params, state))
        return F.add(x, self.call("ffn", self.call("ffn_norm", x, params), params))

    def get_config(self) -> dict:
        attn = self.children["attn"].get_config()  # the attention's options beyond Llama's, where set
        extra = {k: attn[k] for k in ("head_dim", "rope_mode", "qkv_bias", "qk_norm") if k in attn}
        return {**super().get_config(), "dim": self.dim, "n_heads": self.n_heads, "n_kv_heads": self.n_kv_heads,
                "ffn_dim": self.ffn_dim, "rope_theta": self.rope_theta, "eps": self.eps, **extra}


@dataclass(frozen=True)
class LlamaArgs(ModelArgs):
    """A llama's arguments (``llama`` documents them); ``n_kv_heads`` and ``ffn_dim`` are resolved
    (None: n_heads, ``default_ffn_dim(dim)``)."""

    n_kv_heads: int | None = None
    ffn_dim: int | None = None
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    head_dim: int | None = None
    rope_mode: str = "norm"
    qkv_bias: bool = False
    qk_norm: bool = False

    family = "llama"

    def check(self) -> None:
        self._set("n_kv_heads", self.n_heads if self.n_kv_heads is None else check_int("n_kv_heads", self.n_kv_heads))
        self._set("ffn_dim", default_ffn_dim(self.dim) if self.ffn_dim is None else check_int("ffn_dim", self.ffn_dim))
        self._set("rope_theta", check_number("rope_theta", self.rope_theta, 1.0, math.inf, lo_open=True))
        self._set("norm_eps", check_number("norm_eps", self.norm_eps, 0.0, 1.0, lo_open=True))
        if self.head_dim is None and self.dim % self.n_heads:
            raise ValueError(f"dim ({self.dim}) must be a multiple of n_heads ({self.n_heads}), or head_dim given")
        self._set("head_dim", self.dim // self.n_heads if self.head_dim is None else check_int("head_dim", self.head_dim))
        self._set("rope_mode", check_choice("rope_mode", self.rope_mode, ("norm", "neox")))
        self._set("qkv_bias", check_bool("qkv_bias", self.qkv_bias))
        self._set("qk_norm", check_bool("qk_norm", self.qk_norm))


    def layers(self) -> list[Layer]:
        return llama_layers(self)


def llama_layers(a: LlamaArgs) -> list[Layer]:
    """The layers of a llama of arguments ``a``."""
    return [token_embedding(a.vocab_size, a.dim, a.tie_embeddings),
            *(LlamaBlock(a.dim, a.n_heads, a.n_kv_heads, a.ffn_dim, a.rope_theta, a.norm_eps, a.head_dim, a.rope_mode,
                         a.qkv_bias, a.qk_norm, name=f"blk{i}") for i in range(a.n_layers)),
            RMSNorm(a.dim, a.norm_eps, name="norm"), Linear(a.dim, a.vocab_size, bias=False, name="head")]


def llama(vocab_size: int, context: int, dim: int, n_layers: int, n_heads: int, n_kv_heads: int | None = None,
          ffn_dim: int | None = None, rope_theta: float = 10000.0, norm_eps: float = 1e-5,
          tie_embeddings: bool = False, build: bool = True, *, head_dim: int | None = None, rope_mode: str = "norm",
          qkv_bias: bool = False, qk_norm: bool = False) -> LanguageModel:
    """A Llama language model: (n, context) int32 token ids -> (n, context, vocab_size) logits.

    Token embedding ``tok``, ``n_layers`` ``LlamaBlock`` s ``blk<i>`` (RMSNorm, causal grouped-query
    attention with ``n_heads`` query heads and ``n_kv_heads`` key / value heads (default n_heads),
    rotary positions as llama.cpp computes them for its ``llama`` architecture (adjacent feature pairs,
    base ``rope_theta``), RMSNorm, SwiGLU MLP of ``ffn_dim`` units (default ``default_ffn_dim(dim)``);
    no biases), a final RMSNorm ``norm`` and an output layer ``head`` without bias; every RMSNorm uses
    ``norm_eps``. The variants of Llama's family: ``head_dim`` (default dim / n_heads), ``rope_mode``
    "neox" (rotating halves, as Qwen does), ``qkv_bias`` (biases on the query / key / value projections,
    Qwen2's) and ``qk_norm`` (RMSNorm of each head's queries and keys, Qwen3's). With ``tie_embeddings`` the output layer's weight is the token embedding itself (one
    parameter ``tok.weight``, vocab_size * dim fewer; llama.cpp's files then have no ``output.weight``). Train it with the cross-entropy loss (fit's default) on the next id of every step, sample with
    ``model.generate``, and save it for llama.cpp with ``model.save(path, tokenizer=tok)``.
    ``model.args`` is its ``LlamaArgs``. With ``build=False`` the model has no weights yet
    (``build_with_weights((context,), weights)`` gives it those of a file, with no random ones first).
    """
    args = LlamaArgs(vocab_size, context, dim, n_layers, n_heads, tie_embeddings, n_kv_heads, ffn_dim, rope_theta,
                     norm_eps, head_dim, rope_mode, qkv_bias, qk_norm)
    return LanguageModel.made(args, check_bool("build", build))


def _head_dim(a: ModelArgs) -> int:
    return a.head_dim  # type: ignore[attr-defined]  # a LlamaArgs


# the keys of llama.cpp's llama-family architectures, each under its own prefix
FAMILY_KEYS = (
    Key("context_length", np.uint32, "context"), Key("embedding_length", np.uint32, "dim"),
    Key("feed_forward_length", np.uint32, "ffn_dim"), Key("block_count", np.uint32, "n_layers"),
    Key("attention.head_count", np.uint32, "n_heads"),
    Key("attention.head_count_kv", np.uint32, "n_kv_heads", default=None),
    Key("rope.dimension_count", np.uint32, derive=_head_dim),
    Key("rope.freq_base", np.float32, "rope_theta", default=10000.0),
    Key("attention.layer_norm_rms_epsilon", np.float32, "norm_eps"),
    Key("vocab_size", np.uint32, "vocab_size"),
    # keys and values of the head size (llama.cpp's default: embedding_length / head_count)
    Key("attention.key_length", np.uint32, "head_dim", default=None),
    Key("attention.value_length", np.uint32, derive=_head_dim))
FAMILY_TENSORS = TensorMap(
    {"tok.weight": "token_embd.weight", "norm.weight": "output_norm.weight", "head.weight": "output.weight"},
    {"attn_norm.weight": "attn_norm.weight", "attn.wq.weight": "attn_q.weight", "attn.wk.weight": "attn_k.weight",
     "attn.wv.weight": "attn_v.weight", "attn.wo.weight": "attn_output.weight",
     "ffn_norm.weight": "ffn_norm.weight", "ffn.w_gate.weight": "ffn_gate.weight",
     "ffn.w_up.weight": "ffn_up.weight", "ffn.w_down.weight": "ffn_down.weight"})
REFUSED = {"expert_count": (None, 0), "rope.scaling.type": (None, "none", "linear")}

LLAMA = Architecture("llama", "llama.cpp", LlamaArgs, FAMILY_KEYS, FAMILY_TENSORS,
                     fixed={"rope_mode": "norm", "qkv_bias": False, "qk_norm": False}, refused=REFUSED, exact_args=True)
