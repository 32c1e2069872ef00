"""``gpt``: a GPT-2 style causal language model, and its GGUF layout "pyggml-gpt".

A file of this layout has ``general.architecture`` = "pyggml-gpt" and, as llama.cpp's files do for
their architectures, the hyperparameters under that prefix:

  pyggml-gpt.vocab_size            int   token ids are in [0, vocab_size)
  pyggml-gpt.context_length        int   ids per sequence (the model's input is (context_length,))
  pyggml-gpt.embedding_length      int   the model width (dim)
  pyggml-gpt.block_count           int   transformer blocks
  pyggml-gpt.attention.head_count  int   heads per attention layer
  pyggml-gpt.positions             str   "learned" (GPT-2's position table) or "rope"
  pyggml-gpt.dropout               float dropout rate of training (no effect on inference)
  pyggml-gpt.head_bias             bool  the output layer has a bias (absent in older files: true)
  pyggml-gpt.tie_embeddings        bool  the output layer's weight is tok.weight (absent: false)

Tensors are named as the model names its parameters: ``tok.weight`` (vocab_size, dim), ``pos.weight``
(context_length, dim) for learned positions, ``blk<i>.ln1.weight`` / ``.bias``, ``blk<i>.attn.wq`` ...
``bo``, ``blk<i>.ln2.*``, ``blk<i>.fc1.*`` / ``fc2.*`` (the MLP), ``ln_f.*``, ``head.weight`` (vocab_size,
dim) (none when tied) / ``head.bias``; numpy shapes, float32. Any Sequential with the same layers saves in this layout.
A gpt without output bias also saves as llama.cpp's ``gpt2`` (``models/llama_cpp.py``).
"""
from __future__ import annotations

import re
from typing import Any

from ..checks import check_bool, check_choice, check_int, check_number
from ..core import GGUFFile
from ..nn import Network
from ..nn.layers import Dropout, Layer, LayerNorm, Linear, PositionalEmbedding, TransformerBlock
from ..saving import FileFormat, register_format
from .architecture import (LOSS, MAX_CONTEXT, blocks_of, check_context, hyperparameters_of, language_model,
                           ties_embeddings, token_embedding)
from .model import Sequential

ARCHITECTURE = "pyggml-gpt"
POSITIONS = ("learned", "rope")


def gpt(vocab_size: int, context: int, dim: int, n_layers: int, n_heads: int, dropout: float = 0.0,
        positions: str = "learned", head_bias: bool = True, tie_embeddings: bool = False,
        build: bool = True) -> Sequential:
    """A GPT-2 style language model: (n, context) int32 token ids -> (n, context, vocab_size) logits.

    Token embedding, learnt positions (``positions="learned"``; or ``"rope"``: rotary embeddings in
    every attention layer instead), dropout, ``n_layers`` pre-norm TransformerBlocks (causal
    attention with ``n_heads`` heads, GELU MLP of 4 x dim), a final LayerNorm and an output layer (with
    a bias unless ``head_bias`` is False, as in GPT-2 itself: llama.cpp's ``gpt2`` architecture has
    none, so only such a gpt saves for llama.cpp) whose weight is the token embedding itself with
    ``tie_embeddings`` (GPT-2's; one parameter ``tok.weight``), else one of its own. Train it with the cross-entropy
    loss (fit's default) on labels (n, context) (the next id of every step) and sample from it with
    ``model.generate``. With ``build=False`` the model has no weights yet (``build_with_weights((context,),
    weights)`` gives it those of a file, with no random ones made first).
    """
    vocab_size, context = check_int("vocab_size", vocab_size), check_context(context)
    dim, n_layers, n_heads = check_int("dim", dim), check_int("n_layers", n_layers), check_int("n_heads", n_heads)
    dropout = check_number("dropout", dropout, 0.0, 1.0, hi_open=True)
    head_bias, tie_embeddings = check_bool("head_bias", head_bias), check_bool("tie_embeddings", tie_embeddings)
    positions = check_choice("positions", positions, POSITIONS)
    rope = positions == "rope"
    layers: list[Layer] = [token_embedding(vocab_size, dim, tie_embeddings)]
    if not rope:
        layers.append(PositionalEmbedding(context, dim, name="pos"))
    if dropout:
        layers.append(Dropout(dropout, name="drop"))
    layers += [TransformerBlock(dim, n_heads, dropout=dropout, rope=rope, name=f"blk{i}") for i in range(n_layers)]
    layers += [LayerNorm(dim, name="ln_f"), Linear(dim, vocab_size, bias=head_bias, name="head")]
    return language_model(layers, context, tie_embeddings, build)


def guess_hyperparameters(model: Network) -> dict[str, Any] | None:
    """The builder's arguments read off ``model``'s layers, unchecked (``hyperparameters`` checks them);
    None where it is not even shaped like one."""
    found = blocks_of(model, TransformerBlock)
    if found is None:
        return None
    embedding, blocks, head, context = found
    first = blocks[0]
    return {"vocab_size": embedding.num_embeddings, "context": context, "dim": first.dim,
            "n_layers": len(blocks), "n_heads": first.n_heads, "dropout": first.dropout,
            "positions": "rope" if first.rope else "learned", "head_bias": not isinstance(head, Linear) or head.bias,
            "tie_embeddings": bool(ties_embeddings(model))}


def hyperparameters(model: Network) -> dict[str, Any] | None:
    """``gpt``'s arguments that rebuild ``model``'s architecture, or None if it is not a gpt."""
    return hyperparameters_of(model, guess_hyperparameters, gpt)


def _metadata(model: Network) -> dict[str, object]:
    h = hyperparameters(model)
    assert h is not None  # the format matched this model
    p = ARCHITECTURE
    return {f"{p}.vocab_size": h["vocab_size"], f"{p}.context_length": h["context"],
            f"{p}.embedding_length": h["dim"], f"{p}.block_count": h["n_layers"],
            f"{p}.attention.head_count": h["n_heads"], f"{p}.positions": h["positions"],
            f"{p}.dropout": float(h["dropout"]), f"{p}.head_bias": bool(h["head_bias"]),
            # only when tied: untied files stay as earlier versions wrote them
            **({f"{p}.tie_embeddings": True} if h["tie_embeddings"] else {})}



def _build(f: GGUFFile) -> tuple[Network, tuple[int, ...]]:
    """The gpt a file describes (unbuilt) and its input shape, once its hyperparameters agree with its tensors (checked before the
    model exists: corrupt sizes must not allocate)."""
    p = ARCHITECTURE
    keys = {"vocab_size": "vocab_size", "context": "context_length", "dim": "embedding_length",
            "n_layers": "block_count", "n_heads": "attention.head_count", "positions": "positions",
            "dropout": "dropout"}
    h = {arg: f.get(f"{p}.{key}") for arg, key in keys.items()}
    missing = [f"{p}.{keys[a]}" for a, v in h.items() if v is None]
    if missing:
        raise ValueError(f"a {p} file needs the keys {missing}")
    h["head_bias"] = f.get(f"{p}.head_bias", True)
    h["tie_embeddings"] = f.get(f"{p}.tie_embeddings", False)
    names = f.tensor_names()
    tables = {"tok.weight": (h["vocab_size"], h["dim"])}
    if h["positions"] == "learned":
        tables["pos.weight"] = (h["context"], h["dim"])
    found = {name: f.weight(name, 2).shape for name in tables if name in names}
    blocks = sum(1 for name in names if re.fullmatch(r"blk\d+\.ln1\.weight", name))
    if found != tables or blocks != h["n_layers"] or not isinstance(h["context"], int) or h["context"] > MAX_CONTEXT:
        raise ValueError(f"corrupt {p} file: its hyperparameters {h} disagree with its tensors "
                         f"({found}, {blocks} blocks)")
    try:
        return gpt(**h, build=False), (h["context"],)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"corrupt {p} hyperparameters ({exc})") from None


register_format(FileFormat(ARCHITECTURE, lambda m: hyperparameters(m) is not None, _build,
                           default_loss=LOSS, metadata=_metadata))
