"""Moving tensor data between numpy and ggml tensors (any backend).

Shapes: ggml lists dimensions fastest-first (``ne[0]`` is the row length); numpy lists them
slowest-first. A ggml tensor with ``ne = [784, 500, 1, 1]`` is a numpy array of shape ``(500, 784)``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Union

import numpy as np

from .._lib import CData, ffi, lib
from .context import Context

MAX_NAME = 64  # GGML_MAX_NAME: ggml_tensor.name is char[64], so names have at most 63 bytes

NP_TYPES: dict[int, type[np.generic]] = {
    lib.GGML_TYPE_F32: np.float32,
    lib.GGML_TYPE_F16: np.float16,
    lib.GGML_TYPE_I32: np.int32,
    lib.GGML_TYPE_I64: np.int64,
    lib.GGML_TYPE_I16: np.int16,
    lib.GGML_TYPE_I8: np.int8,
    lib.GGML_TYPE_F64: np.float64,
}


def _cpu_computes_with(kind: int) -> bool:
    """Whether ggml can hold weights of type ``kind`` apart from F32 (a live type with a conversion to
    float32) and its CPU backend multiplies them (MUL_MAT) and picks their rows (GET_ROWS): what a
    language model's matrices need. Asked of ggml itself (type traits, the device's supports_op)."""
    traits = lib.ggml_get_type_traits(kind)
    if kind == lib.GGML_TYPE_F32 or traits.blck_size <= 0 or traits.type_size == 0 or traits.to_float == ffi.NULL:
        return False
    device = lib.ggml_backend_dev_by_type(lib.GGML_BACKEND_DEVICE_TYPE_CPU)
    with Context(5) as ctx:  # tensor headers only
        weight = lib.ggml_new_tensor_2d(ctx.ptr, kind, traits.blck_size, 2)
        x = lib.ggml_new_tensor_2d(ctx.ptr, lib.GGML_TYPE_F32, traits.blck_size, 1)
        ids = lib.ggml_new_tensor_1d(ctx.ptr, lib.GGML_TYPE_I32, 1)
        return device != ffi.NULL and all(lib.ggml_backend_dev_supports_op(device, op) for op in (
            lib.ggml_mul_mat(ctx.ptr, weight, x), lib.ggml_get_rows(ctx.ptr, weight, ids)))


def _cpu_backpropagates(kind: int) -> bool:
    """Whether ggml's CPU backend computes OUT_PROD of a matrix of type ``kind`` with a float32 one: the
    gradient that passes through a frozen weight of that type to what is below it."""
    traits = lib.ggml_get_type_traits(kind)
    device = lib.ggml_backend_dev_by_type(lib.GGML_BACKEND_DEVICE_TYPE_CPU)
    with Context(3) as ctx:  # tensor headers only
        weight = lib.ggml_new_tensor_2d(ctx.ptr, kind, traits.blck_size, 2)
        grad = lib.ggml_new_tensor_2d(ctx.ptr, lib.GGML_TYPE_F32, 1, 2)
        return device != ffi.NULL and bool(lib.ggml_backend_dev_supports_op(device, lib.ggml_out_prod(ctx.ptr, weight, grad)))


# The ggml types besides F32 a weight may be stored and computed in (F16, BF16, Q8_0, Q4_0 ... the
# K-quants, the i-quants), by ggml's names (ggml_type_name): what llama.cpp's files hold.
QUANTIZED_TYPES = {ffi.string(lib.ggml_type_name(kind)).decode(): kind
                   for kind in range(lib.GGML_TYPE_COUNT) if _cpu_computes_with(kind)}
QUANTIZED_NAMES = {kind: name for name, kind in QUANTIZED_TYPES.items()}
# those a gradient passes through on the CPU (LoRA on such a base): all but BF16 in ggml 0.25.3
GRADIENT_TYPES = frozenset(name for name, kind in QUANTIZED_TYPES.items() if _cpu_backpropagates(kind))


@dataclass(frozen=True, eq=False)
class Quantized:
    """A tensor's values in a ggml storage type other than F32 (``type_name``, a key of ``QUANTIZED_TYPES``:
    "f16", "q8_0", "q4_K", ...), as ggml stores them:
    ``data`` (uint8, shape ``shape[:-1] + (bytes per row,)``) holds each row of the last axis of the
    logical ``shape`` as the type's blocks. Rows are independent: cutting and stacking them along the
    first axis (``split_rows`` / ``stack_rows``) cuts and stacks the bytes."""

    type_name: str
    shape: tuple[int, ...]
    data: np.ndarray

    def __post_init__(self) -> None:
        kind = QUANTIZED_TYPES.get(self.type_name)
        if kind is None:
            raise ValueError(f"type_name must be one of {sorted(QUANTIZED_TYPES)}, got {self.type_name!r}")
        if not self.shape or self.shape[-1] % lib.ggml_blck_size(kind):
            raise ValueError(f"{self.type_name} stores rows of a multiple of {lib.ggml_blck_size(kind)} values, "
                             f"got shape {self.shape}")
        want = (*self.shape[:-1], int(lib.ggml_row_size(kind, self.shape[-1])))
        if self.data.dtype != np.uint8 or self.data.shape != want:
            raise ValueError(f"{self.type_name} data of shape {self.shape} is uint8 {want}, got {self.data.dtype} "
                             f"{self.data.shape}")

    @classmethod
    def of(cls, values: np.ndarray, type_name: str) -> "Quantized":
        """float32 ``values`` quantized to ``type_name`` (``quantize``)."""
        values = np.asarray(values, np.float32)
        data = quantize(values, type_name)
        return cls(type_name, values.shape, data.reshape(*values.shape[:-1], -1))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def ggml_type(self) -> int:
        return QUANTIZED_TYPES[self.type_name]

    def dequantize(self) -> np.ndarray:
        """The values as float32 (ggml's own conversion: what its kernels compute with)."""
        out = np.empty(self.shape, np.float32)
        src = np.ascontiguousarray(self.data)
        lib.ggml_get_type_traits(self.ggml_type).to_float(ffi.from_buffer(src), ffi.from_buffer("float[]", out), out.size)
        return out

    def all_finite(self) -> bool:
        """Whether every value is finite, by ggml's own check of the type's blocks (ggml_validate_row_data:
        the scales of quantized blocks, every value of F16 / BF16), without dequantizing anything."""
        data = np.ascontiguousarray(self.data)
        return bool(lib.ggml_validate_row_data(self.ggml_type, ffi.from_buffer(data), data.nbytes))

    @property
    def mapped(self) -> bool:
        """Whether the bytes are read-only memory (a file mapped by ``GGUFFile.weight``): nobody can change
        them, so copies share them and the CPU backend computes on them in place."""
        return not self.data.flags.writeable and self.data.flags.c_contiguous

    def copy(self) -> "Quantized":
        """An independent copy; a ``mapped`` tensor is shared, as nothing can change it."""
        return self if self.mapped else Quantized(self.type_name, self.shape, self.data.copy())


Weight = Union[np.ndarray, Quantized]  # a parameter's value: float32, or kept quantized (frozen)


def stack_rows(parts: list[Weight]) -> Weight:
    """Arrays, or quantized tensors of one type, stacked along their first axis (np.concatenate)."""
    arrays = [p for p in parts if isinstance(p, np.ndarray)]
    if len(arrays) == len(parts):
        return np.concatenate(arrays)
    quantized = [p for p in parts if isinstance(p, Quantized)]
    kinds = {p.type_name for p in quantized}
    if arrays or len(kinds) != 1:
        stored = sorted(kinds) + (["f32"] if arrays else [])
        raise ValueError(f"tensors stored as {stored} cannot be stacked into one")
    data = np.concatenate([p.data for p in quantized])
    return Quantized(kinds.pop(), (data.shape[0], *parts[0].shape[1:]), data)


def split_rows(whole: Weight, cuts: list[int]) -> list[Weight]:
    """``whole`` cut along its first axis before the row numbers ``cuts`` (np.split)."""
    if isinstance(whole, np.ndarray):
        return list(np.split(whole, cuts))
    return [Quantized(whole.type_name, (d.shape[0], *whole.shape[1:]), d) for d in np.split(whole.data, cuts)]


def block_size(type_name: str) -> int:
    """How many values one block of ggml type ``type_name`` holds: rows are a multiple of it (F16 / BF16:
    1; Q8_0, Q4_0, Q4_1, Q5_0, Q5_1: 32; Q4_K, Q5_K, Q6_K: 256)."""
    return 1 if type_name == "f32" else int(lib.ggml_blck_size(QUANTIZED_TYPES[type_name]))


def nbytes(shape: tuple[int, ...], type_name: str = "f32") -> int:
    """The bytes of a tensor of ``shape`` stored as float32 ("f32") or as a quantized type."""
    if type_name == "f32":
        return 4 * math.prod(shape)
    return math.prod(shape[:-1]) * int(lib.ggml_row_size(QUANTIZED_TYPES[type_name], shape[-1]))


def quantize(values: np.ndarray, type_name: str) -> np.ndarray:
    """The bytes of float32 ``values`` in ggml's type ``type_name`` (for instance "q8_0": blocks of 32
    values as int8 and one float16 scale, 8.5 bits a value; "q4_0": 4-bit values, 4.5 bits a value;
    "q4_K": super-blocks of 256, 4.5 bits a value; "f16": IEEE half precision), row by row along the
    last axis (ggml_quantize_chunk, ggml's own quantizer without an importance matrix), as a uint8
    array. ValueError unless the rows' length is a multiple of the block size."""
    if type_name not in QUANTIZED_TYPES:
        raise ValueError(f"type_name must be one of {sorted(QUANTIZED_TYPES)}, got {type_name!r}")
    kind = QUANTIZED_TYPES[type_name]
    if lib.ggml_quantize_requires_imatrix(kind):
        raise ValueError(f"ggml quantizes to {type_name} only with an importance matrix (llama.cpp's llama-quantize "
                         "--imatrix); quantize to another type (q4_K, q8_0 ...)")
    src = np.ascontiguousarray(values, np.float32)
    n_per_row = src.shape[-1] if src.ndim else 1
    block = lib.ggml_blck_size(kind)
    if n_per_row % block:
        raise ValueError(f"{type_name} quantizes rows of a multiple of {block} values, got rows of {n_per_row}")
    rows = src.size // n_per_row
    out = np.empty(lib.ggml_row_size(kind, n_per_row) * rows, np.uint8)
    written = lib.ggml_quantize_chunk(kind, ffi.from_buffer("float[]", src), ffi.from_buffer(out), 0, rows, n_per_row,
                                      ffi.NULL)
    assert written == out.nbytes  # ggml's row size times the rows
    return out


def shape_of(t: CData, ndim: int | None = None) -> tuple[int, ...]:
    """numpy-order shape of tensor ``t``; ``ndim`` dims (default: drop trailing size-1 dims, keep >= 1)."""
    ne = [int(t.ne[i]) for i in range(lib.GGML_MAX_DIMS)]
    if ndim is None:
        ndim = max(1, lib.ggml_n_dims(t))
    return tuple(reversed(ne[:ndim]))


def ne_of(shape: tuple[int, ...]) -> list[int]:
    """ggml ``ne`` (4 entries) for a numpy-order shape of at most 4 dims."""
    if len(shape) > lib.GGML_MAX_DIMS:
        raise ValueError(f"ggml tensors have at most {lib.GGML_MAX_DIMS} dimensions, got shape {shape}")
    ne = [int(d) for d in reversed(shape)]
    return ne + [1] * (lib.GGML_MAX_DIMS - len(ne))


def np_dtype(t: CData) -> type[np.generic]:
    try:
        return NP_TYPES[t.type]
    except KeyError:
        raise TypeError(f"tensor type {ffi.string(lib.ggml_type_name(t.type)).decode()} has no numpy equivalent") from None


def _check_allocated(t: CData) -> None:
    # ggml_backend_tensor_get / _set assert (abort) on a tensor without memory
    if t.data == ffi.NULL or t.buffer == ffi.NULL:
        raise ValueError(f"tensor {ffi.string(t.name).decode()!r} has no memory (not allocated, or only a copy of "
                         "its graph was computed)")


def get(t: CData, ndim: int | None = None) -> np.ndarray:
    """A numpy copy of tensor ``t``'s data (from any backend)."""
    _check_allocated(t)
    if not lib.ggml_is_contiguous(t):
        raise ValueError("only contiguous tensors can be read")
    out = np.empty(shape_of(t, ndim), dtype=np_dtype(t))
    lib.ggml_backend_tensor_get(t, ffi.from_buffer(out), 0, lib.ggml_nbytes(t))
    return out


def set(t: CData, value: np.ndarray) -> None:  # noqa: A001 - mirrors ggml_backend_tensor_set
    """Copy ``value`` into the whole of tensor ``t``: the element type must match, and the element count
    must be the tensor's exactly (a smaller array would leave the rest of the tensor unwritten)."""
    _check_allocated(t)
    dtype = np_dtype(t)
    arr = np.ascontiguousarray(value, dtype=dtype)
    if arr.size != lib.ggml_nelements(t):
        raise ValueError(f"an array of shape {arr.shape} ({arr.size} values) does not fill a tensor of shape "
                         f"{shape_of(t)} ({lib.ggml_nelements(t)} values)")
    lib.ggml_backend_tensor_set(t, ffi.from_buffer(arr), 0, arr.nbytes)


def get_quantized(t: CData, ndim: int | None = None) -> Quantized:
    """A copy of quantized tensor ``t``'s data (from any backend)."""
    _check_allocated(t)
    if t.type not in QUANTIZED_NAMES or not lib.ggml_is_contiguous(t):
        raise ValueError(f"tensor {ffi.string(t.name).decode()!r} is not a contiguous tensor of a quantized type")
    shape = shape_of(t, ndim)
    data = np.empty((*shape[:-1], int(lib.ggml_row_size(t.type, shape[-1]))), np.uint8)
    lib.ggml_backend_tensor_get(t, ffi.from_buffer(data), 0, data.nbytes)
    return Quantized(QUANTIZED_NAMES[t.type], shape, data)


def set_quantized(t: CData, value: Quantized) -> None:
    """Copy ``value`` into the whole of tensor ``t``, which has its type and element count."""
    _check_allocated(t)
    if t.type != value.ggml_type or math.prod(value.shape) != lib.ggml_nelements(t):
        raise ValueError(f"{value.type_name} values of shape {value.shape} do not fill tensor "
                         f"{ffi.string(t.name).decode()!r} of type {ffi.string(lib.ggml_type_name(t.type)).decode()} "
                         f"and shape {shape_of(t)}")
    data = np.ascontiguousarray(value.data)
    lib.ggml_backend_tensor_set(t, ffi.from_buffer(data), 0, data.nbytes)


def location(t: CData) -> tuple[int, int]:
    """Where tensor ``t``'s memory is: its data and buffer pointers, which an allocation may change."""
    return int(ffi.cast("uintptr_t", t.data)), int(ffi.cast("uintptr_t", t.buffer))


def host_view(t: CData, shape: tuple[int, ...]) -> np.ndarray | None:
    """A writable numpy view of tensor ``t``'s memory when it lives in host memory (CPU buffers),
    shaped ``shape``; None where it does not (a GPU buffer, or not allocated yet).

    Valid until ``t`` is allocated again or its buffer freed: take it after each allocation, write
    through it at once (fit gathers a batch straight into the input tensor this way, one copy
    instead of two)."""
    if t.buffer == ffi.NULL or t.data == ffi.NULL or not lib.ggml_backend_buffer_is_host(t.buffer):
        return None
    if not lib.ggml_is_contiguous(t):
        return None
    dtype = np.dtype(np_dtype(t))
    nbytes = int(lib.ggml_nbytes(t))
    if math.prod(shape) * dtype.itemsize != nbytes:
        raise ValueError(f"shape {shape} does not cover the {nbytes} bytes of a tensor of shape {shape_of(t)}")
    return np.frombuffer(ffi.buffer(t.data, nbytes), dtype=dtype).reshape(shape)
