"""``llama``: the Llama architecture as a causal language model (saved for llama.cpp as its ``llama``
architecture by ``models/llama_cpp.py``; in pyggml_opt's own files through the generic layout)."""
from __future__ import annotations

import math
from typing import Any

from ..checks import check_bool, check_int, check_number
from ..nn import Network
from ..nn.layers import Linear, LlamaBlock, RMSNorm
from .architecture import blocks_of, check_context, hyperparameters_of, language_model, ties_embeddings, token_embedding
from .model import Sequential

FFN_MULTIPLE = 32  # the default ffn_dim is rounded up to a multiple of this (Llama rounds to 256)


def default_ffn_dim(dim: int) -> int:
    """Llama's feed-forward width for ``dim``: 2/3 of 4 * dim (SwiGLU's three matrices then cost what a
    4 * dim GELU MLP's two do), rounded up to a multiple of 32."""
    return FFN_MULTIPLE * math.ceil(8 * dim / 3 / FFN_MULTIPLE)


def llama(vocab_size: int, context: int, dim: int, n_layers: int, n_heads: int, n_kv_heads: int | None = None,
          ffn_dim: int | None = None, rope_theta: float = 10000.0, norm_eps: float = 1e-5,
          tie_embeddings: bool = False, build: bool = True) -> Sequential:
    """A Llama language model: (n, context) int32 token ids -> (n, context, vocab_size) logits.

    Token embedding ``tok``, ``n_layers`` ``LlamaBlock`` s ``blk<i>`` (RMSNorm, causal grouped-query
    attention with ``n_heads`` query heads and ``n_kv_heads`` key / value heads (default n_heads),
    rotary positions as llama.cpp computes them for its ``llama`` architecture (adjacent feature pairs,
    base ``rope_theta``), RMSNorm, SwiGLU MLP of ``ffn_dim`` units (default ``default_ffn_dim(dim)``);
    no biases), a final RMSNorm ``norm`` and an output layer ``head`` without bias; every RMSNorm uses
    ``norm_eps``. With ``tie_embeddings`` the output layer's weight is the token embedding itself (one
    parameter ``tok.weight``, vocab_size * dim fewer; llama.cpp's files then have no ``output.weight``). Train it with the cross-entropy loss (fit's default) on the next id of every step, sample with
    ``model.generate``, and save it for llama.cpp with ``model.save(path, tokenizer=tok)``.
    With ``build=False`` the model has no weights yet (``build_with_weights((context,), weights)``
    gives it those of a file, with no random ones made first).
    """
    vocab_size, context = check_int("vocab_size", vocab_size), check_context(context)
    tie_embeddings = check_bool("tie_embeddings", tie_embeddings)
    dim, n_layers, n_heads = check_int("dim", dim), check_int("n_layers", n_layers), check_int("n_heads", n_heads)
    ffn_dim = default_ffn_dim(dim) if ffn_dim is None else check_int("ffn_dim", ffn_dim)
    rope_theta = check_number("rope_theta", rope_theta, 1.0, math.inf, lo_open=True)
    norm_eps = check_number("norm_eps", norm_eps, 0.0, 1.0, lo_open=True)
    layers = [token_embedding(vocab_size, dim, tie_embeddings),
              *(LlamaBlock(dim, n_heads, n_kv_heads, ffn_dim, rope_theta, norm_eps, name=f"blk{i}") for i in range(n_layers)),
              RMSNorm(dim, norm_eps, name="norm"), Linear(dim, vocab_size, bias=False, name="head")]
    return language_model(layers, context, tie_embeddings, build)


def guess_hyperparameters(model: Network) -> dict[str, Any] | None:
    """The builder's arguments read off ``model``'s layers, unchecked (``hyperparameters`` checks them);
    None where it is not even shaped like one."""
    found = blocks_of(model, LlamaBlock)
    if found is None:
        return None
    embedding, blocks, _, context = found
    b = blocks[0]
    return {"vocab_size": embedding.num_embeddings, "context": context, "dim": b.dim,
            "n_layers": len(blocks), "n_heads": b.n_heads, "n_kv_heads": b.n_kv_heads, "ffn_dim": b.ffn_dim,
            "rope_theta": b.rope_theta, "norm_eps": b.eps, "tie_embeddings": bool(ties_embeddings(model))}


def hyperparameters(model: Network) -> dict[str, Any] | None:
    """``llama``'s arguments that rebuild ``model``'s architecture, or None if it is not a llama."""
    return hyperparameters_of(model, guess_hyperparameters, llama)
