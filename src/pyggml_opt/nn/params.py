"""The parameters of a model: their names and values checked, and the ggml tensors holding them in one
backend buffer."""
from __future__ import annotations

from typing import Mapping

import numpy as np

from .._lib import ffi, lib
from ..core import Backend, Buffer, Context, HostBuffer
from ..core import tensor_data
from ..core.tensor_data import MAX_NAME, QUANTIZED_NAMES, QUANTIZED_TYPES, Quantized, Weight
from .ops import Tensor

# values drawn per call by uniform_init: float64 temporaries of 64 KB (reused heap memory), not of a
# whole tensor (which would leave a model's build with three times its weights in memory)
INIT_CHUNK = 8192


def check_param_name(name: str, reserve: int = 0) -> str:
    """A parameter name that fits ggml's tensor names (63 bytes) with ``reserve`` bytes to spare (a
    checkpoint prefixes its optimizer tensors), else ValueError."""
    if len(name.encode()) + reserve >= MAX_NAME:
        raise ValueError(f"parameter name {name!r} is too long for ggml's tensor names (at most "
                         f"{MAX_NAME - 1 - reserve} bytes{' here' if reserve else ''})")
    return name


def quantized_types(weights: dict[str, Weight]) -> dict[str, str]:
    """The weights that are ``Quantized``: name -> ggml type name."""
    return {name: value.type_name for name, value in weights.items() if isinstance(value, Quantized)}


def checked_weight(name: str, value: object, shape: tuple[int, ...]) -> Weight:
    """``value`` as the float32 C-contiguous array of parameter ``name`` (shape ``shape``), or as it is
    for a ``Quantized`` value of that shape: TypeError for a non-numeric value, ValueError for another
    shape or NaN / inf (in a quantized value: its scales). Every path that puts weights into a network
    goes through this check before anything is written."""
    if isinstance(value, Quantized):
        if value.shape != shape:
            raise ValueError(f"parameter {name!r}: expected shape {shape}, got {value.type_name} values of shape {value.shape}")
        if not value.all_finite():
            raise ValueError(f"parameter {name!r} ({value.type_name}) contains NaN or inf")
        return value
    arr = np.asarray(value)
    if arr.dtype.kind not in "fiu":
        raise TypeError(f"parameter {name!r}: expected a numeric array, got dtype {arr.dtype}")
    if arr.shape != shape:
        raise ValueError(f"parameter {name!r}: expected shape {shape}, got {arr.shape}")
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    if not np.isfinite(arr).all():
        raise ValueError(f"parameter {name!r} contains NaN or inf")
    return arr


def check_quantizable(weights: Mapping[str, Weight], quantizable: frozenset[str]) -> None:
    """ValueError for a ``Quantized`` value of a parameter that must be float32 (not in ``quantizable``:
    ``Network.quantizable``)."""
    wrong = sorted(n for n, v in weights.items() if isinstance(v, Quantized) and n not in quantizable)
    if wrong:
        raise ValueError(f"parameter {wrong[0]!r} cannot be kept quantized: its layer computes with it in float32 "
                         f"(the parameters that can: {sorted(quantizable)}); give it float32 values "
                         "(Quantized.dequantize())")


def matching_params(names: tuple[str, ...], params: list[str]) -> frozenset[str]:
    """The parameters of ``params`` that ``names`` name: each a parameter ("head.weight") or the prefix
    of a layer's ("blk0", "blk0.attn"); no names: all of them. ValueError for a name that matches none
    (a typo would otherwise freeze nothing)."""
    if not names:
        return frozenset(params)
    found: set[str] = set()
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"parameter names must be str, got {type(name).__name__}")
        hits = [p for p in params if p == name or p.startswith(name + ".")]
        if not hits:
            raise ValueError(f"{name!r} names no parameter of this model (it has {params[:8]}"
                             f"{' ...' if len(params) > 8 else ''})")
        found.update(hits)
    return frozenset(found)


def uniform_init(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int) -> np.ndarray:
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)) as float32: PyTorch's default for weights and biases."""
    bound = 1.0 / np.sqrt(fan_in)
    out = np.empty(shape, np.float32)
    flat = out.reshape(-1)
    # the generator's stream drawn in chunks is the stream drawn at once: the same weights
    for start in range(0, flat.size, INIT_CHUNK):
        flat[start:start + INIT_CHUNK] = rng.uniform(-bound, bound, size=min(INIT_CHUNK, flat.size - start))
    return out


class ParamStore:
    """Owns a context with one tensor per parameter and the buffer holding them on ``backend``: F32, or
    the quantized type ``quantized`` names for a parameter kept quantized (frozen, as are those named
    in ``frozen``).

    Tensor names are the parameter names (they become the GGUF tensor names). ``tensors`` maps
    name -> Tensor (numpy-order shapes). Every F32 tensor but those named in ``buffers`` (state that is
    not trained) and in ``frozen`` is flagged as a ggml parameter from the start (``ggml_set_param``: ggml-opt gives it
    a gradient and an optimizer step): a graph records its tensors as leafs or nodes by that flag when
    it is built, so flagging them later (at the first fit) made ggml-opt abort on a forward graph
    built before (``dst->n_leafs == src->n_leafs`` when it copies the graph at its first evaluation).
    """

    def __init__(self, shapes: dict[str, tuple[int, ...]], backend: Backend, buffers: frozenset[str] = frozenset(),
                 quantized: Mapping[str, str] | None = None, frozen: frozenset[str] = frozenset()) -> None:
        self.ctx = Context(max(1, len(shapes)))
        self.tensors: dict[str, Tensor] = {}
        quantized = quantized or {}
        for name, shape in shapes.items():
            ne = tensor_data.ne_of(shape)
            kind = QUANTIZED_TYPES[quantized[name]] if name in quantized else lib.GGML_TYPE_F32
            t = lib.ggml_new_tensor(self.ctx.ptr, kind, lib.GGML_MAX_DIMS, ffi.new("int64_t[4]", ne))
            lib.ggml_set_name(t, check_param_name(name).encode())
            if name not in buffers and name not in quantized and name not in frozen:
                lib.ggml_set_param(t)
            self.tensors[name] = Tensor(t, None, self.ctx, len(shape))
        self.buffer: Buffer | None = None
        self.backend = backend
        self.buffers = buffers
        # the values whose memory the tensors use where it is (fill); read_only: those of them a file's
        # frozen weights (mapped Quantized values), never written
        self.in_place: dict[str, Weight] = {}
        self.read_only: frozenset[str] = frozenset()
        self._host_buffers: list[HostBuffer] = []

    def fill(self, weights: Mapping[str, Weight]) -> None:
        """Give the tensors their memory and ``weights`` (every parameter's value): on a CPU backend a
        value over a file's mapping (``GGUFFile.weight``) is the tensor's memory itself, no copy (a
        float32 one copy-on-write: training writes pages of the process's own); the others are copied
        into one buffer of the backend."""
        if self.backend.is_cpu:
            self.in_place = {n: w for n, w in weights.items() if _on_a_mapping(w)}
            self.read_only = frozenset(n for n, w in self.in_place.items() if isinstance(w, Quantized))
        roots: dict[int, HostBuffer] = {}
        for name, value in self.in_place.items():
            data = value.data if isinstance(value, Quantized) else value
            root = _root(data)
            if id(root) not in roots:
                roots[id(root)] = HostBuffer(root)
                self._host_buffers.append(roots[id(root)])
            roots[id(root)].place(self.tensors[name].ptr, data)
        # ggml allocates no buffer for a context whose tensors all have memory (or that has none)
        if len(self.in_place) < len(self.tensors):
            self.buffer = Buffer(self.ctx, self.backend)
        self.set({n: w for n, w in weights.items() if n not in self.in_place})

    def get(self) -> dict[str, Weight]:
        """Every parameter's value: copies, but the ``read_only`` values themselves (nothing changes them)."""
        return {name: self.in_place[name] if name in self.read_only
                else tensor_data.get_quantized(t.ptr, t.ndim) if t.ptr.type in QUANTIZED_NAMES
                else tensor_data.get(t.ptr, t.ndim) for name, t in self.tensors.items()}

    def set(self, weights: Mapping[str, Weight]) -> None:
        """Copy ``weights`` into their tensors (ValueError for a ``read_only`` one: a file's frozen weight)."""
        for name, value in weights.items():
            if name in self.read_only:
                raise ValueError(f"parameter {name!r} computes on a file's mapped bytes, which are read-only")
            if isinstance(value, Quantized):
                tensor_data.set_quantized(self.tensors[name].ptr, value)
            else:
                tensor_data.set(self.tensors[name].ptr, value)

    def close(self) -> None:
        for owner in [self.buffer, *self._host_buffers]:
            if owner is not None:
                owner.close()
        self.ctx.close()


def _root(array: np.ndarray) -> np.ndarray:
    """The outermost numpy array ``array`` is a view of (a whole file's mapping for a ``GGUFFile``
    weight): one host buffer serves every tensor placed on it."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def _on_a_mapping(value: Weight) -> bool:
    """Whether ``value`` is a contiguous piece of a file's mapping (``GGUFFile.weight``): a tensor can use
    its memory where it is."""
    data = value.data if isinstance(value, Quantized) else value
    return data.flags.c_contiguous and isinstance(_root(data), np.memmap)
