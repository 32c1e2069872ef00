"""Model layouts in GGUF files, by ``general.architecture``: a registry of ``FileFormat``.

Every model saves in the generic layout ("pyggml_opt": the architecture as JSON, tensors named as
the model names its parameters), which needs no per-model code. Other layouts, such as ggml's
``mnist-fc`` / ``mnist-cnn`` examples, register a ``FileFormat`` (see ``pyggml_opt.models.zoo``): which
models they fit, how to build a model for a file that has no JSON architecture (a file from ggml's
C++ tools), and how tensors differ from the model's own.

A layout belongs to one family (``FileFormat.layout``): "pyggml_opt" (the files pyggml_opt reads and
writes by default) or "llama.cpp" (files llama.cpp runs: ``save(model, path, format="llama.cpp",
tokenizer=...)``). Within a family the first registered format that matches a model is the one it
saves in. The language models' architectures are registered from their table (``models/lm``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..core import GGUFFile
from ..core.tensor_data import Weight
from ..nn import Network

GENERIC = "pyggml_opt"
LAYOUTS = (GENERIC, "llama.cpp")  # the families of layouts a model can be saved in


Reader = Callable[[str, int], Weight]  # a file's tensor by name and rank (checked by the caller)


def same_tensors(weights: dict[str, Weight]) -> dict[str, Weight]:
    """The file's tensors of a layout that names and stores them as the model's parameters."""
    return weights


def read_each(read: Reader, shapes: dict[str, tuple[int, ...]]) -> dict[str, Weight]:
    """The parameters of such a layout: each its own file tensor."""
    return {name: read(name, len(shape)) for name, shape in shapes.items()}


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
    # The one conversion hook pair: the model's weights -> the file's tensors, and (a reader of file
    # tensors by name and rank, the model's parameter shapes) -> the parameters (llama.cpp's names and
    # fused tensors, ggml's mnist-cnn column order); both may meet ``Quantized`` values.
    to_tensors: Callable[[dict[str, Weight]], dict[str, Weight]] = same_tensors
    from_tensors: Callable[[Reader, dict[str, tuple[int, ...]]], dict[str, Weight]] = read_each
    default_loss: str | None = None             # for files that do not say
    metadata: Callable[[Network], dict[str, object]] = _no_metadata  # keys the layout writes (hyperparameters)
    layout: str = GENERIC                       # its family (LAYOUTS)
    # why a model does not fit (the first layer that does not map), for the ValueError of an explicit save
    mismatch: Callable[[Network], str] | None = None
    # the hooks compute on float32 values (mnist-cnn permutes a matrix's columns): no quantized tensors
    float32_only: bool = False


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
