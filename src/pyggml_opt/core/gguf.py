"""gguf_context: reading and writing GGUF files (key/value metadata plus named tensors)."""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from .._lib import CData, c_str, ffi, lib
from ..atomic import atomic_file
from .context import Context
from .handle import Handle
from .tensor_data import MAX_NAME, NP_TYPES, QUANTIZED_NAMES, QUANTIZED_TYPES, Quantized, Weight, ne_of, shape_of

_GETTERS = {
    lib.GGUF_TYPE_UINT8: "u8", lib.GGUF_TYPE_INT8: "i8", lib.GGUF_TYPE_UINT16: "u16",
    lib.GGUF_TYPE_INT16: "i16", lib.GGUF_TYPE_UINT32: "u32", lib.GGUF_TYPE_INT32: "i32",
    lib.GGUF_TYPE_FLOAT32: "f32", lib.GGUF_TYPE_UINT64: "u64", lib.GGUF_TYPE_INT64: "i64",
    lib.GGUF_TYPE_FLOAT64: "f64", lib.GGUF_TYPE_BOOL: "bool", lib.GGUF_TYPE_STRING: "str",
}
# numpy scalar type -> gguf_set_val_<suffix>; element type of arrays <-> numpy dtype
_SCALAR_SETTERS = {np.dtype(np.uint8): "u8", np.dtype(np.int8): "i8", np.dtype(np.uint16): "u16",
                   np.dtype(np.int16): "i16", np.dtype(np.uint32): "u32", np.dtype(np.int32): "i32",
                   np.dtype(np.float32): "f32", np.dtype(np.uint64): "u64", np.dtype(np.int64): "i64",
                   np.dtype(np.float64): "f64"}
_ARRAY_DTYPES = {getattr(lib, f"GGUF_TYPE_{name}"): np.dtype(dtype) for name, dtype in (
    ("UINT8", np.uint8), ("INT8", np.int8), ("UINT16", np.uint16), ("INT16", np.int16), ("UINT32", np.uint32),
    ("INT32", np.int32), ("FLOAT32", np.float32), ("UINT64", np.uint64), ("INT64", np.int64),
    ("FLOAT64", np.float64), ("BOOL", np.bool_))}
_ARRAY_TYPES = {dtype: kind for kind, dtype in _ARRAY_DTYPES.items()}


def _c_bytes(key: str, value: str) -> bytes:
    """``value`` as the UTF-8 C string GGUF stores; ValueError for what a C string cannot hold."""
    try:
        data = value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"GGUF key {key!r}: {value[:40]!r} is not valid UTF-8 ({exc.reason})") from None
    if b"\0" in data:
        raise ValueError(f"GGUF key {key!r}: {value[:40]!r} contains a NUL character, which a GGUF string "
                         "(a C string for its readers) cannot hold")
    return data


class GGUFFile(Handle):
    """Owns a ``gguf_context`` and the ggml context holding its tensors' data.

    ``GGUFFile.read(path)`` parses and validates a file (ggml's parser checks the header, types,
    sizes and offsets; a bad file is a ValueError, not a crash); ``GGUFFile()`` starts an empty one
    to fill with ``set`` / ``add_tensor`` and ``write``.
    """

    _kind = "GGUF context"

    def __init__(self, _ptr: CData | None = None, _ctx_ptr: CData | None = None) -> None:
        self._tensor_ctx = _ctx_ptr
        self._path: str | None = None  # set by read(); tensor data is read from this file
        self._map: np.ndarray | None = None  # the file mapped copy-on-write (_mapping), once a tensor is read
        self._unmappable = False
        self._strings: dict[str, list[str]] = {}  # string arrays read (get_array)
        self._arrays: list[tuple[np.ndarray, Context]] = []  # (data, context) of each tensor added for writing
        ptr = _ptr if _ptr is not None else lib.gguf_init_empty()
        super().__init__(ptr, lib.gguf_free)
        self._ctx_finalizer: Handle | None
        if _ctx_ptr is not None:
            self._ctx_finalizer = Handle(_ctx_ptr, lib.ggml_free)
        else:
            self._ctx_finalizer = None

    def close(self) -> None:
        super().close()
        if self._ctx_finalizer is not None:
            self._ctx_finalizer.close()

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> GGUFFile:
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no such GGUF file: {path!r}")
        # Metadata only (no_alloc): with no_alloc=False ggml would allocate the sizes the file
        # claims before checking them against the file, and abort when that fails. Tensor data is
        # read from the file by ``tensor`` after the sizes were checked here.
        ctx_out = ffi.new("struct ggml_context **")
        params = ffi.new("struct gguf_init_params *", {"no_alloc": True, "ctx": ctx_out})
        ptr = lib.gguf_init_from_file(path.encode(), params[0])
        if ptr == ffi.NULL:
            raise ValueError(f"{path!r} is not a valid GGUF file (ggml's parser rejected it; "
                             "see the 'pyggml_opt.ggml' log for the reason)")
        f = cls(ptr, ctx_out[0])
        f._path = path
        try:
            f._check_sizes(os.path.getsize(path))
        except ValueError:
            f.close()
            raise
        return f

    def _check_sizes(self, file_size: int) -> None:
        data_offset = lib.gguf_get_data_offset(self.ptr)
        for i in range(lib.gguf_get_n_tensors(self.ptr)):
            name = c_str(lib.gguf_get_tensor_name(self.ptr, i))
            t = lib.ggml_get_tensor(self._tensor_ctx, name.encode())
            size = lib.gguf_get_tensor_size(self.ptr, i)
            end = data_offset + lib.gguf_get_tensor_offset(self.ptr, i) + size
            if t == ffi.NULL or size != lib.ggml_nbytes(t) or end > file_size:
                raise ValueError(f"{self._path!r}: tensor {name!r} ({size} bytes) does not fit in the file "
                                 f"({file_size} bytes)")

    # ---- metadata ---------------------------------------------------------------------------------------
    def keys(self) -> list[str]:
        return [c_str(lib.gguf_get_key(self.ptr, i)) for i in range(lib.gguf_get_n_kv(self.ptr))]

    def get(self, key: str, default: Any = None) -> Any:
        """Value of a scalar or string key (arrays: ``get_array``); ``default`` if absent. Its type is the
        file's: check it before use."""
        kid = lib.gguf_find_key(self.ptr, key.encode())
        if kid < 0:
            return default
        kind = lib.gguf_get_kv_type(self.ptr, kid)
        if kind not in _GETTERS:
            raise ValueError(f"GGUF key {key!r} has type {c_str(lib.gguf_type_name(kind))}, which is not read")
        value = getattr(lib, f"gguf_get_val_{_GETTERS[kind]}")(self.ptr, kid)
        return c_str(value) if kind == lib.GGUF_TYPE_STRING else value

    def get_array(self, key: str) -> list[str] | np.ndarray | None:
        """Value of an array key: a list of str for a string array, else a numpy array of the file's
        element type (a copy); None if absent. ValueError for a key that is not an array, or an array
        of arrays."""
        kid = lib.gguf_find_key(self.ptr, key.encode())
        if kid < 0:
            return None
        if lib.gguf_get_kv_type(self.ptr, kid) != lib.GGUF_TYPE_ARRAY:
            raise ValueError(f"GGUF key {key!r} is not an array")
        kind = lib.gguf_get_arr_type(self.ptr, kid)
        n = lib.gguf_get_arr_n(self.ptr, kid)
        if kind == lib.GGUF_TYPE_STRING:
            if key not in self._strings:  # read once: a vocabulary's 151,936 tokens take 0.2 s
                self._strings[key] = [c_str(lib.gguf_get_arr_str(self.ptr, kid, i)) for i in range(n)]
            return list(self._strings[key])
        dtype = _ARRAY_DTYPES.get(kind)
        if dtype is None:
            raise ValueError(f"GGUF key {key!r} is an array of {c_str(lib.gguf_type_name(kind))}, which is not read")
        if n == 0:
            return np.zeros(0, dtype)
        data = ffi.buffer(ffi.cast("const char *", lib.gguf_get_arr_data(self.ptr, kid)), n * dtype.itemsize)
        return np.frombuffer(data, dtype.newbyteorder("<")).astype(dtype)

    def get_typed(self, key: str) -> object:
        """The value of any key in a form ``set`` writes back with the file's GGUF type: str, bool, a
        numpy scalar of the file's type (np.uint32 ...), a list of str, a 1-D numpy array; KeyError if
        absent."""
        kid = lib.gguf_find_key(self.ptr, key.encode())
        if kid < 0:
            raise KeyError(f"no key {key!r} in the GGUF file")
        kind = lib.gguf_get_kv_type(self.ptr, kid)
        if kind == lib.GGUF_TYPE_ARRAY:
            return self.get_array(key)
        value = self.get(key)
        dtype = _ARRAY_DTYPES.get(kind)
        return value if dtype is None or kind == lib.GGUF_TYPE_BOOL else dtype.type(value)

    def set(self, key: str, value: object) -> None:
        """Set a key. Python values: str, bool, int (int64), float (float64); a numpy scalar keeps its
        type (``np.uint32(5)``, ``np.float32(1e-5)``: readers such as llama.cpp check a key's exact type);
        a list of str is a string array; a 1-D numpy array of a GGUF element type is that array."""
        k = key.encode()
        if isinstance(value, str):
            lib.gguf_set_val_str(self.ptr, k, _c_bytes(key, value))
        elif isinstance(value, (bool, np.bool_)):
            lib.gguf_set_val_bool(self.ptr, k, bool(value))
        elif isinstance(value, np.generic) and value.dtype in _SCALAR_SETTERS:
            getattr(lib, f"gguf_set_val_{_SCALAR_SETTERS[value.dtype]}")(self.ptr, k, value.item())
        elif isinstance(value, (int, np.integer)):
            lib.gguf_set_val_i64(self.ptr, k, int(value))
        elif isinstance(value, (float, np.floating)):
            lib.gguf_set_val_f64(self.ptr, k, float(value))
        elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            items = [ffi.new("char[]", _c_bytes(key, v)) for v in value]
            lib.gguf_set_arr_str(self.ptr, k, ffi.new("const char *[]", items), len(items))
        elif isinstance(value, np.ndarray) and value.ndim == 1 and value.dtype in _ARRAY_TYPES:
            arr = np.ascontiguousarray(value, value.dtype.newbyteorder("<"))
            lib.gguf_set_arr_data(self.ptr, k, _ARRAY_TYPES[value.dtype], ffi.from_buffer(arr), arr.size)
        else:
            raise TypeError(f"GGUF values must be str, bool, int, float, a numpy scalar, a list of str or a 1-D "
                            f"numpy array of a GGUF type; {key!r} is {type(value).__name__}")

    # ---- tensors ---------------------------------------------------------------------------------------------
    def tensor_names(self) -> list[str]:
        return [c_str(lib.gguf_get_tensor_name(self.ptr, i)) for i in range(lib.gguf_get_n_tensors(self.ptr))]

    def tensor_shape(self, name: str, ndim: int | None = None) -> tuple[int, ...]:
        """Tensor ``name``'s numpy-order shape (``ndim`` dims if given) from its header alone, whatever
        its type: no data is read."""
        t = lib.ggml_get_tensor(self._tensor_ctx, name.encode()) if self._tensor_ctx is not None else ffi.NULL
        if t == ffi.NULL:
            raise KeyError(f"no tensor {name!r} in the GGUF file")
        return shape_of(t, ndim)

    def tensor(self, name: str, ndim: int | None = None) -> np.ndarray:
        """A copy of tensor ``name`` as numpy (numpy-order shape, ``ndim`` dims if given); ValueError
        for a quantized one (``weight`` reads those)."""
        t, path, offset = self._find(name)
        if t.type not in NP_TYPES:
            raise ValueError(f"tensor {name!r} has type {c_str(lib.ggml_type_name(t.type))}; only "
                             "unquantized types are supported")
        dtype = np.dtype(NP_TYPES[t.type])
        count = lib.ggml_nelements(t)
        arr = np.fromfile(path, dtype=dtype.newbyteorder("<"), count=count, offset=offset)
        if arr.size != count:
            raise ValueError(f"tensor {name!r} is truncated in the file")
        return arr.astype(dtype, copy=False).reshape(shape_of(t, ndim))

    def weight(self, name: str, ndim: int | None = None) -> Weight:
        """Tensor ``name`` as a model weight, over the file mapped copy-on-write (no copy: the mapping
        lives as long as the value, whatever becomes of the file, and nothing is ever written to the
        file), or read once where the file cannot be mapped: an F32 tensor as a float32 array (writable:
        a change is the process's own), another type pyggml_opt computes with
        (``tensor_data.QUANTIZED_TYPES``: F16, BF16, Q8_0, the K-quants ...) as a ``Quantized`` whose
        mapped bytes are read-only (``Quantized.mapped``). ValueError for other types (integer tensors:
        ``tensor``'s arrays)."""
        t, path, offset = self._find(name)
        if t.type not in QUANTIZED_NAMES and t.type != lib.GGML_TYPE_F32:
            if t.type in NP_TYPES:
                return self.tensor(name, ndim)
            raise ValueError(f"tensor {name!r} has type {c_str(lib.ggml_type_name(t.type))}, which ggml's CPU backend "
                             f"cannot compute with as a weight (the types it can: f32, {', '.join(QUANTIZED_TYPES)})")
        shape = shape_of(t, ndim)
        size = int(lib.ggml_nbytes(t))
        mapping = self._mapping()
        if mapping is not None:
            data = mapping[offset:offset + size].view(np.ndarray)
        else:
            data = np.fromfile(path, dtype=np.uint8, count=size, offset=offset)
        if data.size != size:
            raise ValueError(f"tensor {name!r} is truncated in the file")
        if t.type == lib.GGML_TYPE_F32:
            return data.view(np.dtype("<f4")).astype(np.float32, copy=False).reshape(shape)
        if mapping is not None:
            data.flags.writeable = False  # a frozen weight's bytes: copies share them
        return Quantized(QUANTIZED_NAMES[t.type], shape, data.reshape(*shape[:-1], -1))

    def _mapping(self) -> np.ndarray | None:
        """The whole file mapped copy-on-write (made at the first call; the file is opened read-only and
        never written: pages the process writes become its own), or None where it cannot be mapped (a
        pipe, a file system without mmap)."""
        if self._map is None and not self._unmappable and self._path is not None:
            try:
                self._map = np.memmap(self._path, dtype=np.uint8, mode="c")
            except (OSError, ValueError):
                self._unmappable = True
        return self._map

    def _find(self, name: str) -> tuple[CData, str, int]:
        """Tensor ``name``'s header, the file and the offset of its data there."""
        if self._path is None:
            raise ValueError("tensors can be read only from a file opened with GGUFFile.read")
        tid = lib.gguf_find_tensor(self.ptr, name.encode())
        t = lib.ggml_get_tensor(self._tensor_ctx, name.encode())
        if tid < 0 or t == ffi.NULL:
            raise KeyError(f"no tensor {name!r} in the GGUF file")
        return t, self._path, lib.gguf_get_data_offset(self.ptr) + lib.gguf_get_tensor_offset(self.ptr, tid)

    def add_tensor(self, name: str, value: Weight, type_name: str = "f32") -> None:
        """Add a tensor (numpy-order shape, at most 4 dims) to be written, as float32 or quantized
        (``type_name`` a key of ``tensor_data.QUANTIZED_TYPES``: ``tensor_data.quantize``, rows of a multiple of
        its block size); a ``Quantized`` value is written as it is, whatever ``type_name`` says.
        ValueError for a name ggml cannot store (64 bytes or more) or one already added (gguf aborts on
        both)."""
        key = name.encode()
        if len(key) >= MAX_NAME:
            raise ValueError(f"GGUF tensor name {name!r} is too long (at most {MAX_NAME - 1} bytes)")
        if lib.gguf_find_tensor(self.ptr, key) >= 0:
            raise ValueError(f"the GGUF file already has a tensor {name!r}")
        if isinstance(value, np.ndarray) and type_name != "f32":
            value = Quantized.of(value, type_name)  # ValueError for an unknown type or row length
        if isinstance(value, Quantized):
            arr, kind, shape = np.ascontiguousarray(value.data), value.ggml_type, value.shape
        else:
            arr = np.ascontiguousarray(value, dtype=np.float32)
            kind, shape = lib.GGML_TYPE_F32, arr.shape
        ctx = Context(1)  # one per tensor: gguf keeps a copy of the tensor's header, its data stays in `arr`
        t = lib.ggml_new_tensor(ctx.ptr, kind, lib.GGML_MAX_DIMS, ffi.new("int64_t[4]", ne_of(shape)))
        lib.ggml_set_name(t, key)
        self._arrays.append((arr, ctx))
        t.data = ffi.cast("void *", ffi.from_buffer(arr))
        lib.gguf_add_tensor(self.ptr, t)

    def write(self, path: str | os.PathLike[str]) -> None:
        """Write the file; it replaces ``path`` only once written completely and synced to disk (see
        ``atomic.atomic_file``): any write error raises ``OSError`` and leaves ``path`` as it was. A file
        opened with ``read`` holds no tensor data in memory: it can be written only if it has no
        tensors; copy it into a new ``GGUFFile`` instead."""
        if self._path is not None and lib.gguf_get_n_tensors(self.ptr) > 0:
            raise ValueError(f"this GGUFFile was read from {self._path!r} without its tensor data and cannot be "
                             "written; add its keys and tensors (tensor()) to a new GGUFFile")
        # The same bytes as gguf_write_to_file (its header, then each tensor at its offset, padded to
        # the alignment), written here because gguf_write_to_file ignores fclose's error: a disk that
        # fills while stdio flushes its last buffer would leave a truncated file reported as written.
        meta = ffi.new("char[]", lib.gguf_get_meta_size(self.ptr))
        lib.gguf_get_meta_data(self.ptr, meta)
        alignment = lib.gguf_get_alignment(self.ptr)
        with atomic_file(path) as out:
            out.write(ffi.buffer(meta))
            pos = len(meta)
            for i, (arr, _) in enumerate(self._arrays):
                start = len(meta) + lib.gguf_get_tensor_offset(self.ptr, i)
                out.write(bytes(start - pos))
                out.write(arr.data)
                pos = start + arr.nbytes
            out.write(bytes(-pos % alignment))
