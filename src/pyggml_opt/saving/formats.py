"""Model layouts in GGUF files, by ``general.architecture``: a registry of ``FileFormat``.

Every model saves in the generic layout ("pyggml_opt": the architecture as JSON, tensors named as
the model names its parameters), which needs no per-model code. Other layouts, such as ggml's
``mnist-fc`` / ``mnist-cnn`` examples, register a ``FileFormat`` (see ``pyggml_opt.models.zoo``): which
models they fit, how to build a model for a file that has no JSON architecture (a file from ggml's
C++ tools), and how tensors differ from the model's own."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..core import GGUFFile
from ..nn import Network

GENERIC = "pyggml_opt"


def _same(name: str, value: np.ndarray) -> np.ndarray:
    return value


def _no_metadata(model: Network) -> dict[str, object]:
    return {}


@dataclass(frozen=True)
class FileFormat:
    """One value of ``general.architecture`` and what it means for a model's tensors."""

    architecture: str
    matches: Callable[[Network], bool]          # does this (built) model save in this layout?
    # a model for an open file of this layout (its keys may hold hyperparameters); ValueError if corrupt
    build: Callable[[GGUFFile], Network]
    to_file: Callable[[str, np.ndarray], np.ndarray] = _same    # parameter -> file tensor
    from_file: Callable[[str, np.ndarray], np.ndarray] = _same  # file tensor -> parameter
    default_loss: str | None = None             # for files that do not say
    metadata: Callable[[Network], dict[str, object]] = _no_metadata  # keys the layout writes (hyperparameters)


_FORMATS: dict[str, FileFormat] = {}


def register_format(fmt: FileFormat) -> FileFormat:
    if fmt.architecture == GENERIC or _FORMATS.get(fmt.architecture, fmt) is not fmt:
        raise ValueError(f"a file format {fmt.architecture!r} is already registered")
    _FORMATS[fmt.architecture] = fmt
    return fmt


def format_of(model: Network) -> FileFormat | None:
    """The registered layout ``model`` saves in, or None for the generic one."""
    return next((f for f in _FORMATS.values() if f.matches(model)), None)


def format_named(architecture: str) -> FileFormat | None:
    return _FORMATS.get(architecture)


def known_architectures() -> list[str]:
    return sorted([GENERIC, *_FORMATS])
