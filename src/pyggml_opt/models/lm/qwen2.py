"""The Qwen2 architecture (llama.cpp's src/models/qwen2.cpp): Llama's block with biases on the query,
key and value projections and rotary positions in halves (NEOX); the ``qwen2`` builder and llama.cpp's
"qwen2" GGUF entry (Llama's keys, its tensor names plus ``attn_q.bias`` / ``attn_k.bias`` /
``attn_v.bias``)."""
from __future__ import annotations

from typing import Any

from .llama import FAMILY_KEYS, FAMILY_TENSORS, REFUSED, LlamaArgs, llama
from .model import LanguageModel
from .table import Architecture, TensorMap

VARIANT: dict[str, Any] = {"rope_mode": "neox", "qkv_bias": True, "qk_norm": False}  # what makes a llama a qwen2

QWEN2 = Architecture("qwen2", "llama.cpp", LlamaArgs, FAMILY_KEYS,
                     TensorMap(FAMILY_TENSORS.names, {**FAMILY_TENSORS.block,
                                                      **{f"attn.w{p}.bias": f"attn_{p}.bias" for p in "qkv"}}),
                     fixed=VARIANT, refused=REFUSED, exact_args=True)


def qwen2(vocab_size: int, context: int, dim: int, n_layers: int, n_heads: int, n_kv_heads: int | None = None,
          ffn_dim: int | None = None, rope_theta: float = 1e6, norm_eps: float = 1e-6, tie_embeddings: bool = False,
          build: bool = True, *, head_dim: int | None = None) -> LanguageModel:
    """A Qwen2 language model: ``llama`` (which documents the arguments) with biases on the query, key
    and value projections and rotary positions rotating halves of each head (``rope_mode="neox"``);
    Qwen2's defaults for ``rope_theta`` (1e6) and ``norm_eps`` (1e-6). It saves as llama.cpp's ``qwen2``."""
    return llama(vocab_size, context, dim, n_layers, n_heads, n_kv_heads, ffn_dim, rope_theta, norm_eps,
                 tie_embeddings, build, head_dim=head_dim, **VARIANT)
