"""llama.cpp's GGUF layouts for the language models: a ``gpt`` (learned positions, LayerNorm, GELU,
no output bias) as llama.cpp's ``gpt2`` architecture, a ``llama`` as its ``llama`` architecture.

Registered file formats of the "llama.cpp" family: ``model.save(path, tokenizer=tok)`` writes them
(``saving.save``), ``pgo.load`` reads them back into the same model, from pyggml_opt or from another
tool (a float32 file of these architectures without features pyggml_opt lacks). What llama.cpp's
loader (``src/models/gpt2.cpp``, ``llama.cpp``, ``llama-model.cpp`` in llama-cpp-python 0.3.36)
expects:

- keys ``<arch>.context_length``, ``.embedding_length``, ``.feed_forward_length``, ``.block_count``,
  ``.attention.head_count`` as uint32; gpt2: ``.attention.layer_norm_epsilon`` float32; llama:
  ``.attention.head_count_kv``, ``.rope.dimension_count`` (the head size) uint32,
  ``.attention.layer_norm_rms_epsilon``, ``.rope.freq_base`` float32 (llama.cpp refuses keys of
  another type). ``pyggml_opt.hyperparameters`` (JSON) keeps the builder's exact arguments (float64
  values, the dropout rate) for ``load``.
- tensors by llama.cpp's names, numpy shapes (out, in) as pyggml_opt's Linear weights: ``token_embd``,
  ``output_norm``, ``output`` (absent for a model built with ``tie_embeddings=True``: both architectures'
  loaders then use ``token_embd`` as the output matrix) and per block ``blk.<i>.attn_norm``, ``attn_output``, ``ffn_norm``,
  ``ffn_up``, ``ffn_down``; gpt2: ``position_embd`` and the fused ``attn_qkv`` (wq, wk, wv stacked by
  rows, biases likewise); llama: ``attn_q``, ``attn_k``, ``attn_v``, ``ffn_gate``. llama.cpp's ``llama``
  rotates adjacent feature pairs (rope type NORM), as ``GroupedQueryAttention`` does, so no weight
  is permuted.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..core import GGUFFile
from ..core.tensor_data import Weight, split_rows, stack_rows
from ..nn import Network
from ..nn.layers import Dropout, Embedding, LayerNorm, Linear, LlamaBlock, PositionalEmbedding, RMSNorm, TransformerBlock
from ..saving import FileFormat, register_format
from .gpt import gpt
from .gpt import guess_hyperparameters as guess_gpt
from .gpt import hyperparameters as gpt_hyperparameters
from .llama import guess_hyperparameters as guess_llama
from .llama import hyperparameters as llama_hyperparameters
from .llama import llama
from .architecture import LOSS, MAX_CONTEXT, first_difference

LAYOUT = "llama.cpp"
OWN_HYPERPARAMETERS = "pyggml_opt.hyperparameters"
BLOCK = re.compile(r"blk(\d+)\.(.+)")
Reader = Callable[[str, int], Weight]


@dataclass(frozen=True)
class TensorMap:
    """Model parameter names <-> llama.cpp tensor names: ``names`` outside the blocks, ``block`` inside
    block i (``blk<i>.<key>`` <-> ``blk.<i>.<value>``), ``fused``: a file tensor of block i holding several
    block parameters stacked along their first axis."""

    names: dict[str, str]
    block: dict[str, str]
    fused: dict[str, tuple[str, ...]]

    def to_file(self, weights: dict[str, Weight]) -> dict[str, Weight]:
        out: dict[str, Weight] = {}
        for name, value in weights.items():
            m = BLOCK.fullmatch(name)
            if m is None:
                out[self.names[name]] = value
                continue
            i, own = m.groups()
            if own in self.block:
                out[f"blk.{i}.{self.block[own]}"] = value
            for file_name, parts in self.fused.items():
                if own == parts[0]:
                    out[f"blk.{i}.{file_name}"] = stack_rows([weights[f"blk{i}.{p}"] for p in parts])
        return out

    def from_file(self, read: Reader, shapes: dict[str, tuple[int, ...]]) -> dict[str, Weight]:
        out: dict[str, Weight] = {}
        for name, shape in shapes.items():
            m = BLOCK.fullmatch(name)
            if m is None:
                out[name] = read(self.names[name], len(shape))
                continue
            i, own = m.groups()
            if own in self.block:
                out[name] = read(f"blk.{i}.{self.block[own]}", len(shape))
                continue
            file_name, parts = next((f, p) for f, p in self.fused.items() if own in p)
            whole = read(f"blk.{i}.{file_name}", len(shape))
            cuts = np.cumsum([shapes[f"blk{i}.{p}"][0] for p in parts])
            if whole.shape[0] != cuts[-1]:
                raise ValueError(f"tensor blk.{i}.{file_name} has {whole.shape[0]} rows, the model needs {cuts[-1]}")
            out[name] = split_rows(whole, [int(c) for c in cuts[:-1]])[parts.index(own)]
        return out

    def file_names(self, model_names: list[str]) -> set[str]:
        """The file's tensor names for a model with these parameter names."""
        zeros: dict[str, Weight] = {n: np.zeros((1, 1), np.float32) for n in model_names}
        return set(self.to_file(zeros))


GPT2 = TensorMap(
    {"tok.weight": "token_embd.weight", "pos.weight": "position_embd.weight", "ln_f.weight": "output_norm.weight",
     "ln_f.bias": "output_norm.bias", "head.weight": "output.weight"},
    {"ln1.weight": "attn_norm.weight", "ln1.bias": "attn_norm.bias", "attn.wo": "attn_output.weight",
     "attn.bo": "attn_output.bias", "ln2.weight": "ffn_norm.weight", "ln2.bias": "ffn_norm.bias",
     "fc1.weight": "ffn_up.weight", "fc1.bias": "ffn_up.bias", "fc2.weight": "ffn_down.weight", "fc2.bias": "ffn_down.bias"},
    {"attn_qkv.weight": ("attn.wq", "attn.wk", "attn.wv"), "attn_qkv.bias": ("attn.bq", "attn.bk", "attn.bv")})

LLAMA = TensorMap(
    {"tok.weight": "token_embd.weight", "norm.weight": "output_norm.weight", "head.weight": "output.weight"},
    {"attn_norm.weight": "attn_norm.weight", "attn.wq": "attn_q.weight", "attn.wk": "attn_k.weight",
     "attn.wv": "attn_v.weight", "attn.wo": "attn_output.weight", "ffn_norm.weight": "ffn_norm.weight",
     "ffn.w_gate": "ffn_gate.weight", "ffn.w_up": "ffn_up.weight", "ffn.w_down": "ffn_down.weight"}, {})

GPT2_KINDS = (Embedding, PositionalEmbedding, Dropout, TransformerBlock, LayerNorm, Linear)
LLAMA_KINDS = (Embedding, LlamaBlock, RMSNorm, Linear)
GPT2_EPS = 1e-5  # gpt's LayerNorms (TransformerBlock's default eps)


def _u32(value: int) -> np.uint32:
    return np.uint32(value)


def _f32(value: float) -> np.float32:
    return np.float32(value)


# ---- gpt2 ---------------------------------------------------------------------------------------------

def _gpt2_guess(model: Network) -> dict[str, Any] | None:
    h = guess_gpt(model)
    return None if h is None else {**h, "positions": "learned", "head_bias": False}


def _gpt2_hyperparameters(model: Network) -> dict[str, Any] | None:
    h = gpt_hyperparameters(model)
    return h if h is not None and h["positions"] == "learned" and not h["head_bias"] else None


def _gpt2_metadata(model: Network) -> dict[str, object]:
    h = _gpt2_hyperparameters(model)
    assert h is not None  # the format matched this model
    return {"gpt2.context_length": _u32(h["context"]), "gpt2.embedding_length": _u32(h["dim"]),
            "gpt2.feed_forward_length": _u32(4 * h["dim"]), "gpt2.block_count": _u32(h["n_layers"]),
            "gpt2.attention.head_count": _u32(h["n_heads"]), "gpt2.attention.layer_norm_epsilon": _f32(GPT2_EPS),
            "gpt2.vocab_size": _u32(h["vocab_size"]), OWN_HYPERPARAMETERS: json.dumps(h)}


def _gpt2_build(f: GGUFFile) -> tuple[Network, tuple[int, ...]]:
    h = _read_keys(f, "gpt2", {"context": "context_length", "dim": "embedding_length", "n_layers": "block_count",
                               "n_heads": "attention.head_count", "ffn": "feed_forward_length"},
                   {"eps": "attention.layer_norm_epsilon"})
    if h["ffn"] != 4 * h["dim"] or not math.isclose(h["eps"], GPT2_EPS, rel_tol=1e-6):
        raise ValueError(f"a gpt2 file with feed_forward_length {h['ffn']} and layer_norm_epsilon {h['eps']}: pyggml_opt's "
                         f"gpt has 4 * embedding_length ({4 * h['dim']}) and {GPT2_EPS}")
    _check_sizes(f, "gpt2", h, {"position_embd.weight": (h["context"], h["dim"]),
                                "blk.0.ffn_up.weight": (h["ffn"], h["dim"])})
    args = {"vocab_size": h["vocab_size"], "context": h["context"], "dim": h["dim"], "n_layers": h["n_layers"],
            "n_heads": h["n_heads"], "positions": "learned", "head_bias": False, "tie_embeddings": h["tie_embeddings"]}
    return _model(f, args, gpt, GPT2)


# ---- llama --------------------------------------------------------------------------------------------

def _llama_metadata(model: Network) -> dict[str, object]:
    h = llama_hyperparameters(model)
    assert h is not None  # the format matched this model
    return {"llama.context_length": _u32(h["context"]), "llama.embedding_length": _u32(h["dim"]),
            "llama.feed_forward_length": _u32(h["ffn_dim"]), "llama.block_count": _u32(h["n_layers"]),
            "llama.attention.head_count": _u32(h["n_heads"]), "llama.attention.head_count_kv": _u32(h["n_kv_heads"]),
            "llama.rope.dimension_count": _u32(h["dim"] // h["n_heads"]), "llama.rope.freq_base": _f32(h["rope_theta"]),
            "llama.attention.layer_norm_rms_epsilon": _f32(h["norm_eps"]), "llama.vocab_size": _u32(h["vocab_size"]),
            OWN_HYPERPARAMETERS: json.dumps(h)}


def _llama_build(f: GGUFFile) -> tuple[Network, tuple[int, ...]]:
    h = _read_keys(f, "llama", {"context": "context_length", "dim": "embedding_length", "n_layers": "block_count",
                                "n_heads": "attention.head_count", "ffn_dim": "feed_forward_length"},
                   {"norm_eps": "attention.layer_norm_rms_epsilon"})
    _check_sizes(f, "llama", h, {"blk.0.ffn_up.weight": (h["ffn_dim"], h["dim"])})
    n_kv, theta, rot = (f.get(f"llama.{k}") for k in ("attention.head_count_kv", "rope.freq_base", "rope.dimension_count"))
    head = h["dim"] // h["n_heads"] if h["n_heads"] > 0 else None  # key / value lengths other tools write
    plain = {"expert_count": (None, 0), "rope.scaling.type": (None, "none", "linear"),
             "attention.key_length": (None, head), "attention.value_length": (None, head)}
    unsupported = [f"llama.{k}" for k, ok in plain.items() if f.get(f"llama.{k}") not in ok]
    if unsupported or (rot is not None and rot * h["n_heads"] != h["dim"]):
        raise ValueError(f"this llama file uses what pyggml_opt's llama lacks: {unsupported or 'a rotary dimension'}")
    args = {k: h[k] for k in ("vocab_size", "context", "dim", "n_layers", "n_heads", "ffn_dim", "norm_eps", "tie_embeddings")}
    args["n_kv_heads"] = h["n_heads"] if n_kv is None else n_kv
    args["rope_theta"] = 10000.0 if theta is None else theta
    return _model(f, args, llama, LLAMA)


# ---- shared -------------------------------------------------------------------------------------------

def _read_keys(f: GGUFFile, arch: str, ints: dict[str, str], floats: dict[str, str]) -> dict[str, Any]:
    """The hyperparameters under ``arch``'s keys (ValueError naming the missing or mistyped ones), the
    vocabulary size (``<arch>.vocab_size``, else the tokenizer's number of tokens), and whether the
    output layer uses the token embedding (no ``output.weight``: llama.cpp's loader takes
    ``token_embd.weight`` then)."""
    h: dict[str, Any] = {}
    for arg, key in {**ints, **floats}.items():
        value = f.get(f"{arch}.{key}")
        if isinstance(value, bool) or not isinstance(value, (int, float) if arg in floats else int):
            raise ValueError(f"a {arch} file needs the number {arch}.{key}, got {value!r}")
        h[arg] = value
    tokens = f.get_array("tokenizer.ggml.tokens")
    vocab = f.get(f"{arch}.vocab_size", len(tokens) if isinstance(tokens, list) else None)
    if not isinstance(vocab, int):
        raise ValueError(f"a {arch} file needs {arch}.vocab_size or a tokenizer.ggml.tokens array")
    h["vocab_size"] = vocab
    h["tie_embeddings"] = "output.weight" not in f.tensor_names()
    if h["context"] > MAX_CONTEXT:
        raise ValueError(f"corrupt {arch} file: context_length {h['context']}")
    return h


def _check_sizes(f: GGUFFile, arch: str, h: dict[str, Any], more: dict[str, tuple[int, int]]) -> None:
    """ValueError unless the hyperparameters that size the model (vocabulary, width, blocks, and the
    shapes ``more`` names) agree with the file's tensors and its tokenizer, before the model is built: the
    tensors are no larger than the file, the keys are (a block count of 10**6 built for minutes, a
    vocabulary of 2**31 allocated 128 GiB)."""
    names = f.tensor_names()
    blocks = {int(m.group(1)) for m in map(re.compile(r"blk\.(\d+)\.").match, names) if m}
    if len(blocks) != h["n_layers"] or blocks != set(range(len(blocks))):
        raise ValueError(f"corrupt {arch} file: {arch}.block_count is {h['n_layers']}, its tensors are of "
                         f"{len(blocks)} blocks")
    for name, shape in {"token_embd.weight": (h["vocab_size"], h["dim"]), **more}.items():
        found = f.tensor_shape(name, 2) if name in names else "missing"
        if found != shape:
            raise ValueError(f"corrupt {arch} file: tensor {name} is {found}, its hyperparameters make it {shape}")
    tokens = f.get_array("tokenizer.ggml.tokens")
    if isinstance(tokens, list) and len(tokens) != h["vocab_size"]:
        raise ValueError(f"corrupt {arch} file: its tokenizer has {len(tokens)} tokens, its token embedding "
                         f"{h['vocab_size']} rows (llama.cpp needs one vocabulary size)")


def _model(f: GGUFFile, args: dict[str, Any], builder: Callable[..., Network],
           tensors: TensorMap) -> tuple[Network, tuple[int, ...]]:
    """``builder``'s model (unbuilt) and its input shape for a file's hyperparameters ``args``, with pyggml_opt's exact values
    (``OWN_HYPERPARAMETERS``) where the file has them and they agree (floats as float32, as the
    llama.cpp keys store them); ValueError if the file's tensors are not that model's."""
    own = f.get(OWN_HYPERPARAMETERS)
    try:
        exact = json.loads(own) if isinstance(own, str) else {}
    except ValueError:
        exact = {}
    if isinstance(exact, dict) and all(_agrees(exact.get(k), v) for k, v in args.items()):
        args = {**args, **exact}
    try:
        model = builder(**args, build=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"corrupt {f.get('general.architecture')} hyperparameters ({exc})") from None
    input_shape = (args["context"],)
    names = model.shapes_for(input_shape)
    expected, found = tensors.file_names(list(names)), set(f.tensor_names())
    if expected != found:
        raise ValueError(f"the file's tensors are not a {f.get('general.architecture')} of its hyperparameters: "
                         f"missing {sorted(expected - found)[:5]}, unexpected {sorted(found - expected)[:5]}")
    return model, input_shape


def _agrees(exact: object, file_value: object) -> bool:
    if isinstance(file_value, float):
        return isinstance(exact, (int, float)) and np.float32(exact) == np.float32(file_value)
    return exact == file_value


register_format(FileFormat("gpt2", lambda m: _gpt2_hyperparameters(m) is not None, _gpt2_build,
                           default_loss=LOSS, metadata=_gpt2_metadata, layout=LAYOUT,
                           to_tensors=GPT2.to_file, from_tensors=GPT2.from_file,
                           mismatch=lambda m: first_difference(m, _gpt2_guess, gpt, "gpt2", GPT2_KINDS)))
register_format(FileFormat("llama", lambda m: llama_hyperparameters(m) is not None, _llama_build,
                           default_loss=LOSS, metadata=_llama_metadata, layout=LAYOUT,
                           to_tensors=LLAMA.to_file, from_tensors=LLAMA.from_file,
                           mismatch=lambda m: first_difference(m, guess_llama, llama, "llama", LLAMA_KINDS)))
