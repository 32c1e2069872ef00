"""Model layouts in GGUF files, by ``general.architecture``: a registry of ``FileFormat``.

Every model saves in the generic layout ("pyggml_opt": the architecture as JSON, tensors named as
the model names its parameters), which needs no per-model code. Other layouts, such as ggml's
``mnist-fc`` / ``mnist-cnn`` examples, register a ``FileFormat`` (see ``pyggml_opt.models.zoo``): which
models they fit, how to build a model for a file that has no JSON architecture (a file from ggml's
C++ tools), and how tensors differ from the model's own.

A layout belongs to one family (``FileFormat.layout``): "pyggml_opt" (the files pyggml_opt reads and
writes by default) or "llama.cpp" (files llama.cpp runs: ``save(model, path, tokenizer=...)``). Within
a family the first registered format that matches a model is the one it saves in."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..core import GGUFFile
from ..core.tensor_data import Weight
from ..nn import Network

GENERIC = "pyggml_opt"
LAYOUTS = (GENERIC, "llama.cpp")  # the families of layouts a model can be saved in


def _same(name: str, value: np.ndarray) -> np.ndarray:
    return value


def _no_metadata(model: Network) -> dict[str, object]:
    return {}


@dataclass(frozen=True)
class FileFormat:
    """One value of ``general.architecture`` and what it means for a model's tensors."""

    architecture: str
    matches: Callable[[Network], bool]          # does this (built) model save in this layout?
    # the model of an open file of this layout (its keys may hold hyperparameters), not built yet (the
    # file's weights are its first ones), and the input shape to build it for; ValueError if corrupt
    build: Callable[[GGUFFile], "tuple[Network, tuple[int, ...]]"]
    to_file: Callable[[str, np.ndarray], np.ndarray] = _same    # parameter -> file tensor
    from_file: Callable[[str, np.ndarray], np.ndarray] = _same  # file tensor -> parameter
    default_loss: str | None = None             # for files that do not say
    metadata: Callable[[Network], dict[str, object]] = _no_metadata  # keys the layout writes (hyperparameters)
    layout: str = GENERIC                       # its family (LAYOUTS)
    # Layouts whose tensors are named and cut otherwise than the model's parameters (llama.cpp's):
    # the model's weights -> the file's tensors, and (a reader of file tensors by name and rank, the
    # model's parameter shapes) -> the parameters. None: one tensor per parameter (to_file / from_file).
    # Either may hold ``Quantized`` values (parameters kept quantized), which to_file / from_file cannot.
    to_tensors: Callable[[dict[str, Weight]], dict[str, Weight]] | None = None
    from_tensors: Callable[[Callable[[str, int], Weight], dict[str, tuple[int, ...]]],
                           dict[str, Weight]] | None = None
    # why a model does not fit (the first layer that does not map), for the ValueError of an explicit save
    mismatch: Callable[[Network], str] | None = None

    @property
    def converts(self) -> bool:
        """Whether a parameter's file tensor differs from it (to_file / from_file are not the identity):
        such a layout takes float32 weights only."""
        return self.to_file is not _same or self.from_file is not _same


_FORMATS: dict[str, FileFormat] = {}


def register_format(fmt: FileFormat) -> FileFormat:
    if fmt.architecture == GENERIC or _FORMATS.get(fmt.architecture, fmt) is not fmt:
        raise ValueError(f"a file format {fmt.architecture!r} is already registered")
    _FORMATS[fmt.architecture] = fmt
    return fmt


def format_of(model: Network, layout: str = GENERIC) -> FileFormat | None:
    """The registered layout of family ``layout`` that ``model`` saves in, or None (for "pyggml_opt":
    the generic layout)."""
    return next((f for f in _FORMATS.values() if f.layout == layout and f.matches(model)), None)


def formats_in(layout: str) -> list[FileFormat]:
    """The registered formats of family ``layout``."""
    return [f for f in _FORMATS.values() if f.layout == layout]


def format_named(architecture: str) -> FileFormat | None:
    return _FORMATS.get(architecture)


def known_architectures() -> list[str]:
    return sorted([GENERIC, *_FORMATS])
