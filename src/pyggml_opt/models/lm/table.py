"""One table entry per GGUF architecture of the language models (as llama.cpp's ``LLM_KV`` /
``LLM_TENSOR_NAMES`` in src/llama-arch.cpp): its ``general.architecture``, the family of arguments it
holds, its keys (each with its GGUF type and the argument it carries or the value it derives), its
tensor names, and what of a family's models it can hold. Import, export and the checks read these
entries (``gguf_io.py``, which keeps the registered ones); adding an architecture is one new entry."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ...core.tensor_data import Weight, split_rows, stack_rows
from .args import ModelArgs

BLOCK = re.compile(r"blk(\d+)\.(.+)")
Reader = Callable[[str, int], Weight]


@dataclass(frozen=True)
class TensorMap:
    """Model parameter names <-> file tensor names: ``names`` outside the blocks, ``block`` inside
    block i (``blk<i>.<key>`` <-> ``blk.<i>.<value>``), ``fused``: a file tensor of block i holding several
    block parameters stacked along their first axis. Empty: the file names tensors as the model does."""

    names: dict[str, str] = field(default_factory=dict)
    block: dict[str, str] = field(default_factory=dict)
    fused: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def identity(self) -> bool:
        return not (self.names or self.block or self.fused)

    def _file_name(self, name: str) -> tuple[str, tuple[str, ...] | None]:
        """The file tensor holding parameter ``name``, and the parameters fused into it (None: itself alone)."""
        if self.identity:
            return name, None
        m = BLOCK.fullmatch(name)
        if m is None:
            return self.names[name], None
        i, own = m.groups()
        if own in self.block:
            return f"blk.{i}.{self.block[own]}", None
        file_name, parts = next((f, p) for f, p in self.fused.items() if own in p)
        return f"blk.{i}.{file_name}", tuple(f"blk{i}.{p}" for p in parts)

    def to_file(self, weights: dict[str, Weight]) -> dict[str, Weight]:
        """The file's tensors of a model's weights."""
        out: dict[str, Weight] = {}
        for name, value in weights.items():
            file_name, parts = self._file_name(name)
            if parts is None:
                out[file_name] = value
            elif name == parts[0]:
                out[file_name] = stack_rows([weights[p] for p in parts])
        return out

    def file_shapes(self, shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
        """The file's tensor shapes of a model with parameters of ``shapes`` (arithmetic only: checked
        against a file before anything is read)."""
        out: dict[str, tuple[int, ...]] = {}
        for name, shape in shapes.items():
            file_name, parts = self._file_name(name)
            if parts is None:
                out[file_name] = shape
            elif name == parts[0]:
                out[file_name] = (sum(shapes[p][0] for p in parts), *shape[1:])
        return out

    def from_file(self, read: Reader, shapes: dict[str, tuple[int, ...]]) -> dict[str, Weight]:
        """A model's parameters of ``shapes`` from the file's tensors (``read(name, ndim)``)."""
        out: dict[str, Weight] = {}
        for name, shape in shapes.items():
            file_name, parts = self._file_name(name)
            if parts is None:
                out[name] = read(file_name, len(shape))
                continue
            whole = read(file_name, len(shape))
            cuts = np.cumsum([shapes[p][0] for p in parts])
            if whole.shape[0] != cuts[-1]:
                raise ValueError(f"tensor {file_name} has {whole.shape[0]} rows, the model needs {cuts[-1]}")
            out[name] = split_rows(whole, [int(c) for c in cuts[:-1]])[parts.index(name)]
        return out


@dataclass(frozen=True)
class Key:
    """A key ``<architecture>.<suffix>`` of GGUF type ``kind`` (np.uint32 / np.float32 for llama.cpp,
    whose loader refuses other types; int / float / str / bool as pyggml_opt's own layouts write them).
    It carries the argument ``arg`` (read back into it; ``default`` when absent, required without one),
    or else holds ``derive(args)``: written from the arguments, checked against them when read."""

    suffix: str
    kind: type
    arg: str | None = None
    derive: Callable[[ModelArgs], Any] | None = None
    default: Any = ...
    # written only when it differs from ``default`` (keys earlier versions' files lack)
    sparse: bool = False
    written: bool = True  # False: read and checked only (keys other tools write)

    @property
    def required(self) -> bool:
        return self.default is ...


@dataclass(frozen=True)
class Architecture:
    """A GGUF architecture of language models: files with ``general.architecture`` = ``name``, in the
    layout family ``layout`` ("pyggml_opt" or "llama.cpp"), holding models of ``args``' family.

    ``keys``: its hyperparameters; ``fixed``: argument values a file of it cannot express (the model is
    refused at save if they differ, filled in at load); ``tensors``: its tensor names; ``refused``: keys
    whose other values mean features the family lacks (a file with them is refused, naming the key)."""

    name: str
    layout: str
    args: type[ModelArgs]
    keys: tuple[Key, ...]
    tensors: TensorMap = TensorMap()
    fixed: dict[str, Any] = field(default_factory=dict)
    refused: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    # the arguments the file's keys cannot give exactly, kept as JSON beside them (pyggml_opt.hyperparameters)
    exact_args: bool = False

    def why_not(self, args: ModelArgs) -> str | None:
        """Why a model of ``args`` cannot be saved in this architecture, or None if it can."""
        if not isinstance(args, self.args):
            return f"a {self.name} file holds {self.args.family} models, this is a {args.family}"
        wrong = [f"{k}={getattr(args, k)!r}, where a {self.name} file has {k}={v!r} (build the model with {k}={v!r})"
                 for k, v in self.fixed.items() if getattr(args, k) != v]
        return "; ".join(wrong) or None

