"""Reading and writing the language models' GGUF architectures of the table (``table.py``), as
registered file formats of ``saving``: the keys each entry lists, written from a model's arguments
and read back into them, checked against the file's tensors before a model is made; tensors by the
entry's names. pyggml_opt's exact arguments ride along as JSON (``pyggml_opt.hyperparameters``: float64
values, the dropout rate) where the entry's keys cannot hold them."""
from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import numpy as np

from ...core import GGUFFile
from ...nn import Network
from ...saving import FileFormat, register_format
from ...saving.model_file import stored_name
from .legacy import args_of, why_not
from .model import LOSS, LanguageModel
from .table import Architecture, Key

OWN_HYPERPARAMETERS = "pyggml_opt.hyperparameters"
LLAMA_CPP = "llama.cpp"
NUMBERS = {np.uint32: int, np.float32: float, int: int, float: float}
BLOCKS = {True: re.compile(r"blk(\d+)\."), False: re.compile(r"blk\.(\d+)\.")}  # own names / llama.cpp's


def metadata(arch: Architecture, model: Network) -> dict[str, object]:
    """The keys of ``arch`` for ``model`` (which it fits)."""
    args = args_of(model)
    assert args is not None  # the format matched this model
    out: dict[str, object] = {}
    for key in arch.keys:
        if not key.written:
            continue
        value = getattr(args, key.arg) if key.arg is not None else key.derive(args)  # type: ignore[misc]
        if key.sparse and value == key.default:
            continue
        out[f"{arch.name}.{key.suffix}"] = key.kind(value)
    if arch.exact_args:
        out[OWN_HYPERPARAMETERS] = json.dumps(args.to_config())
    return out


def _value(arch: Architecture, key: Key, f: GGUFFile) -> Any:
    """The file's value of ``key`` (None when absent), of the key's kind (ValueError otherwise)."""
    full = f"{arch.name}.{key.suffix}"
    value = f.get(full)
    if value is None:
        return None
    if key.kind in NUMBERS:
        ok = not isinstance(value, bool) and isinstance(value, (int, float) if NUMBERS[key.kind] is float else int)
        what = "number"
    else:
        ok, what = isinstance(value, key.kind), "string" if key.kind is str else "flag"
    if not ok:
        raise ValueError(f"a {arch.name} file needs the {what} {full}, got {value!r}")
    return value


def _agrees(exact: object, file_value: object) -> bool:
    if isinstance(file_value, float):
        return isinstance(exact, (int, float)) and np.float32(exact) == np.float32(file_value)
    return exact == file_value


def read_args(arch: Architecture, f: GGUFFile) -> dict[str, Any]:
    """The arguments a file of ``arch`` gives (unchecked): its keys, with defaults where absent; for
    llama.cpp's files the vocabulary size may come from the tokenizer and the tie from the tensors."""
    found: dict[str, Any] = {}
    for key in arch.keys:
        if key.arg is None:
            continue
        value = _value(arch, key, f)
        if value is None and key.arg == "vocab_size" and arch.layout == LLAMA_CPP:
            tokens = f.get_array("tokenizer.ggml.tokens")
            value = len(tokens) if isinstance(tokens, list) else None
            if value is None:
                raise ValueError(f"a {arch.name} file needs {arch.name}.vocab_size or a tokenizer.ggml.tokens array")
        if value is None:
            if key.required:
                what = "number" if key.kind in NUMBERS else "string" if key.kind is str else "flag"
                raise ValueError(f"a {arch.name} file needs the {what} {arch.name}.{key.suffix}, got None")
            value = key.default
        found[key.arg] = value
    if arch.layout == LLAMA_CPP:
        found["tie_embeddings"] = arch.tensors.names["head.weight"] not in f.tensor_names()
    unsupported = [f"{arch.name}.{k}" for k, ok in arch.refused.items() if f.get(f"{arch.name}.{k}") not in ok]
    if unsupported:
        raise ValueError(f"this {arch.name} file uses what pyggml_opt's {arch.args.family} lacks: {unsupported}")
    found.update(arch.fixed)
    own = f.get(OWN_HYPERPARAMETERS)
    try:
        exact = json.loads(own) if isinstance(own, str) else {}
    except ValueError:
        exact = {}
    if isinstance(exact, dict):
        fields = {field.name for field in dataclasses.fields(arch.args)}
        exact = {k: v for k, v in exact.items() if k in fields}
        if all(_agrees(exact.get(k), v) for k, v in found.items()):
            found.update(exact)
    return found


def _check_blocks(arch: Architecture, f: GGUFFile, n_layers: object) -> None:
    """ValueError unless the block count agrees with the file's block tensors (a block count of 10**6
    built for minutes: checked before any layer is made)."""
    pattern = BLOCKS[arch.tensors.identity]
    blocks = {int(m.group(1)) for m in map(pattern.match, f.tensor_names()) if m}
    if n_layers != len(blocks) or blocks != set(range(len(blocks))):
        raise ValueError(f"corrupt {arch.name} file: {arch.name}.block_count is {n_layers}, its tensors are of "
                         f"{len(blocks)} blocks")


def _check_shapes(arch: Architecture, f: GGUFFile, expected: dict[str, tuple[int, ...]]) -> None:
    """ValueError unless the file has the tensors ``expected`` names, of those shapes, and (llama.cpp's
    files, which llama.cpp would read otherwise) no others; pyggml_opt's own may hold more (a
    checkpoint's optimizer state)."""
    names = set(f.tensor_names())
    if not expected.keys() <= names or (arch.layout == LLAMA_CPP and expected.keys() != names):
        raise ValueError(f"the file's tensors are not a {arch.name} of its hyperparameters: missing "
                         f"{sorted(expected.keys() - names)[:5]}, unexpected {sorted(names - expected.keys())[:5]}")
    wrong = [f"tensor {name} is {f.tensor_shape(name, len(shape))}, its hyperparameters make it {shape}"
             for name, shape in expected.items() if f.tensor_shape(name, len(shape)) != shape]
    if wrong:
        raise ValueError(f"corrupt {arch.name} file: {'; '.join(wrong[:4])}")


def build(arch: Architecture, f: GGUFFile) -> tuple[Network, tuple[int, ...]]:
    """The model of a file of ``arch`` (no weights yet) and its input shape; ValueError, before any
    layer is made, for keys that disagree with the file's tensors or its tokenizer."""
    found = read_args(arch, f)
    _check_blocks(arch, f, found.get("n_layers"))
    token_table = arch.tensors.names.get("tok.weight", "tok.weight")
    vocab, dim = found.get("vocab_size"), found.get("dim")
    if token_table in f.tensor_names() and f.tensor_shape(token_table, 2) != (vocab, dim):
        raise ValueError(f"corrupt {arch.name} file: tensor {token_table} is {f.tensor_shape(token_table, 2)}, its "
                         f"hyperparameters make it {(vocab, dim)}")
    tokens = f.get_array("tokenizer.ggml.tokens")
    if arch.layout == LLAMA_CPP and isinstance(tokens, list) and len(tokens) != vocab:
        raise ValueError(f"corrupt {arch.name} file: its tokenizer has {len(tokens)} tokens, its token embedding "
                         f"{vocab} rows (llama.cpp needs one vocabulary size)")
    try:
        args = arch.args(**found)
        model = LanguageModel.made(args, build=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"corrupt {arch.name} hyperparameters ({exc})") from None
    derived = [f"{arch.name}.{k.suffix}" for k in arch.keys if k.derive is not None
               and (v := _value(arch, k, f)) is not None and not _agrees(k.derive(args), v)]
    if derived:
        raise ValueError(f"this {arch.name} file uses what pyggml_opt's {args.family} lacks: {derived}")
    input_shape = (args.context,)
    expected = arch.tensors.file_shapes(model.shapes_for(input_shape))
    if arch.tensors.identity:  # an earlier version's file names some parameters otherwise
        names, legacy = set(f.tensor_names()), model.legacy_names()
        expected = {stored_name(n, names, legacy): s for n, s in expected.items()}
    _check_shapes(arch, f, expected)
    return model, input_shape


def file_format(arch: Architecture) -> FileFormat:
    """``arch`` as a file format of ``saving``."""
    def matches(model: Network) -> bool:
        args = args_of(model)
        return args is not None and arch.why_not(args) is None

    return FileFormat(arch.name, matches, lambda f: build(arch, f), default_loss=LOSS,
                      metadata=lambda m: metadata(arch, m), layout=arch.layout, to_tensors=arch.tensors.to_file,
                      from_tensors=arch.tensors.from_file, mismatch=lambda m: why_not(m, arch))


ARCHITECTURES: dict[str, Architecture] = {}  # the table: general.architecture -> its entry


def register_architecture(arch: Architecture) -> Architecture:
    """Add ``arch`` to the table, so that ``save`` writes and ``load`` reads its files (ValueError for
    a name already registered, here or as another file format)."""
    if arch.name in ARCHITECTURES:
        raise ValueError(f"architecture {arch.name!r} is already in the table")
    register_format(file_format(arch))
    ARCHITECTURES[arch.name] = arch
    return arch


__all__ = ["ARCHITECTURES", "OWN_HYPERPARAMETERS", "build", "file_format", "metadata", "read_args",
           "register_architecture"]
