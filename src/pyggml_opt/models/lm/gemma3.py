"""The Gemma 3 architecture (text; llama.cpp's src/models/gemma3.cpp, transformers' Gemma3ForCausalLM):
``Gemma3Args``, ``Gemma3Block``, the ``gemma3`` builder and llama.cpp's "gemma3" GGUF entry.

What differs from Llama: the token embedding's rows are scaled by sqrt(dim) (the tied output layer
uses the table as it is); each block normalises before and after both attention and the MLP,
x + post_attention_norm(attn(attn_norm(x))), then x + post_ffw_norm(ffn(ffn_norm(x))); queries and
keys get a per-head RMSNorm; the MLP is gated with GELU in its tanh form (GeGLU); rotary positions
rotate halves (NEOX); and layers alternate sliding-window attention (local, rope base
``rope_local_theta``) with global attention (rope base ``rope_theta``): of each ``sliding_pattern``
layers the last is global (layer i is local when i % pattern < pattern - 1; a pattern of 0 makes every
layer local), a local layer's queries seeing fewer than ``sliding_window`` steps back.

llama.cpp's keys ``gemma3.attention.sliding_window`` (absent or 0: every layer global),
``.attention.sliding_window_pattern`` (default 6), ``.rope.freq_base_swa`` (default 10000) and the
llama family's; its tensors the llama family's plus ``attn_q_norm``, ``attn_k_norm``,
``post_attention_norm`` and ``post_ffw_norm`` per block. The converter stores Gemma's norm weights
plus one (transformers' Gemma3RMSNorm multiplies by 1 + w), so the file's are plain RMSNorm weights.
The attention scale is not in the file: llama.cpp uses 1 / sqrt(head size), and 1 / sqrt(dim / heads)
for the 62-layer model (Gemma 3 27B, whose query_pre_attn_scalar is that); so does pyggml_opt.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...checks import check_bool, check_int, check_number
from ...nn import Tensor, register
from ...nn import ops as F
from ...nn.layers import Block, GatedMLP, GroupedQueryAttention, Layer, LayerShapes, Linear, RMSNorm
from ...nn.layers.base import SequenceState
from .args import ModelArgs
from .llama import FAMILY_KEYS, FAMILY_TENSORS, default_ffn_dim
from .model import LanguageModel, token_embedding
from .table import Architecture, Key, TensorMap

WIDE_SCALE_LAYERS = 62  # Gemma 3 27B: scores scaled by 1 / sqrt(dim / heads), not by the head size


@register
class Gemma3Block(Block):
    """Gemma 3's transformer block on a sequence (T, dim): x + post_attention_norm(attn(attn_norm(x))),
    then x + post_ffw_norm(ffn(ffn_norm(x))), with ``attn`` a causal ``GroupedQueryAttention`` (NEOX
    rotary positions of base ``rope_theta``, per-head query / key RMSNorm, sliding ``window`` where
    given, scores scaled by ``scale``) and ``ffn`` a GELU-gated ``GatedMLP`` of ``ffn_dim`` hidden
    units; every RMSNorm uses ``eps``."""

    keeps_mask = True

    def __init__(self, dim: int, n_heads: int, n_kv_heads: int, ffn_dim: int, head_dim: int,
                 rope_theta: float = 10000.0, eps: float = 1e-6, window: int | None = None,
                 scale: float | None = None, name: str | None = None) -> None:
        super().__init__(name)
        self.dim, self.ffn_dim = check_int("dim", dim), check_int("ffn_dim", ffn_dim)
        self.eps = check_number("eps", eps, 0.0, 1.0, lo_open=True)
        attn = GroupedQueryAttention(dim, n_heads, n_kv_heads, rope_theta, head_dim=head_dim, rope_mode="neox",
                                     qk_norm=True, norm_eps=self.eps, window=window, scale=scale)
        self.children = {"attn_norm": RMSNorm(dim, self.eps), "attn": attn,
                         "post_attention_norm": RMSNorm(dim, self.eps), "ffn_norm": RMSNorm(dim, self.eps),
                         "ffn": GatedMLP(dim, self.ffn_dim, "gelu_tanh"), "post_ffw_norm": RMSNorm(dim, self.eps)}

    def infer(self, input_shape: tuple[int, ...]) -> LayerShapes:
        if len(input_shape) != 2 or input_shape[1] != self.dim:
            self._fail(input_shape, f"a sequence (T, {self.dim})")
        return self.infer_children({child: input_shape for child in self.children}, tuple(input_shape))

    def forward(self, x: Tensor, params: dict[str, Tensor], state: SequenceState | None = None) -> Tensor:
        attn = self.call("attn", self.call("attn_norm", x, params), params, state)
        x = F.add(x, self.call("post_attention_norm", attn, params))
        ffn = self.call("ffn", self.call("ffn_norm", x, params), params)
        return F.add(x, self.call("post_ffw_norm", ffn, params))

    def get_config(self) -> dict:
        attn = self.children["attn"]
        return {**super().get_config(), "dim": self.dim, "n_heads": attn.n_heads,  # type: ignore[attr-defined]
                "n_kv_heads": attn.n_kv_heads, "ffn_dim": self.ffn_dim,  # type: ignore[attr-defined]
                "head_dim": attn.head_dim, "rope_theta": attn.rope_base, "eps": self.eps,  # type: ignore[attr-defined]
                "window": attn.window, "scale": attn.scale}  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Gemma3Args(ModelArgs):
    """A Gemma 3's arguments (``gemma3`` documents them); ``n_kv_heads``, ``ffn_dim`` and ``head_dim``
    are resolved (None: n_heads, ``default_ffn_dim(dim)``, dim / n_heads), a ``sliding_window`` of 0 is
    None (every layer global)."""

    n_kv_heads: int | None = None
    ffn_dim: int | None = None
    head_dim: int | None = None
    rope_theta: float = 1e6
    rope_local_theta: float = 10000.0
    norm_eps: float = 1e-6
    sliding_window: int | None = 512
    sliding_pattern: int = 6

    family = "gemma3"

    def check(self) -> None:
        self._set("n_kv_heads", self.n_heads if self.n_kv_heads is None else check_int("n_kv_heads", self.n_kv_heads))
        if self.n_heads % self.n_kv_heads:  # type: ignore[operator]  # resolved above
            raise ValueError(f"n_kv_heads ({self.n_kv_heads}) must divide n_heads ({self.n_heads})")
        self._set("ffn_dim", default_ffn_dim(self.dim) if self.ffn_dim is None else check_int("ffn_dim", self.ffn_dim))
        if self.head_dim is None and self.dim % self.n_heads:
            raise ValueError(f"dim ({self.dim}) must be a multiple of n_heads ({self.n_heads}), or head_dim given")
        self._set("head_dim", self.dim // self.n_heads if self.head_dim is None else check_int("head_dim", self.head_dim))
        for name in ("rope_theta", "rope_local_theta"):
            self._set(name, check_number(name, getattr(self, name), 1.0, math.inf, lo_open=True))
        self._set("norm_eps", check_number("norm_eps", self.norm_eps, 0.0, 1.0, lo_open=True))
        window = self.sliding_window
        self._set("sliding_window", None if window is None or (not isinstance(window, bool) and window == 0)
                  else check_int("sliding_window", window))
        self._set("sliding_pattern", check_int("sliding_pattern", self.sliding_pattern, 0))

    def is_local(self, layer: int) -> bool:
        """Whether block ``layer`` attends within the sliding window (llama.cpp's pattern rule)."""
        pattern = self.sliding_pattern
        return self.sliding_window is not None and (pattern == 0 or layer % pattern < pattern - 1)

    def layers(self) -> list[Layer]:
        return gemma3_layers(self)


def gemma3_layers(a: Gemma3Args) -> list[Layer]:
    """The layers of a Gemma 3 of arguments ``a``."""
    scale = (a.dim / a.n_heads) ** -0.5 if a.n_layers == WIDE_SCALE_LAYERS else None
    blocks = [Gemma3Block(a.dim, a.n_heads, a.n_kv_heads, a.ffn_dim, a.head_dim,  # type: ignore[arg-type]
                          a.rope_local_theta if a.is_local(i) else a.rope_theta, a.norm_eps,
                          a.sliding_window if a.is_local(i) else None, scale, name=f"blk{i}")
              for i in range(a.n_layers)]
    return [token_embedding(a.vocab_size, a.dim, a.tie_embeddings, scale=math.sqrt(a.dim)), *blocks,
            RMSNorm(a.dim, a.norm_eps, name="norm"), Linear(a.dim, a.vocab_size, bias=False, name="head")]


def gemma3(vocab_size: int, context: int, dim: int, n_layers: int, n_heads: int, n_kv_heads: int | None = None,
           ffn_dim: int | None = None, head_dim: int | None = None, sliding_window: int | None = 512,
           sliding_pattern: int = 6, rope_theta: float = 1e6, rope_local_theta: float = 10000.0,
           norm_eps: float = 1e-6, tie_embeddings: bool = True, build: bool = True) -> LanguageModel:
    """A Gemma 3 (text) language model: (n, context) int32 token ids -> (n, context, vocab_size) logits.

    Token embedding ``tok`` scaled by sqrt(dim), ``n_layers`` ``Gemma3Block`` s ``blk<i>`` (grouped-query
    attention with ``n_heads`` query heads of ``head_dim`` features (default dim / n_heads) and
    ``n_kv_heads`` key / value heads, per-head query / key RMSNorm, NEOX rotary positions; a GELU-gated
    MLP of ``ffn_dim`` units (default ``default_ffn_dim(dim)``); RMSNorms before and after both), a final
    RMSNorm ``norm`` and the output layer ``head``, tied to the token embedding by default (Gemma's).
    Of every ``sliding_pattern`` blocks the first pattern - 1 attend within a sliding window of
    ``sliding_window`` steps (rope base ``rope_local_theta``) and the last over the whole context (rope
    base ``rope_theta``); ``sliding_window=None`` makes every block global. Gemma-3-270M is
    ``gemma3(262144, 32768, 640, 18, 4, 1, 2048, 256)``. It saves for llama.cpp as ``gemma3``;
    ``model.args`` is its ``Gemma3Args``; ``build=False`` as ``llama``'s."""
    args = Gemma3Args(vocab_size, context, dim, n_layers, n_heads, tie_embeddings, n_kv_heads, ffn_dim, head_dim,
                      rope_theta, rope_local_theta, norm_eps, sliding_window, sliding_pattern)
    return LanguageModel.made(args, check_bool("build", build))


GEMMA3 = Architecture(
    "gemma3", "llama.cpp", Gemma3Args,
    (*FAMILY_KEYS,
     Key("rope.freq_base_swa", np.float32, "rope_local_theta", default=10000.0),
     Key("attention.sliding_window", np.uint32, "sliding_window", default=None, sparse=True),
     Key("attention.sliding_window_pattern", np.uint32, "sliding_pattern", default=6, sparse=True)),
    TensorMap(FAMILY_TENSORS.names,
              {**FAMILY_TENSORS.block, "attn.q_norm.weight": "attn_q_norm.weight",
               "attn.k_norm.weight": "attn_k_norm.weight", "post_attention_norm.weight": "post_attention_norm.weight",
               "post_ffw_norm.weight": "post_ffw_norm.weight"}),
    refused={"final_logit_softcapping": (None,), "attn_logit_softcapping": (None,), "rope.scaling.type": (None, "none"),
             "expert_count": (None, 0)},
    exact_args=True)
