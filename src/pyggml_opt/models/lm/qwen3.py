"""The Qwen3 architecture (llama.cpp's src/models/qwen3.cpp): Llama's block with an RMSNorm of each
head's queries and keys (``attn_q_norm`` / ``attn_k_norm``, one weight per head feature), rotary
positions in halves (NEOX) and no biases; the ``qwen3`` builder and llama.cpp's "qwen3" GGUF entry."""
from __future__ import annotations

from typing import Any

from .llama import FAMILY_KEYS, FAMILY_TENSORS, REFUSED, LlamaArgs, llama
from .model import LanguageModel
from .table import Architecture, TensorMap

VARIANT: dict[str, Any] = {"rope_mode": "neox", "qkv_bias": False, "qk_norm": True}  # what makes a llama a qwen3

QWEN3 = Architecture("qwen3", "llama.cpp", LlamaArgs, FAMILY_KEYS,
                     TensorMap(FAMILY_TENSORS.names, {**FAMILY_TENSORS.block, "attn.q_norm.weight": "attn_q_norm.weight",
                                                      "attn.k_norm.weight": "attn_k_norm.weight"}),
                     fixed=VARIANT, refused=REFUSED, exact_args=True)


def qwen3(vocab_size: int, context: int, dim: int, n_layers: int, n_heads: int, n_kv_heads: int | None = None,
          ffn_dim: int | None = None, rope_theta: float = 1e6, norm_eps: float = 1e-6, tie_embeddings: bool = False,
          build: bool = True, *, head_dim: int | None = None) -> LanguageModel:
    """A Qwen3 language model: ``llama`` (which documents the arguments) with an RMSNorm of each head's
    queries and keys (eps ``norm_eps``), rotary positions rotating halves of each head and no biases;
    Qwen3's defaults for ``rope_theta`` (1e6) and ``norm_eps`` (1e-6); ``head_dim`` may differ from
    dim / n_heads (Qwen3's 128). It saves as llama.cpp's ``qwen3``."""
    return llama(vocab_size, context, dim, n_layers, n_heads, n_kv_heads, ffn_dim, rope_theta, norm_eps,
                 tie_embeddings, build, head_dim=head_dim, **VARIANT)
