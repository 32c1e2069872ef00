"""The GPT family: ``GPTArgs``, the ``gpt`` builder (GPT-2 style blocks), and its two GGUF
architectures, pyggml_opt's own "pyggml-gpt" and llama.cpp's "gpt2".

"pyggml-gpt" files hold, as llama.cpp's do for their architectures, the arguments under that prefix
(``vocab_size``, ``context_length``, ``embedding_length``, ``block_count``, ``attention.head_count``,
``positions``, ``dropout``, ``head_bias`` (absent in older files: true), ``tie_embeddings`` (only when
true)) and tensors named as the model names its parameters (``tok.weight``, ``pos.weight``,
``blk<i>.ln1.weight`` ... ``blk<i>.attn.wq`` ... ``head.weight``), float32. Every gpt saves so.

"gpt2" files are what llama.cpp's loader (src/models/gpt2.cpp in llama-cpp-python 0.3.36) reads: keys
as uint32 / float32 (it refuses other types), tensors by its names with the fused ``attn_qkv`` (wq, wk,
wv stacked by rows, biases likewise); a gpt with learned positions and no output bias fits.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...checks import check_bool, check_choice, check_number
from ...nn.layers import Dropout, Layer, LayerNorm, Linear, PositionalEmbedding, TransformerBlock
from .args import ModelArgs
from .model import LanguageModel, token_embedding
from .table import Architecture, Key, TensorMap

POSITIONS = ("learned", "rope")
GPT2_EPS = 1e-5  # gpt's LayerNorms (TransformerBlock's default eps)


@dataclass(frozen=True)
class GPTArgs(ModelArgs):
    """A gpt's arguments (``gpt`` documents them)."""

    dropout: float = 0.0
    positions: str = "learned"
    head_bias: bool = True

    family = "gpt"

    def check(self) -> None:
        self._set("dropout", check_number("dropout", self.dropout, 0.0, 1.0, hi_open=True))
        self._set("head_bias", check_bool("head_bias", self.head_bias))
        self._set("positions", check_choice("positions", self.positions, POSITIONS))


    def layers(self) -> list[Layer]:
        return gpt_layers(self)


def gpt_layers(a: GPTArgs) -> list[Layer]:
    """The layers of a gpt of arguments ``a``."""
    rope = a.positions == "rope"
    layers: list[Layer] = [token_embedding(a.vocab_size, a.dim, a.tie_embeddings)]
    if not rope:
        layers.append(PositionalEmbedding(a.context, a.dim, name="pos"))
    if a.dropout:
        layers.append(Dropout(a.dropout, name="drop"))
    layers += [TransformerBlock(a.dim, a.n_heads, dropout=a.dropout, rope=rope, name=f"blk{i}") for i in range(a.n_layers)]
    return layers + [LayerNorm(a.dim, name="ln_f"), Linear(a.dim, a.vocab_size, bias=a.head_bias, name="head")]


def gpt(vocab_size: int, context: int, dim: int, n_layers: int, n_heads: int, dropout: float = 0.0,
        positions: str = "learned", head_bias: bool = True, tie_embeddings: bool = False,
        build: bool = True) -> LanguageModel:
    """A GPT-2 style language model: (n, context) int32 token ids -> (n, context, vocab_size) logits.

    Token embedding, learnt positions (``positions="learned"``; or ``"rope"``: rotary embeddings in
    every attention layer instead), dropout, ``n_layers`` pre-norm TransformerBlocks (causal
    attention with ``n_heads`` heads, GELU MLP of 4 x dim), a final LayerNorm and an output layer (with
    a bias unless ``head_bias`` is False, as in GPT-2 itself: llama.cpp's ``gpt2`` architecture has
    none, so only such a gpt saves for llama.cpp) whose weight is the token embedding itself with
    ``tie_embeddings`` (GPT-2's; one parameter ``tok.weight``), else one of its own. Train it with the cross-entropy
    loss (fit's default) on labels (n, context) (the next id of every step) and sample from it with
    ``model.generate``. ``model.args`` is its ``GPTArgs``. With ``build=False`` the model has no weights
    yet (``build_with_weights((context,), weights)`` gives it those of a file, with no random ones first).
    """
    args = GPTArgs(vocab_size, context, dim, n_layers, n_heads, tie_embeddings, dropout, positions, head_bias)
    return LanguageModel.made(args, check_bool("build", build))


PYGGML_GPT = Architecture(
    "pyggml-gpt", "pyggml_opt", GPTArgs,
    (Key("vocab_size", int, "vocab_size"), Key("context_length", int, "context"), Key("embedding_length", int, "dim"),
     Key("block_count", int, "n_layers"), Key("attention.head_count", int, "n_heads"),
     Key("positions", str, "positions"), Key("dropout", float, "dropout"),
     Key("head_bias", bool, "head_bias", default=True),
     Key("tie_embeddings", bool, "tie_embeddings", default=False, sparse=True)))

GPT2 = Architecture(
    "gpt2", "llama.cpp", GPTArgs,
    (Key("context_length", np.uint32, "context"), Key("embedding_length", np.uint32, "dim"),
     Key("feed_forward_length", np.uint32, derive=lambda a: 4 * a.dim),
     Key("block_count", np.uint32, "n_layers"), Key("attention.head_count", np.uint32, "n_heads"),
     Key("attention.layer_norm_epsilon", np.float32, derive=lambda a: GPT2_EPS),
     Key("vocab_size", np.uint32, "vocab_size")),
    TensorMap({"tok.weight": "token_embd.weight", "pos.weight": "position_embd.weight",
               "ln_f.weight": "output_norm.weight", "ln_f.bias": "output_norm.bias", "head.weight": "output.weight"},
              {"ln1.weight": "attn_norm.weight", "ln1.bias": "attn_norm.bias", "attn.wo.weight": "attn_output.weight",
               "attn.wo.bias": "attn_output.bias", "ln2.weight": "ffn_norm.weight", "ln2.bias": "ffn_norm.bias",
               "fc1.weight": "ffn_up.weight", "fc1.bias": "ffn_up.bias", "fc2.weight": "ffn_down.weight",
               "fc2.bias": "ffn_down.bias"},
              {"attn_qkv.weight": ("attn.wq.weight", "attn.wk.weight", "attn.wv.weight"),
               "attn_qkv.bias": ("attn.wq.bias", "attn.wk.bias", "attn.wv.bias")}),
    fixed={"positions": "learned", "head_bias": False}, exact_args=True)
