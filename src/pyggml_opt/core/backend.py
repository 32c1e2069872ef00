"""Backends (CPU, CUDA, Metal, ...), their devices, and backend buffers."""
from __future__ import annotations

import os
from dataclasses import dataclass

from .._lib import c_str, cpu_proc, ffi, lib
from .handle import Handle

_DEVICE_TYPES = {
    lib.GGML_BACKEND_DEVICE_TYPE_CPU: "cpu",
    lib.GGML_BACKEND_DEVICE_TYPE_GPU: "gpu",
    lib.GGML_BACKEND_DEVICE_TYPE_IGPU: "igpu",
    lib.GGML_BACKEND_DEVICE_TYPE_ACCEL: "accel",
}


@dataclass(frozen=True)
class Device:
    """A ggml device as registered by the loaded backends."""

    name: str
    description: str
    type: str
    memory_free: int
    memory_total: int


def devices() -> list[Device]:
    """All devices ggml found (the CPU is always there; CUDA / Metal when built with them)."""
    out = []
    for i in range(lib.ggml_backend_dev_count()):
        dev = lib.ggml_backend_dev_get(i)
        free, total = ffi.new("size_t *"), ffi.new("size_t *")
        lib.ggml_backend_dev_memory(dev, free, total)
        out.append(Device(c_str(lib.ggml_backend_dev_name(dev)), c_str(lib.ggml_backend_dev_description(dev)),
                          _DEVICE_TYPES.get(lib.ggml_backend_dev_type(dev), "unknown"), free[0], total[0]))
    return out


def _find_device(name: str):
    """Device by ggml name ("CPU", "CUDA0", "Metal") or by kind ("cpu", "cuda", "metal", "gpu")."""
    key = name.lower()
    kinds = {"cpu": lib.GGML_BACKEND_DEVICE_TYPE_CPU, "gpu": lib.GGML_BACKEND_DEVICE_TYPE_GPU}
    for i in range(lib.ggml_backend_dev_count()):
        dev = lib.ggml_backend_dev_get(i)
        dev_name = c_str(lib.ggml_backend_dev_name(dev)).lower()
        reg_name = c_str(lib.ggml_backend_reg_name(lib.ggml_backend_dev_backend_reg(dev))).lower()
        if key in (dev_name, reg_name) or (key in kinds and lib.ggml_backend_dev_type(dev) == kinds[key]):
            return dev
    known = ", ".join(repr(d.name) for d in devices())
    raise ValueError(f"backend {name!r} is not available in this build; devices found: {known} "
                     "(build with -C cmake.define.GGML_CUDA=ON or GGML_METAL=ON for GPUs)")


class Backend(Handle):
    """Owns a ``ggml_backend_t`` for one device.

    ``name``: "cpu" (default), "cuda", "metal", "gpu" or a ggml device name such as "CUDA0".
    ``n_threads`` applies to the CPU backend (default: all cores).
    """

    _kind = "backend"

    def __init__(self, name: str = "cpu", n_threads: int | None = None) -> None:
        if not isinstance(name, str):
            raise TypeError(f"backend must be a str such as 'cpu' or 'cuda', got {type(name).__name__}")
        dev = _find_device(name)
        super().__init__(lib.ggml_backend_dev_init(dev, ffi.NULL), lib.ggml_backend_free)
        self.device_name = c_str(lib.ggml_backend_dev_name(dev))
        self.is_cpu = lib.ggml_backend_dev_type(dev) == lib.GGML_BACKEND_DEVICE_TYPE_CPU
        if self.is_cpu:
            self.set_n_threads(n_threads)

    def set_n_threads(self, n_threads: int | None) -> None:
        """Threads of the CPU backend (None: all cores). Ignored on other backends."""
        if n_threads is None:
            n_threads = os.cpu_count() or 1
        if not isinstance(n_threads, int) or isinstance(n_threads, bool) or n_threads < 1:
            raise ValueError(f"n_threads must be a positive int, got {n_threads!r}")
        if n_threads > lib.GGML_MAX_N_THREADS:
            raise ValueError(f"n_threads must be at most {lib.GGML_MAX_N_THREADS}, got {n_threads}")
        fn = cpu_proc("ggml_backend_set_n_threads", "ggml_backend_set_n_threads_t")
        if self.is_cpu and fn is not None:
            fn(self.ptr, n_threads)
        self.n_threads = n_threads


class Buffer(Handle):
    """Owns a backend buffer holding the data of every tensor of a context (``ggml_backend_alloc_ctx_tensors``)."""

    _kind = "backend buffer"

    def __init__(self, context, backend: Backend) -> None:
        ptr = lib.ggml_backend_alloc_ctx_tensors(context.ptr, backend.ptr)
        super().__init__(ptr, lib.ggml_backend_buffer_free, context, backend)
        self.context, self.backend = context, backend

    @property
    def nbytes(self) -> int:
        return lib.ggml_backend_buffer_get_size(self.ptr)
